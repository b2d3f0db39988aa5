/*
 * main.c - the `abgate` executable: dispatches a subcommand to the abeval library. Nothing else
 * lives here, so tests drive the same code through the library.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_policies.h"
#include "cmd_serve.h"

static void usage(FILE *f)
{
	fputs("abgate - A/B evaluation and regression gate for pull requests\n\n"
	      "usage: abgate <command> [options]\n\n"
	      "  eval --repo PATH|URL --base REF --head REF   evaluate head against base, print the verdict\n"
	      "  eval --pr N [--config FILE] [--post|--dry-run] evaluate a pull request of a configured repo\n"
	      "  history [--limit N]                           past evaluations from the store\n"
	      "  report ID [--format md|json|text|html]        re-render a stored evaluation\n"
	      "  calibrate --repo R --ref REF [--runs N]       A/A runs: false-positive rate and MDE per series\n"
	      "  serve --config FILE                           run the webhook service and its workers\n"
	      "  policies --config FILE [--repo R] [--dry-run] run the PR lifecycle policies once, print a table\n"
	      "  version                                       print the version\n\n"
	      "Run `abgate <command> --help` for a command's options.\n", f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "eval") == 0)
		return ab_cmd_eval(argc - 1, argv + 1);
	if (strcmp(cmd, "history") == 0)
		return ab_cmd_history(argc - 1, argv + 1);
	if (strcmp(cmd, "report") == 0)
		return ab_cmd_report(argc - 1, argv + 1);
	if (strcmp(cmd, "calibrate") == 0)
		return ab_cmd_calibrate(argc - 1, argv + 1);
	if (strcmp(cmd, "serve") == 0)
		return ab_cmd_serve(argc - 1, argv + 1);
	if (strcmp(cmd, "policies") == 0)
		return ab_cmd_policies(argc - 1, argv + 1);
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		puts("abgate 0.1.0");
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "abgate: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return 2;
}
