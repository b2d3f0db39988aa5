/*
 * build.c - the build driver (see build.h). Each build directory is keyed by what determines its
 * output: the source tree and the build section's templates. Success is recorded by a marker file
 * written (atomically, last) after every step passed; anything else - a failure, a timeout, a
 * killed abgate - leaves no marker, so the next attempt wipes the directory and builds from clean.
 */
#define _GNU_SOURCE
#include "build.h"

#include "error.h"
#include "fs.h"
#include "log.h"
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MARKER_NAME ".ok"
#define DEFAULT_TIMEOUT_S 1800
#define LOG_TAIL_BYTES 8192
#define PLACEHOLDER_MAX 32

int ab_build_subst(char **out, const char *template, const struct ab_subst *vars, size_t n_vars)
{
	size_t cap = strlen(template) + 64, len = 0;
	char *s = malloc(cap);
	if (!s)
		return ab_error_set("out of memory");
	for (const char *p = template; *p;) {
		const char *value = NULL;
		size_t skip = 1;
		if (*p == '{') {
			const char *close = strchr(p + 1, '}');
			size_t name_len = close ? (size_t)(close - p - 1) : 0;
			for (size_t i = 0; close && name_len <= PLACEHOLDER_MAX && i < n_vars; i++) {
				if (strlen(vars[i].name) == name_len && strncmp(vars[i].name, p + 1, name_len) == 0) {
					if (!vars[i].value) {
						free(s);
						return ab_error_setc(AB_EINVALID, "placeholder {%s} has no value here (in '%s')",
							vars[i].name, template);
					}
					value = vars[i].value;
					skip = name_len + 2;
					break;
				}
			}
		}
		size_t add = value ? strlen(value) : 1;
		if (len + add + 1 > cap) {
			while (len + add + 1 > cap)
				cap *= 2;
			char *grown = realloc(s, cap);
			if (!grown) {
				free(s);
				return ab_error_set("out of memory");
			}
			s = grown;
		}
		if (value)
			memcpy(s + len, value, add);
		else
			s[len] = *p;
		len += add;
		p += skip;
	}
	s[len] = '\0';
	*out = s;
	return 0;
}

void ab_build_argv_free(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

int ab_build_subst_argv(char ***out, const char *const *template, const struct ab_subst *vars, size_t n_vars)
{
	size_t n = 0;
	while (template && template[n])
		n++;
	char **argv = calloc(n + 1, sizeof(*argv));
	if (!argv)
		return ab_error_set("out of memory");
	for (size_t i = 0; i < n; i++) {
		int error = ab_build_subst(&argv[i], template[i], vars, n_vars);
		if (error < 0) {
			ab_build_argv_free(argv);
			return error;
		}
	}
	*out = argv;
	return 0;
}

static void hash_argv(EVP_MD_CTX *ctx, const char *tag, const char *const *argv)
{
	char head[64];
	size_t n = 0;
	while (argv && argv[n])
		n++;
	snprintf(head, sizeof(head), "%s %zu\n", tag, argv ? n : (size_t)-1);
	EVP_DigestUpdate(ctx, head, strlen(head));
	for (size_t i = 0; i < n; i++) {
		snprintf(head, sizeof(head), "%zu:", strlen(argv[i]));
		EVP_DigestUpdate(ctx, head, strlen(head));
		EVP_DigestUpdate(ctx, argv[i], strlen(argv[i]));
	}
}

static int valid_tree_id(const char *id)
{
	if (!id || strlen(id) != 40)
		return 0;
	for (int i = 0; i < 40; i++)
		if (!isxdigit((unsigned char)id[i]))
			return 0;
	return 1;
}

int ab_build_key(char out[64], const struct ab_build_request *rq)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	int ok;

	if (!valid_tree_id(rq->tree_id))
		return ab_error_setc(AB_EINVALID, "build: tree id '%s' is not 40 hex digits", rq->tree_id ? rq->tree_id : "");
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return ab_error_set("out of memory");
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	if (ok) {
		EVP_DigestUpdate(ctx, "abgate.build/1\n", 15);
		hash_argv(ctx, "configure", rq->configure);
		hash_argv(ctx, "build", rq->build);
		hash_argv(ctx, "env", rq->env);
		if (rq->key_salt)
			EVP_DigestUpdate(ctx, rq->key_salt, strlen(rq->key_salt));
		ok = EVP_DigestFinal_ex(ctx, digest, &dlen);
	}
	EVP_MD_CTX_free(ctx);
	if (!ok || dlen < 8)
		return ab_error_set("sha256 failed");
	int w = snprintf(out, 64, "%s-", rq->tree_id);
	for (int i = 0; i < 8; i++)
		w += snprintf(out + w, (size_t)(64 - w), "%02x", digest[i]);
	return 0;
}

