/*
 * test_policy.c - guards/policy: added-line fingerprints (whitespace, comments, hunks only),
 * containment, "earlier" by when lines appeared (recorded heads beat PR-open time; commit dates
 * when abgate saw no arrival), and each rule's decision with its figures: stale and draft stale,
 * exempt labels, exhausted evaluations (infra not counted), the per-author cap with exemptions,
 * copycat block / warn / too small, denylist on a committer, harness skip, the comment table, and
 * which PR carries merge-first.
 */
#include <stdlib.h>

#include "check.h"
#include "policy.h"

#define DAY 86400
#define NOW ((int64_t)1700000000)

static struct ab_policy_rules defaults(void)
{
	static const char *const exempt[] = { "hold", "merge-first" };
	struct ab_policy_rules r = { .stale_days = 2, .draft_stale_days = 4, .max_unrewarded_evals = 2,
				     .max_open_prs_per_author = 5, .copycat_block = 0.85, .copycat_warn = 0.75,
				     .copycat_min_added_lines = 15, .exempt_labels = exempt, .n_exempt_labels = 2 };
	return r;
}

static struct ab_policy_pr pr_at(int number, const char *author, int64_t created)
{
	struct ab_policy_pr p = { .number = number, .author = author, .created_at = created, .head_sha = "abcdef1234567" };
	p.last_commit_at = created;
	return p;
}

/* Fingerprints of "line <from>" .. "line <to-1>" as added lines of one patch. */
static size_t lines_range(uint64_t **out, int from, int to)
{
	char *patch = malloc(64 * (size_t)(to - from + 2));
	int o = sprintf(patch, "@@ -0,0 +1,%d @@\n", to - from);
	size_t n = 0;
	for (int i = from; i < to; i++)
		o += sprintf(patch + o, "+  value_%d = compute(%d);\n", i, i);
	*out = NULL;
	CHECK(ab_policy_patch_lines(out, &n, patch) == 0);
	free(patch);
	return ab_policy_lines_finish(*out, n);
}

static void test_lines(void)
{
	uint64_t a, b;
	CHECK(ab_policy_line_hash(&a, "  x = y + 1;", 12) == 1);
	CHECK(ab_policy_line_hash(&b, "x=y+1;\t", 7) == 1);
	CHECK(a == b);                                   /* whitespace does not matter */
	CHECK(ab_policy_line_hash(&a, "   ", 3) == 0);   /* blank */
	CHECK(ab_policy_line_hash(&a, " // note", 8) == 0);
	CHECK(ab_policy_line_hash(&a, "/* c */", 7) == 0);
	CHECK(ab_policy_line_hash(&a, " * more", 7) == 0);
	CHECK(ab_policy_line_hash(&a, "# python comment", 16) == 0);
	CHECK(ab_policy_line_hash(&a, "#include <x.h>", 14) == 1);  /* a directive is code */
	/* Hunks only: a "+++" file header outside a hunk is not an added line; "++i" inside one is. */
	const char *patch = "+++ b/file.c\n@@ -1,2 +1,4 @@\n ctx\n-old\n+++i;\n+new();\n+// c\n ctx2\n";
	uint64_t *l = NULL;
	size_t n = 0;
	CHECK(ab_policy_patch_lines(&l, &n, patch) == 0);
	n = ab_policy_lines_finish(l, n);
	CHECK(n == 2);
	uint64_t want;
	ab_policy_line_hash(&want, "++i;", 4);
	CHECK(l[0] == want || l[1] == want);
	free(l);
	uint64_t *x, *y;
	size_t nx = lines_range(&x, 0, 20), ny = lines_range(&y, 2, 40);
	CHECK(nx == 20 && ny == 38);
	CHECK(ab_policy_intersect(x, nx, y, ny) == 18);
	CHECK_NEAR(ab_policy_containment(x, nx, y, ny), 0.9, 1e-12);
	free(x);
	free(y);
}

static int find(const struct ab_policy_action *a, size_t n, int pr, enum ab_policy_rule rule)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].pr == pr && a[i].rule == rule)
			return (int)i;
	return -1;
}

