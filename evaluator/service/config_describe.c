/*
 * config_describe.c - the key table of config_int.h written out: ab_config_describe prints every
 * effective value for the start-up log (secrets as a length and their source, a URL's password
 * masked), ab_config_table_markdown the key / type / default / meaning table that documents the
 * sample config (ci/abgate.sample.md).
 */
#include "config_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "sandbox_config.h"
#include "text.h"

/* Hands the text of describe/markdown over to *out (caller frees). */
static int text_finish(char **out, struct ab_text *t)
{
	char *text = ab_text_take(t);
	if (!text)
		return ab_error_set("out of memory");
	*out = text;
	return 0;
}

/* Appends a string value quoted, with the password of a URL's user info ("https://user:pw@host") masked. */
static void describe_string(struct ab_text *t, const char *v)
{
	const char *scheme = strstr(v, "://");
	const char *authority = scheme ? scheme + 3 : NULL;
	const char *at = authority ? strpbrk(authority, "@/?#") : NULL;
	const char *colon = at && *at == '@' ? memchr(authority, ':', (size_t)(at - authority)) : NULL;

	if (colon)
		ab_text_printf(t, "\"%.*s:********%s\"\n", (int)(colon - v), v, at);
	else
		ab_text_printf(t, "\"%s\"\n", v);
}

static void describe_value(struct ab_text *t, void *base, const struct key_def *d, const char *prefix,
			   const char *source)
{
	ab_text_printf(t, "  %s%s = ", prefix, d->key);
	switch (d->type) {
	case T_SECRET: {
		const char *v = *(char **)field(base, d);
		if (v)
			ab_text_printf(t, "******** (%zu chars, from %s)\n", strlen(v), source ? source : "config");
		else
			ab_text_printf(t, "(not set)\n");
		return;
	}
	case T_STR: {
		const char *v = *(char **)field(base, d);
		if (v)
			describe_string(t, v);
		else
			ab_text_printf(t, "(not set)\n");
		return;
	}
	case T_INT: ab_text_printf(t, "%d\n", *(int *)field(base, d)); return;
	case T_BOOL: ab_text_printf(t, "%s\n", *(int *)field(base, d) ? "true" : "false"); return;
	case T_I64: ab_text_printf(t, "%" PRId64 "\n", *(int64_t *)field(base, d)); return;
	case T_DBL: ab_text_printf(t, "%g\n", *(double *)field(base, d)); return;
	case T_LIST: {
		char **l = *list_slot(base, d);
		size_t n = *list_count(base, d);
		ab_text_printf(t, "[");
		for (size_t i = 0; i < n; i++)
			ab_text_printf(t, "%s\"%s\"", i ? ", " : "", l[i]);
		ab_text_printf(t, "]\n");
		return;
	}
	}
}

int ab_config_describe(char **out, const struct ab_config *cfg)
{
	struct ab_text t = { 0 };

	ab_text_printf(&t, "effective configuration (%s):\n", cfg->path ? cfg->path : "defaults");
	for (size_t k = 0; k < ab_config_key_count; k++) {
		const struct key_def *d = &ab_config_keys[k];
		if (d->section == S_TOP)
			describe_value(&t, (void *)cfg, d, "", d->type == T_SECRET ? cfg->webhook_secret_source : NULL);
		else if (d->section == S_GITHUB)
			describe_value(&t, (void *)&cfg->github, d, "github.",
				       d->type == T_SECRET ? cfg->github.token_source : NULL);
		else if (d->section == S_POLICY)
			describe_value(&t, (void *)&cfg->policies, d, "policies.", NULL);
	}
	ab_sandbox_config_describe(&t, &cfg->sandbox);
	ab_text_printf(&t, "  github auth = %s\n", cfg->github.token ? "token (commit statuses)"
				       : cfg->github.app_id ? "GitHub App (check runs)"
							    : "none: posts are written to github.output_dir");
	for (size_t i = 0; i < cfg->repo_count; i++) {
		char prefix[64];
		snprintf(prefix, sizeof(prefix), "repos[%zu].", i);
		for (size_t k = 0; k < ab_config_key_count; k++)
			if (ab_config_keys[k].section == S_REPO)
				describe_value(&t, &cfg->repos[i], &ab_config_keys[k], prefix, NULL);
		snprintf(prefix, sizeof(prefix), "repos[%zu].policies.", i);
		for (size_t k = 0; k < ab_config_key_count; k++)
			if (ab_config_keys[k].section == S_POLICY)
				describe_value(&t, &cfg->repos[i].policies, &ab_config_keys[k], prefix, NULL);
		if (cfg->repos[i].policies.denylist_file)
			ab_text_printf(&t, "  repos[%zu].policies.denylist = %zu login(s)\n", i,
				       cfg->repos[i].policies.denylist_count);
	}
	return text_finish(out, &t);
}

int ab_config_table_markdown(char **out)
{
	static const char *type_names[] = { "string", "secret string", "integer", "integer", "number", "array of strings",
					    "boolean" };
	struct ab_text t = { 0 };

	ab_text_printf(&t, "| key | type | default | meaning |\n|---|---|---|---|\n");
	for (size_t k = 0; k < ab_config_key_count; k++) {
		const struct key_def *d = &ab_config_keys[k];
		const char *prefix = d->section == S_GITHUB ? "github." : d->section == S_REPO ? "repos[]."
				     : d->section == S_POLICY ? "policies." : "";
		ab_text_printf(&t, "| `%s%s` | %s | %s%s%s | %s |\n", prefix, d->key, type_names[d->type], d->dflt ? "`" : "",
			 d->dflt ? d->dflt : "—", d->dflt ? "`" : "", d->meaning);
	}
	ab_sandbox_config_table(&t);
	return text_finish(out, &t);
}
