/*
 * repo.c - repositories through libgit2 (see repo.h). A remote is kept as a bare mirror whose
 * refspecs copy branches, tags and refs/pull/N/head one to one, so a ref resolves the same way in
 * the mirror as on the remote. Checkouts never touch a repository's own work tree or index: they
 * go to <state>/src/<tree-id>/ with an empty baseline, via a temporary directory and rename().
 */
#define _GNU_SOURCE
#include "repo.h"

#include "error.h"
#include "fs.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const mirror_refspecs[] = {
	"+refs/heads/*:refs/heads/*",
	"+refs/tags/*:refs/tags/*",
	"+refs/pull/*/head:refs/pull/*/head",
};

struct ab_repo {
	git_repository *git;
	char *path;
	char *url;        /* mirrors only */
	char *lock_path;  /* mirrors only: serialises fetches between processes */
};

static pthread_once_t git_once = PTHREAD_ONCE_INIT;
static int git_init_rc;

static void git_init_once(void)
{
	git_init_rc = git_libgit2_init();
}

static int git_ready(void)
{
	pthread_once(&git_once, git_init_once);
	return git_init_rc < 0 ? ab_error_set("libgit2 failed to initialise") : 0;
}

/* Translates a libgit2 failure into ours, keeping libgit2's message. */
static int git_fail(int gerr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int git_fail(int gerr, const char *fmt, ...)
{
	const git_error *e = git_error_last();
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	int code = gerr == GIT_ENOTFOUND ? AB_ENOTFOUND
		: (gerr == GIT_EAMBIGUOUS || gerr == GIT_EINVALIDSPEC) ? AB_EINVALID : AB_ERROR;
	return ab_error_setc(code, "%s: %s", what, e && e->message ? e->message : "libgit2 error");
}

int ab_repo_is_url(const char *spec)
{
	if (!spec)
		return 0;
	if (strstr(spec, "://"))
		return 1;
	/* scp-like "user@host:path" (but not a local path that happens to contain ':') */
	const char *at = strchr(spec, '@'), *colon = strchr(spec, ':'), *slash = strchr(spec, '/');
	return at && colon && at < colon && (!slash || colon < slash);
}

static ab_repo *repo_new(git_repository *git, const char *path)
{
	ab_repo *r = calloc(1, sizeof(*r));
	if (!r || !(r->path = strdup(path))) {
		free(r);
		ab_error_set("out of memory");
		return NULL;
	}
	r->git = git;
	return r;
}

int ab_repo_open(ab_repo **out, const char *path)
{
	git_repository *git = NULL;
	int rc;

	if (git_ready() < 0)
		return AB_ERROR;
	if ((rc = git_repository_open_ext(&git, path, 0, NULL)) < 0)
		return git_fail(rc, "cannot open repository %s", path);
	const char *where = git_repository_is_bare(git) ? git_repository_path(git) : git_repository_workdir(git);
	ab_repo *r = repo_new(git, where ? where : path);
	if (!r) {
		git_repository_free(git);
		return AB_ERROR;
	}
	*out = r;
	return 0;
}

/* "https://github.com/org/repo.git" -> "github.com_org_repo-<8 hex of sha256(url)>" */
static int mirror_name(char *out, size_t cap, const char *url)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	const char *s = strstr(url, "://");
	size_t w = 0;

	s = s ? s + 3 : url;
	const char *at = strchr(s, '@'), *slash = strchr(s, '/');
	if (at && (!slash || at < slash))
		s = at + 1;  /* drop credentials/user */
	size_t len = strlen(s);
	if (len > 4 && strcmp(s + len - 4, ".git") == 0)
		len -= 4;
	while (len && s[len - 1] == '/')
		len--;
	for (size_t i = 0; i < len && w + 12 < cap && w < 80; i++) {
		char c = s[i];
		int keep = isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
		char put = keep ? c : '_';
		if (w == 0 && (put == '.' || put == '_'))
			continue;
		if (put == '_' && w > 0 && out[w - 1] == '_')
			continue;
		out[w++] = put;
	}
	if (w == 0)
		out[w++] = 'r';
	if (!EVP_Digest(url, strlen(url), digest, &dlen, EVP_sha256(), NULL))
		return ab_error_set("sha256 failed");
	snprintf(out + w, cap - w, "-%02x%02x%02x%02x", digest[0], digest[1], digest[2], digest[3]);
	return 0;
}

static int lock_file(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return ab_error_errno("cannot open lock %s", path);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			close(fd);
			return ab_error_errno("cannot lock %s", path);
		}
	}
	return fd;
}

