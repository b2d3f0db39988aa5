/*
 * config.c - the service configuration, driven by one key table (config_int.h): each row names a
 * key, its type, its default and its meaning. The parser walks the JSON against the table (unknown
 * keys and wrong types are errors with the key's path), then secrets are resolved and the values
 * checked across keys; config_describe.c prints the same rows for the start-up dump (secrets
 * masked) and the markdown that documents the sample config.
 */
#define _GNU_SOURCE
#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <jansson.h>

#include "error.h"
#include "sandbox_config.h"
#include "log.h"

#define CONFIG_FILE_MAX (1 << 20)      /* a config file larger than this is a mistake */
#define SECRET_FILE_MAX (64 << 10)

#define TOP(k, t, f, d, lo, hi, m) { S_TOP, k, t, offsetof(struct ab_config, f), d, lo, hi, m }
#define GH(k, t, f, d, lo, hi, m) { S_GITHUB, k, t, offsetof(struct ab_github_config, f), d, lo, hi, m }
#define REPO(k, t, f, d, lo, hi, m) { S_REPO, k, t, offsetof(struct ab_repo_config, f), d, lo, hi, m }
#define POL(k, t, f, d, lo, hi, m) { S_POLICY, k, t, offsetof(struct ab_policy_config, f), d, lo, hi, m }

