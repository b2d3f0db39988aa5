/*
 * policy.h - PR lifecycle policies as pure decisions: given the facts of a repository's open PRs
 * (authors, labels, dates, commit logins, changed files and added lines, the evaluations each
 * had), the rules and the time, say what to do (label, comment, close, do not evaluate) with the
 * rule and the figures that triggered it. Also the copycat arithmetic (added-line fingerprints,
 * containment, when lines first appeared) and the one table every policy comment is written from.
 * No I/O: evaluator/service/policies.c fetches the facts and applies the actions.
 */
#ifndef AB_POLICY_H
#define AB_POLICY_H

#include <stddef.h>
#include <stdint.h>

/* The rules (ci/abgate.sample.md: `policies`). A count or threshold of 0 turns its rule off. */
struct ab_policy_rules {
	int stale_days;                 /* non-draft: close after more than N days without author activity */
	int draft_stale_days;           /* drafts: more than N days since creation / last conversion to draft */
	int max_unrewarded_evals;       /* close once more than N evaluations ended eval:none or eval:REJECT */
	int max_open_prs_per_author;    /* keep an author's N oldest open PRs, close newer ones */
	double copycat_block;           /* containment >= block: copycat, closed, not evaluated */
	double copycat_warn;            /* containment >= warn: copycat-warn, not evaluated */
	int copycat_min_added_lines;    /* PRs with fewer added lines are not compared */
	const char *const *denylist;    /* logins, compared case-insensitively */
	size_t n_denylist;
	int harness_skip;               /* 1: PRs touching harness paths are not evaluated */
	const char *const *harness_paths;
	size_t n_harness_paths;
	const char *const *exempt_labels; /* a PR carrying one is never closed */
	size_t n_exempt_labels;
};

/* One state of a PR's added lines at a time: a head abgate recorded, or one commit. */
struct ab_policy_snapshot {
	int64_t at;                     /* Unix seconds (recorded: when abgate first saw the head; commit: committer date) */
	int64_t seq;                    /* tie-break among equal `at` (recording order); 0 for commits */
	const char *sha;
	const uint64_t *lines;          /* sorted unique line fingerprints (recorded: the whole head; commit: its own additions) */
	size_t n_lines;
};

/* One finished evaluation of the PR. */
struct ab_policy_eval {
	const char *head_sha;
	const char *label;              /* "eval:none", "eval:REJECT", "eval:infra-error", "eval:M", ... */
	const char *link;               /* where to see it (check run or commit URL); may be NULL */
};

/* What is known about one open PR. Every pointer is borrowed for the call. */
struct ab_policy_pr {
	int number;
	const char *author;
	int author_exempt;              /* repository owner, member, collaborator or a bot */
	int draft;
	int64_t created_at;
	int64_t draft_since;            /* last conversion to draft, else created_at */
	int64_t last_commit_at;         /* newest committer date, 0: unknown */
	int64_t last_author_comment_at; /* newest comment by the author, 0: none */
	int64_t head_seen_at;           /* when abgate first saw the current head, 0: unknown */
	const char *head_sha;
	const char *const *labels;
	size_t n_labels;
	const char *const *commit_logins; /* every commit's author and committer login */
	size_t n_commit_logins;
	const char *const *files;       /* changed paths (old paths of renames too) */
	size_t n_files;
	const uint64_t *lines;          /* added lines of the current head: sorted unique fingerprints */
	size_t n_lines;
	const struct ab_policy_snapshot *heads;   /* recorded by abgate, oldest first */
	size_t n_heads;
	const struct ab_policy_snapshot *commits; /* the PR's commits, oldest first */
	size_t n_commits;
	const struct ab_policy_eval *evals;       /* finished evaluations, oldest first */
	size_t n_evals;
};

enum ab_policy_rule {
	AB_RULE_DENYLIST = 0,
	AB_RULE_COPYCAT,
	AB_RULE_COPYCAT_WARN,
	AB_RULE_HARNESS,
	AB_RULE_CAP,
	AB_RULE_EXHAUSTED,
	AB_RULE_STALE,
	AB_RULE_STALE_DRAFT,
	AB_RULE_COUNT
};

#define AB_POLICY_FIGURES_MAX 1536

/* One decision about one PR. */
struct ab_policy_action {
	enum ab_policy_rule rule;
	int pr;
	int close;                      /* close the PR */
	int no_eval;                    /* do not evaluate its head */
	const char *label;              /* label to add (static), NULL: none */
	char key[128];                  /* idempotency key: the same rule and key never act twice */
	char figures[AB_POLICY_FIGURES_MAX]; /* what triggered it, in words (markdown) */
	/* The figures as numbers, for the record. */
	double value;                   /* days idle, evaluations counted, containment, open PRs */
	int match_pr;                   /* copycat: the earlier PR; cap: the author's open count */
};

/* The rule's name as in the config and the record ("stale", "copycat", ...). */
const char *ab_policy_rule_name(enum ab_policy_rule rule);

