/*
 * cli.c - `abgate eval`, `abgate history` and `abgate report` (see cli.h): option parsing, output
 * files and tables around ab_eval_run and the store. The evaluation itself lives in eval.c.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.h"
#include "calibration.h"
#include "cmd_serve.h"
#include "error.h"
#include "eval.h"
#include "html.h"
#include "log.h"
#include "markdown.h"
#include "config.h"
#include "result.h"
#include "sandbox_config.h"
#include "store.h"
#include "terminal.h"

static int write_file(const char *path, const char *text)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "abgate: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	int ok = fputs(text, f) >= 0 && (f == stdout ? fflush(f) == 0 : fclose(f) == 0);
	if (!ok)
		fprintf(stderr, "abgate: cannot write %s: %s\n", path, strerror(errno));
	return ok ? 0 : -1;
}

static int parse_int(int *out, const char *text, const char *what, int min, int max)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end || end == text || v < min || v > max) {
		fprintf(stderr, "abgate: %s must be an integer in [%d, %d], got '%s'\n", what, min, max, text);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* The sandbox of `eval` and `calibrate`: the `sandbox` object of --config FILE, else the defaults
 * (on); --no-sandbox turns it off. *out's strings belong to *cfg (NULL without --config), which the
 * caller frees with ab_config_free after the last use of *out. Returns 0, or -1 with the message
 * printed. */
static int sandbox_from_cli(struct ab_sandbox_config *out, struct ab_config **cfg, const char *config_path,
			    int no_sandbox)
{
	*cfg = NULL;
	if (config_path) {
		if (ab_config_load(cfg, config_path) < 0) {
			fprintf(stderr, "abgate: %s\n", ab_error_last());
			return -1;
		}
		*out = (*cfg)->sandbox;
	} else {
		ab_sandbox_config_defaults(out);
	}
	if (no_sandbox)
		out->enabled = 0;
	return 0;
}

static void eval_usage(FILE *f)
{
	fputs("usage: abgate eval --repo PATH|URL --base REF --head REF [--suite FILE] [--state DIR]\n"
	      "                   [--json FILE] [--markdown FILE] [--pairs-min N] [--pairs-max N]\n"
	      "                   [--seed N] [--jobs N] [--quiet] [--config FILE] [--no-sandbox]\n"
	      "  --config FILE   use the config's `sandbox` object (limits, network steps, paths)\n"
	      "  --no-sandbox    run the PR's build and SUT with abgate's own rights (shown in every report)\n"
	      "       abgate eval --pr N [--config FILE] [--post | --dry-run] ...   (see abgate help)\n"
	      "Exit status: 0 verdict without REJECT, 1 eval:REJECT, 2 usage or configuration error,\n"
	      "3 eval:infra-error, 4 canceled.\n", f);
}

