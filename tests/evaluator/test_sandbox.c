/*
 * test_sandbox.c - the bubblewrap argv (namespaces, view, limits, environment), the denied
 * environment names, the set-up failure detector, and real sandboxes when bwrap works here: what a
 * sandboxed command can see, write, reach and leave behind.
 */
#include "testutil.h"

#include <sys/stat.h>
#include <unistd.h>

#include "build.h"
#include "sandbox.h"

static int has(char **argv, const char *a)
{
	for (size_t i = 0; argv[i]; i++)
		if (!strcmp(argv[i], a))
			return 1;
	return 0;
}

/* argv contains a, b, c consecutively. */
static int has3(char **argv, const char *a, const char *b, const char *c)
{
	for (size_t i = 0; argv[i] && argv[i + 1] && argv[i + 2]; i++)
		if (!strcmp(argv[i], a) && !strcmp(argv[i + 1], b) && !strcmp(argv[i + 2], c))
			return 1;
	return 0;
}

static void wrap_argv(void)
{
	struct ab_sandbox_config cfg;
	ab_sandbox_config_defaults(&cfg);
	cfg.gpu = 0;
	const char *dir = tu_path("build");
	CHECK(ab_fs_mkdirs(dir) == 0);
	const char *rw[] = { dir, NULL }, *ro[] = { "/usr/share", NULL };
	const char *env[] = { "OMP_NUM_THREADS=2", "ABGATE_GITHUB_TOKEN=x", "MY_SECRET=y", NULL };
	const char *cmd[] = { "cc", "-o", "x", NULL };
	struct ab_sandbox_step step = { .name = "build", .cwd = dir, .rw = rw, .ro = ro, .env = env };
	char **argv = NULL;
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(has(argv, "--unshare-net") && has(argv, "--unshare-pid") && has(argv, "--unshare-user"));
	CHECK(has(argv, "--die-with-parent") && has(argv, "--clearenv") && has(argv, "--disable-userns"));
	CHECK(has3(argv, "--bind", dir, dir));
	CHECK(has3(argv, "--ro-bind", "/usr/share", "/usr/share"));
	CHECK(has3(argv, "--setenv", "OMP_NUM_THREADS", "2"));
	CHECK(!has(argv, "ABGATE_GITHUB_TOKEN") && !has(argv, "MY_SECRET"));
	CHECK(has(argv, "--nproc=4096:4096") && has(argv, "--fsize=8589934592:8589934592"));
	CHECK(has(argv, "--as=17179869184:17179869184"));
	CHECK(!has(argv, "/etc") && !has(argv, "/root"));
	/* The command comes last, after prlimit's "--". */
	size_t n = 0;
	while (argv[n])
		n++;
	CHECK_STR(argv[n - 3], "cc");
	CHECK_STR(argv[n - 1], "x");
	ab_build_argv_free(argv);

	/* env_add passes more host names on top of env; denied names stay out whichever list has them. */
	setenv("MY_TOKEN", "t", 1);
	setenv("PKG_CONFIG_PATH", "/opt/x/pkgconfig", 1);
	char *env_list[] = { "CUDA_HOME" }, *add_list[] = { "PKG_CONFIG_PATH", "MY_TOKEN" };
	cfg.env = env_list;
	cfg.env_count = 1;
	cfg.env_add = add_list;
	cfg.env_add_count = 2;
	setenv("CUDA_HOME", "/usr/local/cuda", 1);
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(has3(argv, "--setenv", "CUDA_HOME", "/usr/local/cuda"));
	CHECK(has3(argv, "--setenv", "PKG_CONFIG_PATH", "/opt/x/pkgconfig"));
	CHECK(!has(argv, "MY_TOKEN"));
	ab_build_argv_free(argv);
	cfg.env = NULL;
	cfg.env_count = 0;
	cfg.env_add = NULL;
	cfg.env_add_count = 0;
	unsetenv("MY_TOKEN");
	unsetenv("PKG_CONFIG_PATH");
	unsetenv("CUDA_HOME");

	/* A step named in `network` keeps the host network; SUT runs never do. */
	char *net[] = { "build" };
	cfg.network = net;
	cfg.network_count = 1;
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(!has(argv, "--unshare-net"));
	ab_build_argv_free(argv);
	step.run = 1;
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(has(argv, "--unshare-net") && has(argv, "--nproc=1024:1024"));
	ab_build_argv_free(argv);
	/* GPU runs: no address-space limit (CUDA reserves VA), /sys bound. */
	cfg.gpu = 1;
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(has3(argv, "--ro-bind", "/sys", "/sys"));
	for (size_t i = 0; argv[i]; i++)
		CHECK(strncmp(argv[i], "--as=", 5) != 0);
	ab_build_argv_free(argv);

	/* Missing or relative paths are refused before anything runs. */
	const char *bad[] = { "relative/dir", NULL };
	step.ro = bad;
	CHECK_EQ(ab_sandbox_wrap(&argv, &cfg, &step, cmd), AB_EINVALID);
	const char *missing[] = { "/nonexistent/abgate", NULL };
	step.ro = missing;
	CHECK_EQ(ab_sandbox_wrap(&argv, &cfg, &step, cmd), AB_EINVALID);
}

