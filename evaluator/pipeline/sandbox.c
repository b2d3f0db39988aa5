/*
 * sandbox.c - the bubblewrap argv for one step (see sandbox.h). The view is built from an empty
 * root: system paths read-only, a few /etc files, a fresh /proc and /dev, a sized tmpfs on /tmp,
 * then the step's own paths. Limits are applied by prlimit as the sandbox's first command, so they
 * count processes in the sandbox's user namespace only, not every process of abgate's user.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include "build.h"
#include "error.h"
#include "proc.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARGV_MAX 512
#define SANDBOX_UID "1000"   /* inside; mapped to abgate's own uid, with no capabilities */

void ab_sandbox_config_defaults(struct ab_sandbox_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = 1;
	cfg->gpu = -1;
	/* nvcc + gcc at -j16 stay far below 4096 processes and 16 GiB of address space per process;
	 * CUDA objects and fatbins stay below 8 GiB; nvcc's temporaries live in /tmp. */
	cfg->build = (struct ab_sandbox_limits){ .nproc = 4096, .mem_mb = 16384, .fsize_mb = 8192,
		.cpu_s = 3600, .tmp_mb = 8192, .disk_mb = 65536, .mem_total_mb = 24576 };
	/* A SUT serves for up to an evaluation (job_timeout_s 7200); model files are mapped, not written. */
	cfg->run = (struct ab_sandbox_limits){ .nproc = 1024, .mem_mb = 65536, .fsize_mb = 1024,
		.cpu_s = 14400, .tmp_mb = 1024, .disk_mb = 0, .mem_total_mb = 98304 };
}

static void list_free(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

void ab_sandbox_config_clear(struct ab_sandbox_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->bwrap);
	free(cfg->prlimit);
	list_free(cfg->network, cfg->network_count);
	list_free(cfg->ro_paths, cfg->ro_path_count);
	list_free(cfg->env, cfg->env_count);
	list_free(cfg->env_add, cfg->env_add_count);
	cfg->bwrap = cfg->prlimit = NULL;
	cfg->network = cfg->ro_paths = cfg->env = cfg->env_add = NULL;
	cfg->network_count = cfg->ro_path_count = cfg->env_count = cfg->env_add_count = 0;
}

int ab_sandbox_env_denied(const char *name)
{
	static const char *const prefixes[] = { "ABGATE", "GITHUB", "GH_", "GIT_", "SSH_", "AWS_", "AZURE",
		"GOOGLE", "GCLOUD", "GCP_", "CLOUDSDK", "DOCKER", "KUBE", "VAULT_", "NPM_", "PYPI", "TWINE",
		"HF_", "HUGGING", "LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "ENV", NULL };
	static const char *const parts[] = { "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "API_KEY", "APIKEY",
		"PRIVATE", "AUTH", "SESSION", "COOKIE", "NETRC", "KRB5", NULL };
	char up[128];
	size_t n = strlen(name);
	if (n == 0 || n >= sizeof(up))
		return 1;
	for (size_t i = 0; i <= n; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	for (int i = 0; prefixes[i]; i++)
		if (strncmp(up, prefixes[i], strlen(prefixes[i])) == 0)
			return 1;
	for (int i = 0; parts[i]; i++)
		if (strstr(up, parts[i]))
			return 1;
	return 0;
}

struct args {
	char *v[ARGV_MAX];
	size_t n;
	int oom;
};

static void add(struct args *a, const char *s)
{
	if (a->oom)
		return;
	if (a->n + 1 >= ARGV_MAX || !(a->v[a->n] = strdup(s))) {
		a->oom = 1;
		return;
	}
	a->n++;
}

static void add2(struct args *a, const char *x, const char *y) { add(a, x); add(a, y); }
static void add3(struct args *a, const char *x, const char *y, const char *z) { add(a, x); add(a, y); add(a, z); }

/* "--nproc=V:V": soft and hard limit alike, so the PR cannot raise it. */
static void add_limit(struct args *a, const char *opt, long long v)
{
	char buf[96];
	snprintf(buf, sizeof(buf), "%s=%lld:%lld", opt, v, v);
	add(a, buf);
}

/* /bin, /lib64, ...: a symlink (merged /usr) is recreated, a directory bound read-only. */
static void add_system_path(struct args *a, const char *path)
{
	struct stat st;
	char target[PATH_MAX];
	if (lstat(path, &st) != 0)
		return;
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			add3(a, "--symlink", target, path);
		}
	} else if (S_ISDIR(st.st_mode)) {
		add3(a, "--ro-bind", path, path);
	}
}

static int check_path(const char *what, const char *path)
{
	struct stat st;
	if (!path || path[0] != '/')
		return ab_error_setc(AB_EINVALID, "sandbox: %s path '%s' is not absolute", what, path ? path : "");
	if (stat(path, &st) != 0)
		return ab_error_setc(AB_EINVALID, "sandbox: %s path %s does not exist", what, path);
	return 0;
}

