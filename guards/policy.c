/*
 * policy.c - the PR lifecycle decisions (see policy.h): one pass over a repository's open PRs
 * that applies the refusing rules first (denylist, copycat, harness), then the queue-keeping ones
 * (per-author cap, exhausted evaluations, staleness), plus the added-line fingerprints, the
 * containment arithmetic and the table every policy comment is written from.
 */
#define _GNU_SOURCE
#include "policy.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "verdict.h"

#define DAY 86400

/* ---- the one table of texts ---- */

struct rule_text {
	const char *name;       /* config / record name */
	const char *label;      /* label added, NULL: none */
	const char *title;      /* "## <title>" after "Closed: " or "Not evaluated: " */
	const char *rule;       /* the rule, one %s: its configured value */
	const char *proceed;    /* how to go on */
};

static const struct rule_text texts[AB_RULE_COUNT] = {
	[AB_RULE_DENYLIST] = { "denylist", "flagged:gaming", "🚩 flagged: eval-gaming",
		"`denylist_file` (%s): a pull request opened by a listed account, or carrying a commit authored or "
		"committed by one, is labelled `flagged:gaming`, closed and never evaluated.",
		"If this is a mistake, ask a maintainer to review the entry; they can remove it from the list and "
		"reopen this pull request." },
	[AB_RULE_COPYCAT] = { "copycat", "copycat", "copy of an earlier open pull request",
		"`copycat.block` = %s: when that share or more of a pull request's added lines (whitespace, blank "
		"and comment-only lines ignored) is already in an earlier, still-open, non-draft pull request of "
		"another author that touches a shared file, it is labelled `copycat`, closed and not evaluated. "
		"\"Earlier\" is when the lines first appeared (the first head abgate recorded holding them, or the "
		"commit dates), not when the pull request was opened.",
		"If the code is yours and the other pull request copied it, or the overlap is convergent, ask a "
		"maintainer: they can label this pull request `hold` and reopen it." },
	[AB_RULE_COPYCAT_WARN] = { "copycat-warn", "copycat-warn", "large overlap with an earlier open pull request",
		"`copycat.warn` = %s: when that share or more of the added lines is already in an earlier open "
		"pull request of another author, it is labelled `copycat-warn` and not evaluated.",
		"Push a version that is your own work, or ask a maintainer to review the overlap." },
	[AB_RULE_HARNESS] = { "harness", NULL, "changes the evaluation harness",
		"`harness_changes` = %s: pull requests that change the harness paths are not evaluated.",
		"Propose harness changes in an issue, or move them into a separate pull request for a maintainer." },
	[AB_RULE_CAP] = { "max-open-prs", NULL, "too many open pull requests",
		"`max_open_prs_per_author` = %s: an author's oldest open pull requests up to that number are kept, "
		"newer ones are closed to keep the review queue manageable.",
		"Reopen this pull request once one of your older ones is merged or closed." },
	[AB_RULE_EXHAUSTED] = { "exhausted-evals", NULL, "evaluations with no verified speedup",
		"`max_unrewarded_evals` = %s: a pull request is closed once more evaluations than that ended "
		"`eval:none` or `eval:REJECT` (infrastructure errors never count).",
		"Rework the change, push, and reopen; or ask a maintainer for `hold` if the measurements are wrong." },
	[AB_RULE_STALE] = { "stale", NULL, "no activity",
		"`stale_days` = %s: an open, non-draft pull request with no commit and no comment by its author "
		"for more than that many days is closed.",
		"Reopen it and push or comment to continue; ask a maintainer for `hold` to keep it open while waiting." },
	[AB_RULE_STALE_DRAFT] = { "stale-draft", NULL, "draft left too long",
		"`draft_stale_days` = %s: a draft open for more than that many days since it was created or last "
		"converted to draft is closed.",
		"Reopen it when it is ready for review, or ask a maintainer for `hold`." },
};

const char *ab_policy_rule_name(enum ab_policy_rule rule)
{
	return rule < AB_RULE_COUNT ? texts[rule].name : "?";
}