/*
 * Decides for every PR of `prs` (a repository's open PRs) at time `now`. Writes at most `cap`
 * actions into out and their number into *out_n. Per PR: denylist, then copycat (block, then
 * warn), then harness, then the cap, exhausted evaluations and staleness; a PR that a rule closes
 * gets no further action. A PR with an exempt label is never closed (its no-eval decisions
 * still stand). Returns 0, or -1 when `cap` was too small (the first `cap` are kept).
 */
int ab_policy_decide(struct ab_policy_action *out, size_t cap, size_t *out_n, const struct ab_policy_rules *rules,
		     const struct ab_policy_pr *prs, size_t n_prs, int64_t now);

/* ---- merge-first ---- */

/* One PR as the merge-first decision sees it. */
struct ab_policy_gain {
	int pr;
	double gain;        /* verified gain of its latest verdict (family-wise lower bound - 1); <= 0: none */
	int labelled;       /* carries `merge-first` now */
	int eligible;       /* open, not closed or refused by a policy in this sweep */
};

/*
 * Which PR should carry `merge-first` (one at a time): the eligible PR with the largest verified
 * gain. The current holder keeps it unless another's gain is strictly larger; among others a tie
 * goes to the lower number. *out_winner is 0 when no eligible PR has a gain. out_remove receives
 * (up to `cap`) the PRs that carry the label and must lose it (closed ones included); *out_n the
 * count (may exceed cap). Returns 0, or -1 when cap was too small.
 */
int ab_policy_merge_first(int *out_winner, int *out_remove, size_t cap, size_t *out_n,
			  const struct ab_policy_gain *prs, size_t n);

/* ---- added lines ---- */

/*
 * Normalises one added line: every whitespace character dropped; 0 when the result is empty or
 * the line is comment-only (starts with //, slash-star, *, or # unless a C preprocessor directive), else 1 with the
 * fingerprint in *out.
 */
int ab_policy_line_hash(uint64_t *out, const char *line, size_t len);

/*
 * The added lines of a unified-diff patch (GitHub's per-file `patch`: hunks only; file headers
 * outside hunks are never read) appended to *io (count in *io_n; malloc'd, grown as needed, caller frees).
 * Call ab_policy_lines_finish after the last patch. Returns 0 or -1 (out of memory).
 */
int ab_policy_patch_lines(uint64_t **io, size_t *io_n, const char *patch);

/* Sorts and de-duplicates a fingerprint array in place; returns the new count. */
size_t ab_policy_lines_finish(uint64_t *lines, size_t n);

/* |a ∩ b| of two sorted unique arrays. */
size_t ab_policy_intersect(const uint64_t *a, size_t na, const uint64_t *b, size_t nb);

/* |later ∩ earlier| / |later| (0 when later is empty). */
double ab_policy_containment(const uint64_t *later, size_t n_later, const uint64_t *earlier, size_t n_earlier);

/*
 * When `pr` first held at least half of `shared` (sorted unique): from the heads abgate recorded
 * (the first head that held them; when that is the first head abgate ever saw of the PR, the
 * lines may be older, so the commits are asked too and the earlier answer kept), else from the
 * commits (the first commit, oldest first, after which the additions so far held them). *out_at
 * and *out_seq order the answer; `how` (may be NULL) says which evidence decided. 0, or
 * AB_ENOTFOUND-like -1 when neither tells (the PR-open time is then used by the caller).
 */
int ab_policy_appeared(int64_t *out_at, int64_t *out_seq, char *how, size_t how_size, const struct ab_policy_pr *pr,
		       const uint64_t *shared, size_t n_shared);

/*
 * Which PRs' commits (ab_policy_pr.commits, fetched only on demand) could change a copycat
 * decision: a side of a pair the rule compares (containment >= warn) whose recorded heads cannot
 * tell alone when the shared lines appeared (no recorded head holds them, or the first head
 * abgate saw already did: they may be older). Sets out_want[i] (n entries) for those; returns
 * how many.
 */
size_t ab_policy_wants_commits(uint8_t *out_want, const struct ab_policy_rules *rules, const struct ab_policy_pr *prs,
			       size_t n);

/* ---- comments ---- */

/*
 * The comment for an action, from the one table of texts: a hidden marker
 * "&lt;!-- abgate:policy rule=NAME key=KEY --&gt;" (an HTML comment), a title, the rule with its configured value, the
 * figures, and how to proceed. Caller frees *out.
 */
int ab_policy_comment(char **out, const struct ab_policy_action *a, const struct ab_policy_rules *rules);

/* The marker line an action's comment starts with, into buf. */
void ab_policy_marker(char *buf, size_t size, const struct ab_policy_action *a);

/* One line for the check run of a head not evaluated (copycat-warn, harness skip). */
void ab_policy_check_note(char *buf, size_t size, const struct ab_policy_action *a);

#endif