static int listed(char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return 1;
	return 0;
}

static int gpu_wanted(const struct ab_sandbox_config *cfg)
{
	return cfg->gpu > 0 || (cfg->gpu < 0 && access("/dev/nvidiactl", F_OK) == 0);
}

/* /dev/nvidia0.., nvidiactl, nvidia-uvm(-tools), nvidia-modeset, nvidia-caps/; /sys for NVML. */
static void add_gpu(struct args *a)
{
	DIR *d = opendir("/dev");
	struct dirent *e;
	char path[300];
	while (d && (e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "nvidia", 6) != 0)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", e->d_name);
		add3(a, "--dev-bind", path, path);
	}
	if (d)
		closedir(d);
	add3(a, "--ro-bind", "/sys", "/sys");
	add3(a, "--bind-try", "/run/nvidia-persistenced", "/run/nvidia-persistenced");
}

static void add_env(struct args *a, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char name[128];
	if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(name))
		return;
	memcpy(name, kv, (size_t)(eq - kv));
	name[eq - kv] = '\0';
	if (ab_sandbox_env_denied(name))
		return;
	add3(a, "--setenv", name, eq + 1);
}

/*
 * Limits over all of a step's processes are cgroups, joined by a shell just before bwrap is
 * executed, one cgroup per kind of step ("abgate-build", "abgate-run"), only when abgate runs as
 * root (the kernel never applies RLIMIT_NPROC to uid 0, whatever the namespace, so there the
 * process limit is a pids cgroup too). cgroup_dir finds where `controller` can be used: cgroup v1
 * (/sys/fs/cgroup/<controller>) or v2 (/sys/fs/cgroup with the controller in its subtree_control;
 * for pids, also a writable root). NULL: none, and that limit is not applied.
 */
static const char *cgroup_dir(const char *controller)
{
	static char v1[2][64];
	char probe[128];
	if (geteuid() != 0)
		return NULL;
	int k = strcmp(controller, "pids") == 0 ? 0 : 1;
	snprintf(v1[k], sizeof(v1[k]), "/sys/fs/cgroup/%s", controller);
	snprintf(probe, sizeof(probe), "%s/cgroup.procs", v1[k]);
	if (access(v1[k], W_OK) == 0 && access(probe, W_OK) == 0)
		return v1[k];
	if (access("/sys/fs/cgroup/cgroup.procs", W_OK) != 0)
		return NULL;
	char line[512] = "";
	FILE *f = fopen("/sys/fs/cgroup/cgroup.subtree_control", "r");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n"))
		if (strcmp(t, controller) == 0)
			return "/sys/fs/cgroup";
	/* v2 without pids delegated below the root: the legacy "unified" mount or a root pids.max. */
	if (k == 0 && (access("/sys/fs/cgroup/unified/cgroup.procs", W_OK) == 0))
		return "/sys/fs/cgroup/unified";
	if (k == 0 && access("/sys/fs/cgroup/pids.max", F_OK) == 0)
		return "/sys/fs/cgroup";
	return NULL;
}

/* The shell that joins the cgroups: triples DIR FILE VALUE, then "--" and the command. */
static const char CGROUP_JOIN[] = "set -e; while [ \"$1\" != -- ]; do mkdir -p \"$1\"; "
	"echo \"$3\" > \"$1/$2\"; echo $$ > \"$1/cgroup.procs\"; shift 3; done; shift; exec \"$@\"";

static int add_cgroups(struct args *a, const struct ab_sandbox_limits *lim, const char *kind)
{
	const char *pids = lim->nproc > 0 ? cgroup_dir("pids") : NULL;
	const char *mem = lim->mem_total_mb > 0 ? cgroup_dir("memory") : NULL;
	char dir[256], value[32];
	if (!pids && !mem)
		return 0;
	add3(a, "/bin/sh", "-c", CGROUP_JOIN);
	add(a, "abgate-sandbox");
	if (pids) {
		snprintf(dir, sizeof(dir), "%s/abgate-%s", pids, kind);
		snprintf(value, sizeof(value), "%d", lim->nproc);
		add3(a, dir, "pids.max", value);
	}
	if (mem) {
		int v2 = strcmp(mem, "/sys/fs/cgroup") == 0;
		snprintf(dir, sizeof(dir), "%s/abgate-%s", mem, kind);
		snprintf(value, sizeof(value), "%lld", (long long)lim->mem_total_mb << 20);
		add3(a, dir, v2 ? "memory.max" : "memory.limit_in_bytes", value);   /* swap is not capped */
	}
	add(a, "--");
	return 1;
}

