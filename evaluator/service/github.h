/*
 * github.h - a small GitHub REST client on libcurl + jansson: one function sends a request with
 * GitHub's headers and the retry policy (exponential backoff with jitter on 5xx and network errors,
 * Retry-After (seconds or a date) / x-ratelimit-reset on 403/429 with waits capped at an hour, one
 * token refresh on 401 with App auth), one follows `Link: rel="next"` pagination. Every failure is
 * logged with method, path and status. The client is thread-safe: each request uses its own easy
 * handle; connections are shared.
 */
#ifndef AB_GITHUB_H
#define AB_GITHUB_H

#include <stdatomic.h>
#include <stddef.h>
#include <jansson.h>

#include "github_auth.h"

typedef struct ab_gh ab_gh;

struct ab_gh_options {
	const char *api_url;       /* e.g. "https://api.github.com" (no trailing slash) */
	const char *user_agent;    /* required by GitHub */
	int timeout_s;             /* per request; 0: 30 */
	int max_retries;           /* retries after the first try */
	int backoff_base_ms;       /* 0: 1000 */
	int backoff_max_ms;        /* 0: 32000 */
	int max_wait_s;            /* longest rate-limit wait taken in line; longer returns AB_ERATELIMIT */
	const atomic_int *stop;    /* may be NULL; nonzero abandons waits with AB_ECANCELED (shutdown) */
	/* Called after every HTTP exchange (status 0: no response). May be NULL. */
	void (*on_response)(void *payload, const char *method, const char *path, long status, double seconds);
	void *payload;
};

/* `auth` is borrowed (may be NULL: anonymous) and must outlive the client. Caller frees with ab_gh_free. */
int ab_gh_new(ab_gh **out, const struct ab_gh_options *opts, ab_gh_auth *auth);
void ab_gh_free(ab_gh *gh);

/* The auth the client was made with (borrowed; NULL for anonymous). */
ab_gh_auth *ab_gh_get_auth(ab_gh *gh);

/* Request flags. */
enum {
	/* Do not retry 5xx or network errors: for non-idempotent creates (comment, check run) whose
	 * caller re-checks whether the first try landed before trying again. Rate-limit answers are
	 * still waited out and retried: GitHub did not process those. */
	AB_GH_NO_RETRY = 1
};

/*
 * Sends METHOD api_url+path (path starts with "/", or is a full URL under api_url, as in `Link`)
 * with `body` (may be NULL) as JSON. On 2xx returns 0 and *out_body gets the parsed reply (NULL
 * for an empty body; caller json_decref; out_body may be NULL to drop it). *out_status (may be NULL)
 * always receives the last HTTP status, 0 when no response came. Errors: AB_ENOTFOUND on 404,
 * AB_EINVALID on 422/400, AB_ERATELIMIT when GitHub asks for a wait longer than max_wait_s,
 * AB_ECANCELED on stop, AB_ERROR otherwise (403 without rate-limit signs, other 4xx, 5xx after the
 * retries, network errors); ab_error_last() names method, path, status and GitHub's message.
 */
int ab_gh_request(ab_gh *gh, json_t **out_body, long *out_status, const char *method, const char *path,
		  json_t *body, unsigned flags);

/*
 * GETs `path` and every following `Link: rel="next"` page, concatenating the items: the page itself
 * when it is an array, else its member `items_key` (e.g. "check_runs"). Stops with an error past
 * `max_items`. *out is a new array (caller json_decref).
 */
int ab_gh_get_all(ab_gh *gh, json_t **out, const char *path, const char *items_key, size_t max_items);

/* Sleeps the backoff for retry number `attempt` (0-based), honouring stop. AB_ECANCELED on stop. */
int ab_gh_backoff(ab_gh *gh, int attempt);

/* Seconds GitHub last asked to wait before AB_ERATELIMIT was returned (0 if none). Per thread. */
long ab_gh_last_wait_s(void);

/* Percent-encodes one path segment (label names hold ':' and spaces). Caller frees. */
int ab_gh_escape(char **out, const char *segment);

/* Total HTTP exchanges made by this client (for figures and tests). */
long ab_gh_request_count(ab_gh *gh);

/* A pull request as the service needs it. */
struct ab_gh_pr {
	int number;
	char head_sha[41];
	char base_ref[256];
	int open;      /* state == "open" */
	int draft;
};

/* GET /repos/{repo}/pulls/{number}. AB_ENOTFOUND when there is no such PR. */
int ab_gh_pr_get(ab_gh *gh, struct ab_gh_pr *out, const char *repo, int number);

/* The open PRs of `repo` (all pages). *out is a new array of *out_count entries (caller free()s). */
int ab_gh_pr_list_open(ab_gh *gh, struct ab_gh_pr **out, size_t *out_count, const char *repo);

/*
 * `user`'s permission on `repo` (GET /repos/{repo}/collaborators/{user}/permission): "admin",
 * "maintain", "write", "triage", "read" or "none", into buf. A user who is not a collaborator is
 * "none" (GitHub answers 404 for some of those).
 */
int ab_gh_permission(ab_gh *gh, char *buf, size_t size, const char *repo, const char *user);

/* Whether a permission string allows starting an evaluation (write, maintain or admin). */
int ab_gh_permission_can_write(const char *permission);

/* Global libcurl set-up; call once at program start before threads (ab_gh_new also calls it). */
int ab_gh_global_init(void);

#endif
