/*
 * config_int.h - the key table that config.c (defaults, parsing, validation, freeing) and
 * config_describe.c (the start-up dump and the markdown table) both walk: one row per key with its
 * type, default, bounds and meaning, and the accessors from a row to its field. Internal to
 * evaluator/service: everything a caller needs is in config.h.
 */
#ifndef AB_CONFIG_INT_H
#define AB_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum key_type { T_STR, T_SECRET, T_INT, T_I64, T_DBL, T_LIST, T_BOOL };
enum key_section { S_TOP, S_GITHUB, S_REPO, S_POLICY };

struct key_def {
	enum key_section section;
	const char *key;
	enum key_type type;
	size_t offset;         /* into struct ab_config, ab_github_config or ab_repo_config */
	const char *dflt;      /* NULL: no default (unset) */
	int64_t min, max;      /* for integers */
	const char *meaning;
};

/* The rows, in the order the dump and the documentation list them (config.c). */
extern const struct key_def ab_config_keys[];
extern const size_t ab_config_key_count;

/* The field a row describes, inside the struct its section is stored in. */
static inline void *field(void *base, const struct key_def *d) { return (char *)base + d->offset; }

/* A list field: the char ** and its count (the size_t member right after it). */
static inline char ***list_slot(void *base, const struct key_def *d) { return (char ***)field(base, d); }
static inline size_t *list_count(void *base, const struct key_def *d)
{
	return (size_t *)((char *)base + d->offset + sizeof(char **));
}

#endif
