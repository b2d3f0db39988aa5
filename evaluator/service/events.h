/*
 * events.h - turns one verified GitHub webhook delivery into what the queue should do: evaluate a
 * head (pull_request opened / synchronize / reopened / ready_for_review, drafts skipped), cancel a
 * PR's jobs (closed), or check an "/eval" command (issue_comment created on a PR). The payload is
 * untrusted: every field is type-checked and length-capped; anything unexpected is "ignored" with
 * a reason, never a crash.
 */
#ifndef AB_EVENTS_H
#define AB_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "queue.h"

/* The intent plus the storage its strings point into. */
struct ab_event {
	struct ab_intent intent;
	char repo[201];
	char head_sha[41];
	char user[101];
	char trigger[64];
	const char *ignored;   /* why nothing is to be done (static string), NULL otherwise */
	int is_ping;
};

/*
 * Parses `body` (len bytes of JSON) of event type `event` against the configured repos. Returns 0
 * and fills *out (out->intent.kind AB_INTENT_NONE with out->ignored set when there is nothing to
 * do), or AB_EINVALID when the body is not JSON or misses what its event must carry. The intent's
 * pointers point into *out and into cfg (base ref).
 */
int ab_events_parse(struct ab_event *out, const struct ab_config *cfg, const char *event, const char *body, size_t len);

/* Whether a comment body is an evaluation command: 1 "/eval", 2 "/eval rerun", 0 otherwise. */
int ab_events_command(const char *comment_body);

#endif
