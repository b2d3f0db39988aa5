/*
 * cmd_serve.c - `abgate serve` and `abgate eval --pr N` (see cmd_serve.h): option parsing, the
 * start-up banner with the effective config (secrets masked), signal handling, and the manual
 * re-run that posts through the same reporter as the service.
 */
#define _GNU_SOURCE
#include "cmd_serve.h"
#include "fs.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "sandbox.h"
#include "error.h"
#include "github.h"
#include "log.h"
#include "report.h"
#include "reporter.h"

static int set_log_level(const char *name)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, names[i])) {
			ab_log_set_level((enum ab_log_level)i);
			return 0;
		}
	return -1;
}

static void serve_usage(FILE *f)
{
	fprintf(f, "usage: abgate serve --config FILE [--log-level error|warn|info|debug] [--print-config]\n"
		   "       abgate serve --config-table   (the config keys as a markdown table)\n"
		   "Secrets may come from ABGATE_WEBHOOK_SECRET and ABGATE_GITHUB_TOKEN.\n");
}

int ab_cmd_serve_with(int argc, char **argv, ab_service_eval_fn eval)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "log-level", required_argument, NULL, 'l' },
		{ "print-config", no_argument, NULL, 'p' }, { "config-table", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *config_path = getenv("ABGATE_CONFIG"), *log_level = NULL;
	int print_only = 0, opt;
	struct ab_config *cfg = NULL;
	ab_service *svc = NULL;
	char *text = NULL;
	sigset_t sigs;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': config_path = optarg; break;
		case 'l': log_level = optarg; break;
		case 'p': print_only = 1; break;
		case 't':
			if (ab_config_table_markdown(&text) < 0)
				return 3;
			fputs(text, stdout);
			free(text);
			return 0;
		case 'h': serve_usage(stdout); return 0;
		default: serve_usage(stderr); return 2;
		}
	}
	if (optind < argc || !config_path) {
		serve_usage(stderr);
		return 2;
	}
	if (ab_config_load(&cfg, config_path) < 0) {
		fprintf(stderr, "abgate serve: %s\n", ab_error_last());
		return 2;
	}
	if (set_log_level(log_level ? log_level : cfg->log_level) < 0) {
		fprintf(stderr, "abgate serve: unknown log level %s\n", log_level);
		ab_config_free(cfg);
		return 2;
	}
	ab_log_set_timestamps(1);
	if (ab_config_describe(&text, cfg) == 0) {
		fputs(text, stderr);
		free(text);
	}
	if (print_only) {
		int bad = ab_config_check_serve(cfg) < 0;
		if (bad)
			fprintf(stderr, "abgate serve: %s\n", ab_error_last());
		ab_config_free(cfg);
		return bad ? 2 : 0;
	}
	if (ab_config_check_serve(cfg) < 0) {
		fprintf(stderr, "abgate serve: %s\n", ab_error_last());
		ab_config_free(cfg);
		return 2;
	}
	/* Whether PR code is confined, said once at start (each evaluation checks again). */
	char bwrap_version[64];
	if (!cfg->sandbox.enabled)
		AB_WARN("serve: sandbox OFF (\"sandbox\": {\"enabled\": false}): PR builds and SUTs run with abgate's rights");
	else if (ab_sandbox_probe(&cfg->sandbox, bwrap_version, sizeof(bwrap_version)) < 0)
		AB_WARN("serve: sandbox on, but it cannot start here: every evaluation will end as infra-error: %s",
			ab_error_last());
	else
		AB_INFO("serve: sandbox on (%s)", bwrap_version);
	/* Every thread inherits the blocked set; only sigwait below sees SIGINT/SIGTERM. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (ab_gh_global_init() < 0 || ab_service_start(&svc, cfg, eval) < 0) {
		fprintf(stderr, "abgate serve: %s\n", ab_error_last());
		ab_config_free(cfg);
		return 3;
	}
	int sig = 0;
	sigwait(&sigs, &sig);
	AB_INFO("service: %s received; stopping (running evaluations go back to the queue)", strsignal(sig));
	ab_service_stop(svc);
	ab_config_free(cfg);
	AB_INFO("service: stopped");
	return 0;
}

int ab_cmd_serve(int argc, char **argv)
{
	return ab_cmd_serve_with(argc, argv, ab_eval_run);
}

/* ---- abgate eval --pr N ---- */

static void eval_usage(FILE *f)
{
	fprintf(f, "usage: abgate eval --pr N [--config FILE] [--repo owner/repo|PATH|URL] [--base REF] [--suite FILE]\n"
		   "                  [--state DIR] [--post | --dry-run] [--out-dir DIR] [--out FILE] [--json FILE]\n"
		   "                  [--pairs-min N] [--pairs-max N] [--seed N] [--quiet]\n"
		   "--post posts the result (check run, sticky comment, labels) like the service; with no GitHub\n"
		   "credentials configured the posts are written to --out-dir (or github.output_dir).\n"
		   "--dry-run (default) prints the comment it would post, or writes it to --out FILE.\n");
}

