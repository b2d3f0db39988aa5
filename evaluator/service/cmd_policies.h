/*
 * cmd_policies.h - `abgate policies --config FILE [--repo owner/repo] [--dry-run] [--log-level L]`:
 * one sweep of the PR lifecycle policies by hand (the same code `abgate serve` runs), printed as
 * a table of what it did, or with --dry-run would do (nothing is written to GitHub or the record).
 * Exit status: 0 done, 2 usage or configuration error, 3 when GitHub could not be reached.
 */
#ifndef AB_CMD_POLICIES_H
#define AB_CMD_POLICIES_H

/* argv[0] is "policies". Returns the process exit status. */
int ab_cmd_policies(int argc, char **argv);

#endif
