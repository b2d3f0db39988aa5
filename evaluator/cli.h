/*
 * cli.h - the `abgate` subcommands implemented in this library (main.c only dispatches):
 *
 *   abgate eval --repo PATH|URL --base REF --head REF [--suite FILE] [--state DIR] [--json FILE]
 *               [--markdown FILE] [--pairs-min N] [--pairs-max N] [--seed N] [--jobs N] [--quiet]
 *   abgate history [--state DIR] [--limit N]
 *   abgate report ID [--state DIR] [--format md|json|text]
 *
 * argv[0] is the subcommand's name; each returns the process exit status (eval: enum
 * ab_eval_status; history/report: 0 ok, 2 usage, 3 failure). They print to stdout/stderr.
 */
#ifndef AB_CLI_H
#define AB_CLI_H

int ab_cmd_eval(int argc, char **argv);
int ab_cmd_history(int argc, char **argv);
int ab_cmd_report(int argc, char **argv);

/* `abgate calibrate`: N A/A evaluations, FPR and MDE (calibrate.h). Exit status 0, 2 usage, 3 failure. */
int ab_cmd_calibrate(int argc, char **argv);

#endif