static void test_stale(void)
{
	struct ab_policy_rules r = defaults();
	struct ab_policy_pr prs[5];
	static const char *const hold[] = { "hold" };
	prs[0] = pr_at(1, "a", NOW - 3 * DAY);            /* idle 3 days: closed */
	prs[1] = pr_at(2, "b", NOW - 3 * DAY);
	prs[1].last_author_comment_at = NOW - DAY;        /* the author commented yesterday */
	prs[2] = pr_at(3, "c", NOW - 3 * DAY);
	prs[2].labels = hold, prs[2].n_labels = 1;        /* hold: untouched */
	prs[3] = pr_at(4, "d", NOW - 3 * DAY);
	prs[3].draft = 1;                                 /* a draft: 4 days */
	prs[4] = pr_at(5, "e", NOW - 10 * DAY);
	prs[4].draft = 1, prs[4].draft_since = NOW - 5 * DAY;
	struct ab_policy_action act[16];
	size_t n = 0;
	CHECK(ab_policy_decide(act, 16, &n, &r, prs, 5, NOW) == 0);
	CHECK(n == 2);
	int i = find(act, n, 1, AB_RULE_STALE);
	CHECK(i >= 0 && act[i].close && act[i].value > 2.99 && act[i].value < 3.01);
	CHECK(i >= 0 && strstr(act[i].figures, "3.0 days idle") != NULL);
	CHECK(find(act, n, 5, AB_RULE_STALE_DRAFT) >= 0);
	r.stale_days = 0;  /* off */
	r.draft_stale_days = 0;
	CHECK(ab_policy_decide(act, 16, &n, &r, prs, 5, NOW) == 0 && n == 0);
	/* The comment: marker, rule with its value, figures, how to proceed. */
	r = defaults();
	CHECK(ab_policy_decide(act, 16, &n, &r, prs, 1, NOW) == 0 && n == 1);
	char *c = NULL;
	CHECK(ab_policy_comment(&c, &act[0], &r) == 0);
	CHECK(strncmp(c, "<!-- abgate:policy rule=stale key=since-", 40) == 0);
	CHECK(strstr(c, "## Closed: no activity") && strstr(c, "`stale_days` = 2") && strstr(c, "3.0 days idle") &&
	      strstr(c, "Reopen"));
	free(c);
}

static void test_exhausted(void)
{
	struct ab_policy_rules r = defaults();
	struct ab_policy_eval ev[4] = { { "1111111", "eval:none", "https://x/runs/1" }, { "2222222", "eval:REJECT", NULL },
					{ "3333333", "eval:infra-error", NULL }, { "4444444", "eval:none", NULL } };
	struct ab_policy_pr p = pr_at(7, "a", NOW - DAY / 2);
	struct ab_policy_action act[4];
	size_t n = 0;
	p.evals = ev, p.n_evals = 3;  /* two counted, one infra */
	CHECK(ab_policy_decide(act, 4, &n, &r, &p, 1, NOW) == 0 && n == 0);
	p.n_evals = 4;                /* the third counted one */
	CHECK(ab_policy_decide(act, 4, &n, &r, &p, 1, NOW) == 0 && n == 1);
	CHECK(n == 1 && act[0].rule == AB_RULE_EXHAUSTED && act[0].value == 3 && !strcmp(act[0].key, "evals-3"));
	CHECK(n == 1 && strstr(act[0].figures, "(https://x/runs/1)") && strstr(act[0].figures, "1 infrastructure"));
	static const char *const hold[] = { "merge-first" };
	p.labels = hold, p.n_labels = 1;
	CHECK(ab_policy_decide(act, 4, &n, &r, &p, 1, NOW) == 0 && n == 0);
}

static void test_cap(void)
{
	struct ab_policy_rules r = defaults();
	struct ab_policy_pr p[12];
	for (int i = 0; i < 6; i++) {
		p[i] = pr_at(10 + i, "busy", NOW - 3600 * (10 - i));
		p[6 + i] = pr_at(20 + i, "member", NOW - 3600 * (10 - i));
		p[6 + i].author_exempt = 1;
	}
	struct ab_policy_action act[16];
	size_t n = 0;
	CHECK(ab_policy_decide(act, 16, &n, &r, p, 12, NOW) == 0);
	CHECK(n == 1 && act[0].pr == 15 && act[0].rule == AB_RULE_CAP && act[0].close);
	CHECK(n == 1 && strstr(act[0].figures, "6 open pull requests") != NULL);
	r.max_open_prs_per_author = 0;
	CHECK(ab_policy_decide(act, 16, &n, &r, p, 12, NOW) == 0 && n == 0);
}

