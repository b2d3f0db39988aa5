/*
 * jread.h - strict reading of a JSON document a person wrote (the suite file): typed getters that
 * apply a default when a key is absent (or null) and refuse a wrong type or an out-of-range value,
 * and a path stack that follows the reading so every error names the value it is about:
 * `suite guards/default.json: speed.decode.contexts[2]: expected a positive integer, got "4k"`.
 * Errors are AB_EINVALID with that message (ab_error_last()); an allocation failure sets `oom`.
 */
#ifndef AB_JREAD_H
#define AB_JREAD_H

#include <stddef.h>
#include <jansson.h>

/* One document being read. Initialise with .what (and .origin); the rest starts zeroed. */
struct ab_jread {
	const char *what;     /* what the document is, first word of every message: "suite" */
	const char *origin;   /* where it came from (a file name) for messages, or NULL */
	char path[512];       /* JSON path of the value being read: "speed.decode.contexts[2]" */
	size_t path_len;
	int oom;              /* an allocation failed: the error is ours, not the document's */
};

/* Path stack. Each push returns the previous length, which ab_jread_pop restores. */
size_t ab_jread_push_key(struct ab_jread *r, const char *key);
size_t ab_jread_push_index(struct ab_jread *r, size_t index);
void ab_jread_pop(struct ab_jread *r, size_t old_len);

/* Sets "<what> <origin>: <path>: <message>" and returns AB_EINVALID. */
int ab_jread_fail(struct ab_jread *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ab_jread_fail with "expected <expected>, got <a short printable description of got>". */
int ab_jread_fail_type(struct ab_jread *r, const char *expected, const json_t *got);
/* Records an allocation failure (r->oom) and returns AB_ERROR with "<what>: out of memory". */
int ab_jread_oom(struct ab_jread *r);

/* AB_EINVALID unless v is an object (the path should name v). */
int ab_jread_object(struct ab_jread *r, const json_t *v);
/* Refuses a key of obj that is not in the NULL-terminated `allowed` list, naming both. */
int ab_jread_keys(struct ab_jread *r, const json_t *obj, const char *const *allowed);

/* The value of an optional key, NULL when absent or null. Borrowed from obj. */
json_t *ab_jread_optional(const json_t *obj, const char *key);
/* The value of a required key (null counts as present); AB_EINVALID naming it when missing. */
int ab_jread_required(json_t **out, struct ab_jread *r, const json_t *obj, const char *key);

/*
 * Typed optional keys: *out = def when absent or null, else the value if it has the type and lies
 * in range, else AB_EINVALID naming the key (*out untouched). Numbers lie in lo..hi with `bounds`
 * "[]", "[)", "(]" or "()" saying which ends are included (hi = INFINITY: no upper bound).
 */
int ab_jread_int(int *out, struct ab_jread *r, const json_t *obj, const char *key, int def, int lo, int hi);
int ab_jread_number(double *out, struct ab_jread *r, const json_t *obj, const char *key, double def,
	double lo, double hi, const char *bounds);
int ab_jread_bool(int *out, struct ab_jread *r, const json_t *obj, const char *key, int def);

#endif