const struct key_def ab_config_keys[] = {
	TOP("listen", T_STR, listen, "127.0.0.1:8080", 0, 0,
	    "address:port of the webhook receiver (POST /webhook, GET /healthz, GET /metrics); port 0 picks a free one"),
	TOP("public_url", T_STR, public_url, NULL, 0, 0,
	    "address the read-only pages (/runs/<id>, /history, /calibration) are reachable at; set: the check run's details_url and the comment link to /runs/<id>"),
	TOP("state_dir", T_STR, state_dir, "./.abgate", 0, 0,
	    "evaluations, mirrors and builds (abgate.db) and the job queue (queue.db)"),
	TOP("webhook_secret", T_SECRET, webhook_secret, NULL, 0, 0,
	    "secret of the GitHub webhook (HMAC-SHA256); env ABGATE_WEBHOOK_SECRET wins"),
	TOP("webhook_secret_file", T_STR, webhook_secret_file, NULL, 0, 0,
	    "file holding the webhook secret (trailing newline ignored)"),
	TOP("webhook_max_body", T_I64, webhook_max_body, "5242880", 1024, 1 << 30,
	    "largest webhook body in bytes; larger ones get 413 without being buffered"),
	GH("api_url", T_STR, api_url, "https://api.github.com", 0, 0,
	   "GitHub REST base URL (GHES: https://HOST/api/v3)"),
	GH("token", T_SECRET, token, NULL, 0, 0,
	   "token auth (PAT or GITHUB_TOKEN); env ABGATE_GITHUB_TOKEN wins; cannot create check runs, so commit statuses are used"),
	GH("token_file", T_STR, token_file, NULL, 0, 0, "file holding the token"),
	GH("app_id", T_I64, app_id, "0", 0, INT64_MAX, "GitHub App id (App auth: app_id + private_key_file + installation_id)"),
	GH("private_key_file", T_STR, private_key_file, NULL, 0, 0, "the App's PEM private key (RS256 JWT)"),
	GH("installation_id", T_I64, installation_id, "0", 0, INT64_MAX, "the App installation whose token is used"),
	GH("user_agent", T_STR, user_agent, "abgate/0.1", 0, 0, "User-Agent of every API request"),
	GH("check_name", T_STR, check_name, "abgate", 0, 0, "name of the check run, and context of the fallback commit status"),
	GH("output_dir", T_STR, output_dir, NULL, 0, 0,
	   "with no auth configured, 'posts' are written here (default <state_dir>/github-out)"),
	GH("timeout_s", T_INT, timeout_s, "30", 1, 600, "per-request timeout (connect + transfer)"),
	GH("max_retries", T_INT, max_retries, "5", 0, 20, "retries of one request on 5xx, network errors and rate limits"),
	GH("backoff_base_ms", T_INT, backoff_base_ms, "1000", 1, 600000, "first retry delay; doubles per retry, half of it random (equal jitter)"),
	GH("backoff_max_ms", T_INT, backoff_max_ms, "32000", 1, 3600000, "cap on one retry delay"),
	GH("max_wait_s", T_INT, max_wait_s, "120", 0, 3600,
	   "longest Retry-After / x-ratelimit-reset wait taken in line; a longer one defers the post"),
	REPO("name", T_STR, name, NULL, 0, 0, "\"owner/repo\" (required)"),
	REPO("git_url", T_STR, git_url, NULL, 0, 0, "clone URL or local path (default https://github.com/<name>.git)"),
	REPO("base", T_STR, base, "main", 0, 0, "base ref every PR is measured against"),
	REPO("suite", T_STR, suite, NULL, 0, 0, "suite file (default: guards/default.json from the base commit)"),
	REPO("pairs_min", T_INT, pairs_min, "0", 0, 100000, "override the suite's pairs_min (0: the suite's)"),
	REPO("pairs_max", T_INT, pairs_max, "0", 0, 100000, "override the suite's pairs_max (0: the suite's)"),
	TOP("workers", T_INT, workers, "1", 1, 64, "evaluations run at once (one GPU: 1)"),
	TOP("poll_interval_s", T_INT, poll_interval_s, "300", 0, 86400,
	    "every so often list open PRs and enqueue heads with no result (0: off)"),
	TOP("job_timeout_s", T_INT, job_timeout_s, "7200", 1, 7 * 86400, "an evaluation running longer is stopped (infra error)"),
	TOP("max_attempts", T_INT, max_attempts, "3", 1, 100, "attempts per job when workers die; then closed as infra error"),
	TOP("lease_s", T_INT, lease_s, "60", 3, 3600, "a worker's lease on its job, renewed every lease_s/3"),
	TOP("report_retry_max_s", T_INT, report_retry_max_s, "900", 1, 86400,
	    "cap on the backoff between retries of a post that could not be made (GitHub's Retry-After is honoured, up to an hour)"),
	TOP("delivery_ttl_days", T_INT, delivery_ttl_days, "14", 1, 3650, "how long X-GitHub-Delivery ids are kept for dedupe"),
	TOP("jobs", T_INT, jobs, "0", 0, 1024, "build parallelism {jobs} (0: online cores)"),
	TOP("log_level", T_STR, log_level, "info", 0, 0, "error, warn, info or debug"),
	/* Policies: percentages are fractions in [0, 1] (min/max in percent). */
	POL("stale_days", T_INT, stale_days, "2", 0, 3650,
	    "close an open, non-draft PR with no commit, push and no comment by its author for more than N days (0: off)"),
	POL("draft_stale_days", T_INT, draft_stale_days, "4", 0, 3650,
	    "close a draft open for more than N days since creation or the last conversion to draft (0: off)"),
	POL("max_unrewarded_evals", T_INT, max_unrewarded_evals, "2", 0, 1000,
	    "close once more than N finished evaluations ended eval:none or eval:REJECT; infra errors never count (0: off)"),
	POL("max_open_prs_per_author", T_INT, max_open_prs_per_author, "5", 0, 10000,
	    "keep an author's N oldest open PRs, close newer ones; owners, members, collaborators and bots exempt (0: off)"),
	POL("copycat.block", T_DBL, copycat_block, "0.85", 0, 100,
	    "containment of the added lines in an earlier open PR of another author at or above this: `copycat`, closed, not evaluated (0: off)"),
	POL("copycat.warn", T_DBL, copycat_warn, "0.75", 0, 100,
	    "at or above this: `copycat-warn`, not evaluated (0: copycat off)"),
	POL("copycat.min_added_lines", T_INT, copycat_min_added_lines, "15", 0, 1000000,
	    "PRs with fewer added lines (after dropping blank and comment-only lines) are not compared"),
	POL("denylist_file", T_STR, denylist_file, NULL, 0, 0,
	    "one login per line (# comments); opener or any commit author/committer listed: `flagged:gaming`, closed, never evaluated"),
	POL("harness_changes", T_STR, harness_changes, "evaluate", 0, 0,
	    "\"evaluate\" (measured with the base's harness, `harness-touched`) or \"skip\" (not evaluated; the check run says why)"),
	POL("exempt_labels", T_LIST, exempt_labels, "hold,merge-first", 0, 0, "PRs carrying one of these labels are never closed by a policy"),
	POL("merge_first", T_BOOL, merge_first, "false", 0, 0,
	    "after each verdict, label the open PR with the largest verified gain (the family-wise lower bound of its best series) `merge-first`, one at a time"),
};
const size_t ab_config_key_count = sizeof(ab_config_keys) / sizeof(ab_config_keys[0]);

