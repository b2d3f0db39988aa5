/*
 * cmd_policies.c - `abgate policies` (see cmd_policies.h): loads the config, makes the GitHub
 * client the service would make, opens the service's queue for the evaluation history when the
 * state dir has one, runs ab_policies_sweep and prints one markdown table row per decision.
 */
#include "cmd_policies.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "github.h"
#include "github_auth.h"
#include "log.h"
#include "policies.h"
#include "queue.h"

static void usage(FILE *f)
{
	fputs("usage: abgate policies --config FILE [--repo owner/repo] [--dry-run] [--log-level error|warn|info|debug]\n"
	      "Runs the PR lifecycle policies once and prints what was done (--dry-run: what would be done).\n", f);
}

/* A table cell: '|' and newlines would break the row. */
static void cell(const char *s)
{
	for (; s && *s; s++)
		fputs(*s == '|' ? "\\|" : *s == '\n' ? " " : (char[]){ *s, 0 }, stdout);
}

static void print_row(void *payload, const struct ab_policies_row *r)
{
	int *count = payload;
	if ((*count)++ == 0)
		puts("| repo | PR | rule | action | figures |\n|---|---|---|---|---|");
	printf("| %s | #%d | %s | ", r->repo, r->pr, r->rule);
	cell(r->did);
	fputs(" | ", stdout);
	cell(r->figures);
	puts(" |");
}

int ab_cmd_policies(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "repo", required_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },      { "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *config_path = getenv("ABGATE_CONFIG"), *repo = NULL, *level = "warn";
	struct ab_config *cfg = NULL;
	ab_gh_auth *auth = NULL;
	ab_gh *gh = NULL;
	ab_queue *queue = NULL;
	ab_policies *pol = NULL;
	int dry_run = 0, opt, status = 2, count = 0;
	char path[4096];

	optind = 0;
	while ((opt = getopt_long(argc, argv, "c:r:nh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': config_path = optarg; break;
		case 'r': repo = optarg; break;
		case 'n': dry_run = 1; break;
		case 'l': level = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || !config_path) {
		usage(stderr);
		return 2;
	}
	static const char *names[] = { "error", "warn", "info", "debug" };
	for (int i = 0; i < 4; i++)
		if (!strcmp(level, names[i]))
			ab_log_set_level((enum ab_log_level)i);
	if (ab_config_load(&cfg, config_path) < 0) {
		fprintf(stderr, "abgate policies: %s\n", ab_error_last());
		goto cleanup;
	}
	if (repo && !ab_config_repo(cfg, repo)) {
		fprintf(stderr, "abgate policies: %s is not a configured repository\n", repo);
		goto cleanup;
	}
	if (!ab_config_has_auth(cfg)) {
		fprintf(stderr, "abgate policies: no GitHub credentials configured (github.token or App auth)\n");
		goto cleanup;
	}
	status = 3;
	if (cfg->github.token ? ab_gh_auth_new_token(&auth, cfg->github.token) < 0
			      : ab_gh_auth_new_app(&auth, cfg->github.app_id, cfg->github.private_key_file,
						   cfg->github.installation_id) < 0)
		goto fail;
	struct ab_gh_options go = {
		.api_url = cfg->github.api_url, .user_agent = cfg->github.user_agent, .timeout_s = cfg->github.timeout_s,
		.max_retries = cfg->github.max_retries, .backoff_base_ms = cfg->github.backoff_base_ms,
		.backoff_max_ms = cfg->github.backoff_max_ms, .max_wait_s = cfg->github.max_wait_s,
	};
	if (ab_gh_new(&gh, &go, auth) < 0)
		goto fail;
	/* The service's evaluation history, when this state dir has one (never created here). */
	snprintf(path, sizeof(path), "%s/queue.db", cfg->state_dir);
	if (access(path, F_OK) == 0 && ab_queue_open(&queue, path) < 0)
		goto fail;
	if (ab_policies_new(&pol, cfg, gh, queue) < 0)
		goto fail;
	int error = ab_policies_sweep(pol, repo, dry_run, print_row, &count);
	if (count == 0)
		printf("no policy applies%s\n", dry_run ? " (dry run)" : "");
	if (error < 0)
		goto fail;
	status = 0;
	goto cleanup;
fail:
	fprintf(stderr, "abgate policies: %s\n", ab_error_last());
cleanup:
	ab_policies_free(pol);
	ab_queue_free(queue);
	ab_gh_free(gh);
	ab_gh_auth_free(auth);
	ab_config_free(cfg);
	return status;
}