int ab_sandbox_memory_capped(const struct ab_sandbox_config *cfg, int run)
{
	const struct ab_sandbox_limits *lim = run ? &cfg->run : &cfg->build;
	return lim->mem_total_mb > 0 && cgroup_dir("memory") != NULL;
}

int ab_sandbox_wrap(char ***out, const struct ab_sandbox_config *cfg, const struct ab_sandbox_step *step,
	const char *const *argv)
{
	static const char *const system[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL };
	/* What compilers, the dynamic linker and libc read; never /etc as a whole (it holds the
	 * service's config and env file). */
	static const char *const etc[] = { "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/alternatives", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime",
		"/etc/os-release", "/etc/debian_version", "/etc/ssl/certs", "/etc/ca-certificates.conf",
		"/etc/gai.conf", "/etc/host.conf", NULL };
	const struct ab_sandbox_limits *lim = step->run ? &cfg->run : &cfg->build;
	int net = !step->run && listed(cfg->network, cfg->network_count, step->name);
	int gpu = step->run && gpu_wanted(cfg);
	struct args a = { .n = 0 };
	char buf[64];

	if (!argv || !argv[0])
		return ab_error_setc(AB_EINVALID, "sandbox: no command");
	if (step->status_fd && step->status_fd != 3 && step->status_fd != 4)
		return ab_error_setc(AB_EINVALID, "sandbox: status fd %d (3 or 4)", step->status_fd);
	for (size_t i = 0; step->rw && step->rw[i]; i++)
		if (check_path("writable", step->rw[i]) < 0)
			return AB_EINVALID;
	for (size_t i = 0; step->ro && step->ro[i]; i++)
		if (check_path("read-only", step->ro[i]) < 0)
			return AB_EINVALID;

	add_cgroups(&a, lim, step->run ? "run" : "build");
	add(&a, cfg->bwrap ? cfg->bwrap : "bwrap");
	if (step->status_fd)
		add2(&a, "--json-status-fd", step->status_fd == 4 ? "4" : "3");
	add(&a, "--unshare-user");
	/* As root, bwrap would keep capabilities: map abgate to an unprivileged uid inside. */
	add2(&a, "--uid", SANDBOX_UID);
	add2(&a, "--gid", SANDBOX_UID);
	add(&a, "--disable-userns");
	add(&a, "--unshare-pid");
	add(&a, "--unshare-ipc");
	add(&a, "--unshare-uts");
	add(&a, "--unshare-cgroup-try");
	if (!net)
		add(&a, "--unshare-net");
	add(&a, "--die-with-parent");
	add2(&a, "--hostname", "sandbox");
	add2(&a, "--cap-drop", "ALL");
	for (int i = 0; system[i]; i++)
		add_system_path(&a, system[i]);
	for (int i = 0; etc[i]; i++)
		add3(&a, "--ro-bind-try", etc[i], etc[i]);
	if (net) {
		add3(&a, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf");
		add3(&a, "--ro-bind-try", "/etc/hosts", "/etc/hosts");
	}
	add2(&a, "--proc", "/proc");
	add2(&a, "--dev", "/dev");
	if (lim->tmp_mb > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)lim->tmp_mb << 20);
		add2(&a, "--size", buf);
	}
	add2(&a, "--tmpfs", "/tmp");
	add2(&a, "--tmpfs", "/var/tmp");
	add3(&a, "--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu");
	if (gpu)
		add_gpu(&a);
	for (size_t i = 0; i < cfg->ro_path_count; i++)
		add3(&a, "--ro-bind-try", cfg->ro_paths[i], cfg->ro_paths[i]);
	for (size_t i = 0; step->rw && step->rw[i]; i++)
		add3(&a, "--bind", step->rw[i], step->rw[i]);
	for (size_t i = 0; step->ro && step->ro[i]; i++)
		add3(&a, "--ro-bind", step->ro[i], step->ro[i]);
	add2(&a, "--chdir", step->cwd ? step->cwd : "/");

	/* Environment: a minimal base, the configured pass-through names, the suite's own entries. */
	add(&a, "--clearenv");
	const char *path = getenv("PATH");
	add3(&a, "--setenv", "PATH", path && path[0] ? path : "/usr/local/bin:/usr/bin:/bin");
	add3(&a, "--setenv", "HOME", "/tmp");
	add3(&a, "--setenv", "TMPDIR", "/tmp");
	add3(&a, "--setenv", "LANG", "C.UTF-8");
	add3(&a, "--setenv", "USER", "sandbox");
	for (size_t i = 0; i < cfg->env_count + cfg->env_add_count; i++) {
		const char *name = i < cfg->env_count ? cfg->env[i] : cfg->env_add[i - cfg->env_count];
		const char *v = getenv(name);
		if (v && !ab_sandbox_env_denied(name))
			add3(&a, "--setenv", name, v);
	}
	for (size_t i = 0; step->env && step->env[i]; i++)
		add_env(&a, step->env[i]);

	add(&a, "--");
	add(&a, cfg->prlimit ? cfg->prlimit : "/usr/bin/prlimit");
	add(&a, "--core=0");
	if (lim->nproc > 0)
		add_limit(&a, "--nproc", lim->nproc);
	if (lim->mem_mb > 0 && !gpu)
		add_limit(&a, "--as", (long long)(lim->mem_mb << 20));
	if (lim->fsize_mb > 0)
		add_limit(&a, "--fsize", (long long)(lim->fsize_mb << 20));
	if (lim->cpu_s > 0)
		add_limit(&a, "--cpu", (long long)lim->cpu_s);
	add(&a, "--");
	for (size_t i = 0; argv[i]; i++)
		add(&a, argv[i]);
	if (a.oom) {
		for (size_t i = 0; i < a.n; i++)
			free(a.v[i]);
		return ab_error_set("sandbox: out of memory (or more than %d arguments)", ARGV_MAX);
	}
	char **v = calloc(a.n + 1, sizeof(*v));
	if (!v) {
		for (size_t i = 0; i < a.n; i++)
			free(a.v[i]);
		return ab_error_set("out of memory");
	}
	memcpy(v, a.v, a.n * sizeof(*v));
	*out = v;
	return 0;
}