static void unlock_file(int fd)
{
	if (fd >= 0)
		close(fd);  /* releases the flock */
}

/* Fetches `specs` (NULL: the mirror refspecs, pruned) from url. An anonymous remote with explicit
 * refspecs: nothing depends on the mirror's config (and libgit2 1.5 leaks when it reads remote
 * config through its regex path). */
static int fetch_refspecs(git_repository *git, const char *url, const char *const *specs, size_t n,
	const char *what)
{
	git_remote *remote = NULL;
	git_fetch_options opts;
	git_strarray arr = {(char **)(specs ? specs : mirror_refspecs),
		specs ? n : sizeof(mirror_refspecs) / sizeof(mirror_refspecs[0])};
	int rc;

	git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
	if ((rc = git_remote_create_anonymous(&remote, git, url)) < 0)
		return git_fail(rc, "remote %s", url);
	opts.prune = specs ? GIT_FETCH_NO_PRUNE : GIT_FETCH_PRUNE;
	opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_ALL;
	rc = git_remote_fetch(remote, &arr, &opts, "abgate fetch");
	git_remote_free(remote);
	return rc < 0 ? git_fail(rc, "fetch %s", what) : 0;
}

int ab_repo_fetch(ab_repo *r)
{
	if (!r->url)
		return 0;
	int lock = lock_file(r->lock_path);
	if (lock < 0)
		return lock;
	AB_INFO("fetching %s", r->url);
	int error = fetch_refspecs(r->git, r->url, NULL, 0, r->url);
	unlock_file(lock);
	return error;
}

/* Creates a bare mirror of url at tmp_path (a fresh directory), fetched. */
static int mirror_create(const char *tmp_path, const char *url)
{
	git_repository *git = NULL;
	git_remote *remote = NULL;
	int rc, error = -1;

	if ((rc = git_repository_init(&git, tmp_path, 1)) < 0) {
		git_fail(rc, "cannot create mirror in %s", tmp_path);
		goto cleanup;
	}
	if ((rc = git_remote_create_with_fetchspec(&remote, git, "origin", url, mirror_refspecs[0])) < 0) {
		git_fail(rc, "cannot add remote %s", url);
		goto cleanup;
	}
	for (size_t i = 1; i < sizeof(mirror_refspecs) / sizeof(mirror_refspecs[0]); i++)
		if ((rc = git_remote_add_fetch(git, "origin", mirror_refspecs[i])) < 0) {
			git_fail(rc, "cannot add refspec %s", mirror_refspecs[i]);
			goto cleanup;
		}
	AB_INFO("cloning %s", url);
	error = fetch_refspecs(git, url, NULL, 0, url);
cleanup:
	git_remote_free(remote);
	git_repository_free(git);
	return error;
}