static void *section_base(struct ab_config *cfg, enum key_section s, struct ab_repo_config *repo)
{
	if (s == S_POLICY)
		return repo ? (void *)&repo->policies : (void *)&cfg->policies;
	return s == S_TOP ? (void *)cfg : s == S_GITHUB ? (void *)&cfg->github : (void *)repo;
}

static void list_free(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* Sets a list field from a comma-separated string (defaults) or copies another list. */
static int list_set(void *base, const struct key_def *d, const char *csv, char *const *from, size_t n_from)
{
	char **list = calloc(64, sizeof(char *));
	size_t n = 0;

	if (!list)
		return ab_error_set("out of memory");
	list_free(*list_slot(base, d), *list_count(base, d));
	*list_slot(base, d) = list;
	*list_count(base, d) = 0;
	if (csv) {
		for (const char *p = csv; *p && n < 64;) {
			size_t len = strcspn(p, ",");
			if (!(list[n++] = strndup(p, len)))
				return ab_error_set("out of memory");
			*list_count(base, d) = n;
			p += len + (p[len] == ',');
		}
	}
	for (size_t i = 0; i < n_from && n < 64; i++) {
		if (!(list[n++] = strdup(from[i])))
			return ab_error_set("out of memory");
		*list_count(base, d) = n;
	}
	return 0;
}

static int set_default(void *base, const struct key_def *d)
{
	if (!d->dflt)
		return 0;
	switch (d->type) {
	case T_STR:
	case T_SECRET:
		if (!(*(char **)field(base, d) = strdup(d->dflt)))
			return ab_error_set("out of memory");
		return 0;
	case T_INT: *(int *)field(base, d) = atoi(d->dflt); return 0;
	case T_BOOL: *(int *)field(base, d) = !strcmp(d->dflt, "true"); return 0;
	case T_I64: *(int64_t *)field(base, d) = strtoll(d->dflt, NULL, 10); return 0;
	case T_DBL: *(double *)field(base, d) = strtod(d->dflt, NULL); return 0;
	case T_LIST: return list_set(base, d, d->dflt, NULL, 0);
	}
	return 0;
}

static int set_value(void *base, const struct key_def *d, json_t *value, const char *path)
{
	if (d->type == T_DBL) {
		if (!json_is_number(value))
			return ab_error_setc(AB_EINVALID, "config: %s: expected a number", path);
		double v = json_number_value(value);
		if (!(v >= (double)d->min / 100 && v <= (double)d->max / 100))
			return ab_error_setc(AB_EINVALID, "config: %s: %g is outside [%g, %g]", path, v, (double)d->min / 100,
					     (double)d->max / 100);
		*(double *)field(base, d) = v;
		return 0;
	}
	if (d->type == T_LIST) {
		size_t i, n = json_array_size(value);
		json_t *item;
		if (!json_is_array(value) || n > 64)
			return ab_error_setc(AB_EINVALID, "config: %s: expected an array of at most 64 strings", path);
		char *items[64];
		json_array_foreach(value, i, item) {
			if (!json_is_string(item) || !json_string_length(item))
				return ab_error_setc(AB_EINVALID, "config: %s[%zu]: expected a non-empty string", path, i);
			items[i] = (char *)json_string_value(item);
		}
		return list_set(base, d, NULL, items, n);
	}
	if (d->type == T_STR || d->type == T_SECRET) {
		if (json_is_null(value))
			return 0;
		if (!json_is_string(value))
			return ab_error_setc(AB_EINVALID, "config: %s: expected a string", path);
		char **slot = field(base, d);
		free(*slot);
		if (!(*slot = strdup(json_string_value(value))))
			return ab_error_set("out of memory");
		return 0;
	}
	if (d->type == T_BOOL) {
		if (!json_is_boolean(value))
			return ab_error_setc(AB_EINVALID, "config: %s: expected true or false", path);
		*(int *)field(base, d) = json_is_true(value);
		return 0;
	}
	if (!json_is_integer(value))
		return ab_error_setc(AB_EINVALID, "config: %s: expected an integer", path);
	json_int_t v = json_integer_value(value);
	if (v < d->min || v > d->max)
		return ab_error_setc(AB_EINVALID, "config: %s: %" JSON_INTEGER_FORMAT " is outside [%" PRId64 ", %" PRId64 "]",
				     path, v, d->min, d->max);
	if (d->type == T_INT)
		*(int *)field(base, d) = (int)v;
	else
		*(int64_t *)field(base, d) = v;
	return 0;
}

/* Walks a `policies` object (repo NULL: the top-level one); `sub` is "copycat." inside copycat. */
static int parse_policies(struct ab_config *cfg, struct ab_repo_config *repo, json_t *obj, const char *prefix,
			  const char *sub)
{
	const char *key;
	json_t *value;
	char path[256], name[96];

	if (!json_is_object(obj))
		return ab_error_setc(AB_EINVALID, "config: %s: expected an object", prefix);
	json_object_foreach(obj, key, value) {
		snprintf(path, sizeof(path), "%s.%s", prefix, key);
		snprintf(name, sizeof(name), "%s%s", sub, key);
		if (key[0] == '_')
			continue;
		if (!sub[0] && !strcmp(key, "copycat")) {
			if (parse_policies(cfg, repo, value, path, "copycat.") < 0)
				return -1;
			continue;
		}
		size_t k;
		for (k = 0; k < ab_config_key_count; k++)
			if (ab_config_keys[k].section == S_POLICY && !strcmp(ab_config_keys[k].key, name))
				break;
		if (k == ab_config_key_count)
			return ab_error_setc(AB_EINVALID, "config: %s: unknown key", path);
		if (set_value(section_base(cfg, S_POLICY, repo), &ab_config_keys[k], value, path) < 0)
			return -1;
		if (repo)
			repo->policies_set |= 1ULL << k;
	}
	return 0;
}

/* Walks one JSON object against the rows of `section`. */
static int parse_section(struct ab_config *cfg, enum key_section section, struct ab_repo_config *repo,
			 json_t *obj, const char *prefix)
{
	const char *key;
	json_t *value;
	char path[256];

	if (!json_is_object(obj))
		return ab_error_setc(AB_EINVALID, "config: %s: expected an object", prefix[0] ? prefix : "(top)");
	json_object_foreach(obj, key, value) {
		snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", key);
		if (key[0] == '_')
			continue;
		if ((section == S_TOP || section == S_REPO) && !strcmp(key, "policies")) {
			if (parse_policies(cfg, repo, value, path, "") < 0)
				return -1;
			continue;
		}
		if (section == S_TOP && !strcmp(key, "sandbox")) {
			if (ab_sandbox_config_parse(&cfg->sandbox, value) < 0)
				return -1;
			continue;
		}
		if (section == S_TOP && !strcmp(key, "github")) {
			if (parse_section(cfg, S_GITHUB, NULL, value, "github") < 0)
				return -1;
			continue;
		}
		if (section == S_TOP && !strcmp(key, "repos")) {
			if (!json_is_array(value))
				return ab_error_setc(AB_EINVALID, "config: repos: expected an array");
			size_t i, n = json_array_size(value);
			if (n > 1000)
				return ab_error_setc(AB_EINVALID, "config: repos: more than 1000 entries");
			cfg->repos = calloc(n ? n : 1, sizeof(*cfg->repos));
			if (!cfg->repos)
				return ab_error_set("out of memory");
			for (i = 0; i < n; i++) {
				struct ab_repo_config *r = &cfg->repos[i];
				char rp[32];
				cfg->repo_count = i + 1;
				for (size_t k = 0; k < ab_config_key_count; k++)
					if (ab_config_keys[k].section == S_REPO && set_default(r, &ab_config_keys[k]) < 0)
						return -1;
				r->policies_set = 0;
				snprintf(rp, sizeof(rp), "repos[%zu]", i);
				if (parse_section(cfg, S_REPO, r, json_array_get(value, i), rp) < 0)
					return -1;
			}
			continue;
		}
		const struct key_def *d = NULL;
		for (size_t k = 0; k < ab_config_key_count; k++)
			if (ab_config_keys[k].section == section && !strcmp(ab_config_keys[k].key, key))
				d = &ab_config_keys[k];
		if (!d)
			return ab_error_setc(AB_EINVALID, "config: %s: unknown key", path);
		if (set_value(section_base(cfg, section, repo), d, value, path) < 0)
			return -1;
	}
	return 0;
}

/* Reads a small secret file, trailing whitespace dropped. Warns when others may read it. */
static int read_secret_file(char **out, const char *path, const char *what)
{
	FILE *f = NULL;
	char *buf = NULL;
	struct stat st;
	size_t n;
	int error = -1;

	if (!(f = fopen(path, "rb"))) {
		ab_error_errno("config: %s: cannot open %s", what, path);
		goto cleanup;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		AB_WARN("config: %s file %s is readable by group or others (chmod 600)", what, path);
	if (!(buf = malloc(SECRET_FILE_MAX + 1))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	n = fread(buf, 1, SECRET_FILE_MAX + 1, f);
	if (n > SECRET_FILE_MAX) {
		ab_error_setc(AB_EINVALID, "config: %s: %s is larger than %d bytes", what, path, SECRET_FILE_MAX);
		goto cleanup;
	}
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = '\0';
	if (n == 0) {
		ab_error_setc(AB_EINVALID, "config: %s: %s is empty", what, path);
		goto cleanup;
	}
	*out = buf;
	buf = NULL;
	error = 0;
cleanup:
	free(buf);
	if (f)
		fclose(f);
	return error;
}

/* Resolves one secret: env wins, then *_file, then the inline value. */
static int resolve_secret(char **value, char **source, const char *file, const char *env, const char *what)
{
	const char *ev = getenv(env);
	char *s = NULL;
	char src[512];

	if (ev && ev[0]) {
		if (!(s = strdup(ev)))
			return ab_error_set("out of memory");
		snprintf(src, sizeof(src), "env %s", env);
	} else if (file) {
		if (read_secret_file(&s, file, what) < 0)
			return -1;
		snprintf(src, sizeof(src), "file %s", file);
	} else if (*value) {
		snprintf(src, sizeof(src), "config");
	} else {
		return 0;
	}
	if (s) {
		free(*value);
		*value = s;
	}
	free(*source);
	if (!(*source = strdup(src)))
		return ab_error_set("out of memory");
	return 0;
}

static int valid_repo_name(const char *name)
{
	const char *slash = strchr(name, '/');
	if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/'))
		return 0;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("-_./", *p))
			return 0;
	return 1;
}

/* Copies one policy key's value from the top-level policies into a repo's. */
static int inherit_policy(struct ab_policy_config *dst, const struct ab_policy_config *src, const struct key_def *d)
{
	switch (d->type) {
	case T_STR:
	case T_SECRET: {
		char **slot = field(dst, d), *v = *(char **)field((void *)src, d);
		free(*slot);
		*slot = NULL;
		if (v && !(*slot = strdup(v)))
			return ab_error_set("out of memory");
		return 0;
	}
	case T_INT:
	case T_BOOL: *(int *)field(dst, d) = *(int *)field((void *)src, d); return 0;
	case T_I64: *(int64_t *)field(dst, d) = *(int64_t *)field((void *)src, d); return 0;
	case T_DBL: *(double *)field(dst, d) = *(double *)field((void *)src, d); return 0;
	case T_LIST: return list_set(dst, d, NULL, *list_slot((void *)src, d), *list_count((void *)src, d));
	}
	return 0;
}

/* Reads a denylist: one login per line, '#' starts a comment, blank lines ignored. */
static int read_denylist(struct ab_policy_config *p, const char *where)
{
	FILE *f = fopen(p->denylist_file, "r");
	char line[512];
	int lineno = 0, error = -1;
	size_t cap = 0;

	if (!f)
		return ab_error_errno("config: %s.denylist_file: cannot open %s", where, p->denylist_file);
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *hash = strchr(line, '#'), *s = line, *e;
		if (hash)
			*hash = '\0';
		while (isspace((unsigned char)*s))
			s++;
		e = s + strlen(s);
		while (e > s && isspace((unsigned char)e[-1]))
			*--e = '\0';
		if (!*s)
			continue;
		for (char *c = s; *c; c++)
			if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '[' && *c != ']') {
				ab_error_setc(AB_EINVALID, "config: %s.denylist_file: %s:%d: \"%s\" is not a GitHub login", where,
					      p->denylist_file, lineno, s);
				goto cleanup;
			}
		if (p->denylist_count == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **nl = realloc(p->denylist, nc * sizeof(*nl));
			if (!nl) {
				ab_error_set("out of memory");
				goto cleanup;
			}
			p->denylist = nl, cap = nc;
		}
		if (!(p->denylist[p->denylist_count] = strdup(s))) {
			ab_error_set("out of memory");
			goto cleanup;
		}
		p->denylist_count++;
	}
	error = 0;
cleanup:
	fclose(f);
	return error;
}