void ab_build_result_clear(struct ab_build_result *r)
{
	if (!r)
		return;
	free(r->build_dir);
	free(r->log_path);
	free(r->log_tail);
	memset(r, 0, sizeof(*r));
}

/* The marker goes in last and atomically: its presence means every step succeeded. */
static int write_marker(const char *build_dir, const char *key, double duration_s)
{
	char path[PATH_MAX + 64], text[256];
	snprintf(path, sizeof(path), "%s" MARKER_NAME, build_dir);
	snprintf(text, sizeof(text), "{\"key\":\"%s\",\"duration_s\":%.3f,\"finished_unix\":%lld}\n", key,
		duration_s, (long long)time(NULL));
	return ab_fs_write_atomic(path, text) < 0 ? AB_ERROR : 0;
}

static int lock_key(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return ab_error_errno("cannot open lock %s", path);
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			close(fd);
			return ab_error_errno("cannot lock %s", path);
		}
	return fd;
}

const char *ab_build_state_name(enum ab_build_state state)
{
	switch (state) {
	case AB_BUILD_STATE_OK: return "ok";
	case AB_BUILD_STATE_FAILED: return "failed";
	case AB_BUILD_STATE_TIMEOUT: return "timeout";
	case AB_BUILD_STATE_KILLED: return "killed";
	case AB_BUILD_STATE_NOT_STARTED: return "not-started";
	}
	return "unknown";
}

static int64_t du_bytes;
static int du_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path; (void)flag; (void)ftw;
	du_bytes += (int64_t)st->st_blocks * 512;
	return 0;
}

/* Disk used under dir (not following links). Single-threaded use only (nftw has no payload). */
static int64_t dir_bytes(const char *dir)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	du_bytes = 0;
	nftw(dir, du_entry, 32, FTW_PHYS | FTW_MOUNT);
	int64_t n = du_bytes;
	pthread_mutex_unlock(&lock);
	return n;
}