int ab_repo_mirror(ab_repo **out, const char *url, const char *state_dir)
{
	char name[128], dir[PATH_MAX + 160], tmp[PATH_MAX + 224], lock_path[PATH_MAX + 168], abs_url[PATH_MAX + 8];
	char state_abs[PATH_MAX];
	git_repository *git = NULL;
	ab_repo *r = NULL;
	int lock = -1, rc, error = -1;
	struct stat st;

	if (git_ready() < 0)
		return AB_ERROR;
	/* A plain local path becomes absolute, so the mirror does not depend on the cwd. */
	if (!ab_repo_is_url(url)) {
		char resolved[PATH_MAX];
		if (!realpath(url, resolved))
			return ab_error_setc(AB_ENOTFOUND, "repository %s: %s", url, strerror(errno));
		snprintf(abs_url, sizeof(abs_url), "%s", resolved);
		url = abs_url;
	}
	if (mirror_name(name, sizeof(name), url) < 0)
		return AB_ERROR;
	snprintf(dir, sizeof(dir), "%s/mirrors", state_dir);
	if (ab_fs_mkdirs(dir) < 0 || !realpath(dir, state_abs))
		return ab_error_wrap(AB_ERROR, "state dir %s", state_dir);
	snprintf(dir, sizeof(dir), "%s/%s", state_abs, name);
	snprintf(lock_path, sizeof(lock_path), "%s.lock", dir);
	if ((lock = lock_file(lock_path)) < 0)
		return lock;

	if (stat(dir, &st) != 0) {
		snprintf(tmp, sizeof(tmp), "%s.tmp-%d", dir, (int)getpid());
		ab_fs_rmtree(tmp);
		if (mirror_create(tmp, url) < 0) {
			ab_fs_rmtree(tmp);
			goto cleanup;
		}
		if (rename(tmp, dir) != 0) {
			ab_error_errno("cannot move mirror into %s", dir);
			ab_fs_rmtree(tmp);
			goto cleanup;
		}
		if ((rc = git_repository_open_bare(&git, dir)) < 0) {
			git_fail(rc, "cannot open mirror %s", dir);
			goto cleanup;
		}
	} else {
		if ((rc = git_repository_open_bare(&git, dir)) < 0) {
			git_fail(rc, "cannot open mirror %s", dir);
			goto cleanup;
		}
		AB_INFO("fetching %s", url);
		if (fetch_refspecs(git, url, NULL, 0, url) < 0)
			goto cleanup;
	}
	if (!(r = repo_new(git, dir)))
		goto cleanup;
	git = NULL;
	if (!(r->url = strdup(url)) || !(r->lock_path = strdup(lock_path))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	*out = r;
	r = NULL;
	error = 0;
cleanup:
	unlock_file(lock);
	git_repository_free(git);
	ab_repo_free(r);
	return error;
}

const char *ab_repo_path(const ab_repo *repo)
{
	return repo->path;
}

/* "pull/12/head" or "refs/pull/12/head" -> 12; 0 when it is not one. */
static long pull_number(const char *ref)
{
	if (strncmp(ref, "refs/", 5) == 0)
		ref += 5;
	if (strncmp(ref, "pull/", 5) != 0)
		return 0;
	char *end;
	errno = 0;
	long n = strtol(ref + 5, &end, 10);
	if (errno || n <= 0 || end == ref + 5 || strcmp(end, "/head") != 0 || !isdigit((unsigned char)ref[5]))
		return 0;
	return n;
}

static int fill_commit(struct ab_repo_commit *out, git_commit *commit, const char *refname)
{
	const char *summary = git_commit_summary(commit);
	memset(out, 0, sizeof(*out));
	git_oid_tostr(out->sha, sizeof(out->sha), git_commit_id(commit));
	git_oid_tostr(out->tree, sizeof(out->tree), git_commit_tree_id(commit));
	snprintf(out->refname, sizeof(out->refname), "%s", refname ? refname : "");
	snprintf(out->summary, sizeof(out->summary), "%s", summary ? summary : "");
	return 0;
}

int ab_repo_resolve(struct ab_repo_commit *out, ab_repo *r, const char *ref)
{
	git_object *obj = NULL, *peeled = NULL;
	git_reference *reference = NULL;
	int rc, error = -1;

	if (!ref || !*ref || ref[0] == '-' || strlen(ref) > 200)
		return ab_error_setc(AB_EINVALID, "bad ref name '%s'", ref ? ref : "");
	for (const char *c = ref; *c; c++)
		if (iscntrl((unsigned char)*c) || *c == ' ')
			return ab_error_setc(AB_EINVALID, "bad ref name '%s'", ref);

	long pr = pull_number(ref);
	if (pr > 0) {
		char full[64];
		git_oid oid;
		snprintf(full, sizeof(full), "refs/pull/%ld/head", pr);
		rc = git_reference_name_to_id(&oid, r->git, full);
		if (rc == GIT_ENOTFOUND && r->url) {
			char spec[160];
			const char *specs[1] = {spec};
			snprintf(spec, sizeof(spec), "+%s:%s", full, full);
			int lock = lock_file(r->lock_path);
			if (lock < 0)
				return lock;
			AB_INFO("fetching %s from %s", full, r->url);
			error = fetch_refspecs(r->git, r->url, specs, 1, full);
			unlock_file(lock);
			if (error < 0)
				return error;
			rc = git_reference_name_to_id(&oid, r->git, full);
		}
		if (rc < 0)
			return git_fail(rc, "cannot resolve %s%s", full, r->url ? "" : " (open the repository as a mirror to fetch pull refs)");
		if ((rc = git_object_lookup(&obj, r->git, &oid, GIT_OBJECT_ANY)) < 0)
			return git_fail(rc, "cannot read %s", full);
		rc = git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT);
		if (rc < 0) {
			git_fail(rc, "%s is not a commit", full);
			goto cleanup;
		}
		error = fill_commit(out, (git_commit *)peeled, full);
		goto cleanup;
	}

	if ((rc = git_revparse_ext(&obj, &reference, r->git, ref)) < 0) {
		error = git_fail(rc, "cannot resolve '%s'", ref);
		goto cleanup;
	}
	if ((rc = git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT)) < 0) {
		error = git_fail(rc, "'%s' does not name a commit", ref);
		if (error == AB_ENOTFOUND)
			error = ab_error_setc(AB_EINVALID, "'%s' does not name a commit", ref);
		goto cleanup;
	}
	error = fill_commit(out, (git_commit *)peeled, reference ? git_reference_name(reference) : NULL);