static void rule_value(char *buf, size_t size, enum ab_policy_rule rule, const struct ab_policy_rules *r)
{
	switch (rule) {
	case AB_RULE_DENYLIST: snprintf(buf, size, "%zu account(s)", r->n_denylist); break;
	case AB_RULE_COPYCAT: snprintf(buf, size, "%.0f%%", r->copycat_block * 100); break;
	case AB_RULE_COPYCAT_WARN: snprintf(buf, size, "%.0f%%", r->copycat_warn * 100); break;
	case AB_RULE_HARNESS: snprintf(buf, size, "\"%s\"", r->harness_skip ? "skip" : "evaluate"); break;
	case AB_RULE_CAP: snprintf(buf, size, "%d", r->max_open_prs_per_author); break;
	case AB_RULE_EXHAUSTED: snprintf(buf, size, "%d", r->max_unrewarded_evals); break;
	case AB_RULE_STALE: snprintf(buf, size, "%d", r->stale_days); break;
	case AB_RULE_STALE_DRAFT: snprintf(buf, size, "%d", r->draft_stale_days); break;
	default: snprintf(buf, size, "?");
	}
}

void ab_policy_marker(char *buf, size_t size, const struct ab_policy_action *a)
{
	snprintf(buf, size, "<!-- abgate:policy rule=%s key=%s -->", ab_policy_rule_name(a->rule), a->key);
}

int ab_policy_comment(char **out, const struct ab_policy_action *a, const struct ab_policy_rules *r)
{
	const struct rule_text *t = &texts[a->rule < AB_RULE_COUNT ? a->rule : 0];
	char marker[256], value[64], rule[1024];
	size_t size = 4096 + AB_POLICY_FIGURES_MAX;
	char *s = malloc(size);

	if (!s)
		return -1;
	ab_policy_marker(marker, sizeof(marker), a);
	rule_value(value, sizeof(value), a->rule, r);
	/* The rule text holds one %s for the value; spliced by hand so the table stays plain data. */
	const char *at = strstr(t->rule, "%s");
	snprintf(rule, sizeof(rule), "%.*s%s%s", at ? (int)(at - t->rule) : (int)strlen(t->rule), t->rule, at ? value : "",
		 at ? at + 2 : "");
	snprintf(s, size, "%s\n## %s: %s\n\n**Rule.** %s\n\n**Figures.** %s\n\n**How to proceed.** %s%s\n", marker,
		 a->close ? "Closed" : "Not evaluated", t->title, rule, a->figures, t->proceed,
		 a->close || !a->no_eval ? "" : " Until then this head is not evaluated.");
	*out = s;
	return 0;
}

void ab_policy_check_note(char *buf, size_t size, const struct ab_policy_action *a)
{
	snprintf(buf, size, "Not evaluated (policy %s): %s", ab_policy_rule_name(a->rule), a->figures);
}

/* ---- added lines ---- */

static int is_directive(const char *s, size_t n)
{
	static const char *const words[] = { "include", "define", "undef", "if", "ifdef", "ifndef", "elif", "else",
					     "endif", "pragma", "error", "warning", "line" };
	size_t w = 0;
	while (w < n && isalpha((unsigned char)s[w]))
		w++;
	for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
		if (w == strlen(words[i]) && !strncmp(s, words[i], w))
			return 1;
	return 0;
}

int ab_policy_line_hash(uint64_t *out, const char *line, size_t len)
{
	uint64_t h = 1469598103934665603ULL;
	char first[16];
	size_t nf = 0, n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];
		if (isspace(c))
			continue;
		if (nf < sizeof(first))
			first[nf++] = (char)c;
		h = (h ^ c) * 1099511628211ULL;
		n++;
	}
	if (n == 0)
		return 0;
	if (first[0] == '*' || (nf >= 2 && first[0] == '/' && (first[1] == '/' || first[1] == '*')))
		return 0;
	if (first[0] == '#' && !is_directive(first + 1, nf - 1))
		return 0;
	*out = h;
	return 1;
}

static int push(uint64_t **io, size_t *io_n, size_t *cap, uint64_t v)
{
	if (*io_n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		uint64_t *p = realloc(*io, nc * sizeof(*p));
		if (!p)
			return -1;
		*io = p;
		*cap = nc;
	}
	(*io)[(*io_n)++] = v;
	return 0;
}