/* Runs one step with its own timeout; fills state/reason/status on failure. Returns 0 if it passed. */
static int run_step(struct ab_build_result *res, const char *step, const char *const *templ,
	char **env, const struct ab_subst *vars, size_t n_vars, const char *cwd, int timeout_s,
	const struct ab_build_request *rq)
{
	char **argv = NULL, **boxed = NULL, desc[96];
	struct ab_proc_status st;
	struct stat log_st;
	int error;

	if ((error = ab_build_subst_argv(&argv, templ, vars, n_vars)) < 0)
		return error;
	AB_INFO("build: %s (%s)", step, argv[0]);
	const struct ab_sandbox_config *sb = rq->sandbox && rq->sandbox->enabled ? rq->sandbox : NULL;
	if (sb) {
		const char *rw[] = { res->build_dir, NULL };
		const char *ro[] = { rq->src_dir, rq->model, NULL };
		const struct ab_sandbox_step ss = { .name = step, .cwd = cwd, .rw = rw, .ro = ro,
			.env = (const char *const *)env, .status_fd = 3 };
		if (ab_sandbox_wrap(&boxed, sb, &ss, (const char *const *)argv) < 0) {
			res->state = AB_BUILD_STATE_NOT_STARTED;
			snprintf(res->reason, sizeof(res->reason), "%s: %s", step, ab_error_last());
			ab_build_argv_free(argv);
			return 1;
		}
		ab_build_argv_free(argv);
		argv = boxed;
		env = NULL;   /* set inside by bwrap after --clearenv */
	}
	off_t log_start = stat(res->log_path, &log_st) == 0 ? log_st.st_size : 0;
	char status[4096];
	if (ab_proc_run_status(&st, sb ? status : NULL, sizeof(status), (const char *const *)argv,
		(const char *const *)env, cwd, res->log_path, (int64_t)timeout_s * 1000) < 0) {
		res->state = AB_BUILD_STATE_NOT_STARTED;
		snprintf(res->reason, sizeof(res->reason), "%s: %s", step, ab_error_last());
		ab_build_argv_free(argv);
		return 1;
	}
	ab_build_argv_free(argv);
	res->status = st;
	res->duration_s += (double)st.wall_ns / 1e9;
	if (st.timed_out) {
		res->state = AB_BUILD_STATE_TIMEOUT;
		snprintf(res->reason, sizeof(res->reason), "%s: killed after timeout (%d s)", step, timeout_s);
		return 1;
	}
	if (!ab_proc_status_ok(&st)) {
		char *out = NULL;
		/* bubblewrap's own failure (its status fd has no exit-code record: the command never ran)
		 * is the box's, not the PR's; its "bwrap: ..." line, the last one in the log, says why. */
		if (sb && !st.signaled && ab_sandbox_start_failed(status)) {
			char why[200];
			if (ab_fs_tail(&out, res->log_path, 4096, log_start) != 0)
				out = NULL;
			ab_sandbox_failure_reason(why, sizeof(why), out);
			res->state = AB_BUILD_STATE_NOT_STARTED;
			snprintf(res->reason, sizeof(res->reason), "%s: sandbox: %s", step, why);
			free(out);
			return 1;
		}
		free(out);
		res->state = st.signaled ? AB_BUILD_STATE_KILLED : AB_BUILD_STATE_FAILED;
		/* SIGXFSZ / SIGXCPU come from the sandbox's limits: what the PR's build did, not the box. */
		if (sb && st.signaled && (st.signal_number == SIGXFSZ || st.signal_number == SIGXCPU))
			res->state = AB_BUILD_STATE_FAILED;
		snprintf(res->reason, sizeof(res->reason), "%s: %s", step, ab_proc_status_describe(desc, sizeof(desc), &st));
		return 1;
	}
	if (sb && sb->build.disk_mb > 0) {
		int64_t used = dir_bytes(res->build_dir);
		if (used > (sb->build.disk_mb << 20)) {
			res->state = AB_BUILD_STATE_FAILED;
			snprintf(res->reason, sizeof(res->reason), "%s: the build dir holds %lld MiB, over the sandbox's %lld",
				step, (long long)(used >> 20), (long long)sb->build.disk_mb);
			return 1;
		}
	}
	return 0;
}