cleanup:
	git_object_free(peeled);
	git_object_free(obj);
	git_reference_free(reference);
	return error;
}

static int lookup_commit(git_commit **out, ab_repo *r, const char *sha)
{
	git_oid oid;
	int rc;
	if (!sha || strlen(sha) != 40 || git_oid_fromstr(&oid, sha) < 0)
		return ab_error_setc(AB_EINVALID, "'%s' is not a full commit id", sha ? sha : "");
	if ((rc = git_commit_lookup(out, r->git, &oid)) < 0)
		return git_fail(rc, "commit %s", sha);
	return 0;
}

int ab_repo_merge_base(char out_sha[AB_REPO_OID_HEX], ab_repo *r, const char *sha_a, const char *sha_b)
{
	git_oid a, b, base;
	int rc;
	if (git_oid_fromstr(&a, sha_a) < 0 || git_oid_fromstr(&b, sha_b) < 0)
		return ab_error_setc(AB_EINVALID, "merge base: bad commit ids");
	if ((rc = git_merge_base(&base, r->git, &a, &b)) < 0)
		return git_fail(rc, "no merge base of %.12s and %.12s", sha_a, sha_b);
	git_oid_tostr(out_sha, AB_REPO_OID_HEX, &base);
	return 0;
}

void ab_repo_changes_free(struct ab_repo_change *changes, size_t count)
{
	for (size_t i = 0; changes && i < count; i++) {
		free(changes[i].path);
		free(changes[i].old_path);
	}
	free(changes);
}