int ab_sandbox_start_failed(const char *status)
{
	return !status || !strstr(status, "\"exit-code\"");
}

void ab_sandbox_failure_reason(char *why, size_t len, const char *tail)
{
	const char *last = NULL;
	for (const char *m = tail ? strstr(tail, "bwrap: ") : NULL; m; m = strstr(m + 1, "bwrap: "))
		last = m;
	if (last)
		snprintf(why, len, "%.*s", (int)strcspn(last, "\n"), last);
	else
		snprintf(why, len, "bubblewrap exited before starting the command");
}

int ab_sandbox_probe(const struct ab_sandbox_config *cfg, char *version, size_t version_len)
{
	char tmpdir[] = "/tmp/abgate-probe.XXXXXX", *tail = NULL, **argv = NULL;
	struct ab_proc_status st;
	ab_proc *p = NULL;
	int error = -1;

	if (version && version_len)
		version[0] = '\0';
	if (!mkdtemp(tmpdir))
		return ab_error_errno("sandbox: mkdtemp");
	const char *rw[] = { tmpdir, NULL };
	const struct ab_sandbox_step step = { .name = "probe", .cwd = tmpdir, .rw = rw };
	const char *cmd[] = { "/bin/sh", "-c", "echo ok > ok && test ! -e /etc/shadow", NULL };
	if (ab_sandbox_wrap(&argv, cfg, &step, cmd) < 0)
		goto cleanup;
	const struct ab_proc_spec spec = { .argv = (const char *const *)argv };
	if (ab_proc_spawn(&p, &spec) < 0) {
		ab_error_wrap(AB_ERROR, "sandbox: cannot start %s", argv[0]);
		goto cleanup;
	}
	if (ab_proc_wait(&st, p, ab_proc_deadline_ms(20000)) == AB_ETIMEOUT)
		ab_proc_kill(&st, p, 500, 1);
	char okfile[sizeof(tmpdir) + 8];
	snprintf(okfile, sizeof(okfile), "%s/ok", tmpdir);
	if (!ab_proc_status_ok(&st) || access(okfile, F_OK) != 0) {
		char how[96];
		ab_proc_stderr_tail(&tail, p, 1024);
		size_t n = tail ? strlen(tail) : 0;
		while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' '))
			tail[--n] = '\0';
		ab_error_set("sandbox: bubblewrap cannot start a sandbox here (%s): %s",
			ab_proc_status_describe(how, sizeof(how), &st), n ? tail : "no message");
		goto cleanup;
	}
	if (version && version_len) {
		/* bwrap --version: "bubblewrap 0.8.0" */
		ab_proc *vp = NULL;
		const char *vargv[] = { cfg->bwrap ? cfg->bwrap : "bwrap", "--version", NULL };
		const struct ab_proc_spec vspec = { .argv = vargv, .stdout_pipe = 1, .line_max = 256 };
		const char *line = NULL;
		size_t len = 0;
		if (ab_proc_spawn(&vp, &vspec) == 0 &&
		    ab_proc_read_line(&line, &len, NULL, vp, ab_proc_deadline_ms(5000)) == 0)
			snprintf(version, version_len, "%s", line);
		ab_proc_free(vp);
	}
	error = 0;
cleanup:
	ab_proc_free(p);
	free(tail);
	ab_build_argv_free(argv);
	char okpath[sizeof(tmpdir) + 8];
	snprintf(okpath, sizeof(okpath), "%s/ok", tmpdir);
	unlink(okpath);
	rmdir(tmpdir);
	return error;
}
