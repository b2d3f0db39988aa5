/*
 * merge_first.h - the `merge_first` policy's act: after each verdict the open PR with the largest
 * verified gain carries the `merge-first` label, one at a time. The gain of a PR is read from its
 * latest verdict in the queue (the abgate.result/1 document); guards/policy.h decides who holds
 * the label; this module adds and removes it. Labels are idempotent, so GitHub's labels are the
 * record: a restart re-reads them and changes nothing that is already right.
 */
#ifndef AB_MERGE_FIRST_H
#define AB_MERGE_FIRST_H

#include <stddef.h>

#include "github.h"
#include "policies.h"
#include "queue.h"

#define AB_MERGE_FIRST_LABEL "merge-first"

/*
 * The verified gain of one abgate.result/1 document (text): for a verdict of kind "tier", the
 * family-wise lower bound (ci_adj[0]) of its best series (gating, earning a tier) minus 1; 0 for
 * "none" and "reject". `what` (may be NULL) names the series ("decode_tps ctx 512 (model): lower
 * bound 1.064x, eval:M"). Returns 0, or AB_ENOTFOUND when the document holds no verdict to go by
 * (infra error, unreadable).
 */
int ab_merge_first_gain(double *out_gain, char *what, size_t what_size, const char *result_json);

/* An open PR as the sweep knows it. */
struct ab_merge_first_pr {
	int number;
	int labelled;        /* carries merge-first now */
	int eligible;        /* not a draft, not closed or refused by a policy in this sweep */
};

/*
 * Moves `merge-first` in `repo`: gains from the latest verdict of each PR in `queue` (NULL: no
 * gains, so the label goes), closed PRs still carrying it found through the issues list, the
 * decision from ab_policy_merge_first, then the label removed and added. dry_run: nothing is
 * written. `row` (may be NULL) sees each change. Returns 0 or the first error.
 */
int ab_merge_first_run(ab_gh *gh, ab_queue *queue, const char *repo, const struct ab_merge_first_pr *prs, size_t n,
		       int dry_run, ab_policies_row_fn row, void *payload);

#endif
