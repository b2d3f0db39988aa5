/*
 * models.c - model files for an evaluation (see models.h): substitute, generate once atomically,
 * verify sha256 with a cache keyed by path, size and mtime.
 */
#include "models.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "log.h"
#include "proc.h"

int ab_models_sha256_file(char out[65], const char *path)
{
	unsigned char digest[EVP_MAX_MD_SIZE], *buf = NULL;
	unsigned int digest_len = 0;
	EVP_MD_CTX *md = NULL;
	int fd = -1, error = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		ab_error_errno("cannot open %s", path);
		goto cleanup;
	}
	if ((buf = malloc(1 << 20)) == NULL || (md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		ab_error_set("sha256: out of memory");
		goto cleanup;
	}
	for (;;) {
		ssize_t got = read(fd, buf, 1 << 20);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ab_error_errno("cannot read %s", path);
			goto cleanup;
		}
		if (got == 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)got);
	}
	EVP_DigestFinal_ex(md, digest, &digest_len);
	for (unsigned i = 0; i < digest_len && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", digest[i]);
	error = 0;
cleanup:
	if (fd >= 0)
		close(fd);
	free(buf);
	EVP_MD_CTX_free(md);
	return error;
}

void ab_models_free(char **paths, int count)
{
	if (paths == NULL)
		return;
	for (int i = 0; i < count; i++)
		free(paths[i]);
	free(paths);
}

/* A model path with placeholders substituted, made absolute against the base checkout. */
static int model_path(char **out, const struct ab_models_request *rq, const char *template)
{
	struct ab_subst vars[] = {
		{ "state", rq->state_dir }, { "build", rq->build_dir }, { "src", rq->src_dir },
		{ "model", NULL }, { "jobs", NULL },
	};
	char *path = NULL;
	if (ab_build_subst(&path, template, vars, sizeof(vars) / sizeof(vars[0])) < 0)
		return ab_error_wrap(AB_EINVALID, "model path");
	if (path[0] != '/') {
		size_t len = strlen(rq->src_dir) + strlen(path) + 2;
		char *abs = malloc(len);
		if (abs == NULL) {
			free(path);
			return ab_error_set("out of memory");
		}
		snprintf(abs, len, "%s/%s", rq->src_dir, path);
		free(path);
		path = abs;
	}
	*out = path;
	return 0;
}

/* One file the suite needs: a model or a model's draft. */
struct artifact {
	const char *what;                     /* "model" or "draft" */
	const char *name;                     /* the suite model's name */
	const char *path_template;
	const struct ab_suite_argv *generate;
	const char *sha256;                   /* "" when not given */
	const char *model_path;               /* a draft's target model (its {model}); NULL for a model */
};

static int generate(const struct ab_models_request *rq, const struct artifact *m, const char *path)
{
	char tmp[4096], tmp_dir[4096], jobs[16], log_dir[4096], log_path[4200], **argv = NULL, *tail = NULL;
	char **boxed = NULL;
	struct ab_proc_status st;
	int error = -1;
	const struct ab_sandbox_config *sb = rq->sandbox && rq->sandbox->enabled ? rq->sandbox : NULL;

	tmp_dir[0] = '\0';
	if (sb) {
		/* The generator sees one private, empty directory for its output (not the models dir). */
		const char *base = strrchr(path, '/');
		snprintf(tmp_dir, sizeof(tmp_dir), "%.*s/.gen.%ld", (int)(base - path), path, (long)getpid());
		ab_fs_rmtree(tmp_dir);
		if (ab_fs_mkdirs(tmp_dir) < 0)
			return -1;
		snprintf(tmp, sizeof(tmp), "%s%s", tmp_dir, base);
	} else {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());   /* under the model's lock */
	}
	snprintf(jobs, sizeof(jobs), "%d", rq->jobs > 0 ? rq->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN));
	snprintf(log_dir, sizeof(log_dir), "%s/logs", rq->state_dir);
	snprintf(log_path, sizeof(log_path), "%s/generate-%s%s.log", log_dir, m->name,
		m->model_path ? "-draft" : "");
	/* A model's generator writes {model}; a draft's writes {draft} and may read its target {model}. */
	int is_draft = m->model_path != NULL;
	struct ab_subst vars[] = {
		{ "state", rq->state_dir }, { "build", rq->build_dir }, { "src", rq->src_dir },
		{ "model", is_draft ? m->model_path : tmp }, { "jobs", jobs }, { "draft", is_draft ? tmp : NULL },
	};
	/* The model's directory exists: the caller made it to hold the lock file. */
	if (ab_fs_mkdirs(log_dir) < 0)
		goto cleanup;
	if (ab_build_subst_argv(&argv, (const char *const *)m->generate->argv, vars,
	                        sizeof(vars) / sizeof(vars[0])) < 0)
		goto cleanup;
	if (!rq->quiet)
		AB_INFO("generating %s %s -> %s", m->what, m->name, path);
	unlink(tmp);
	if (sb) {
		const char *rw[] = { tmp_dir, NULL };
		const char *ro[] = { rq->src_dir, rq->build_dir, is_draft ? m->model_path : NULL, NULL };
		const struct ab_sandbox_step ss = { .name = "generate", .cwd = rq->src_dir, .rw = rw, .ro = ro };
		if (ab_sandbox_wrap(&boxed, sb, &ss, (const char *const *)argv) < 0)
			goto cleanup;
		ab_build_argv_free(argv);
		argv = boxed;
	}
	if (ab_proc_run(&st, (const char *const *)argv, NULL, rq->src_dir, log_path,
	                (int64_t)(rq->timeout_s > 0 ? rq->timeout_s : 1800) * 1000) < 0)
		goto cleanup;
	if (!ab_proc_status_ok(&st)) {
		char how[128];
		ab_fs_tail(&tail, log_path, 2048, 0);
		ab_error_set("generating %s %s failed (%s); log %s:\n%s", m->what, m->name,
			ab_proc_status_describe(how, sizeof(how), &st), log_path, tail ? tail : "");
		goto cleanup;
	}
	struct stat tmp_st;
	if (sb && (lstat(tmp, &tmp_st) != 0 || !S_ISREG(tmp_st.st_mode))) {
		ab_error_set("generating %s %s: the output at {%s} is missing or not a regular file", m->what,
			m->name, is_draft ? "draft" : "model");
		goto cleanup;
	}
	if (access(tmp, R_OK) != 0) {
		ab_error_set("generating %s %s: the command succeeded but wrote no file at {%s}", m->what,
			m->name, is_draft ? "draft" : "model");
		goto cleanup;
	}
	if (rename(tmp, path) != 0) {
		ab_error_errno("cannot move the generated %s into %s", m->what, path);
		goto cleanup;
	}
	error = 0;
