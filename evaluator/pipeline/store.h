/*
 * store.h - abgate's persistent record: one SQLite file (<state>/abgate.db, WAL) holding every
 * evaluation (refs, suite, seed, verdict, the abgate.result/1 document), every raw sample, and a
 * key/value cache (reference accuracy answers keyed by model sha256 + prompt hash). The schema is
 * versioned and migrated on open. A handle belongs to one thread at a time; several threads and
 * processes (the service worker and a CLI) may each hold their own handle on the same file.
 */
#ifndef AB_STORE_H
#define AB_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"

typedef struct ab_store ab_store;

/* The schema version this build writes; a file with a higher version is refused. */
#define AB_STORE_SCHEMA_VERSION 3

enum ab_store_status {
	AB_STORE_RUNNING = 0,
	AB_STORE_DONE = 1,        /* a verdict was reached (pass, REJECT or infra-error with a result) */
	AB_STORE_CANCELED = 2,
	AB_STORE_ERROR = 3        /* stopped without a verdict (configuration error, abgate failure) */
};

/* What is known about an evaluation when it starts (or later, see ab_store_eval_update). Every
 * string may be NULL: not known (yet). */
struct ab_store_eval_info {
	const char *trigger;        /* "cli", "webhook pr#7", ... */
	const char *repo;           /* path or URL */
	const char *base_ref, *base_sha, *base_tree;
	const char *head_ref, *head_sha, *head_tree;
	const char *suite_name;
	const char *suite_sha256;
	int has_seed;               /* 0: seed unknown / unchanged */
	uint64_t seed;
};

/* One evaluation row. Strings are NULL where the column is NULL. */
struct ab_store_eval {
	int64_t id;
	int64_t created_at_ms;      /* Unix time, milliseconds */
	int64_t finished_at_ms;     /* 0 while running */
	enum ab_store_status status;
	char *trigger, *repo;
	char *base_ref, *base_sha, *base_tree;
	char *head_ref, *head_sha, *head_tree;
	char *suite_name, *suite_sha256;
	int has_seed;
	uint64_t seed;
	char *label;                /* "eval:M", "eval:REJECT", ... */
	char *reason;
	int exit_status;            /* enum ab_eval_status; -1 while running */
	char *result_json;          /* abgate.result/1 text; always NULL in history listings */
};

/*
 * Opens (creating it and the directory, mode 0755, as needed) <state_dir>/abgate.db, switches it to
 * WAL, sets a busy timeout and migrates the schema. *out is the handle; caller closes it with
 * ab_store_close. Fails with a clear message when the file's schema is newer than
 * AB_STORE_SCHEMA_VERSION.
 */
int ab_store_open(ab_store **out, const char *state_dir);

/* Same with an explicit database file (its directory must exist). */
int ab_store_open_file(ab_store **out, const char *db_path);

/* Closes the handle (finalises statements, checkpoints nothing by force). NULL is fine. */
void ab_store_close(ab_store *store);

/* Starts an evaluation row (status running, created_at now). *out_id receives its id. */
int ab_store_eval_begin(int64_t *out_id, ab_store *store, const struct ab_store_eval_info *info);

/* Fills in what became known later (refs resolved, suite read): sets every non-NULL field of `info`
 * (and the seed if has_seed). AB_ENOTFOUND when `id` does not exist. */
int ab_store_eval_update(ab_store *store, int64_t id, const struct ab_store_eval_info *info);

/* Ends an evaluation: status, verdict label and reason, the exit status, and the result document
 * text (each string may be NULL). Sets finished_at. AB_ENOTFOUND when `id` does not exist. */
int ab_store_eval_finish(ab_store *store, int64_t id, enum ab_store_status status, const char *label,
			 const char *reason, int exit_status, const char *result_json);

/* Reads one evaluation with its result text. *out is the caller's (ab_store_eval_free).
 * AB_ENOTFOUND when there is no such id. */
int ab_store_eval_get(struct ab_store_eval **out, ab_store *store, int64_t id);

/* Frees one row returned by ab_store_eval_get. NULL is fine. */
void ab_store_eval_free(struct ab_store_eval *eval);

/*
 * The newest `limit` evaluations (by id, newest first), without result text. *out_evals is an array
 * of *out_count rows (NULL when 0), owned by the caller: ab_store_evals_free(*out_evals, *out_count).
 */
int ab_store_history(struct ab_store_eval **out_evals, size_t *out_count, ab_store *store, int limit);

/* Frees an array from ab_store_history. NULL is fine. */
void ab_store_evals_free(struct ab_store_eval *evals, size_t count);

/* Appends one sample to evaluation `eval_id`. */
int ab_store_sample_add(ab_store *store, int64_t eval_id, const struct ab_sample *sample);

/* Appends `count` samples in one transaction (all or none). */
int ab_store_samples_add(ab_store *store, int64_t eval_id, const struct ab_sample *samples, size_t count);

/* The samples of an evaluation in insertion order. *out_samples (NULL when none) is the caller's to
 * free(); *out_count its length. A failed sample's value reads back as NAN. */
int ab_store_samples_get(struct ab_sample **out_samples, size_t *out_count, ab_store *store, int64_t eval_id);

/* Looks a cache entry up. *out_value is a malloc'd copy (caller free()s; an extra NUL byte follows
 * the value so text can be used directly), *out_len its length. AB_ENOTFOUND when absent. */
int ab_store_cache_get(void **out_value, size_t *out_len, ab_store *store, const char *key);

/* Inserts or replaces a cache entry. */
int ab_store_cache_put(ab_store *store, const char *key, const void *value, size_t len);

/* One calibration (abgate calibrate): strings borrowed for the call. */
struct ab_store_calibration {
	const char *repo, *ref, *sha;
	const char *suite_name;         /* required */
	const char *suite_sha256;
	int runs, false_positives;
	double fpr_upper;               /* NAN: unknown */
	const char *result_json;        /* the abgate.calibration/1 document, required */
};

/* Stores a calibration; *out_id (may be NULL) receives its id. */
int ab_store_calibration_add(int64_t *out_id, ab_store *store, const struct ab_store_calibration *calibration);

/* The latest calibration of a suite: *out_json a malloc'd copy of its document (caller free()s),
 * *out_id (may be NULL) its id. AB_ENOTFOUND when the suite was never calibrated. */
int ab_store_calibration_latest(char **out_json, int64_t *out_id, ab_store *store, const char *suite_name);

#endif
