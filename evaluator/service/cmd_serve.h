/*
 * cmd_serve.h - the two commands of the GitHub side of abgate, called by main.c:
 *
 *   abgate serve --config FILE [--log-level L] [--print-config] [--config-table]
 *   abgate eval --pr N [--config FILE] [--repo owner/repo|PATH|URL] [--base REF] [--suite FILE]
 *               [--state DIR] [--post | --dry-run] [--out-dir DIR] [--out FILE] [--json FILE]
 *               [--pairs-min N] [--pairs-max N] [--seed N] [--quiet]
 *
 * argv[0] is the subcommand's name ("serve", "eval"); options follow. Both return the process exit
 * status. These are front ends: they print (stdout/stderr); the work is in service.c / reporter.c.
 */
#ifndef AB_CMD_SERVE_H
#define AB_CMD_SERVE_H

#include "service.h"

/* `abgate serve`: runs until SIGINT/SIGTERM; 0 after a clean stop, 2 on a usage or config error,
 * 3 when the service cannot start. */
int ab_cmd_serve(int argc, char **argv);

/*
 * `abgate eval --pr N`: evaluates refs/pull/N/head of the configured repository against its base,
 * then posts the result like the service does (--post; with no credentials the posts are written
 * to --out-dir or github.output_dir) or shows what it would post (--dry-run, the default: the
 * comment on stdout or into --out FILE, and the files into --out-dir when given). Exit status as
 * `abgate eval` (0 pass, 1 REJECT, 2 usage, 3 infra, 4 canceled); 3 when posting failed.
 */
int ab_cmd_eval_pr(int argc, char **argv);

/* The same with another evaluation entry point (tests). */
int ab_cmd_serve_with(int argc, char **argv, ab_service_eval_fn eval);
int ab_cmd_eval_pr_with(int argc, char **argv, ab_service_eval_fn eval);

#endif