static void env_denied(void)
{
	const char *denied[] = { "ABGATE_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY",
		"AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "HF_TOKEN", "my_api_key",
		"NPM_TOKEN", "LD_PRELOAD", "DB_PASSWORD", "", NULL };
	const char *allowed[] = { "PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LD_LIBRARY_PATH", "CC", NULL };
	for (int i = 0; denied[i]; i++) {
		if (!ab_sandbox_env_denied(denied[i]))
			fprintf(stderr, "not denied: %s\n", denied[i]);
		CHECK(ab_sandbox_env_denied(denied[i]));
	}
	for (int i = 0; allowed[i]; i++)
		CHECK(!ab_sandbox_env_denied(allowed[i]));
}

static void start_failed(void)
{
	/* bwrap's --json-status-fd records: set-up child forked, then the command's exit (or not). */
	CHECK(!ab_sandbox_start_failed("{ \"child-pid\": 3059, \"pid-namespace\": 4026532256 }\n{ \"exit-code\": 1 }\n"));
	CHECK(!ab_sandbox_start_failed("{ \"child-pid\": 7 }\n{ \"exit-code\": 137 }\n"));
	CHECK(ab_sandbox_start_failed("{ \"child-pid\": 3064, \"mnt-namespace\": 4026532253 }"));
	CHECK(ab_sandbox_start_failed(""));
	CHECK(ab_sandbox_start_failed(NULL));
}

/* Runs `script` in a build step's sandbox with the status fd; returns 1 when bwrap says the
 * command never ran (ab_sandbox_start_failed), 0 when it ran, whatever its output. */
static int boxed_not_started(const char *dir, const char *const *ro, const char *script, const char *log)
{
	/* ro[0], when given, is removed after the argv is made: bwrap then fails binding it. */
	struct ab_sandbox_config cfg;
	ab_sandbox_config_defaults(&cfg);
	const char *rw[] = { dir, NULL };
	const char *cmd[] = { "/bin/sh", "-c", script, NULL };
	struct ab_sandbox_step step = { .name = "build", .cwd = dir, .rw = rw, .ro = ro, .status_fd = 3 };
	char **argv = NULL, status[4096];
	struct ab_proc_status st;
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(has(argv, "--json-status-fd"));
	if (ro)
		CHECK(rmdir(ro[0]) == 0);
	CHECK(ab_proc_run_status(&st, status, sizeof(status), (const char *const *)argv, NULL, dir, log, 30000) == 0);
	ab_build_argv_free(argv);
	CHECK(strstr(status, "child-pid") != NULL);
	return ab_sandbox_start_failed(status);
}

/* Runs `script` in a build-step sandbox of `cfg` whose writable dir is `dir`; the exit status. */
static int boxed_cfg(const struct ab_sandbox_config *cfg, const char *dir, const char *script, const char *log)
{
	const char *rw[] = { dir, NULL };
	const char *cmd[] = { "/bin/sh", "-c", script, NULL };
	struct ab_sandbox_step step = { .name = "build", .cwd = dir, .rw = rw };
	char **argv = NULL;
	struct ab_proc_status st;
	CHECK(ab_sandbox_wrap(&argv, cfg, &step, cmd) == 0);
	CHECK(ab_proc_run(&st, (const char *const *)argv, NULL, dir, log, 60000) == 0);
	ab_build_argv_free(argv);
	return st.exited ? st.exit_code : 128 + st.signal_number;
}

/* The whole step's memory cap (root with a memory cgroup only): four processes of 48 MiB, each far
 * under the per-process limit, in a 96 MiB step are killed; one of them alone fits. */