static int check_policies(struct ab_policy_config *p, const char *where)
{
	if (strcmp(p->harness_changes, "evaluate") && strcmp(p->harness_changes, "skip"))
		return ab_error_setc(AB_EINVALID, "config: %s.harness_changes: expected \"evaluate\" or \"skip\", got \"%s\"",
				     where, p->harness_changes);
	if (p->copycat_block > 0 && p->copycat_warn > p->copycat_block)
		return ab_error_setc(AB_EINVALID, "config: %s.copycat: warn (%g) is above block (%g)", where, p->copycat_warn,
				     p->copycat_block);
	return p->denylist_file ? read_denylist(p, where) : 0;
}

static int finish(struct ab_config *cfg)
{
	char buf[1024];
	size_t i;

	if (resolve_secret(&cfg->webhook_secret, &cfg->webhook_secret_source, cfg->webhook_secret_file,
			   "ABGATE_WEBHOOK_SECRET", "webhook_secret") < 0)
		return -1;
	if (resolve_secret(&cfg->github.token, &cfg->github.token_source, cfg->github.token_file,
			   "ABGATE_GITHUB_TOKEN", "github.token") < 0)
		return -1;
	if (cfg->github.token && (cfg->github.app_id || cfg->github.installation_id || cfg->github.private_key_file))
		return ab_error_setc(AB_EINVALID, "config: github: both a token and App auth are configured; pick one");
	if ((cfg->github.app_id || cfg->github.installation_id || cfg->github.private_key_file) &&
	    !(cfg->github.app_id && cfg->github.installation_id && cfg->github.private_key_file))
		return ab_error_setc(AB_EINVALID,
				     "config: github: App auth needs app_id, private_key_file and installation_id together");
	size_t ulen = strlen(cfg->github.api_url);
	while (ulen > 0 && cfg->github.api_url[ulen - 1] == '/')
		cfg->github.api_url[--ulen] = '\0';
	if (strncmp(cfg->github.api_url, "http://", 7) && strncmp(cfg->github.api_url, "https://", 8))
		return ab_error_setc(AB_EINVALID, "config: github.api_url: expected an http(s) URL");
	if (!cfg->github.output_dir) {
		snprintf(buf, sizeof(buf), "%s/github-out", cfg->state_dir);
		if (!(cfg->github.output_dir = strdup(buf)))
			return ab_error_set("out of memory");
	}
	if (!strchr(cfg->listen, ':'))
		return ab_error_setc(AB_EINVALID, "config: listen: expected host:port");
	if (cfg->public_url && ((strncmp(cfg->public_url, "http://", 7) && strncmp(cfg->public_url, "https://", 8)) ||
				strpbrk(cfg->public_url, "\"'<> \t\r\n")))
		return ab_error_setc(AB_EINVALID, "config: public_url: expected an http(s) URL");
	if (strcmp(cfg->log_level, "error") && strcmp(cfg->log_level, "warn") && strcmp(cfg->log_level, "info") &&
	    strcmp(cfg->log_level, "debug"))
		return ab_error_setc(AB_EINVALID, "config: log_level: expected error, warn, info or debug");
	for (i = 0; i < cfg->repo_count; i++) {
		struct ab_repo_config *r = &cfg->repos[i];
		if (!r->name)
			return ab_error_setc(AB_EINVALID, "config: repos[%zu].name: required", i);
		if (!valid_repo_name(r->name))
			return ab_error_setc(AB_EINVALID, "config: repos[%zu].name: expected \"owner/repo\", got \"%s\"", i,
					     r->name);
		for (size_t j = 0; j < i; j++)
			if (!strcasecmp(cfg->repos[j].name, r->name))
				return ab_error_setc(AB_EINVALID, "config: repos[%zu].name: %s is listed twice", i, r->name);
		if (!r->git_url) {
			snprintf(buf, sizeof(buf), "https://github.com/%s.git", r->name);
			if (!(r->git_url = strdup(buf)))
				return ab_error_set("out of memory");
		}
		if (r->pairs_max && r->pairs_min > r->pairs_max)
			return ab_error_setc(AB_EINVALID, "config: repos[%zu]: pairs_min > pairs_max", i);
	}
	if (check_policies(&cfg->policies, "policies") < 0)
		return -1;
	for (i = 0; i < cfg->repo_count; i++) {
		struct ab_repo_config *r = &cfg->repos[i];
		char where[48];
		for (size_t k = 0; k < ab_config_key_count; k++)
			if (ab_config_keys[k].section == S_POLICY && !(r->policies_set & (1ULL << k)) &&
			    inherit_policy(&r->policies, &cfg->policies, &ab_config_keys[k]) < 0)
				return -1;
		snprintf(where, sizeof(where), "repos[%zu].policies", i);
		if (check_policies(&r->policies, where) < 0)
			return -1;
	}
	return 0;
}

