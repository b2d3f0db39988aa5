/*
 * sandbox.h - runs PR code (build steps, model generators, SUT processes) under bubblewrap: its own
 * user, PID, IPC, UTS and network namespaces; a filesystem view of exactly the paths a step names
 * (bound at their real paths, so {src}/{build} need no translation) over read-only system paths and
 * a private /tmp; rlimits set inside the sandbox by prlimit; a scrubbed environment. Nothing here
 * spawns: ab_sandbox_wrap turns a command into the bwrap argv that proc.h then runs.
 */
#ifndef AB_SANDBOX_H
#define AB_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

/* Per-process limits inside the sandbox; 0 = no limit for that one. */
struct ab_sandbox_limits {
	int nproc;          /* RLIMIT_NPROC, counted in the sandbox's own user namespace */
	int64_t mem_mb;     /* RLIMIT_AS per process (never applied to GPU steps: CUDA reserves VA) */
	int64_t fsize_mb;   /* RLIMIT_FSIZE: largest file a process may write */
	int64_t cpu_s;      /* RLIMIT_CPU per process */
	int64_t tmp_mb;     /* size of the private /tmp (tmpfs) */
	int64_t disk_mb;    /* builds: the build dir's size after each step (checked by build.c) */
	int64_t mem_total_mb; /* all processes of the step together: a memory cgroup (as root, where a
	                       * memory controller is writable: v2 memory.max, v1 memory.limit_in_bytes) */
};

/*
 * The deployment's sandbox settings (config key `sandbox`, CLI --no-sandbox). Strings are owned by
 * whoever filled the struct (config.c frees its copy with ab_sandbox_config_clear).
 */
struct ab_sandbox_config {
	int enabled;                 /* 0 only by an explicit --no-sandbox / "enabled": false */
	char *bwrap;                 /* NULL: "bwrap" from PATH */
	char *prlimit;               /* NULL: /usr/bin/prlimit (run inside the sandbox) */
	char **network;              /* step names allowed the network: configure, build, generate */
	size_t network_count;
	char **ro_paths;             /* extra read-only host paths (a toolchain under /opt, ...) */
	size_t ro_path_count;
	char **env;                  /* host variable names passed in (denied names never are) */
	size_t env_count;
	char **env_add;              /* more names, on top of env (a deployment keeps the defaults) */
	size_t env_add_count;
	int gpu;                     /* 1: bind /dev/nvidia* and /sys into SUT runs; -1: when /dev/nvidiactl exists */
	struct ab_sandbox_limits build;  /* configure, build, generate */
	struct ab_sandbox_limits run;    /* SUT and reference processes */
};

/* The defaults (enabled, limits that fit a CUDA build of ember on a 16-core box); no strings. */
void ab_sandbox_config_defaults(struct ab_sandbox_config *cfg);
/* Frees the strings of a config filled by config.c. */
void ab_sandbox_config_clear(struct ab_sandbox_config *cfg);

/* What one step may see. Every path must exist and be absolute. */
struct ab_sandbox_step {
	const char *name;            /* "configure", "build", "generate", "sut", "reference" */
	const char *cwd;             /* --chdir (inside a bound path); NULL: / */
	const char *const *rw;       /* NULL-terminated: bound writable */
	const char *const *ro;       /* NULL-terminated: bound read-only (after rw, so it wins below one) */
	const char *const *env;      /* "KEY=VALUE" the suite sets, NULL-terminated; denied names dropped */
	int run;                     /* 1: run limits and GPU binding; 0: build limits */
	int status_fd;               /* 0: none; 3 (or 4, when fd 3 is a passed socket): bwrap writes its
	                              * JSON status records to that fd: spawn the argv with proc.h's
	                              * spec.status_fd (ab_proc_run_status), which puts the pipe there */
};

/*
 * The argv that runs `argv` (NULL-terminated, argv[0] resolved inside the sandbox's PATH unless it
 * has a '/') in the sandbox `step` describes. *out is NULL-terminated; free with
 * ab_build_argv_free (build.h). AB_EINVALID for a relative or missing path.
 */
int ab_sandbox_wrap(char ***out, const struct ab_sandbox_config *cfg, const struct ab_sandbox_step *step,
	const char *const *argv);

/* 1 when the steps of that kind (run: SUTs; else builds) get the whole-step memory cap here
 * (mem_total_mb > 0 and a writable memory cgroup: abgate runs as root). */
int ab_sandbox_memory_capped(const struct ab_sandbox_config *cfg, int run);

/* 1 when an environment variable name must never reach PR code (ABGATE_*, GITHUB_*, tokens, SSH,
 * cloud credentials), whatever the suite or the config asks. */
int ab_sandbox_env_denied(const char *name);

/*
 * Starts a trivial sandbox (/bin/true with the build step's view) to check that bubblewrap works
 * here. Returns 0, or negative with the reason ("sandbox: bwrap: No permissions to create new
 * namespace...") - an infra error, never a verdict. *version (may be NULL) gets "bubblewrap 0.8.0".
 */
int ab_sandbox_probe(const struct ab_sandbox_config *cfg, char *version, size_t version_len);

/*
 * 1 when a step wrapped with status_fd never ran its command: `status` (what bwrap wrote to its status fd)
 * has no "exit-code" record. bwrap writes {"child-pid": N} when it has forked its set-up child and
 * {"exit-code": N} only after the command itself ran and ended (a mount, namespace or execvp
 * failure leaves none). Nothing the command prints can fake or hide that record, unlike its
 * output: a PR whose build prints "bwrap: ..." and exits 1 is a failed build, not an infra error.
 */
int ab_sandbox_start_failed(const char *status);

/*
 * Why bwrap failed, for a step ab_sandbox_start_failed says never ran: the last "bwrap: ..." line
 * of its stderr `tail` (may be NULL), else a generic reason. Writes at most `len` bytes to `why`.
 */
void ab_sandbox_failure_reason(char *why, size_t len, const char *tail);

#endif