static void memory_cap(void)
{
	struct ab_sandbox_config cfg;
	ab_sandbox_config_defaults(&cfg);
	cfg.build.mem_total_mb = 96;
	if (ab_sandbox_probe(&cfg, NULL, 0) < 0 || !ab_sandbox_memory_capped(&cfg, 0)) {
		fprintf(stderr, "SKIP: no sandbox or no writable memory cgroup here (not root?)\n");
		exit(77);
	}
	const char *dir = tu_path("mem"), *log = tu_path("mem.log");
	CHECK(ab_fs_mkdirs(dir) == 0);
	const char *hog = "python3 -c 'import time; b = bytearray(48 << 20); time.sleep(1)'";
	char four[1024];
	snprintf(four, sizeof(four), "p=; for i in 1 2 3 4; do %s & p=\"$p $!\"; done; r=0; "
		"for x in $p; do wait $x || r=1; done; exit $r", hog);
	CHECK_EQ(boxed_cfg(&cfg, dir, hog, log), 0);
	CHECK(boxed_cfg(&cfg, dir, four, log) != 0);
	cfg.build.mem_total_mb = 0;     /* the control: without the cap the same four fit */
	CHECK_EQ(boxed_cfg(&cfg, dir, four, log), 0);
}

/* Runs `script` in a build-step sandbox whose writable dir is `dir`; returns the exit status. */
static int boxed(const char *dir, const char *script, const char *log)
{
	struct ab_sandbox_config cfg;
	ab_sandbox_config_defaults(&cfg);
	cfg.build.nproc = 64;
	cfg.build.fsize_mb = 1;
	const char *rw[] = { dir, NULL };
	const char *cmd[] = { "/bin/sh", "-c", script, NULL };
	struct ab_sandbox_step step = { .name = "build", .cwd = dir, .rw = rw };
	char **argv = NULL;
	struct ab_proc_status st;
	CHECK(ab_sandbox_wrap(&argv, &cfg, &step, cmd) == 0);
	CHECK(ab_proc_run(&st, (const char *const *)argv, NULL, dir, log, 30000) == 0);
	ab_build_argv_free(argv);
	return st.exited ? st.exit_code : 128 + st.signal_number;
}

static void real(void)
{
	struct ab_sandbox_config cfg;
	ab_sandbox_config_defaults(&cfg);
	char version[64];
	if (ab_sandbox_probe(&cfg, version, sizeof(version)) < 0) {
		fprintf(stderr, "SKIP: %s\n", ab_error_last());
		exit(77);
	}
	CHECK_STR_HAS(version, "bubblewrap");
	const char *dir = tu_path("box"), *secret = tu_path("secret"), *log = tu_path("box.log");
	CHECK(ab_fs_mkdirs(dir) == 0);
	CHECK(ab_fs_write(secret, "s3cr3t\n") == 0);
	/* Writable dir works; a sibling of it (the secret) and /etc/shadow are not there. */
	CHECK_EQ(boxed(dir, "echo hi > out && test -s out", log), 0);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "test ! -e %s && test ! -e /etc/shadow && test ! -e /root", secret);
	CHECK_EQ(boxed(dir, cmd, log), 0);
	/* No processes of the host: the sandbox's shell is a low pid in its own namespace. */
	CHECK_EQ(boxed(dir, "test $$ -lt 10 && test $(ls -d /proc/[0-9]* | wc -l) -lt 10", log), 0);
	/* Limits: a 2 MiB file against fsize 1 MiB dies of SIGXFSZ; 200 processes against nproc 64 fail. */
	CHECK(boxed(dir, "head -c 2097152 /dev/zero > big", log) != 0);
	struct stat st;
	CHECK(stat(tu_path("box/big"), &st) == 0 && st.st_size <= (1 << 20));
	CHECK(boxed(dir, "set -e; for i in $(seq 200); do sleep 30 & done", log) != 0);
	/* The environment is scrubbed: no ABGATE_* reaches it even when abgate has it. */
	setenv("ABGATE_GITHUB_TOKEN", "tok-123", 1);
	CHECK_EQ(boxed(dir, "env > env.txt", log), 0);
	char *env = NULL;
	CHECK(ab_fs_tail(&env, tu_path("box/env.txt"), 65536, 0) == 0);
	CHECK(!strstr(env, "tok-123") && strstr(env, "HOME=/tmp"));
	free(env);
	unsetenv("ABGATE_GITHUB_TOKEN");
	/* Set-up failure vs the command's own output: a bind of a path that vanished fails inside bwrap
	 * (no exit-code record); a command that prints bwrap's words and exits 1 ran. */
	const char *gone = tu_path("gone");
	CHECK(ab_fs_mkdirs(gone) == 0);
	const char *ro_gone[] = { gone, NULL };
	CHECK_EQ(boxed_not_started(dir, ro_gone, "true", log), 1);
	CHECK_EQ(boxed_not_started(dir, NULL, "echo 'bwrap: Can'\\''t mount proc' >&2; exit 1", log), 0);
	CHECK_EQ(boxed_not_started(dir, NULL, "kill -9 $$", log), 0);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "wrap_argv", wrap_argv }, { "env_denied", env_denied }, { "start_failed", start_failed },
		{ "real", real }, { "memory_cap", memory_cap },
	};
	return TU_RUN(argc, argv, cases);
}