int ab_build_run(struct ab_build_result *out, const struct ab_build_request *rq)
{
	struct ab_build_result res = {0};
	char builds[PATH_MAX + 16], state_abs[PATH_MAX], marker[PATH_MAX + 128], lock_path[PATH_MAX + 128];
	char jobs[16], text[512];
	char **env = NULL;
	int lock = -1, error = -1;
	struct stat st;

	if (!rq->state_dir || !rq->src_dir || !rq->build || !rq->build[0])
		return ab_error_setc(AB_EINVALID, "build: state_dir, src_dir and a build command are required");
	if (rq->configure && !rq->configure[0])
		return ab_error_setc(AB_EINVALID, "build: empty configure command");
	if ((error = ab_build_key(res.key, rq)) < 0)
		return error;
	error = -1;
	snprintf(builds, sizeof(builds), "%s/builds", rq->state_dir);
	if (ab_fs_mkdirs(builds) < 0 || !realpath(rq->state_dir, state_abs)) {
		ab_error_wrap(AB_ERROR, "build: state dir %s", rq->state_dir);
		goto cleanup;
	}
	if (asprintf(&res.build_dir, "%s/builds/%s", state_abs, res.key) < 0) {
		res.build_dir = NULL;
		ab_error_set("out of memory");
		goto cleanup;
	}
	/* Next to the build dir, not in it: a step can write its own dir, and must not forge success. */
	snprintf(marker, sizeof(marker), "%s" MARKER_NAME, res.build_dir);
	snprintf(lock_path, sizeof(lock_path), "%s.lock", res.build_dir);
	const char *side = rq->side ? rq->side : "build";
	if (rq->log_path ? !(res.log_path = strdup(rq->log_path))
	    : asprintf(&res.log_path, "%s.%s.log", res.build_dir, side) < 0) {
		res.log_path = NULL;
		ab_error_set("out of memory");
		goto cleanup;
	}
	if ((lock = lock_key(lock_path)) < 0)
		goto cleanup;

	if (stat(marker, &st) == 0) {
		AB_INFO("build: %s reused (tree %.12s already built)", side, rq->tree_id);
		res.reused = 1;
		res.state = AB_BUILD_STATE_OK;
		res.status.exited = 1;
		if (!(res.log_tail = strdup("")))
			goto oom;
		goto done;
	}
	/* No marker: a fresh key, or a failed / interrupted attempt whose leftovers must not leak in. */
	if (ab_fs_rmtree(res.build_dir) < 0 || ab_fs_mkdirs(res.build_dir) < 0)
		goto cleanup;
	snprintf(text, sizeof(text), "[abgate] build %s: tree %s, key %s\n", side, rq->tree_id, res.key);
	if (ab_fs_write(res.log_path, text) < 0)
		goto cleanup;

	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(jobs, sizeof(jobs), "%d", rq->jobs > 0 ? rq->jobs : (ncpu > 0 ? (int)ncpu : 1));
	const struct ab_subst vars[] = {
		{"src", rq->src_dir}, {"build", res.build_dir}, {"jobs", jobs}, {"state", state_abs}, {"model", rq->model},
	};
	size_t n_vars = sizeof(vars) / sizeof(vars[0]);
	if (rq->env && (error = ab_build_subst_argv(&env, rq->env, vars, n_vars)) < 0)
		goto cleanup;
	int timeout_s = rq->timeout_s > 0 ? rq->timeout_s : DEFAULT_TIMEOUT_S;
	int r = 0;
	if (rq->configure)
		r = run_step(&res, "configure", rq->configure, env, vars, n_vars, res.build_dir, timeout_s, rq);
	if (r == 0)
		r = run_step(&res, "build", rq->build, env, vars, n_vars, res.build_dir, timeout_s, rq);
	if (r < 0) {
		error = r;
		goto cleanup;
	}
	if (r == 0) {
		res.state = AB_BUILD_STATE_OK;
		if (write_marker(res.build_dir, res.key, res.duration_s) < 0)
			goto cleanup;
		AB_INFO("build: %s done in %.1f s", side, res.duration_s);
	} else {
		/* A step may have written the marker itself: a failed tree must never be "reused". */
		unlink(marker);
		AB_WARN("build: %s failed: %s", side, res.reason);
		if (res.state != AB_BUILD_STATE_OK && rq->sandbox && rq->sandbox->enabled && rq->sandbox->build.disk_mb > 0 &&
		    dir_bytes(res.build_dir) > (rq->sandbox->build.disk_mb << 20))
			ab_fs_rmtree(res.build_dir);   /* do not keep a disk-filling build around until the retry */
	}
	if (ab_fs_tail(&res.log_tail, res.log_path, LOG_TAIL_BYTES, 0) < 0 && !(res.log_tail = strdup("")))
		goto oom;
done:
	*out = res;
	memset(&res, 0, sizeof(res));
	error = 0;
	goto cleanup;
oom:
	ab_error_set("out of memory");
cleanup:
	if (lock >= 0)
		close(lock);
	ab_build_argv_free(env);
	ab_build_result_clear(&res);
	return error;
}
