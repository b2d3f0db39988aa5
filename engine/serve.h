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

#include "session.h"

#define EMBER_SERVE_MAX_LINE (16u << 20)   /* default request size cap (bytes) */

struct ember_serve_config {
	struct ember_session_config session; /* model, draft (for "spec": true), backend, threads, ctx */
	size_t max_line;         /* 0 = EMBER_SERVE_MAX_LINE */
};

/* Runs the server until {"op":"quit"} or end of input. Protocol lines go to `out` (flushed per
 * line), diagnostics to `log`. Returns 0 on quit/EOF; a negative ember error when the model or
 * backend cannot be loaded (a {"ready":false,"error":...} line is printed first). */
int ember_serve_run(const struct ember_serve_config *config, FILE *in, FILE *out, FILE *log);

#endif
