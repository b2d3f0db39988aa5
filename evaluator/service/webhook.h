/*
 * webhook.h - the service's HTTP front (libmicrohttpd): POST /webhook checks the body size
 * (413 past the cap, without buffering the rest), then X-Hub-Signature-256 (HMAC-SHA256 of the raw
 * body, constant-time compare; 401 when missing or wrong) before anything parses the body, and
 * hands the verified bytes to a callback that only records and enqueues. GET /healthz and
 * GET /metrics are served from callbacks too, and so is any other GET (the read-only pages,
 * evaluator/service/pages.h).
 */
#ifndef AB_WEBHOOK_H
#define AB_WEBHOOK_H

#include <stddef.h>

typedef struct ab_webhook ab_webhook;

/*
 * A verified delivery. `event` is X-GitHub-Event, `delivery` X-GitHub-Delivery (NULL when absent),
 * `body` the raw JSON (NUL-terminated, `len` bytes; form-encoded payload= already decoded). Write a
 * short JSON reply into `reply` and return the HTTP status (200/202, 400 for bad JSON, 500/503 when
 * it could not be recorded so GitHub shows the delivery as failed). Called on server threads.
 */
typedef int (*ab_webhook_event_fn)(void *payload, const char *event, const char *delivery, const char *body,
				   size_t len, char *reply, size_t reply_size);

/* Looks up a query-string argument of the request being answered (NULL when absent). */
typedef const char *(*ab_webhook_arg_fn)(void *request, const char *name);

/* What a page callback answers: a malloc'd body (taken over) and its content type (static). */
struct ab_webhook_page {
	char *body;
	const char *content_type;
};

struct ab_webhook_options {
	const char *listen;        /* "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:0" (0: any free port) */
	const char *secret;        /* webhook secret (required, copied) */
	size_t max_body;           /* larger bodies: 413 */
	int threads;               /* 0: 4 */
	ab_webhook_event_fn on_event;
	char *(*metrics)(void *payload);                 /* GET /metrics text; malloc'd; NULL: 404 */
	int (*healthy)(void *payload, char *msg, size_t size); /* 0 healthy; NULL: always */
	/* After every POST /webhook, with the status sent and the handling time. May be NULL. */
	void (*on_done)(void *payload, int status, double seconds);
	/* Any other GET/HEAD path (without the query string; arguments through `arg`): fills *out and
	 * returns the HTTP status, or -1 when it failed (500). NULL: 404 for every other path. */
	int (*page)(void *payload, const char *path, ab_webhook_arg_fn arg, void *request, struct ab_webhook_page *out);
	void *payload;
};

/* Starts listening. Caller stops and frees with ab_webhook_stop. */
int ab_webhook_start(ab_webhook **out, const struct ab_webhook_options *opts);

/* The bound port (useful with port 0). */
int ab_webhook_port(const ab_webhook *w);

/* Stops accepting, waits for handlers in flight, frees. Accepts NULL. */
void ab_webhook_stop(ab_webhook *w);

/*
 * 0 when `header` ("sha256=<64 hex>") is the HMAC-SHA256 of body under secret; AB_EINVALID when
 * it is missing, malformed or wrong. The comparison takes the same time wherever it differs.
 */
int ab_webhook_verify(const char *secret, const void *body, size_t len, const char *header);

#endif