static void test_copycat(void)
{
	struct ab_policy_rules r = defaults();
	static const char *const files[] = { "kernels/decode.cu" };
	uint64_t *orig, *copy, *small, *empty = NULL;
	size_t no = lines_range(&orig, 0, 40), nc, ns = lines_range(&small, 0, 10);
	/* The copy: 36 of the original's lines plus 4 of its own: 90% containment. */
	uint64_t *c1, *c2;
	size_t n1 = lines_range(&c1, 0, 36), n2 = lines_range(&c2, 100, 104);
	copy = malloc((n1 + n2) * sizeof(*copy));
	memcpy(copy, c1, n1 * sizeof(*copy));
	memcpy(copy + n1, c2, n2 * sizeof(*copy));
	nc = ab_policy_lines_finish(copy, n1 + n2);
	CHECK(nc == 40);

	struct ab_policy_pr p[2];
	p[0] = pr_at(1, "orig", NOW - 7200), p[1] = pr_at(2, "copier", NOW - 3600);
	for (int i = 0; i < 2; i++)
		p[i].files = files, p[i].n_files = 1;
	p[0].lines = orig, p[0].n_lines = no;
	p[1].lines = copy, p[1].n_lines = nc;
	struct ab_policy_action act[8];
	size_t n = 0;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0);
	CHECK(n == 1 && act[0].pr == 2 && act[0].rule == AB_RULE_COPYCAT && act[0].close && act[0].no_eval);
	CHECK(n == 1 && act[0].match_pr == 1 && act[0].value > 0.899 && act[0].value < 0.901);
	CHECK(n == 1 && strstr(act[0].figures, "90.0%") && strstr(act[0].figures, "#1"));

	/* The placeholder: #2 was opened first, empty, and the copied lines arrived later. abgate
	 * recorded both heads of #2 and the head of #1: #2 is the copy, whatever the open times say. */
	p[0].created_at = NOW - 3600, p[1].created_at = NOW - 7200;
	struct ab_policy_snapshot h1[1] = { { NOW - 3000, 2, "o1", orig, no } };
	struct ab_policy_snapshot h2[2] = { { NOW - 7100, 1, "p1", empty, 0 }, { NOW - 1000, 3, "p2", copy, nc } };
	p[0].heads = h1, p[0].n_heads = 1;
	p[1].heads = h2, p[1].n_heads = 2;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0);
	CHECK(n == 1 && act[0].pr == 2 && act[0].rule == AB_RULE_COPYCAT);
	CHECK(n == 1 && strstr(act[0].figures, "as abgate recorded it") != NULL);
	/* #2's second recorded head says when its lines arrived; #1's first head may be older: only
	 * #1's commits are worth fetching. With nothing recorded, both. */
	uint8_t want[2] = { 9, 9 };
	CHECK(ab_policy_wants_commits(want, &r, p, 2) == 1 && want[0] == 1 && want[1] == 0);
	p[0].n_heads = p[1].n_heads = 0;
	CHECK(ab_policy_wants_commits(want, &r, p, 2) == 2 && want[0] == 1 && want[1] == 1);
	p[0].n_heads = 1, p[1].n_heads = 2;
	/* Without any record, PR-open time decides, and the placeholder wins (the old mistake). */
	p[0].n_heads = p[1].n_heads = 0;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0);
	CHECK(n == 1 && act[0].pr == 1 && strstr(act[0].figures, "no record of the lines"));
	/* Commit dates answer when abgate recorded nothing: #2's copy commit is newer. */
	struct ab_policy_snapshot c_o[1] = { { NOW - 3000, 0, "oc1", orig, no } };
	struct ab_policy_snapshot c_p[2] = { { NOW - 7100, 0, "pc1", empty, 0 }, { NOW - 1000, 0, "pc2", copy, nc } };
	p[0].commits = c_o, p[0].n_commits = 1;
	p[1].commits = c_p, p[1].n_commits = 2;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0);
	CHECK(n == 1 && act[0].pr == 2 && strstr(act[0].figures, "by its date"));

	/* Warn band: 30 of 40 = 75%. */
	free(copy), free(c1), free(c2);
	lines_range(&c1, 0, 30);
	size_t n3 = lines_range(&c2, 200, 210);
	copy = malloc(40 * sizeof(*copy));
	memcpy(copy, c1, 30 * sizeof(*copy));
	memcpy(copy + 30, c2, n3 * sizeof(*copy));
	nc = ab_policy_lines_finish(copy, 40);
	p[0].created_at = NOW - 7200, p[1].created_at = NOW - 3600;
	p[0].n_commits = p[1].n_commits = 0;
	p[1].lines = copy, p[1].n_lines = nc;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0);
	CHECK(n == 1 && act[0].rule == AB_RULE_COPYCAT_WARN && !act[0].close && act[0].no_eval);
	/* A 10-line identical fix is not compared. */
	p[0].lines = small, p[0].n_lines = ns;
	p[1].lines = small, p[1].n_lines = ns;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0 && n == 0);
	/* The same author, or no shared file: not compared. */
	p[0].lines = orig, p[0].n_lines = no;
	p[1].lines = orig, p[1].n_lines = no;
	p[1].author = "orig";
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0 && n == 0);
	static const char *const other[] = { "README.md" };
	p[1].author = "copier", p[1].files = other;
	CHECK(ab_policy_decide(act, 8, &n, &r, p, 2, NOW) == 0 && n == 0);
	free(orig), free(copy), free(small), free(c1), free(c2);
}