int ab_cmd_eval(int argc, char **argv)
{
	static const struct option options[] = {
		{ "repo", required_argument, 0, 'r' }, { "base", required_argument, 0, 'b' },
		{ "head", required_argument, 0, 'H' }, { "suite", required_argument, 0, 's' },
		{ "state", required_argument, 0, 'S' }, { "json", required_argument, 0, 'j' },
		{ "markdown", required_argument, 0, 'm' }, { "pairs-min", required_argument, 0, 'p' },
		{ "pairs-max", required_argument, 0, 'P' }, { "seed", required_argument, 0, 'e' },
		{ "jobs", required_argument, 0, 'J' }, { "quiet", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' }, { "no-sandbox", no_argument, 0, 'N' },
		{ "config", required_argument, 0, 'C' }, { 0, 0, 0, 0 }
	};
	struct ab_eval_options o = { .trigger = "cli" };
	const char *config_path = NULL;
	int no_sandbox = 0;
	const char *json_path = NULL, *md_path = NULL;
	json_t *result = NULL;
	int64_t id = 0;
	int c;

	/* `eval --pr N` is the GitHub-side front end (cmd_serve.c). */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--pr") == 0 || strncmp(argv[i], "--pr=", 5) == 0)
			return ab_cmd_eval_pr(argc, argv);

	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'r': o.repo = optarg; break;
		case 'b': o.base_ref = optarg; break;
		case 'H': o.head_ref = optarg; break;
		case 's': o.suite_path = optarg; break;
		case 'S': o.state_dir = optarg; break;
		case 'j': json_path = optarg; break;
		case 'm': md_path = optarg; break;
		case 'p': if (parse_int(&o.pairs_min, optarg, "--pairs-min", 2, 10000) < 0) return AB_EVAL_USAGE; break;
		case 'P': if (parse_int(&o.pairs_max, optarg, "--pairs-max", 2, 10000) < 0) return AB_EVAL_USAGE; break;
		case 'J': if (parse_int(&o.jobs, optarg, "--jobs", 1, 4096) < 0) return AB_EVAL_USAGE; break;
		case 'e': {
			char *end;
			errno = 0;
			o.seed = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg) {
				fprintf(stderr, "abgate: --seed must be an unsigned integer, got '%s'\n", optarg);
				return AB_EVAL_USAGE;
			}
			o.has_seed = 1;
			break;
		}
		case 'q': o.quiet = 1; break;
		case 'N': no_sandbox = 1; break;
		case 'C': config_path = optarg; break;
		case 'h': eval_usage(stdout); return 0;
		default: eval_usage(stderr); return AB_EVAL_USAGE;
		}
	}
	if (optind < argc || !o.repo || !o.base_ref || !o.head_ref) {
		if (optind < argc)
			fprintf(stderr, "abgate: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "abgate: eval needs --repo, --base and --head\n");
		eval_usage(stderr);
		return AB_EVAL_USAGE;
	}
	if (o.pairs_min && o.pairs_max && o.pairs_max < o.pairs_min) {
		fprintf(stderr, "abgate: --pairs-max (%d) is below --pairs-min (%d)\n", o.pairs_max, o.pairs_min);
		return AB_EVAL_USAGE;
	}

	struct ab_sandbox_config sandbox;
	struct ab_config *cfg = NULL;
	if (sandbox_from_cli(&sandbox, &cfg, config_path, no_sandbox) < 0)
		return AB_EVAL_USAGE;
	o.sandbox = &sandbox;
	int status = ab_eval_run(&result, &id, &o);
	ab_config_free(cfg);
	cfg = NULL;
	if (result == NULL) {
		fprintf(stderr, "abgate: %s: %s\n", status == AB_EVAL_USAGE ? "error" : "infra-error",
			ab_error_last());
		return status;
	}
	int out_failed = 0;
	if (json_path) {
		char *text = json_dumps(result, JSON_INDENT(2));
		out_failed |= text == NULL || write_file(json_path, text) < 0;
		free(text);
	}
	if (md_path) {
		char *md = NULL;
		struct ab_markdown_options mo = { .samples = 0 };
		if (ab_markdown_render(&md, result, &mo) < 0 || write_file(md_path, md) < 0)
			out_failed = 1;
		free(md);
	}
	if (!json_path || strcmp(json_path, "-") != 0) {
		char *table = NULL;
		if (ab_terminal_render(&table, result, isatty(STDOUT_FILENO)) == 0)
			fputs(table, stdout);
		free(table);
	}
	json_decref(result);
	if (out_failed && status == AB_EVAL_PASS)
		return AB_EVAL_INFRA;
	return status;
}

static int open_store(ab_store **out, const char *state_dir)
{
	if (ab_store_open(out, state_dir ? state_dir : ".abgate") < 0) {
		fprintf(stderr, "abgate: %s\n", ab_error_last());
		return -1;
	}
	return 0;
}

int ab_cmd_history(int argc, char **argv)
{
	static const struct option options[] = {
		{ "state", required_argument, 0, 'S' }, { "limit", required_argument, 0, 'l' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
	};
	const char *state = NULL;
	int limit = 20, c;
	ab_store *store = NULL;
	struct ab_store_eval *evals = NULL;
	size_t n = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'S': state = optarg; break;
		case 'l': if (parse_int(&limit, optarg, "--limit", 1, 1000000) < 0) return 2; break;
		case 'h': puts("usage: abgate history [--state DIR] [--limit N]"); return 0;
		default: fputs("usage: abgate history [--state DIR] [--limit N]\n", stderr); return 2;
		}
	}
	if (open_store(&store, state) < 0)
		return 3;
	if (ab_store_history(&evals, &n, store, limit) < 0) {
		fprintf(stderr, "abgate: %s\n", ab_error_last());
		ab_store_close(store);
		return 3;
	}
	printf("%-6s %-20s %-9s %-16s %-8s %-8s %s\n", "id", "created (UTC)", "status", "label", "base",
		"head", "reason");
	for (size_t i = 0; i < n; i++) {
		const struct ab_store_eval *e = &evals[i];
		char when[32] = "";
		time_t t = (time_t)(e->created_at_ms / 1000);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		static const char *status_names[] = { "running", "done", "canceled", "error" };
		printf("%-6lld %-20s %-9s %-16s %-8.7s %-8.7s %.80s\n", (long long)e->id, when,
			(unsigned)e->status < 4 ? status_names[e->status] : "?", e->label ? e->label : "-",
			e->base_sha ? e->base_sha : "-", e->head_sha ? e->head_sha : "-",
			e->reason ? e->reason : "");
	}
	ab_store_evals_free(evals, n);
	ab_store_close(store);
	return 0;
}

