/*
 * policy_actions.h - applies one decision of guards/policy.h to GitHub as idempotent steps
 * (label, comment with a hidden marker, close), each recorded in the `actions` table of
 * <state>/policies.db (created by policies.c), so a restart or a redelivery never comments twice
 * and the same rule and key never act twice.
 */
#ifndef AB_POLICY_ACTIONS_H
#define AB_POLICY_ACTIONS_H

#include <stddef.h>
#include <sqlite3.h>

#include "github.h"
#include "policy.h"

/*
 * Applies the missing steps of action `a` on repo's PR a->pr at head `head` (may be NULL); `did`
 * receives what was done ("labelled copycat, commented, closed", "already done", "failed: ...").
 * `db` and `gh` are borrowed; the caller serialises calls on one db. Returns 0 or the first error
 * (the steps done so far stay recorded).
 */
int ab_policy_actions_apply(sqlite3 *db, ab_gh *gh, const char *repo, const struct ab_policy_action *a,
			    const struct ab_policy_rules *rules, const char *head, char *did, size_t did_size);

#endif