int ab_config_load(struct ab_config **out, const char *path)
{
	struct ab_config *cfg = NULL;
	json_t *root = NULL;
	json_error_t jerr;
	size_t k;
	int error = -1;

	if (!(cfg = calloc(1, sizeof(*cfg)))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	for (k = 0; k < ab_config_key_count; k++)
		if (ab_config_keys[k].section != S_REPO && set_default(section_base(cfg, ab_config_keys[k].section, NULL), &ab_config_keys[k]) < 0)
			goto cleanup;
	if (ab_sandbox_config_init(&cfg->sandbox) < 0)
		goto cleanup;
	if (path) {
		struct stat st;
		if (stat(path, &st) < 0) {
			ab_error_errno("config: %s", path);
			goto cleanup;
		}
		if (st.st_size > CONFIG_FILE_MAX) {
			ab_error_setc(AB_EINVALID, "config: %s is larger than %d bytes", path, CONFIG_FILE_MAX);
			goto cleanup;
		}
		if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr))) {
			ab_error_setc(AB_EINVALID, "config: %s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
			goto cleanup;
		}
		if (parse_section(cfg, S_TOP, NULL, root, "") < 0) {
			ab_error_wrap(AB_EINVALID, "%s", path);
			goto cleanup;
		}
		if (!(cfg->path = strdup(path))) {
			ab_error_set("out of memory");
			goto cleanup;
		}
	}
	if (finish(cfg) < 0)
		goto cleanup;
	*out = cfg;
	cfg = NULL;
	error = 0;