int ab_cmd_report(int argc, char **argv)
{
	static const struct option options[] = {
		{ "state", required_argument, 0, 'S' }, { "format", required_argument, 0, 'f' },
		{ "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
	};
	const char *state = NULL, *format = "md", *output = NULL;
	const char *usage = "usage: abgate report ID [--state DIR] [--format md|json|text|html] [-o FILE]\n";
	ab_store *store = NULL;
	struct ab_store_eval *ev = NULL;
	json_t *doc = NULL;
	char *out = NULL;
	int c, id, rc = 3;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:", options, NULL)) != -1) {
		switch (c) {
		case 'S': state = optarg; break;
		case 'f': format = optarg; break;
		case 'o': output = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind + 1 != argc || parse_int(&id, argv[optind], "ID", 1, 2147483647) < 0) {
		fputs(usage, stderr);
		return 2;
	}
	if (strcmp(format, "md") && strcmp(format, "json") && strcmp(format, "text") && strcmp(format, "html")) {
		fprintf(stderr, "abgate: --format must be md, json, text or html\n");
		return 2;
	}
	if (open_store(&store, state) < 0)
		return 3;
	if (ab_store_eval_get(&ev, store, id) < 0) {
		fprintf(stderr, "abgate: evaluation %d: %s\n", id, ab_error_last());
		rc = 2;
		goto cleanup;
	}
	if (ev->result_json == NULL) {
		fprintf(stderr, "abgate: evaluation %d has no result (%s%s%s)\n", id,
			ev->status == AB_STORE_RUNNING ? "still running" : "no verdict",
			ev->reason ? ": " : "", ev->reason ? ev->reason : "");
		goto cleanup;
	}
	if (ab_result_load(&doc, ev->result_json, strlen(ev->result_json)) < 0) {
		fprintf(stderr, "abgate: stored result %d: %s\n", id, ab_error_last());
		goto cleanup;
	}
	if (strcmp(format, "json") == 0) {
		out = json_dumps(doc, JSON_INDENT(2));
	} else if (strcmp(format, "md") == 0) {
		struct ab_markdown_options mo = { .samples = 0 };
		ab_markdown_render(&out, doc, &mo);
	} else if (strcmp(format, "html") == 0) {
		ab_html_render_run(&out, doc, NULL);
	} else {
		ab_terminal_render(&out, doc, isatty(STDOUT_FILENO));
	}
	if (out == NULL) {
		fprintf(stderr, "abgate: cannot render evaluation %d: %s\n", id, ab_error_last());
		goto cleanup;
	}
	if (output) {
		if (write_file(output, out) < 0)
			goto cleanup;
	} else {
		fputs(out, stdout);
		if (out[0] && out[strlen(out) - 1] != '\n')
			putchar('\n');
	}
	rc = 0;
cleanup:
	free(out);
	json_decref(doc);
	ab_store_eval_free(ev);
	ab_store_close(store);
	return rc;
}

static void calibrate_usage(FILE *f)
{
	fputs("usage: abgate calibrate --repo PATH|URL --ref REF [--suite FILE] [--runs N] [--state DIR]\n"
	      "                        [--json FILE] [--markdown FILE] [--seed N] [--pairs-min N] [--pairs-max N]\n"
	      "                        [--power P] [--resamples N] [--noise-level P] [--jobs N] [--quiet]\n"
	      "                        [--config FILE] [--no-sandbox]\n"
	      "Runs N (default 10) A/A evaluations of REF against itself and publishes the false-positive rate,\n"
	      "each series' noise and minimal detectable effect; the result is stored and cited by later\n"
	      "evaluations of the suite. The MDE is computed at the noise's --noise-level percent upper\n"
	      "confidence bound (default 90; 0: the A/A pairs as measured). --config and --no-sandbox confine\n"
	      "the evaluations as in `abgate eval`.\n", f);
}

int ab_cmd_calibrate(int argc, char **argv)
{
	static const struct option options[] = {
		{ "repo", required_argument, 0, 'r' }, { "ref", required_argument, 0, 'R' },
		{ "suite", required_argument, 0, 's' }, { "runs", required_argument, 0, 'n' },
		{ "state", required_argument, 0, 'S' }, { "json", required_argument, 0, 'j' },
		{ "markdown", required_argument, 0, 'm' }, { "seed", required_argument, 0, 'e' },
		{ "pairs-min", required_argument, 0, 'p' }, { "pairs-max", required_argument, 0, 'P' },
		{ "power", required_argument, 0, 'w' }, { "resamples", required_argument, 0, 'B' },
		{ "noise-level", required_argument, 0, 'L' }, { "jobs", required_argument, 0, 'J' },
		{ "quiet", no_argument, 0, 'q' },
		{ "config", required_argument, 0, 'C' }, { "no-sandbox", no_argument, 0, 'N' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
	};
	struct ab_calibrate_options o = { .runs = 10 };
	struct ab_sandbox_config sandbox;
	const char *config_path = NULL;
	int no_sandbox = 0;
	const char *json_path = NULL, *md_path = NULL;
	json_t *doc = NULL;
	char *md = NULL;
	int c, power_pct = 90, noise_pct = 90;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'r': o.repo = optarg; break;
		case 'R': o.ref = optarg; break;
		case 's': o.suite_path = optarg; break;
		case 'S': o.state_dir = optarg; break;
		case 'j': json_path = optarg; break;
		case 'm': md_path = optarg; break;
		case 'n': if (parse_int(&o.runs, optarg, "--runs", 2, 10000) < 0) return 2; break;
		case 'p': if (parse_int(&o.pairs_min, optarg, "--pairs-min", 2, 10000) < 0) return 2; break;
		case 'P': if (parse_int(&o.pairs_max, optarg, "--pairs-max", 2, 10000) < 0) return 2; break;
		case 'w': if (parse_int(&power_pct, optarg, "--power (percent)", 50, 99) < 0) return 2; break;
		case 'B': if (parse_int(&o.resamples, optarg, "--resamples", 10, 100000) < 0) return 2; break;
		case 'L': if (parse_int(&noise_pct, optarg, "--noise-level (percent)", 0, 99) < 0) return 2; break;
		case 'J': if (parse_int(&o.jobs, optarg, "--jobs", 1, 4096) < 0) return 2; break;
		case 'e': {
			char *end;
			errno = 0;
			o.seed = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg) {
				fprintf(stderr, "abgate: --seed must be an unsigned integer, got '%s'\n", optarg);
				return 2;
			}
			o.has_seed = 1;
			break;
		}
		case 'q': o.quiet = 1; break;
		case 'C': config_path = optarg; break;
		case 'N': no_sandbox = 1; break;
		case 'h': calibrate_usage(stdout); return 0;
		default: calibrate_usage(stderr); return 2;
		}
	}
	if (optind < argc || !o.repo || !o.ref) {
		fprintf(stderr, "abgate: calibrate needs --repo and --ref\n");
		calibrate_usage(stderr);
		return 2;
	}
	o.power = power_pct / 100.0;
	o.noise_level = noise_pct > 0 ? noise_pct / 100.0 : -1.0;
	struct ab_config *cfg = NULL;
	if (sandbox_from_cli(&sandbox, &cfg, config_path, no_sandbox) < 0)
		return 2;
	o.sandbox = &sandbox;
	int run_error = ab_calibrate_run(&doc, &o);
	ab_config_free(cfg);
	if (run_error < 0) {
		fprintf(stderr, "abgate: %s\n", ab_error_last());
		return 3;
	}
	int failed = 0;
	if (json_path) {
		char *text = json_dumps(doc, JSON_INDENT(2));
		failed |= text == NULL || write_file(json_path, text) < 0;
		free(text);
	}
	if (ab_calibration_markdown(&md, doc) < 0) {
		failed = 1;
	} else {
		if (md_path)
			failed |= write_file(md_path, md) < 0;
		if (!json_path || strcmp(json_path, "-") != 0)
			fputs(md, stdout);
	}
	free(md);
	json_decref(doc);
	return failed ? 3 : 0;
}
