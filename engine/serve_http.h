/*
 * serve_http.h - ember as an HTTP server (`ember serve --http ADDR:PORT`): llama-server's native
 * `POST /completion` and the OpenAI `POST /v1/completions`, both with prompts as token-id arrays,
 * greedy only, streamed token by token over SSE, plus `GET /health`, `/props` and `/v1/models`.
 * One generation at a time: a request that arrives while one runs is answered 503. Built on
 * libmicrohttpd; an ember built without it answers every call with EMBER_EUNSUPPORTED.
 * docs/http-sut.md describes the endpoints, their fields and their limits.
 */
#ifndef EMBER_SERVE_HTTP_H
#define EMBER_SERVE_HTTP_H

#include <stddef.h>
#include <stdio.h>

#include "session.h"

#define EMBER_SERVE_HTTP_MAX_BODY (1u << 20) /* default request body cap (bytes): larger ones get 413 */

struct ember_serve_http_config {
	struct ember_session_config session; /* model, backend, threads, ctx (no draft: see the docs) */
	const char *listen;      /* "HOST:PORT" or "[V6]:PORT"; PORT 0 picks a free port (logged) */
	size_t max_body;         /* 0 = EMBER_SERVE_HTTP_MAX_BODY */
	int idle_timeout_s;      /* an idle kept-alive connection is closed after this; 0 = 300 */
};

/* 1 when this ember was built with libmicrohttpd (ember serve --http works). */
int ember_serve_http_available(void);

/* Loads the model, listens, logs "ember serve: listening on http://HOST:PORT" to `log` and serves
 * until SIGINT or SIGTERM (blocked in the calling thread and its server threads, awaited with
 * sigwait). Returns 0 after such a stop; a negative ember error when the model cannot be loaded,
 * the address cannot be bound, or the build lacks libmicrohttpd (message in ember_error_last()). */
int ember_serve_http_run(const struct ember_serve_http_config *config, FILE *log);

#endif
