/*
 * reporter.h - posts an evaluation where people see it: a check run on the head sha (or a commit
 * status when the credentials cannot create check runs), one sticky PR comment found by its hidden
 * marker and updated in place, and the verdict labels as exclusive sets. Every step is idempotent
 * and reported done through a callback as soon as it lands, so a retry after a crash or an outage
 * repeats only what is missing. A second backend writes the same posts into a directory (no token
 * configured, or `abgate eval --pr N --out-dir`).
 */
#ifndef AB_REPORTER_H
#define AB_REPORTER_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "github.h"
#include "queue.h"
#include "report.h"

typedef struct ab_reporter ab_reporter;

/*
 * Posts to GitHub through `gh` (borrowed). `queue` (borrowed, may be NULL) remembers the sticky
 * comment id and whether check runs are unavailable. Caller frees with ab_reporter_free.
 */
int ab_reporter_new_github(ab_reporter **out, ab_gh *gh, ab_queue *queue, const char *check_name);

/*
 * Writes posts as files: comment.md, labels.json, check_run.json (and reply-<n>.md for replies)
 * under `dir` (flat), or under dir/<owner>__<repo>/pr-<N>/ when per_pr is set. Created as needed.
 */
int ab_reporter_new_dir(ab_reporter **out, const char *dir, int per_pr, const char *check_name);

void ab_reporter_free(ab_reporter *r);

/* Whether posts go to GitHub (1) or to files (0). */
int ab_reporter_is_github(const ab_reporter *r);

/*
 * Marks the start of an evaluation: a check run in_progress (or a pending commit status).
 * *io_check_id is the run created earlier for this job (0: none; a retried job first looks for
 * one carrying the same external_id); *io_kind is "check" or "status" once decided (NULL: decide;
 * the caller frees what is set). Both are updated for the caller to persist.
 */
int ab_reporter_start(ab_reporter *r, const struct ab_report_target *t, int64_t *io_check_id, char **io_kind,
		      int retried);

/*
 * Marks an evaluation that stopped for a service shutdown and went back to the queue: its check run
 * (check_id, kind "check") returns to queued with a note that it resumes when the service starts
 * again; a commit status (kind "status") stays pending with that note. Nothing for the file backend
 * or when no check was started (kind NULL or check_id 0). Returns 0 or the API error.
 */
int ab_reporter_pause(ab_reporter *r, const struct ab_report_target *t, int64_t check_id, const char *kind);

/*
 * Posts `rep`: completes the check run (or sets the final commit status), then, when rep->current
 * and the outcome is a verdict (ab_report_has_verdict), updates or creates the sticky comment and
 * syncs the labels. Both backends take the same steps. Steps whose AB_REPORT_* bit is set in
 * *io_done are skipped; each step that lands sets its bit and calls mark(payload, bit) (may be
 * NULL) before the next one starts. Returns 0 when every step is done, else the first error
 * (AB_ERATELIMIT: ab_gh_last_wait_s() says how long GitHub asked to wait).
 */
int ab_reporter_publish(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep,
			int64_t *io_check_id, char **io_kind, unsigned *io_done,
			int (*mark)(void *payload, unsigned bit), void *payload);

/* Posts a plain reply comment (not sticky) on repo#pr. */
int ab_reporter_reply(ab_reporter *r, const char *repo, int pr, const char *body);

#endif
