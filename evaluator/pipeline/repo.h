/*
 * repo.h - getting the code to evaluate, with libgit2: open a local repository or keep a bare
 * mirror of a remote one under <state>/mirrors/, resolve refs (branch, tag, sha, pull/N/head) to
 * commit and tree ids, list the files a change touches, check a tree out into its own directory
 * (<state>/src/<tree-id>/, written atomically and reused), and read one file from a commit (the
 * suite is read from the base commit, never from the head).
 */
#ifndef AB_REPO_H
#define AB_REPO_H

#include <stddef.h>

typedef struct ab_repo ab_repo;

#define AB_REPO_OID_HEX 41   /* 40 hex digits + NUL */

/* A resolved ref. */
struct ab_repo_commit {
	char sha[AB_REPO_OID_HEX];   /* commit id */
	char tree[AB_REPO_OID_HEX];  /* its tree id: identical trees build and run identically */
	char refname[256];           /* the full ref it came from ("refs/heads/main"), "" for a bare sha */
	char summary[160];           /* first line of the commit message (for reports) */
};

/* One changed path between two trees. */
struct ab_repo_change {
	char status;      /* 'A' added, 'M' modified, 'D' deleted, 'R' renamed, 'C' copied, 'T' type changed */
	char *path;       /* the path in the new tree (the old one for 'D'); owned by the array */
	char *old_path;   /* the path in the old tree; owned by the array */
};

/* 1 when `spec` names a remote ("https://", "ssh://", "git://", "file://", "user@host:path"). */
int ab_repo_is_url(const char *spec);

/*
 * Opens an existing local repository (work tree or bare) at `path`, searching upwards like git.
 * Never writes to it: checkouts go elsewhere and its index and HEAD are left alone.
 * *out: caller frees with ab_repo_free. AB_ENOTFOUND if there is no repository there.
 */
int ab_repo_open(ab_repo **out, const char *path);

/*
 * Opens the bare mirror of `url` under <state_dir>/mirrors/<sanitized-url>, cloning it on first use
 * and fetching otherwise: branches, tags and refs/pull/N/head, force-updated and pruned. `url` may
 * be a local path (plain or file://). The first clone is built in a temporary directory and
 * renamed into place, so an interrupted clone never leaves a half mirror. Public or local remotes
 * only (no credentials yet). *out: caller frees with ab_repo_free.
 */
int ab_repo_mirror(ab_repo **out, const char *url, const char *state_dir);

/* Fetches the mirror again (no-op, 0, for a repository opened with ab_repo_open). */
int ab_repo_fetch(ab_repo *repo);

/* The repository's path (the mirror's directory for mirrors). Borrowed, valid until ab_repo_free. */
const char *ab_repo_path(const ab_repo *repo);

/*
 * Resolves `ref` to a commit: "pull/N/head" (or "refs/pull/N/head"; on a mirror fetched on demand
 * when missing), a branch, a tag (annotated tags are peeled), a full ref name, or a full or
 * abbreviated (>= 4 digits) sha. Returns AB_ENOTFOUND when nothing matches, AB_EINVALID when
 * the name is malformed or an abbreviation is ambiguous.
 */
int ab_repo_resolve(struct ab_repo_commit *out, ab_repo *repo, const char *ref);

/*
 * The best common ancestor of two commits (what a pull request is compared against on GitHub).
 * AB_ENOTFOUND when they share no history.
 */
int ab_repo_merge_base(char out_sha[AB_REPO_OID_HEX], ab_repo *repo, const char *sha_a, const char *sha_b);

/*
 * The paths that differ between the trees of two commits (tree-to-tree, with rename detection),
 * sorted by path. *out is an array of *out_count entries; caller frees with ab_repo_changes_free.
 */
int ab_repo_changed_files(struct ab_repo_change **out, size_t *out_count, ab_repo *repo,
	const char *base_sha, const char *head_sha);
void ab_repo_changes_free(struct ab_repo_change *changes, size_t count);

/*
 * Checks out the tree of commit `sha` into <state_dir>/src/<tree-id>/ and returns that absolute
 * path in *out_dir (caller frees with free()). An existing directory is reused as is (same tree,
 * same files); a new one is written to a temporary directory and renamed into place, so a crash
 * never leaves a partial checkout under the final name. *out_reused (may be NULL) says which.
 */
int ab_repo_checkout(char **out_dir, int *out_reused, ab_repo *repo, const char *sha, const char *state_dir);

/*
 * Reads `path` from the tree of commit `sha`. *out is NUL-terminated (binary content allowed;
 * *out_len excludes the NUL), caller frees with free(). AB_ENOTFOUND if the path is not a file
 * in that commit, AB_EINVALID if it is larger than max_bytes.
 */
int ab_repo_read_file(char **out, size_t *out_len, ab_repo *repo, const char *sha, const char *path,
	size_t max_bytes);

void ab_repo_free(ab_repo *repo);

#endif