static void test_denylist(void)
{
	struct ab_policy_rules r = defaults();
	static const char *const deny[] = { "Sybil" };
	static const char *const logins[] = { "front", "sybil" };
	r.denylist = deny, r.n_denylist = 1;
	struct ab_policy_pr p = pr_at(3, "front", NOW - 60);
	p.commit_logins = logins, p.n_commit_logins = 2;
	struct ab_policy_action act[4];
	size_t n = 0;
	CHECK(ab_policy_decide(act, 4, &n, &r, &p, 1, NOW) == 0);
	CHECK(n == 1 && act[0].rule == AB_RULE_DENYLIST && act[0].close && act[0].no_eval);
	CHECK(n == 1 && !strcmp(act[0].label, "flagged:gaming") && strstr(act[0].figures, "opened by another account"));
	char *c = NULL;
	CHECK(ab_policy_comment(&c, &act[0], &r) == 0 && strstr(c, "flagged: eval-gaming"));
	free(c);
}

static void test_harness(void)
{
	struct ab_policy_rules r = defaults();
	static const char *const paths[] = { "guards/", "ci/" };
	static const char *const files[] = { "src/a.c", "guards/default.json" };
	r.harness_paths = paths, r.n_harness_paths = 2;
	struct ab_policy_pr p = pr_at(4, "a", NOW - 60);
	p.files = files, p.n_files = 2;
	struct ab_policy_action act[4];
	size_t n = 0;
	CHECK(ab_policy_decide(act, 4, &n, &r, &p, 1, NOW) == 0 && n == 0);  /* "evaluate": nothing */
	r.harness_skip = 1;
	CHECK(ab_policy_decide(act, 4, &n, &r, &p, 1, NOW) == 0);
	CHECK(n == 1 && act[0].rule == AB_RULE_HARNESS && act[0].no_eval && !act[0].close);
	CHECK(n == 1 && strstr(act[0].figures, "guards/default.json") != NULL);
	char note[512];
	ab_policy_check_note(note, sizeof(note), &act[0]);
	CHECK(strstr(note, "Not evaluated (policy harness)") == note);
}

/* merge-first: the largest verified gain, one at a time, the holder keeps it on a tie. */
static void test_merge_first(void)
{
	struct ab_policy_gain g[4] = { { 1, 0.04, 0, 1 }, { 2, 0.07, 0, 1 }, { 3, 0.0, 0, 1 }, { 4, 0.09, 0, 0 } };
	int winner = -1, rm[4];
	size_t n = 9;
	/* #4 has the largest gain but is closed (not eligible); #3 has none. */
	CHECK(ab_policy_merge_first(&winner, rm, 4, &n, g, 4) == 0 && winner == 2 && n == 0);
	/* #2 holds it; #1 climbs to the same gain: no move. Strictly larger: it moves. */
	g[1].labelled = 1, g[0].gain = 0.07;
	CHECK(ab_policy_merge_first(&winner, rm, 4, &n, g, 4) == 0 && winner == 2 && n == 0);
	g[0].gain = 0.071;
	CHECK(ab_policy_merge_first(&winner, rm, 4, &n, g, 4) == 0 && winner == 1 && n == 1 && rm[0] == 2);
	/* The closed #4 still carries it from earlier: removed, whoever wins. */
	g[3].labelled = 1;
	CHECK(ab_policy_merge_first(&winner, rm, 4, &n, g, 4) == 0 && winner == 1 && n == 2 && rm[0] == 2 && rm[1] == 4);
	/* Two without a holder tie: the lower number. Nobody with a gain: nobody, every label goes. */
	g[1].labelled = g[3].labelled = 0, g[1].gain = 0.071;
	CHECK(ab_policy_merge_first(&winner, rm, 4, &n, g, 4) == 0 && winner == 1);
	for (int i = 0; i < 4; i++)
		g[i].gain = i == 2 ? -0.01 : 0, g[i].labelled = i == 2;
	CHECK(ab_policy_merge_first(&winner, rm, 4, &n, g, 4) == 0 && winner == 0 && n == 1 && rm[0] == 3);
	/* cap too small: counted, -1. */
	g[0].labelled = 1;
	CHECK(ab_policy_merge_first(&winner, rm, 1, &n, g, 4) == -1 && n == 2);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		{ "lines", test_lines },       { "stale", test_stale },       { "exhausted", test_exhausted },
		{ "cap", test_cap },           { "copycat", test_copycat },   { "denylist", test_denylist },
		{ "harness", test_harness },   { "merge_first", test_merge_first },
	};
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