static const char *outcome_of(int status)
{
	return status == AB_EVAL_PASS ? "pass" : status == AB_EVAL_REJECT ? "reject"
					      : status == AB_EVAL_CANCELED ? "canceled" : "infra";
}

int ab_cmd_eval_pr_with(int argc, char **argv, ab_service_eval_fn eval)
{
	static const struct option longopts[] = {
		{ "pr", required_argument, NULL, 'n' },        { "config", required_argument, NULL, 'c' },
		{ "repo", required_argument, NULL, 'r' },      { "base", required_argument, NULL, 'b' },
		{ "suite", required_argument, NULL, 's' },     { "state", required_argument, NULL, 'S' },
		{ "post", no_argument, NULL, 'P' },            { "dry-run", no_argument, NULL, 'D' },
		{ "out-dir", required_argument, NULL, 'o' },   { "out", required_argument, NULL, 'O' },
		{ "json", required_argument, NULL, 'j' },      { "pairs-min", required_argument, NULL, 'm' },
		{ "pairs-max", required_argument, NULL, 'M' }, { "seed", required_argument, NULL, 'e' },
		{ "quiet", no_argument, NULL, 'q' },           { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = getenv("ABGATE_CONFIG"), *repo_arg = NULL, *base = NULL, *suite = NULL;
	const char *state = NULL, *out_dir = NULL, *out_file = NULL, *json_file = NULL;
	int pr = 0, post = 0, dry = 0, quiet = 0, pairs_min = 0, pairs_max = 0, has_seed = 0, opt, status = 2;
	unsigned long long seed = 0;
	struct ab_config *cfg = NULL;
	ab_gh_auth *auth = NULL;
	ab_gh *gh = NULL;
	ab_reporter *reporter = NULL;
	ab_queue *queue = NULL;
	json_t *result = NULL;
	char *comment = NULL, *kind = NULL;
	char head_ref[64], ext[512], trigger[64], path[4096], note[512];

	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n': pr = atoi(optarg); break;
		case 'c': config_path = optarg; break;
		case 'r': repo_arg = optarg; break;
		case 'b': base = optarg; break;
		case 's': suite = optarg; break;
		case 'S': state = optarg; break;
		case 'P': post = 1; break;
		case 'D': dry = 1; break;
		case 'o': out_dir = optarg; break;
		case 'O': out_file = optarg; break;
		case 'j': json_file = optarg; break;
		case 'm': pairs_min = atoi(optarg); break;
		case 'M': pairs_max = atoi(optarg); break;
		case 'e': seed = strtoull(optarg, NULL, 0), has_seed = 1; break;
		case 'q': quiet = 1; break;
		case 'h': eval_usage(stdout); return 0;
		default: eval_usage(stderr); return 2;
		}
	}
	if (pr <= 0 || optind < argc || (post && dry)) {
		eval_usage(stderr);
		return 2;
	}
	if (ab_config_load(&cfg, config_path) < 0) {
		fprintf(stderr, "abgate eval: %s\n", ab_error_last());
		return 2;
	}
	if (quiet)
		ab_log_set_level(AB_LOG_WARN);
	/* --repo names a configured repository, else it is the clone URL or path itself. */
	const struct ab_repo_config *rc = repo_arg ? ab_config_repo(cfg, repo_arg) : cfg->repo_count == 1 ? &cfg->repos[0] : NULL;
	const char *git_url = rc ? rc->git_url : repo_arg;
	const char *name = rc ? rc->name : NULL;
	if (!git_url) {
		fprintf(stderr, "abgate eval: which repository? give --repo (the config has %zu)\n", cfg->repo_count);
		goto cleanup;
	}
	if (!base)
		base = rc ? rc->base : "main";
	if (!suite && rc)
		suite = rc->suite;

	int to_github = post && ab_config_has_auth(cfg);
	if (to_github && !name) {
		fprintf(stderr, "abgate eval: --post needs the repository's owner/repo name (configure it in repos[])\n");
		goto cleanup;
	}
	struct ab_gh_pr ghpr = { 0 };
	if (to_github) {
		if (cfg->github.token ? ab_gh_auth_new_token(&auth, cfg->github.token) < 0
				      : ab_gh_auth_new_app(&auth, cfg->github.app_id, cfg->github.private_key_file,
							   cfg->github.installation_id) < 0)
			goto fail;
		struct ab_gh_options go = { .api_url = cfg->github.api_url, .user_agent = cfg->github.user_agent,
					    .timeout_s = cfg->github.timeout_s, .max_retries = cfg->github.max_retries,
					    .backoff_base_ms = cfg->github.backoff_base_ms,
					    .backoff_max_ms = cfg->github.backoff_max_ms, .max_wait_s = cfg->github.max_wait_s };
		snprintf(path, sizeof(path), "%s/queue.db", state ? state : cfg->state_dir);
		if (ab_queue_open(&queue, path) < 0)
			AB_WARN("eval: no queue database (%s): the sticky comment is found by its marker", ab_error_last());
		if (ab_gh_new(&gh, &go, auth) < 0 || ab_reporter_new_github(&reporter, gh, queue, cfg->github.check_name) < 0)
			goto fail;
		if (ab_gh_pr_get(gh, &ghpr, name, pr) < 0)
			goto fail;
	} else if (post || out_dir) {
		const char *dir = out_dir ? out_dir : cfg->github.output_dir;
		if (post && !out_dir)
			AB_WARN("eval: no GitHub credentials configured: writing the posts under %s", dir);
		if (ab_reporter_new_dir(&reporter, dir, out_dir == NULL, cfg->github.check_name) < 0)
			goto fail;
	}

	/* Start the check run before measuring, as the service does: people see it is being evaluated. */
	int64_t check_id = 0;
	struct ab_report_target t = { name ? name : "local/repo", pr, ghpr.head_sha, base, ext };
	if (to_github) {
		snprintf(ext, sizeof(ext), "abgate:%s#%d@%s/cli-%lld", name, pr, ghpr.head_sha, (long long)time(NULL));
		if (ab_reporter_start(reporter, &t, &check_id, &kind, 0) < 0)
			AB_WARN("eval: could not mark the check in progress: %s", ab_error_last());
	}
	snprintf(head_ref, sizeof(head_ref), "pull/%d/head", pr);
	snprintf(trigger, sizeof(trigger), "cli --pr %d", pr);
	struct ab_eval_options opts = { .repo = git_url, .base_ref = base, .head_ref = head_ref, .suite_path = suite,
					.state_dir = state ? state : cfg->state_dir, .pairs_min = pairs_min ? pairs_min : rc ? rc->pairs_min : 0,
					.pairs_max = pairs_max ? pairs_max : rc ? rc->pairs_max : 0, .has_seed = has_seed,
					.seed = seed, .jobs = cfg->jobs, .quiet = quiet, .trigger = trigger,
					.sandbox = &cfg->sandbox };
	int64_t eval_id = 0;
	status = eval(&result, &eval_id, &opts);
	if (status == AB_EVAL_USAGE && !result) {
		fprintf(stderr, "abgate eval: %s\n", ab_error_last());
		goto cleanup;
	}
	if (json_file && result && json_dump_file(result, json_file, JSON_INDENT(2)) < 0)
		AB_WARN("eval: cannot write %s", json_file);
	const char *measured = json_string_value(json_object_get(json_object_get(result, "head"), "sha"));
	if (!to_github)
		t.head_sha = measured ? measured : "0000000000000000000000000000000000000000";
	else if (measured && strcmp(measured, ghpr.head_sha))
		AB_WARN("eval: the PR moved to %.12s while measuring %.12s", ghpr.head_sha, measured);
	if (!to_github)
		snprintf(ext, sizeof(ext), "abgate:%s#%d@%s/cli", t.repo, pr, t.head_sha);
	struct ab_report rep = { outcome_of(status), result, NULL, !measured || !to_github || !strcmp(measured, ghpr.head_sha), NULL };
	if (status == AB_EVAL_INFRA && !result) {
		/* A copy: posting sets errors of its own, which would rewrite ab_error_last() under the note. */
		snprintf(note, sizeof(note), "%s", ab_error_last());
		rep.note = note;
	}
	if (reporter) {
		unsigned done = 0;
		if (ab_reporter_publish(reporter, &t, &rep, &check_id, &kind, &done, NULL, NULL) < 0) {
			fprintf(stderr, "abgate eval: posting failed: %s\n", ab_error_last());
			status = AB_EVAL_INFRA;
			goto cleanup;
		}
		if (to_github)
			fprintf(stderr, "abgate eval: posted to %s#%d (%s)\n", name, pr, kind ? kind : "check");
	}
	if (!post) {
		if (ab_report_comment_body(&comment, &t, &rep) < 0)
			goto fail;
		if (out_file ? ab_fs_write(out_file, comment) < 0 : fputs(comment, stdout) < 0)
			goto fail;
	}
	goto cleanup;
fail:
	fprintf(stderr, "abgate eval: %s\n", ab_error_last());
	status = AB_EVAL_INFRA;
cleanup:
	free(comment);
	free(kind);
	json_decref(result);
	ab_reporter_free(reporter);
	ab_gh_free(gh);
	ab_gh_auth_free(auth);
	ab_queue_free(queue);
	ab_config_free(cfg);
	return status;
}

int ab_cmd_eval_pr(int argc, char **argv)
{
	return ab_cmd_eval_pr_with(argc, argv, ab_eval_run);
}
