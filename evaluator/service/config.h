/*
 * config.h - the service configuration (`abgate serve --config FILE`, `abgate eval --pr N`). The
 * config is a JSON object described by one table (key, type, default, meaning) that drives the
 * parser, the start-up dump (secrets masked) and the documentation (ci/abgate.sample.md). Secrets
 * come from the file itself, from a *_file key, or from the environment (which wins).
 */
#ifndef AB_CONFIG_H
#define AB_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sandbox.h"

/*
 * PR lifecycle policies (guards/policy.h decides): top-level `policies`, overridable key by key in
 * `repos[].policies`. Every rule is off when its count or threshold is 0.
 */
struct ab_policy_config {
	int stale_days;
	int draft_stale_days;
	int max_unrewarded_evals;
	int max_open_prs_per_author;
	double copycat_block;
	double copycat_warn;
	int copycat_min_added_lines;
	char *denylist_file;         /* NULL: no denylist */
	char *harness_changes;       /* "evaluate" or "skip" */
	char **exempt_labels;        /* exempt_label_count strings */
	size_t exempt_label_count;
	int merge_first;             /* label the open PR with the largest verified gain `merge-first` */
	char **denylist;             /* read from denylist_file at load */
	size_t denylist_count;
};

/* One repository the service evaluates. */
struct ab_repo_config {
	char *name;          /* "owner/repo", as in the webhook's repository.full_name */
	char *git_url;       /* clone URL or local path; default https://github.com/<name>.git */
	char *base;          /* the base ref every PR is measured against; default "main" */
	char *suite;         /* suite file; NULL: guards/default.json from the base commit */
	int pairs_min;       /* 0: the suite's */
	int pairs_max;       /* 0: the suite's */
	struct ab_policy_config policies;  /* effective: the repo's keys over the top-level ones */
	unsigned long long policies_set;   /* which policy keys the repo set itself (internal) */
};

struct ab_github_config {
	char *api_url;           /* REST base URL, no trailing slash */
	char *token;             /* plain token (secret); NULL when not configured */
	char *token_source;      /* where the token came from ("config", "file PATH", "env NAME") */
	char *token_file;        /* read into token when set */
	int64_t app_id;          /* GitHub App id; 0: no App auth */
	char *private_key_file;  /* the App's PEM private key */
	int64_t installation_id;
	char *user_agent;
	char *check_name;        /* the check run / commit status context */
	char *output_dir;        /* where "posts" go when no auth is configured */
	int timeout_s;           /* per request, connect + transfer */
	int max_retries;         /* retries after the first try on 5xx / network errors / rate limits */
	int backoff_base_ms;     /* first retry delay; doubles each time, half of it random */
	int backoff_max_ms;      /* cap on one backoff delay */
	int max_wait_s;          /* longest Retry-After / rate-limit wait taken in line; longer: defer */
};

struct ab_config {
	char *path;                  /* the file it was loaded from (NULL: defaults only) */
	char *listen;                /* "host:port" of the webhook receiver */
	char *public_url;            /* where the pages are reachable ("https://abgate.example"); NULL: no links */
	char *state_dir;
	char *webhook_secret;        /* secret; NULL when not configured */
	char *webhook_secret_source;
	char *webhook_secret_file;   /* read into webhook_secret when set */
	int64_t webhook_max_body;    /* bytes; larger bodies get 413 */
	struct ab_github_config github;
	struct ab_repo_config *repos;
	size_t repo_count;
	int workers;
	int poll_interval_s;         /* 0: no polling sweep */
	int job_timeout_s;           /* an evaluation running longer is stopped as an infra error */
	int max_attempts;            /* evaluation attempts per job before it is closed as infra error */
	int lease_s;                 /* a worker's lease on a job; renewed every lease_s/3 */
	int report_retry_max_s;      /* cap on the delay between retries of a post that failed */
	int delivery_ttl_days;       /* how long X-GitHub-Delivery ids are remembered */
	int jobs;                    /* build parallelism ({jobs}); 0: online cores */
	char *log_level;             /* error | warn | info | debug */
	struct ab_policy_config policies;  /* the top-level `policies` */
	struct ab_sandbox_config sandbox;  /* the `sandbox` object (sandbox_config.h): how PR code is confined */
};

/*
 * Loads `path` (NULL: defaults only, then the environment), applies defaults and environment
 * overrides (ABGATE_WEBHOOK_SECRET, ABGATE_GITHUB_TOKEN), reads *_file secrets and validates.
 * Unknown keys and wrong types are errors naming the key's path ("repos[1].base"). Keys that start
 * with "_" (e.g. "_comment") are ignored anywhere. *out is owned by the caller (ab_config_free).
 */
int ab_config_load(struct ab_config **out, const char *path);
void ab_config_free(struct ab_config *cfg);

/* Checks what `abgate serve` needs beyond a loadable file: a webhook secret, at least one repo. */
int ab_config_check_serve(const struct ab_config *cfg);

/* The repository named `name` ("owner/repo", case-insensitive), or NULL. Borrowed from cfg. */
const struct ab_repo_config *ab_config_repo(const struct ab_config *cfg, const char *name);

/* Whether any GitHub auth is configured (token or App). */
int ab_config_has_auth(const struct ab_config *cfg);

/* The effective configuration as "key = value  (source)" lines, secrets and URL passwords masked. Caller frees. */
int ab_config_describe(char **out, const struct ab_config *cfg);

/* The key table as a markdown table (key | type | default | meaning). Caller frees. */
int ab_config_table_markdown(char **out);

#endif
