/*
 * policies.h - the PR lifecycle policies of `abgate serve` and `abgate policies`: fetches the
 * facts of a repository's open PRs from GitHub (list, commits, files with patches, the author's
 * comments when staleness is in question) and the evaluations from the queue, asks
 * guards/policy.h what to do, and applies each action as idempotent steps (label, comment with a
 * hidden marker, close) recorded in <state>/policies.db, so a restart or a redelivery never
 * comments twice. Heads are recorded with their added lines the first time they are seen: that
 * record is what decides which of two overlapping PRs had the lines first.
 */
#ifndef AB_POLICIES_H
#define AB_POLICIES_H

#include <stddef.h>

#include "config.h"
#include "github.h"
#include "queue.h"

typedef struct ab_policies ab_policies;

/*
 * `cfg`, `gh` and `queue` are borrowed and must outlive the handle (queue may be NULL: no
 * evaluation history, as in a CLI run without a service state). Opens <state_dir>/policies.db.
 * Thread-safe: sweeps run one at a time. Caller frees with ab_policies_free.
 */
int ab_policies_new(ab_policies **out, const struct ab_config *cfg, ab_gh *gh, ab_queue *queue);
void ab_policies_free(ab_policies *p);

/* One decision as the sweep handled it. Strings are borrowed for the callback. */
struct ab_policies_row {
	const char *repo;
	int pr;
	const char *rule;      /* "stale", "copycat", ... */
	const char *key;
	const char *did;       /* "closed, labelled flagged:gaming, commented", "already done", "would ...", "failed: ..." */
	const char *figures;
	int no_eval;
	int close;
};
typedef void (*ab_policies_row_fn)(void *payload, const struct ab_policies_row *row);

/*
 * Runs the policies of `repo` (NULL: every configured repository) once. dry_run: decides and
 * reports what it would do, writes nothing (GitHub or the record). `row` (may be NULL) sees
 * every decision. Returns 0, or the first error (the other repositories still run).
 */
int ab_policies_sweep(ab_policies *p, const char *repo, int dry_run, ab_policies_row_fn row, void *payload);

/*
 * Before an evaluation of repo#pr at head_sha: runs the repository's sweep, then says whether
 * that head may be evaluated (1) or not (0: *out_closed set when a policy closed the PR, note
 * says why for the check run). When the facts cannot be fetched the head is evaluated (1) and
 * the error logged: policies never cost a contributor an evaluation because GitHub failed.
 */
int ab_policies_gate(ab_policies *p, const char *repo, int pr, const char *head_sha, char *note, size_t note_size,
		     int *out_closed);

#endif
