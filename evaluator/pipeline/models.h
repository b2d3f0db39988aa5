/*
 * models.h - making the suite's model files exist before anything is measured: each model's `path`
 * (placeholders substituted), and its draft's, is used as is when present; otherwise its `generate` command runs once,
 * into a temporary name that is renamed into place only on success, and later evaluations reuse the
 * file. A model with a sha256 is verified (the verification is cached by path, size and mtime).
 */
#ifndef AB_MODELS_H
#define AB_MODELS_H

#include "build.h"
#include "store.h"
#include "suite.h"

struct ab_sandbox_config;

struct ab_models_request {
	const struct ab_suite *suite;
	const char *state_dir;
	const char *build_dir;      /* {build} for generate commands: the base side's build */
	const char *src_dir;        /* {src}: the base side's checkout */
	int jobs;                   /* {jobs} */
	int timeout_s;              /* per generate command */
	ab_store *store;            /* verification cache; may be NULL */
	int quiet;
	const struct ab_sandbox_config *sandbox;  /* NULL / disabled: unsandboxed; else each generator runs in
	                            * bubblewrap seeing {src} {build} {model} read-only and only a private
	                            * directory for its output, which abgate then moves into place */
};

/*
 * Prepares every model and every model's draft. On success *out_paths is an array of
 * suite->model_count absolute paths and *out_draft_paths one of the same length holding each
 * model's draft path, NULL for a model without a draft (caller frees both with ab_models_free). Returns AB_EINVALID for configuration problems (a missing
 * model without a generate command, a sha256 mismatch) and AB_ERROR when a generator failed (the
 * message carries the log tail); the caller decides which is infra.
 */
int ab_models_prepare(char ***out_paths, char ***out_draft_paths, double *out_seconds,
	const struct ab_models_request *request);
void ab_models_free(char **paths, int count);

/* SHA-256 of a file as 64 lowercase hex digits (OpenSSL EVP, streamed). */
int ab_models_sha256_file(char out[65], const char *path);

#endif
