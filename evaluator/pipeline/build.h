/*
 * build.h - building one side of an evaluation: the suite's configure and build commands (argv
 * templates with {src} {build} {jobs} {state} {model} placeholders) run with a timeout into
 * <state>/builds/<key>/, where key = tree id + a hash of the build section. A marker file written
 * only after success lets an identical tree skip the build; a failed or interrupted build is wiped
 * and retried. Also the placeholder substitution the SUT and model-generator commands share.
 */
#ifndef AB_BUILD_H
#define AB_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "proc.h"

struct ab_sandbox_config;

/* One placeholder: `name` without braces ("src"); value NULL = known but unavailable here. */
struct ab_subst {
	const char *name;
	const char *value;
};

/*
 * Replaces every {name} of `vars` inside `template` ("-DFOO={src}/x" -> "-DFOO=/abs/src/x").
 * Braces that do not name a var are kept as they are (so "${HOME}" in a shell snippet survives);
 * a var whose value is NULL is an error (AB_EINVALID: "placeholder {model} has no value here").
 * *out: caller frees with free().
 */
int ab_build_subst(char **out, const char *template, const struct ab_subst *vars, size_t n_vars);

/* The same over a NULL-terminated argv. *out is NULL-terminated; free with ab_build_argv_free. */
int ab_build_subst_argv(char ***out, const char *const *template, const struct ab_subst *vars, size_t n_vars);
void ab_build_argv_free(char **argv);

/*
 * How a build ended. guards/verdict.h's enum ab_build_status is the verdict's view; map
 * OK -> AB_BUILD_OK, FAILED -> AB_BUILD_FAILED ("does not compile"), and TIMEOUT, KILLED,
 * NOT_STARTED -> AB_BUILD_INFRA (the box, not the code, is the likely cause).
 */
enum ab_build_state {
	AB_BUILD_STATE_OK = 0,
	AB_BUILD_STATE_FAILED = 1,      /* a step exited with a non-zero code */
	AB_BUILD_STATE_TIMEOUT = 2,     /* a step ran past timeout_s and its group was killed */
	AB_BUILD_STATE_KILLED = 3,      /* a step died of a signal abgate did not send (OOM killer, ...) */
	AB_BUILD_STATE_NOT_STARTED = 4  /* a step's command could not be executed (not found, ...) */
};

/* "ok", "failed", "timeout", "killed", "not-started". */
const char *ab_build_state_name(enum ab_build_state state);

struct ab_build_request {
	const char *state_dir;             /* required */
	const char *src_dir;               /* the checkout ({src}); required */
	const char *tree_id;               /* 40 hex; required */
	const char *side;                  /* "base" / "head": names the log file; NULL: "build" */
	const char *const *configure;      /* argv template, NULL-terminated; NULL: no configure step */
	const char *const *build;          /* argv template, NULL-terminated; required */
	const char *const *env;            /* "KEY=VALUE" templates, NULL-terminated; may be NULL */
	int timeout_s;                     /* per step, as the suite's build.timeout_s; <= 0: 1800 */
	int jobs;                          /* {jobs}; <= 0: online CPUs */
	const char *model;                 /* {model}; NULL: using it is an error */
	const char *key_salt;              /* extra text mixed into the key (e.g. the compiler id); may be NULL */
	const char *log_path;              /* NULL: <state>/builds/<key>.<side>.log (outside the build dir,
	                                    * which the build can write: it must not be able to swap the
	                                    * log abgate appends to and reads back for a link) */
	const struct ab_sandbox_config *sandbox;  /* NULL or enabled = 0: steps run unsandboxed; else every
	                                    * step runs in bubblewrap (sandbox.h) seeing {src} and {model}
	                                    * read-only and {build} writable, nothing else of the state dir */
};

struct ab_build_result {
	enum ab_build_state state;
	int reused;                  /* 1: the marker was there, nothing ran */
	double duration_s;           /* wall time of the steps run now (0 when reused) */
	char key[64];                /* "<tree-id>-<16 hex>" */
	char *build_dir;             /* absolute <state>/builds/<key> ({build}); owned */
	char *log_path;              /* owned */
	char *log_tail;              /* last ~8 KiB of the log ("" when reused); owned */
	char reason[256];            /* "" when ok; "configure: exit code 2", "build: killed after timeout (600 s)",
	                              * "build: command not found: cmake", "build: signal 9 (SIGKILL)",
	                              * "build: sandbox: bwrap: ..." (NOT_STARTED: the box, not the PR),
	                              * "build: the build dir holds 70000 MiB, over the sandbox's 65536" (FAILED) */
	struct ab_proc_status status;  /* of the step that ended the build */
};

/*
 * The build key for a request: tree id + sha256 of the templates (not their substituted values,
 * so the key does not depend on where the state dir lives) and key_salt. Writes "<tree>-<16 hex>".
 */
int ab_build_key(char out[64], const struct ab_build_request *request);

/*
 * Builds (or reuses) one side. Returns 0 whenever there is a result - also for a failed or timed-out
 * build (read out->state) - and negative only when the build could not be attempted (bad request,
 * state dir not writable, placeholder error: message set). Concurrent callers for the same key are
 * serialised by a lock file, so one builds and the other reuses. Caller clears *out with
 * ab_build_result_clear.
 */
int ab_build_run(struct ab_build_result *out, const struct ab_build_request *request);
void ab_build_result_clear(struct ab_build_result *result);

#endif
