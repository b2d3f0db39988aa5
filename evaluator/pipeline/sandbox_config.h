/*
 * sandbox_config.h - the service config's `sandbox` object (keys, defaults, meanings in one table):
 * the service config (config.c, config_describe.c) calls these for the key `sandbox`, `abgate serve
 * --config-table` prints the rows.
 */
#ifndef AB_SANDBOX_CONFIG_H
#define AB_SANDBOX_CONFIG_H

#include <jansson.h>

#include "sandbox.h"
#include "text.h"

/* The defaults of sandbox.h plus the default pass-through env list (owned strings: free with
 * ab_sandbox_config_clear). */
int ab_sandbox_config_init(struct ab_sandbox_config *cfg);
/* Applies a `sandbox` object over *cfg. Unknown keys, wrong types, an unknown network step, a
 * relative ro_path and a denied env name are AB_EINVALID naming the key ("sandbox.build.nproc"). */
int ab_sandbox_config_parse(struct ab_sandbox_config *cfg, json_t *obj);
/* "  sandbox.KEY = VALUE" lines. */
int ab_sandbox_config_describe(struct ab_text *t, const struct ab_sandbox_config *cfg);
/* The markdown rows (| key | type | default | meaning |) of the sandbox keys. */
int ab_sandbox_config_table(struct ab_text *t);

#endif
