/*
 * serve.h - ember as a System Under Test: the line-delimited JSON protocol of DESIGN.md
 * "Contract 1" over a pair of streams (stdin/stdout for `ember serve --stdio`). The server loads
 * the model, prints the ready line, then answers generate / score / quit requests one at a time;
 * a malformed, oversized or invalid request gets an error event and the server keeps serving.
 */
#ifndef EMBER_SERVE_H
#define EMBER_SERVE_H

#include <stddef.h>
#include <stdio.h>

#define EMBER_SERVE_MAX_LINE (16u << 20)   /* default request size cap (bytes) */
#define EMBER_SERVE_DEFAULT_CTX 4096       /* KV positions when --ctx is not given (capped by the model) */

struct ember_serve_config {
	const char *model_path;
	const char *draft_path;  /* a DFlash draft (draft.h) for "spec": true, or NULL */
	const char *backend;     /* "cpu", "cuda" or NULL for the default */
	int n_threads;           /* 0 = all cores */
	int n_ctx;               /* 0 = min(context_length, EMBER_SERVE_DEFAULT_CTX) */
	int max_batch;           /* 0 = backend default */
	size_t max_line;         /* 0 = EMBER_SERVE_MAX_LINE */
};

/* Runs the server until {"op":"quit"} or end of input. Protocol lines go to `out` (flushed per
 * line), diagnostics to `log`. Returns 0 on quit/EOF; a negative ember error when the model or
 * backend cannot be loaded (a {"ready":false,"error":...} line is printed first). */
int ember_serve_run(const struct ember_serve_config *config, FILE *in, FILE *out, FILE *log);

#endif