cleanup:
	json_decref(root);
	ab_config_free(cfg);
	return error;
}

static void free_section(void *base, enum key_section section)
{
	if (section == S_POLICY) {
		struct ab_policy_config *p = base;
		list_free(p->denylist, p->denylist_count);
	}
	for (size_t k = 0; k < ab_config_key_count; k++)
		if (ab_config_keys[k].section == section && ab_config_keys[k].type == T_LIST)
			list_free(*list_slot(base, &ab_config_keys[k]), *list_count(base, &ab_config_keys[k]));
	for (size_t k = 0; k < ab_config_key_count; k++)
		if (ab_config_keys[k].section == section && (ab_config_keys[k].type == T_STR || ab_config_keys[k].type == T_SECRET)) {
			char **slot = field(base, &ab_config_keys[k]);
			if (*slot && ab_config_keys[k].type == T_SECRET)
				memset(*slot, 0, strlen(*slot));  /* do not leave secrets in freed memory */
			free(*slot);
		}
}

void ab_config_free(struct ab_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->repo_count; i++) {
		free_section(&cfg->repos[i], S_REPO);
		free_section(&cfg->repos[i].policies, S_POLICY);
	}
	free(cfg->repos);
	free_section(&cfg->policies, S_POLICY);
	free_section(cfg, S_TOP);
	free_section(&cfg->github, S_GITHUB);
	ab_sandbox_config_clear(&cfg->sandbox);
	free(cfg->webhook_secret_source);
	free(cfg->github.token_source);
	free(cfg->path);
	free(cfg);
}

int ab_config_check_serve(const struct ab_config *cfg)
{
	if (!cfg->webhook_secret)
		return ab_error_setc(AB_EINVALID, "config: no webhook secret (webhook_secret, webhook_secret_file or "
						  "ABGATE_WEBHOOK_SECRET): unsigned webhooks are never accepted");
	if (cfg->repo_count == 0)
		return ab_error_setc(AB_EINVALID, "config: repos: at least one repository is needed");
	return 0;
}

const struct ab_repo_config *ab_config_repo(const struct ab_config *cfg, const char *name)
{
	for (size_t i = 0; name && i < cfg->repo_count; i++)
		if (!strcasecmp(cfg->repos[i].name, name))
			return &cfg->repos[i];
	return NULL;
}

int ab_config_has_auth(const struct ab_config *cfg)
{
	return cfg->github.token != NULL || cfg->github.app_id != 0;
}
