/*
 * pr_history.h - what GitHub says about a PR's past that the policies need only now and then:
 * the last conversion to draft (the issue timeline's `convert_to_draft` events) and, for the
 * copycat rule when the heads abgate recorded cannot say which PR had the lines first, each
 * commit's own added lines (GET /repos/{repo}/commits/{sha}, `files[].patch`). Commits are
 * bounded per PR and cached in memory per sha (a commit never changes), so a warn-level overlap
 * that every sweep looks at again costs no further requests.
 */
#ifndef AB_PR_HISTORY_H
#define AB_PR_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "github.h"

typedef struct ab_pr_history ab_pr_history;

/* `gh` is borrowed and must outlive the handle. Thread-safe. Caller frees with ab_pr_history_free. */
int ab_pr_history_new(ab_pr_history **out, ab_gh *gh);
void ab_pr_history_free(ab_pr_history *h);

/*
 * The time (Unix seconds) of repo#pr's last conversion to draft into *out_at, 0 when the
 * timeline has none (the PR was opened as a draft). Returns 0 or an error from the client.
 */
int ab_pr_history_draft_since(ab_pr_history *h, int64_t *out_at, const char *repo, int pr);

/* One commit of a PR with its own added lines (sorted unique fingerprints, guards/policy.h). */
struct ab_pr_commit {
	char sha[41];
	int64_t at;          /* committer date, Unix seconds */
	uint64_t *lines;     /* owned by the array (ab_pr_history_commits_free) */
	size_t n_lines;
};

/* Most commits of one PR whose patches are read; a longer PR is read up to its oldest this many. */
#define AB_PR_HISTORY_MAX_COMMITS 30

/*
 * The commits of repo#pr at `head_sha`, oldest first, at most AB_PR_HISTORY_MAX_COMMITS (the
 * oldest: added lines only accumulate, so an answer found among them is the answer), each with
 * its added lines. The commit list is cached per head, the lines per sha. *out (caller frees
 * with ab_pr_history_commits_free) and *out_n; *out_truncated (may be NULL) is set when the PR
 * has more commits than were read. Returns 0 or an error.
 */
int ab_pr_history_commits(ab_pr_history *h, struct ab_pr_commit **out, size_t *out_n, int *out_truncated,
			  const char *repo, int pr, const char *head_sha);
void ab_pr_history_commits_free(struct ab_pr_commit *c, size_t n);

/* Requests this handle made for commit patches (tests and figures). */
long ab_pr_history_patch_requests(ab_pr_history *h);

#endif