cleanup:
	if (error < 0)
		unlink(tmp);
	if (tmp_dir[0])
		ab_fs_rmtree(tmp_dir);
	free(tail);
	ab_build_argv_free(argv);
	return error;
}

static int verify(const struct ab_models_request *rq, const struct artifact *m, const char *path)
{
	struct stat st;
	char key[4200], hex[65];
	void *cached = NULL;
	size_t cached_len = 0;

	if (stat(path, &st) != 0)
		return ab_error_errno("%s %s: %s", m->what, m->name, path);
	snprintf(key, sizeof(key), "sha256:%s:%lld:%lld.%09ld", path, (long long)st.st_size,
		(long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (rq->store && ab_store_cache_get(&cached, &cached_len, rq->store, key) == 0 && cached_len == 64) {
		memcpy(hex, cached, 64);
		hex[64] = '\0';
	} else {
		if (!rq->quiet)
			AB_INFO("verifying sha256 of %s %s", m->what, m->name);
		if (ab_models_sha256_file(hex, path) < 0)
			return -1;
		if (rq->store)
			ab_store_cache_put(rq->store, key, hex, 64);
	}
	free(cached);
	if (strcmp(hex, m->sha256) != 0)
		return ab_error_setc(AB_EINVALID, "%s %s: sha256 of %s is %s, the suite expects %s",
			m->what, m->name, path, hex, m->sha256);
	return 0;
}

/* Makes one file exist (generated once under a lock when missing) and verifies it. *out is the
 * absolute path (caller frees). */
static int prepare_one(char **out, const struct ab_models_request *rq, const struct artifact *m)
{
	char *path = NULL;
	int error = model_path(&path, rq, m->path_template);
	if (error < 0)
		return error;
	error = -1;
	if (access(path, R_OK) != 0) {
		if (m->generate->argc == 0) {
			error = ab_error_setc(AB_EINVALID, "%s %s: %s does not exist and the suite has no "
				"generate command for it", m->what, m->name, path);
			goto cleanup;
		}
		/* Concurrent evaluations (service workers) generate a file once: the lock holder
		 * generates, the others find the file when they get the lock. */
		char lock_path[4200];
		snprintf(lock_path, sizeof(lock_path), "%s.lock", path);
		char *dir_copy = strdup(path);
		if (dir_copy == NULL) {
			ab_error_set("out of memory");
			goto cleanup;
		}
		int made = ab_fs_mkdirs(dirname(dir_copy));
		free(dir_copy);
		if (made < 0)
			goto cleanup;
		int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (lock < 0 || flock(lock, LOCK_EX) != 0) {
			ab_error_errno("cannot lock %s", lock_path);
			if (lock >= 0)
				close(lock);
			goto cleanup;
		}
		int failed = access(path, R_OK) != 0 && generate(rq, m, path) < 0;
		close(lock);
		if (failed)
			goto cleanup;
	}
	if (m->sha256[0] && (error = verify(rq, m, path)) < 0)
		goto cleanup;
	*out = path;
	path = NULL;
	error = 0;
cleanup:
	free(path);
	return error;
}

int ab_models_prepare(char ***out_paths, char ***out_draft_paths, double *out_seconds,
	const struct ab_models_request *rq)
{
	const struct ab_suite *suite = rq->suite;
	char **paths = calloc((size_t)suite->model_count + 1, sizeof(char *));
	char **drafts = calloc((size_t)suite->model_count + 1, sizeof(char *));
	int64_t t0 = ab_proc_now_ns();
	int error = -1;

	if (paths == NULL || drafts == NULL) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	for (int i = 0; i < suite->model_count; i++) {
		const struct ab_suite_model *m = &suite->models[i];
		struct artifact model = { "model", m->name, m->path, &m->generate, m->sha256, NULL };
		if ((error = prepare_one(&paths[i], rq, &model)) < 0)
			goto cleanup;
		if (m->has_draft) {
			struct artifact draft = { "draft", m->name, m->draft.path, &m->draft.generate, m->draft.sha256,
				paths[i] };
			if ((error = prepare_one(&drafts[i], rq, &draft)) < 0)
				goto cleanup;
		}
	}
	*out_paths = paths;
	*out_draft_paths = drafts;
	paths = drafts = NULL;
	if (out_seconds)
		*out_seconds = (ab_proc_now_ns() - t0) / 1e9;
	error = 0;
cleanup:
	ab_models_free(paths, suite->model_count);
	ab_models_free(drafts, suite->model_count);
	return error;
}