int ab_policy_patch_lines(uint64_t **io, size_t *io_n, const char *patch)
{
	size_t cap = *io_n;  /* unknown: grow from the count on the first push */
	long old_left = 0, new_left = 0;

	if (!patch)
		return 0;
	if (*io_n) {
		/* realloc to a known capacity first */
		uint64_t *p = realloc(*io, (*io_n) * sizeof(*p));
		if (!p)
			return -1;
		*io = p;
	}
	for (const char *p = patch; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len && p[len - 1] == '\r')
			len--;
		if (old_left <= 0 && new_left <= 0) {
			long os = 0, oc = 1, ns = 0, nc = 1;
			/* "@@ -a[,b] +c[,d] @@": b and d default to 1. */
			if (len > 4 && !strncmp(p, "@@ -", 4)) {
				const char *q = p + 4;
				char *e;
				os = strtol(q, &e, 10);
				if (*e == ',')
					oc = strtol(e + 1, &e, 10);
				if (*e == ' ' && e[1] == '+') {
					ns = strtol(e + 2, &e, 10);
					if (*e == ',')
						nc = strtol(e + 1, &e, 10);
					(void)os;
					(void)ns;
					old_left = oc;
					new_left = nc;
				}
			}
		} else if (len && p[0] == '+') {
			uint64_t h;
			new_left--;
			if (ab_policy_line_hash(&h, p + 1, len - 1) && push(io, io_n, &cap, h) < 0)
				return -1;
		} else if (len && p[0] == '-') {
			old_left--;
		} else if (len && p[0] == '\\') {
			/* "\ No newline at end of file" */
		} else {
			old_left--;
			new_left--;
		}
		p = eol ? eol + 1 : p + len;
		if (!eol)
			break;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

size_t ab_policy_lines_finish(uint64_t *lines, size_t n)
{
	size_t o = 0;
	if (!n)
		return 0;
	qsort(lines, n, sizeof(*lines), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (!o || lines[o - 1] != lines[i])
			lines[o++] = lines[i];
	return o;
}

size_t ab_policy_intersect(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	size_t i = 0, j = 0, n = 0;
	while (i < na && j < nb) {
		if (a[i] < b[j])
			i++;
		else if (a[i] > b[j])
			j++;
		else
			n++, i++, j++;
	}
	return n;
}

double ab_policy_containment(const uint64_t *later, size_t n_later, const uint64_t *earlier, size_t n_earlier)
{
	return n_later ? (double)ab_policy_intersect(later, n_later, earlier, n_earlier) / (double)n_later : 0.0;
}

static int holds(const uint64_t *lines, size_t n, const uint64_t *shared, size_t n_shared)
{
	return 2 * ab_policy_intersect(shared, n_shared, lines, n) >= n_shared;
}

static void fmt_time(char *buf, size_t size, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M UTC", &tm);
}

/* The commits' answer: the first commit after which the additions so far hold half of `shared`. */
static int appeared_commits(int64_t *out_at, const char **out_sha, const struct ab_policy_pr *pr, const uint64_t *shared,
			    size_t n_shared)
{
	uint8_t *seen = calloc(n_shared ? n_shared : 1, 1);
	size_t covered = 0;
	int found = -1;

	if (!seen)
		return -1;
	for (size_t c = 0; c < pr->n_commits && found < 0; c++) {
		const struct ab_policy_snapshot *s = &pr->commits[c];
		size_t i = 0, j = 0;
		while (i < n_shared && j < s->n_lines) {
			if (shared[i] < s->lines[j])
				i++;
			else if (shared[i] > s->lines[j])
				j++;
			else {
				if (!seen[i])
					seen[i] = 1, covered++;
				i++, j++;
			}
		}
		if (2 * covered >= n_shared && covered > 0) {
			*out_at = s->at;
			*out_sha = s->sha;
			found = 0;
		}
	}
	free(seen);
	return found;
}

int ab_policy_appeared(int64_t *out_at, int64_t *out_seq, char *how, size_t how_size, const struct ab_policy_pr *pr,
		       const uint64_t *shared, size_t n_shared)
{
	char when[40];
	int64_t cat = 0;
	const char *csha = NULL;
	int have_commits = appeared_commits(&cat, &csha, pr, shared, n_shared) == 0;

	for (size_t h = 0; h < pr->n_heads; h++) {
		const struct ab_policy_snapshot *s = &pr->heads[h];
		if (!holds(s->lines, s->n_lines, shared, n_shared))
			continue;
		if (h == 0 && have_commits && cat < s->at) {
			/* abgate first saw the PR already holding them: they may be older. */
			break;
		}
		*out_at = s->at;
		*out_seq = s->seq;
		fmt_time(when, sizeof(when), s->at);
		if (how)
			snprintf(how, how_size, "%s (head %.7s, as abgate recorded it)", when, s->sha ? s->sha : "?");
		return 0;
	}
	if (have_commits) {
		*out_at = cat;
		*out_seq = 0;
		fmt_time(when, sizeof(when), cat);
		if (how)
			snprintf(how, how_size, "%s (commit %.7s, by its date)", when, csha ? csha : "?");
		return 0;
	}
	return -1;
}

/* ---- merge-first ---- */

int ab_policy_merge_first(int *out_winner, int *out_remove, size_t cap, size_t *out_n,
			  const struct ab_policy_gain *prs, size_t n)
{
	const struct ab_policy_gain *best = NULL, *holder = NULL;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ab_policy_gain *g = &prs[i];
		if (!g->eligible || !(g->gain > 0))
			continue;
		if (g->labelled && (!holder || g->gain > holder->gain))
			holder = g;
		if (!best || g->gain > best->gain || (g->gain == best->gain && g->pr < best->pr))
			best = g;
	}
	/* The holder keeps the label on a tie: it moves only for a strictly larger gain. */
	if (holder && !(best->gain > holder->gain))
		best = holder;
	*out_winner = best ? best->pr : 0;
	for (size_t i = 0; i < n; i++) {
		if (!prs[i].labelled || prs[i].pr == *out_winner)
			continue;
		if (k < cap)
			out_remove[k] = prs[i].pr;
		k++;
	}
	*out_n = k;
	return k > cap ? -1 : 0;
}

/* ---- decisions ---- */

static int has_label(const struct ab_policy_pr *pr, const struct ab_policy_rules *r)
{
	for (size_t i = 0; i < pr->n_labels; i++)
		for (size_t k = 0; k < r->n_exempt_labels; k++)
			if (!strcasecmp(pr->labels[i], r->exempt_labels[k]))
				return 1;
	return 0;
}

static const char *denylisted(const struct ab_policy_pr *pr, const struct ab_policy_rules *r, int *is_opener)
{
	for (size_t k = 0; k < r->n_denylist; k++) {
		if (pr->author && !strcasecmp(pr->author, r->denylist[k])) {
			*is_opener = 1;
			return r->denylist[k];
		}
		for (size_t i = 0; i < pr->n_commit_logins; i++)
			if (pr->commit_logins[i] && !strcasecmp(pr->commit_logins[i], r->denylist[k])) {
				*is_opener = 0;
				return r->denylist[k];
			}
	}
	return NULL;
}

static int share_file(const struct ab_policy_pr *a, const struct ab_policy_pr *b)
{
	for (size_t i = 0; i < a->n_files; i++)
		for (size_t j = 0; j < b->n_files; j++)
			if (!strcmp(a->files[i], b->files[j]))
				return 1;
	return 0;
}

/* Whether `a` (lines `shared`) came after `b`; `how_*` say why. */
static int later_than(const struct ab_policy_pr *a, const struct ab_policy_pr *b, const uint64_t *shared, size_t n,
		      char *how_a, char *how_b, size_t how_size)
{
	int64_t ta, sa, tb, sb;
	int ka = ab_policy_appeared(&ta, &sa, how_a, how_size, a, shared, n) == 0;
	int kb = ab_policy_appeared(&tb, &sb, how_b, how_size, b, shared, n) == 0;
	if (!ka || !kb) {
		char when[40];
		/* Nothing tells when the lines appeared: the order the PRs were opened in. */
		ta = a->created_at, sa = a->number, tb = b->created_at, sb = b->number;
		fmt_time(when, sizeof(when), a->created_at);
		snprintf(how_a, how_size, "%s (opened; no record of the lines)", when);
		fmt_time(when, sizeof(when), b->created_at);
		snprintf(how_b, how_size, "%s (opened; no record of the lines)", when);
	}
	if (ta != tb)
		return ta > tb;
	if (sa != sb)
		return sa > sb;
	return a->number > b->number;
}

/* Whether the copycat rule compares `pr` against `o` at all: big enough, another author's open
 * non-draft PR sharing a file. */
static int comparable(const struct ab_policy_rules *r, const struct ab_policy_pr *pr, const struct ab_policy_pr *o)
{
	if (r->copycat_warn <= 0 || pr->n_lines == 0 || (int)pr->n_lines < r->copycat_min_added_lines)
		return 0;
	if (pr == o || o->draft || !o->n_lines || !share_file(pr, o))
		return 0;
	return !(pr->author && o->author && !strcasecmp(pr->author, o->author));
}

/* pr's lines that o also has, malloc'd (caller frees); *out_n their number. NULL: out of memory. */
static uint64_t *shared_lines(const struct ab_policy_pr *pr, const struct ab_policy_pr *o, size_t *out_n)
{
	uint64_t *shared = malloc((pr->n_lines ? pr->n_lines : 1) * sizeof(*shared));
	size_t k = 0, x = 0, y = 0;
	if (!shared)
		return NULL;
	while (x < pr->n_lines && y < o->n_lines) {
		if (pr->lines[x] < o->lines[y])
			x++;
		else if (pr->lines[x] > o->lines[y])
			y++;
		else
			shared[k++] = pr->lines[x], x++, y++;
	}
	*out_n = k;
	return shared;
}

/* Whether pr's recorded heads alone say when `shared` appeared: a head other than the first abgate saw holds them. */
static int heads_decide(const struct ab_policy_pr *pr, const uint64_t *shared, size_t n_shared)
{
	for (size_t h = 0; h < pr->n_heads; h++)
		if (holds(pr->heads[h].lines, pr->heads[h].n_lines, shared, n_shared))
			return h > 0;
	return 0;
}

size_t ab_policy_wants_commits(uint8_t *out_want, const struct ab_policy_rules *r, const struct ab_policy_pr *prs,
			       size_t n)
{
	size_t count = 0;

	memset(out_want, 0, n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			const struct ab_policy_pr *pr = &prs[i], *o = &prs[j];
			size_t ns = 0;
			if (!comparable(r, pr, o) ||
			    (double)ab_policy_intersect(pr->lines, pr->n_lines, o->lines, o->n_lines) / (double)pr->n_lines <
				    r->copycat_warn)
				continue;
			uint64_t *shared = shared_lines(pr, o, &ns);
			if (!shared)
				continue;
			for (int side = 0; side < 2; side++) {
				size_t k = side ? j : i;
				if (!out_want[k] && !heads_decide(&prs[k], shared, ns))
					out_want[k] = 1, count++;
			}
			free(shared);
		}
	return count;
}

struct decide {
	struct ab_policy_action *out;
	size_t cap, n;
	int overflow;
};

static struct ab_policy_action *add(struct decide *d, enum ab_policy_rule rule, const struct ab_policy_pr *pr)
{
	if (d->n >= d->cap) {
		d->overflow = 1;
		return NULL;
	}
	struct ab_policy_action *a = &d->out[d->n++];
	memset(a, 0, sizeof(*a));
	a->rule = rule;
	a->pr = pr->number;
	a->label = texts[rule].label;
	snprintf(a->key, sizeof(a->key), "head-%.40s", pr->head_sha ? pr->head_sha : "none");
	return a;
}

static int refusals(struct decide *d, const struct ab_policy_rules *r, const struct ab_policy_pr *prs, size_t n, size_t i,
		    int exempt)
{
	const struct ab_policy_pr *pr = &prs[i];
	struct ab_policy_action *a;
	int opener = 0;
	const char *login = denylisted(pr, r, &opener);

	if (login) {
		if (!(a = add(d, AB_RULE_DENYLIST, pr)))
			return 0;
		a->close = !exempt;
		a->no_eval = 1;
		snprintf(a->key, sizeof(a->key), "login-%.80s-head-%.12s", login, pr->head_sha ? pr->head_sha : "none");
		snprintf(a->figures, sizeof(a->figures), "`%s` is on the denylist and is %s%s.", login,
			 opener ? "the account that opened this pull request" : "an author or committer of a commit here",
			 !opener && pr->author ? " (opened by another account)" : "");
		return a->close;
	}
	if (r->copycat_warn > 0 && pr->n_lines > 0 && (int)pr->n_lines >= r->copycat_min_added_lines) {
		double best = 0;
		size_t best_j = 0, best_shared = 0;
		char how_a[160], how_b[160], best_a[160] = "", best_b[160] = "";
		for (size_t j = 0; j < n; j++) {
			const struct ab_policy_pr *o = &prs[j];
			size_t ns, k = 0;
			if (!comparable(r, pr, o))
				continue;
			ns = ab_policy_intersect(pr->lines, pr->n_lines, o->lines, o->n_lines);
			double c = (double)ns / (double)pr->n_lines;
			if (c < r->copycat_warn || c <= best)
				continue;
			uint64_t *shared = shared_lines(pr, o, &k);
			if (!shared)
				continue;
			int later = later_than(pr, o, shared, k, how_a, how_b, sizeof(how_a));
			free(shared);
			if (!later)
				continue;
			best = c, best_j = j, best_shared = ns;
			memcpy(best_a, how_a, sizeof(best_a));
			memcpy(best_b, how_b, sizeof(best_b));
		}
		if (best > 0) {
			int block = r->copycat_block > 0 && best >= r->copycat_block;
			if (!(a = add(d, block ? AB_RULE_COPYCAT : AB_RULE_COPYCAT_WARN, pr)))
				return 0;
			a->close = block && !exempt;
			a->no_eval = 1;
			a->value = best;
			a->match_pr = prs[best_j].number;
			snprintf(a->figures, sizeof(a->figures),
				 "%.1f%% of this pull request's %zu added lines (%zu) are in #%d by @%s. Those lines first "
				 "appeared in #%d at %s, and here at %s.",
				 best * 100, pr->n_lines, best_shared, prs[best_j].number,
				 prs[best_j].author ? prs[best_j].author : "?", prs[best_j].number, best_b, best_a);
			if (a->close)
				return 1;
		}
	}
	if (r->harness_skip && r->n_harness_paths) {
		const char *touched[8];
		size_t nt = ab_verdict_harness_match(touched, 8, pr->files, pr->n_files, r->harness_paths,
						     r->n_harness_paths);
		if (nt && (a = add(d, AB_RULE_HARNESS, pr))) {
			a->no_eval = 1;
			a->value = (double)nt;
			int o = snprintf(a->figures, sizeof(a->figures), "%zu changed file(s) under the harness paths:", nt);
			for (size_t k = 0; k < nt && k < 8 && o > 0 && (size_t)o < sizeof(a->figures); k++)
				o += snprintf(a->figures + o, sizeof(a->figures) - (size_t)o, "%s `%s`", k ? "," : "",
					      touched[k]);
		}
	}
	return 0;
}

static int by_age(const struct ab_policy_pr *a, const struct ab_policy_pr *b)
{
	if (a->created_at != b->created_at)
		return a->created_at < b->created_at ? -1 : 1;
	return a->number < b->number ? -1 : a->number > b->number;
}

int ab_policy_decide(struct ab_policy_action *out, size_t cap, size_t *out_n, const struct ab_policy_rules *r,
		     const struct ab_policy_pr *prs, size_t n, int64_t now)
{
	struct decide d = { out, cap, 0, 0 };
	uint8_t *closed = calloc(n ? n : 1, 1);

	if (!closed)
		return -1;
	for (size_t i = 0; i < n; i++)
		closed[i] = (uint8_t)refusals(&d, r, prs, n, i, has_label(&prs[i], r));
	for (size_t i = 0; i < n; i++) {
		const struct ab_policy_pr *pr = &prs[i];
		struct ab_policy_action *a;
		if (closed[i] || has_label(pr, r))
			continue;
		if (r->max_open_prs_per_author > 0 && !pr->author_exempt && pr->author) {
			size_t older = 0, total = 0;
			char list[512] = "";
			int o = 0;
			for (size_t j = 0; j < n; j++) {
				if (closed[j] || !prs[j].author || strcasecmp(prs[j].author, pr->author))
					continue;
				total++;
				if (j != i && by_age(&prs[j], pr) < 0)
					older++;
				if (o >= 0 && (size_t)o < sizeof(list) - 16)
					o += snprintf(list + o, sizeof(list) - (size_t)o, "%s#%d", total > 1 ? ", " : "",
						      prs[j].number);
			}
			if ((int)older >= r->max_open_prs_per_author && (a = add(&d, AB_RULE_CAP, pr))) {
				a->close = 1;
				a->value = (double)total;
				a->match_pr = (int)total;
				snprintf(a->figures, sizeof(a->figures),
					 "@%s has %zu open pull requests (%s); %zu of them are older than this one, and the "
					 "%d oldest are kept.",
					 pr->author, total, list, older, r->max_open_prs_per_author);
				closed[i] = 1;
				continue;
			}
		}
		if (r->max_unrewarded_evals > 0) {
			size_t counted = 0, infra = 0;
			char list[1024] = "";
			int o = 0;
			for (size_t k = 0; k < pr->n_evals; k++) {
				const char *l = pr->evals[k].label ? pr->evals[k].label : "";
				if (!strcmp(l, "eval:infra-error")) {
					infra++;
					continue;
				}
				if (strcmp(l, "eval:none") && strcmp(l, "eval:REJECT"))
					continue;
				counted++;
				if (o >= 0 && (size_t)o < sizeof(list) - 64) {
					if (pr->evals[k].link)
						o += snprintf(list + o, sizeof(list) - (size_t)o, "%s[`%s` on %.7s](%s)",
							      counted > 1 ? ", " : "", l, pr->evals[k].head_sha ? pr->evals[k].head_sha : "?",
							      pr->evals[k].link);
					else
						o += snprintf(list + o, sizeof(list) - (size_t)o, "%s`%s` on %.7s",
							      counted > 1 ? ", " : "", l, pr->evals[k].head_sha ? pr->evals[k].head_sha : "?");
				}
			}
			if ((int)counted > r->max_unrewarded_evals && (a = add(&d, AB_RULE_EXHAUSTED, pr))) {
				a->close = 1;
				a->value = (double)counted;
				snprintf(a->key, sizeof(a->key), "evals-%zu", counted);
				if (infra)
					snprintf(a->figures, sizeof(a->figures),
						 "%zu evaluations counted: %s (%zu infrastructure error(s) not counted).", counted,
						 list, infra);
				else
					snprintf(a->figures, sizeof(a->figures), "%zu evaluations counted: %s.", counted, list);
				closed[i] = 1;
				continue;
			}
		}
		int64_t since;
		const char *what;
		int days = pr->draft ? r->draft_stale_days : r->stale_days;
		if (days <= 0)
			continue;
		if (pr->draft) {
			since = pr->draft_since ? pr->draft_since : pr->created_at;
			what = pr->draft_since && pr->draft_since != pr->created_at ? "converted to draft" : "opened as a draft";
		} else {
			since = pr->created_at, what = "opened";
			if (pr->last_commit_at > since)
				since = pr->last_commit_at, what = "last commit";
			if (pr->head_seen_at > since)
				since = pr->head_seen_at, what = "last push seen";
			if (pr->last_author_comment_at > since)
				since = pr->last_author_comment_at, what = "last comment by the author";
		}
		if (since > 0 && now - since > (int64_t)days * DAY &&
		    (a = add(&d, pr->draft ? AB_RULE_STALE_DRAFT : AB_RULE_STALE, pr))) {
			char when[40];
			a->close = 1;
			a->value = (double)(now - since) / DAY;
			fmt_time(when, sizeof(when), since);
			snprintf(a->key, sizeof(a->key), "since-%lld", (long long)since);
			snprintf(a->figures, sizeof(a->figures), "%.1f days idle: %s %s.", a->value, what, when);
			closed[i] = 1;
		}
	}
	free(closed);
	*out_n = d.n;
	return d.overflow ? -1 : 0;
}