int ab_repo_changed_files(struct ab_repo_change **out, size_t *out_count, ab_repo *r,
	const char *base_sha, const char *head_sha)
{
	git_commit *base = NULL, *head = NULL;
	git_tree *base_tree = NULL, *head_tree = NULL;
	git_diff *diff = NULL;
	git_diff_options opts;
	git_diff_find_options find;
	struct ab_repo_change *changes = NULL;
	size_t n = 0;
	int rc, error = -1;

	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	git_diff_find_options_init(&find, GIT_DIFF_FIND_OPTIONS_VERSION);

	if ((error = lookup_commit(&base, r, base_sha)) < 0 || (error = lookup_commit(&head, r, head_sha)) < 0)
		goto cleanup;
	error = -1;
	if ((rc = git_commit_tree(&base_tree, base)) < 0 || (rc = git_commit_tree(&head_tree, head)) < 0) {
		git_fail(rc, "cannot read trees");
		goto cleanup;
	}
	if ((rc = git_diff_tree_to_tree(&diff, r->git, base_tree, head_tree, &opts)) < 0) {
		git_fail(rc, "diff %.12s..%.12s", base_sha, head_sha);
		goto cleanup;
	}
	find.flags = GIT_DIFF_FIND_RENAMES;
	if ((rc = git_diff_find_similar(diff, &find)) < 0) {
		git_fail(rc, "rename detection");
		goto cleanup;
	}
	size_t total = git_diff_num_deltas(diff);
	if (!(changes = calloc(total ? total : 1, sizeof(*changes)))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	for (; n < total; n++) {
		const git_diff_delta *d = git_diff_get_delta(diff, n);
		const char *path = d->status == GIT_DELTA_DELETED ? d->old_file.path : d->new_file.path;
		changes[n].status = git_diff_status_char(d->status);
		changes[n].path = strdup(path ? path : "");
		changes[n].old_path = strdup(d->old_file.path ? d->old_file.path : "");
		if (!changes[n].path || !changes[n].old_path) {
			n++;
			ab_error_set("out of memory");
			goto cleanup;
		}
	}
	*out = changes;
	*out_count = n;
	changes = NULL;
	error = 0;
cleanup:
	ab_repo_changes_free(changes, n);
	git_diff_free(diff);
	git_tree_free(base_tree);
	git_tree_free(head_tree);
	git_commit_free(base);
	git_commit_free(head);
	return error;
}

int ab_repo_checkout(char **out_dir, int *out_reused, ab_repo *r, const char *sha, const char *state_dir)
{
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	git_index *empty = NULL;
	git_checkout_options opts;
	char tree_hex[AB_REPO_OID_HEX], src[PATH_MAX], src_abs[PATH_MAX], final[PATH_MAX + 48];
	char tmp[PATH_MAX + 96];
	static unsigned counter;
	int rc, error = -1, reused = 0;
	struct stat st;

	git_checkout_options_init(&opts, GIT_CHECKOUT_OPTIONS_VERSION);
	if ((error = lookup_commit(&commit, r, sha)) < 0)
		return error;
	git_oid_tostr(tree_hex, sizeof(tree_hex), git_commit_tree_id(commit));
	snprintf(src, sizeof(src), "%s/src", state_dir);
	if (ab_fs_mkdirs(src) < 0 || !realpath(src, src_abs)) {
		ab_error_wrap(AB_ERROR, "checkout dir %s", src);
		goto cleanup;
	}
	snprintf(final, sizeof(final), "%s/%s", src_abs, tree_hex);
	if (stat(final, &st) == 0 && S_ISDIR(st.st_mode)) {
		reused = 1;
		goto done;
	}
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%.12s-%d-%u", src_abs, tree_hex, (int)getpid(),
		__atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	ab_fs_rmtree(tmp);
	if (mkdir(tmp, 0755) != 0) {
		ab_error_errno("mkdir %s", tmp);
		goto cleanup;
	}
	if ((rc = git_commit_tree(&tree, commit)) < 0 || (rc = git_index_new(&empty)) < 0) {
		git_fail(rc, "checkout %.12s", sha);
		goto fail_tmp;
	}
	/* Empty baseline: every file of the tree is written; the repository's index is never touched. */
	opts.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_DONT_UPDATE_INDEX;
	opts.target_directory = tmp;
	opts.baseline_index = empty;
	if ((rc = git_checkout_tree(r->git, (git_object *)tree, &opts)) < 0) {
		git_fail(rc, "checkout %.12s into %s", sha, tmp);
		goto fail_tmp;
	}
	if (rename(tmp, final) != 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			ab_error_errno("cannot move checkout into %s", final);
			goto fail_tmp;
		}
		reused = 1;  /* another evaluation wrote the same tree first */
		ab_fs_rmtree(tmp);
	}
done:
	if (!(*out_dir = strdup(final))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	if (out_reused)
		*out_reused = reused;
	error = 0;
	goto cleanup;
fail_tmp:
	ab_fs_rmtree(tmp);
cleanup:
	git_index_free(empty);
	git_tree_free(tree);
	git_commit_free(commit);
	return error;
}

int ab_repo_read_file(char **out, size_t *out_len, ab_repo *r, const char *sha, const char *path,
	size_t max_bytes)
{
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	git_tree_entry *entry = NULL;
	git_blob *blob = NULL;
	int rc, error = -1;

	if ((error = lookup_commit(&commit, r, sha)) < 0)
		return error;
	if ((rc = git_commit_tree(&tree, commit)) < 0) {
		git_fail(rc, "tree of %.12s", sha);
		goto cleanup;
	}
	if ((rc = git_tree_entry_bypath(&entry, tree, path)) < 0) {
		error = git_fail(rc, "%s at %.12s", path, sha);
		goto cleanup;
	}
	if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) {
		error = ab_error_setc(AB_ENOTFOUND, "%s at %.12s is not a file", path, sha);
		goto cleanup;
	}
	if ((rc = git_blob_lookup(&blob, r->git, git_tree_entry_id(entry))) < 0) {
		git_fail(rc, "%s at %.12s", path, sha);
		goto cleanup;
	}
	git_object_size_t size = git_blob_rawsize(blob);
	if (size > max_bytes) {
		error = ab_error_setc(AB_EINVALID, "%s at %.12s is %llu bytes, more than the %zu allowed", path, sha,
			(unsigned long long)size, max_bytes);
		goto cleanup;
	}
	char *data = malloc((size_t)size + 1);
	if (!data) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	memcpy(data, git_blob_rawcontent(blob), (size_t)size);
	data[size] = '\0';
	*out = data;
	if (out_len)
		*out_len = (size_t)size;
	error = 0;
cleanup:
	git_blob_free(blob);
	git_tree_entry_free(entry);
	git_tree_free(tree);
	git_commit_free(commit);
	return error;
}

void ab_repo_free(ab_repo *r)
{
	if (!r)
		return;
	git_repository_free(r->git);
	free(r->path);
	free(r->url);
	free(r->lock_path);
	free(r);
}
