/*
 * policies.c - the orchestration of the PR lifecycle policies (see policies.h): fetch the facts
 * (the heads table of policies.db records what abgate saw; pr_history.c reads draft conversions
 * and commit patches when needed), let guards/policy.c decide, apply each action as recorded
 * steps (policy_actions.c), and move `merge-first` (merge_first.c) when the repository wants it.
 */
#define _GNU_SOURCE
#include "policies.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sqlite3.h>
#include <jansson.h>

#include "error.h"
#include "fs.h"
#include "github_auth.h"
#include "log.h"
#include "merge_first.h"
#include "policy.h"
#include "policy_actions.h"
#include "pr_history.h"
#include "suite.h"

#define MAX_PRS 2000
#define MAX_ACTIONS 4096
#define LIST_MAX 5000

struct ab_policies {
	const struct ab_config *cfg;
	ab_gh *gh;
	ab_queue *queue;
	sqlite3 *db;
	ab_pr_history *history;  /* draft conversions and per-commit lines, cached across sweeps */
	pthread_mutex_t lock;
	char web[512];           /* https://github.com (links in comments) */
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS heads(id INTEGER PRIMARY KEY AUTOINCREMENT, repo TEXT NOT NULL, pr INTEGER NOT NULL,"
	"  head_sha TEXT NOT NULL, first_seen INTEGER NOT NULL, lines BLOB, files TEXT NOT NULL, logins TEXT NOT NULL,"
	"  last_commit_at INTEGER NOT NULL, UNIQUE(repo, pr, head_sha));"
	"CREATE TABLE IF NOT EXISTS actions(id INTEGER PRIMARY KEY, repo TEXT NOT NULL, pr INTEGER NOT NULL,"
	"  rule TEXT NOT NULL, key TEXT NOT NULL, head_sha TEXT, figures TEXT NOT NULL, value REAL, match_pr INTEGER,"
	"  close INTEGER NOT NULL, no_eval INTEGER NOT NULL, label TEXT, steps INTEGER NOT NULL DEFAULT 0,"
	"  comment_id INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL, created_at INTEGER NOT NULL, done_at INTEGER,"
	"  UNIQUE(repo, pr, rule, key));";

/* ---- memory for one sweep ---- */

struct arena {
	void **p;
	size_t n, cap;
};

static void *arena_keep(struct arena *a, void *ptr)
{
	if (!ptr)
		return NULL;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 256;
		void **np = realloc(a->p, nc * sizeof(*np));
		if (!np) {
			free(ptr);
			return NULL;
		}
		a->p = np, a->cap = nc;
	}
	return a->p[a->n++] = ptr;
}

static char *arena_strdup(struct arena *a, const char *s) { return s ? arena_keep(a, strdup(s)) : NULL; }
static void *arena_calloc(struct arena *a, size_t n, size_t size) { return arena_keep(a, calloc(n ? n : 1, size)); }

static void arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
}

/* ---- the record ---- */

int ab_policies_new(ab_policies **out, const struct ab_config *cfg, ab_gh *gh, ab_queue *queue)
{
	ab_policies *p = calloc(1, sizeof(*p));
	char path[4096];
	char *msg = NULL;

	if (!p)
		return ab_error_set("out of memory");
	p->cfg = cfg, p->gh = gh, p->queue = queue;
	pthread_mutex_init(&p->lock, NULL);
	const char *api = cfg->github.api_url;
	size_t n = strlen(api);
	if (!strcmp(api, "https://api.github.com"))
		snprintf(p->web, sizeof(p->web), "https://github.com");
	else if (n > 7 && !strcmp(api + n - 7, "/api/v3"))
		snprintf(p->web, sizeof(p->web), "%.*s", (int)(n - 7), api);
	else
		snprintf(p->web, sizeof(p->web), "%s", api);
	snprintf(path, sizeof(path), "%s/policies.db", cfg->state_dir);
	if ((gh && ab_pr_history_new(&p->history, gh) < 0) || ab_fs_mkdirs(cfg->state_dir) < 0) {
		ab_policies_free(p);
		return -1;
	}
	if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
		    SQLITE_OK ||
	    sqlite3_busy_timeout(p->db, 10000) != SQLITE_OK ||
	    sqlite3_exec(p->db, "PRAGMA journal_mode=WAL;", NULL, NULL, &msg) != SQLITE_OK ||
	    sqlite3_exec(p->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		ab_error_set("policies: %s: %s", path, msg ? msg : p->db ? sqlite3_errmsg(p->db) : "cannot open");
		sqlite3_free(msg);
		ab_policies_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

void ab_policies_free(ab_policies *p)
{
	if (!p)
		return;
	sqlite3_close(p->db);
	ab_pr_history_free(p->history);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int db_fail(ab_policies *p, const char *what)
{
	return ab_error_set("policies: %s: %s", what, sqlite3_errmsg(p->db));
}

/* ---- facts ---- */

static int64_t iso_time(const char *s)
{
	time_t t;
	return s && ab_gh_parse_time(&t, s) == 0 ? (int64_t)t : 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A head as recorded: its lines, files, commit logins and newest commit date. */
struct head_rec {
	int64_t id, first_seen;
	uint64_t *lines;
	size_t n_lines;
	json_t *files, *logins;
	int64_t last_commit_at;
};

static void head_rec_clear(struct head_rec *h)
{
	free(h->lines);
	json_decref(h->files);
	json_decref(h->logins);
	memset(h, 0, sizeof(*h));
}

static int head_load(ab_policies *p, struct head_rec *h, const char *repo, int pr, const char *sha)
{
	sqlite3_stmt *st = NULL;
	int rc, error = AB_ENOTFOUND;

	memset(h, 0, sizeof(*h));
	if (sqlite3_prepare_v2(p->db, "SELECT id, first_seen, lines, files, logins, last_commit_at FROM heads "
				      "WHERE repo = ? AND pr = ? AND head_sha = ?", -1, &st, NULL) != SQLITE_OK)
		return db_fail(p, "prepare");
	sqlite3_bind_text(st, 1, repo, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, pr);
	sqlite3_bind_text(st, 3, sha, -1, SQLITE_TRANSIENT);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		h->id = sqlite3_column_int64(st, 0);
		h->first_seen = sqlite3_column_int64(st, 1);
		size_t bytes = (size_t)sqlite3_column_bytes(st, 2);
		h->n_lines = bytes / sizeof(uint64_t);
		h->lines = malloc(bytes ? bytes : 1);
		if (h->lines && bytes)
			memcpy(h->lines, sqlite3_column_blob(st, 2), bytes);
		h->files = json_loads((const char *)sqlite3_column_text(st, 3), 0, NULL);
		h->logins = json_loads((const char *)sqlite3_column_text(st, 4), 0, NULL);
		h->last_commit_at = sqlite3_column_int64(st, 5);
		error = h->lines && h->files && h->logins ? 0 : ab_error_set("policies: unreadable head record");
	} else if (rc != SQLITE_DONE) {
		error = db_fail(p, "step");
	}
	sqlite3_finalize(st);
	return error;
}

/* Fetches a head's files and commits from GitHub; records it unless dry_run. */
static int head_fetch(ab_policies *p, struct head_rec *h, const char *repo, int pr, const char *sha, int dry_run)
{
	char path[512];
	json_t *files = NULL, *commits = NULL, *item;
	size_t i;
	int error = -1;

	memset(h, 0, sizeof(*h));
	snprintf(path, sizeof(path), "/repos/%s/pulls/%d/files?per_page=100", repo, pr);
	if (ab_gh_get_all(p->gh, &files, path, NULL, 3000) < 0)
		goto cleanup;
	snprintf(path, sizeof(path), "/repos/%s/pulls/%d/commits?per_page=100", repo, pr);
	if (ab_gh_get_all(p->gh, &commits, path, NULL, 250) < 0)
		goto cleanup;
	h->files = json_array();
	h->logins = json_array();
	json_array_foreach(files, i, item) {
		const char *name = json_string_value(json_object_get(item, "filename"));
		const char *prev = json_string_value(json_object_get(item, "previous_filename"));
		if (name)
			json_array_append_new(h->files, json_string(name));
		if (prev)
			json_array_append_new(h->files, json_string(prev));
		if (ab_policy_patch_lines(&h->lines, &h->n_lines, json_string_value(json_object_get(item, "patch"))) < 0) {
			ab_error_set("out of memory");
			goto cleanup;
		}
	}
	h->n_lines = ab_policy_lines_finish(h->lines, h->n_lines);
	json_array_foreach(commits, i, item) {
		/* GitHub's user for the commit's author and committer (null when the email is unknown). */
		const char *who[2] = { json_string_value(json_object_get(json_object_get(item, "author"), "login")),
				       json_string_value(json_object_get(json_object_get(item, "committer"), "login")) };
		for (int k = 0; k < 2; k++)
			if (who[k])
				json_array_append_new(h->logins, json_string(who[k]));
		int64_t at = iso_time(json_string_value(
			json_object_get(json_object_get(json_object_get(item, "commit"), "committer"), "date")));
		if (at > h->last_commit_at)
			h->last_commit_at = at;
	}
	h->first_seen = now_ms();
	if (!dry_run) {
		sqlite3_stmt *st = NULL;
		char *ftext = json_dumps(h->files, JSON_COMPACT), *ltext = json_dumps(h->logins, JSON_COMPACT);
		int rc = sqlite3_prepare_v2(p->db, "INSERT OR IGNORE INTO heads(repo, pr, head_sha, first_seen, lines, files, "
					    "logins, last_commit_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?)", -1, &st, NULL);
		if (rc == SQLITE_OK) {
			sqlite3_bind_text(st, 1, repo, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(st, 2, pr);
			sqlite3_bind_text(st, 3, sha, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int64(st, 4, h->first_seen);
			sqlite3_bind_blob(st, 5, h->lines ? (void *)h->lines : "", (int)(h->n_lines * sizeof(uint64_t)),
					  SQLITE_TRANSIENT);
			sqlite3_bind_text(st, 6, ftext ? ftext : "[]", -1, SQLITE_TRANSIENT);
			sqlite3_bind_text(st, 7, ltext ? ltext : "[]", -1, SQLITE_TRANSIENT);
			sqlite3_bind_int64(st, 8, h->last_commit_at);
			rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
			h->id = sqlite3_last_insert_rowid(p->db);
		}
		sqlite3_finalize(st);
		free(ftext);
		free(ltext);
		if (rc != SQLITE_OK) {
			db_fail(p, "record head");
			goto cleanup;
		}
	}
	if (!h->lines && !(h->lines = malloc(1))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	error = 0;
cleanup:
	json_decref(files);
	json_decref(commits);
	if (error < 0)
		head_rec_clear(h);
	return error;
}

/* Every head recorded for repo#pr, oldest first, as snapshots (memory in the arena). */
static int heads_history(ab_policies *p, struct arena *a, struct ab_policy_snapshot **out, size_t *out_n,
			 const char *repo, int pr)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0, cap = 8;
	struct ab_policy_snapshot *s = arena_calloc(a, cap, sizeof(*s));
	int rc;

	if (!s)
		return ab_error_set("out of memory");
	if (sqlite3_prepare_v2(p->db, "SELECT id, first_seen, head_sha, lines FROM heads WHERE repo = ? AND pr = ? "
				      "ORDER BY id", -1, &st, NULL) != SQLITE_OK)
		return db_fail(p, "prepare");
	sqlite3_bind_text(st, 1, repo, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, pr);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < 64) {
		if (n == cap) {
			struct ab_policy_snapshot *ns = arena_calloc(a, cap * 2, sizeof(*ns));
			if (!ns)
				break;
			memcpy(ns, s, n * sizeof(*s));
			s = ns, cap *= 2;
		}
		size_t bytes = (size_t)sqlite3_column_bytes(st, 3);
		uint64_t *lines = arena_keep(a, malloc(bytes ? bytes : 1));
		if (!lines)
			break;
		if (bytes)
			memcpy(lines, sqlite3_column_blob(st, 3), bytes);
		s[n].seq = sqlite3_column_int64(st, 0);
		s[n].at = sqlite3_column_int64(st, 1) / 1000;
		s[n].sha = arena_strdup(a, (const char *)sqlite3_column_text(st, 2));
		s[n].lines = lines;
		s[n].n_lines = bytes / sizeof(uint64_t);
		n++;
	}
	sqlite3_finalize(st);
	*out = s;
	*out_n = n;
	return 0;
}

/* The finished evaluations of repo#pr from the queue, with links. */
static void evals_of(ab_policies *p, struct arena *a, struct ab_policy_pr *f, const char *repo)
{
	int64_t *ids = NULL;
	size_t n = 0;

	if (!p->queue || ab_queue_pr_done_jobs(p->queue, &ids, &n, repo, f->number) < 0 || !n) {
		free(ids);
		return;
	}
	struct ab_policy_eval *ev = arena_calloc(a, n, sizeof(*ev));
	for (size_t i = 0; ev && i < n; i++) {
		struct ab_job *j = NULL;
		if (ab_queue_job_get(p->queue, &j, ids[i]) < 0)
			continue;
		if (j->outcome && !strcmp(j->outcome, "skipped")) {  /* a policy said no: not an evaluation */
			ab_job_free(j);
			continue;
		}
		json_t *res = j->result ? json_loads(j->result, 0, NULL) : NULL;
		const char *label = json_string_value(json_object_get(json_object_get(res, "verdict"), "label"));
		const char *o = j->outcome ? j->outcome : "";
		if (!label)
			label = !strcmp(o, "reject") ? "eval:REJECT" : !strcmp(o, "pass") ? "eval:none" : "eval:infra-error";
		char link[1024];
		if (j->check_kind && !strcmp(j->check_kind, "check") && j->check_run_id)
			snprintf(link, sizeof(link), "%s/%s/runs/%lld", p->web, repo, (long long)j->check_run_id);
		else
			snprintf(link, sizeof(link), "%s/%s/commit/%s", p->web, repo, j->head_sha);
		ev[f->n_evals].head_sha = arena_strdup(a, j->head_sha);
		ev[f->n_evals].label = arena_strdup(a, label);
		ev[f->n_evals].link = arena_strdup(a, link);
		f->n_evals++;
		json_decref(res);
		ab_job_free(j);
	}
	f->evals = ev;
	free(ids);
}

/* The author's newest comment on the PR (only asked when the PR may be stale). */
static int64_t author_comment_at(ab_policies *p, const char *repo, int pr, const char *author)
{
	char path[512];
	json_t *items = NULL, *c;
	size_t i;
	int64_t best = 0;

	snprintf(path, sizeof(path), "/repos/%s/issues/%d/comments?per_page=100", repo, pr);
	if (ab_gh_get_all(p->gh, &items, path, NULL, LIST_MAX) < 0) {
		AB_WARN("policies: %s#%d: comments: %s", repo, pr, ab_error_last());
		return -1;
	}
	json_array_foreach(items, i, c) {
		const char *who = json_string_value(json_object_get(json_object_get(c, "user"), "login"));
		int64_t at = iso_time(json_string_value(json_object_get(c, "created_at")));
		if (who && author && !strcasecmp(who, author) && at > best)
			best = at;
	}
	json_decref(items);
	return best;
}

static const char *const *strings_of(struct arena *a, json_t *arr, size_t *out_n)
{
	size_t n = json_array_size(arr), k = 0, i;
	const char **s = arena_calloc(a, n, sizeof(*s));
	json_t *v;
	json_array_foreach(arr, i, v) {
		const char *x = json_string_value(v);
		if (s && x)
			s[k++] = arena_strdup(a, x);
	}
	*out_n = s ? k : 0;
	return s;
}

/* ---- the sweep ---- */

static const char *const default_harness[] = { "guards/", "evaluator/", "tools/", "ci/" };

struct gate {
	int pr;
	int seen;                /* the PR was among the open ones */
	int no_eval, closed;
	char *note;
	size_t note_size;
};

static void describe(char *buf, size_t size, const struct ab_policy_action *a)
{
	snprintf(buf, size, "would %s%s%s%s%s", a->label ? "label " : "", a->label ? a->label : "",
		 a->rule != AB_RULE_HARNESS ? (a->label ? ", comment" : "comment") : "skip evaluation",
		 a->close ? ", close" : "", "");
}

/*
 * The copycat rule's commit-date evidence, fetched only for the PRs whose recorded heads cannot
 * say when overlapping lines appeared (guards: ab_policy_wants_commits), bounded and cached.
 */
static int commits_where_wanted(ab_policies *p, struct arena *a, const struct ab_policy_rules *rules,
				struct ab_policy_pr *prs, size_t n, const char *repo)
{
	uint8_t *want = arena_calloc(a, n, 1);

	if (!want)
		return ab_error_set("out of memory");
	if (!ab_policy_wants_commits(want, rules, prs, n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct ab_pr_commit *c = NULL;
		size_t nc = 0;
		int truncated = 0;
		if (!want[i])
			continue;
		if (ab_pr_history_commits(p->history, &c, &nc, &truncated, repo, prs[i].number, prs[i].head_sha) < 0)
			return -1;
		/* The arena takes each commit's lines and the array (which holds the shas). */
		struct ab_policy_snapshot *s = arena_calloc(a, nc, sizeof(*s));
		for (size_t k = 0; k < nc; k++) {
			if (s)
				s[k] = (struct ab_policy_snapshot){ c[k].at, 0, c[k].sha, c[k].lines, c[k].n_lines };
			if (!arena_keep(a, c[k].lines))
				s = NULL;
		}
		if (!arena_keep(a, c) || !s)
			return ab_error_set("out of memory");
		prs[i].commits = s, prs[i].n_commits = nc;
		AB_DEBUG("policies: %s#%d: %zu commit(s) read for when its lines appeared%s", repo, prs[i].number, nc,
			 truncated ? " (the oldest only)" : "");
	}
	return 0;
}

/* merge_first: the PRs not closed, refused or drafts compete for the label. */
static int merge_first(ab_policies *p, struct arena *a, const char *repo, const struct ab_policy_pr *prs, size_t n,
		       const struct ab_policy_action *acts, size_t n_acts, int dry_run, ab_policies_row_fn row,
		       void *payload)
{
	struct ab_merge_first_pr *m = arena_calloc(a, n, sizeof(*m));

	if (!m)
		return ab_error_set("out of memory");
	for (size_t i = 0; i < n; i++) {
		m[i] = (struct ab_merge_first_pr){ prs[i].number, 0, !prs[i].draft };
		for (size_t k = 0; k < prs[i].n_labels; k++)
			m[i].labelled |= !strcasecmp(prs[i].labels[k], AB_MERGE_FIRST_LABEL);
		for (size_t k = 0; k < n_acts; k++)
			if (acts[k].pr == prs[i].number && (acts[k].close || acts[k].no_eval))
				m[i].eligible = 0;
	}
	return ab_merge_first_run(p->gh, p->queue, repo, m, n, dry_run, row, payload);
}

static int sweep_repo(ab_policies *p, const struct ab_repo_config *rc, int dry_run, ab_policies_row_fn row, void *payload,
		      struct gate *g)
{
	const struct ab_policy_config *pc = &rc->policies;
	struct arena a = { 0 };
	struct ab_suite *suite = NULL;
	json_t *list = NULL, *item;
	struct ab_policy_pr *prs = NULL;
	struct ab_policy_action *acts = NULL;
	size_t n = 0, n_acts = 0, i;
	char path[512], did[512];
	int error = -1;
	int64_t now = (int64_t)time(NULL);

	struct ab_policy_rules rules = {
		.stale_days = pc->stale_days, .draft_stale_days = pc->draft_stale_days,
		.max_unrewarded_evals = pc->max_unrewarded_evals, .max_open_prs_per_author = pc->max_open_prs_per_author,
		.copycat_block = pc->copycat_block, .copycat_warn = pc->copycat_warn,
		.copycat_min_added_lines = pc->copycat_min_added_lines,
		.denylist = (const char *const *)pc->denylist, .n_denylist = pc->denylist_count,
		.harness_skip = !strcmp(pc->harness_changes, "skip"),
		.harness_paths = default_harness, .n_harness_paths = sizeof(default_harness) / sizeof(*default_harness),
		.exempt_labels = (const char *const *)pc->exempt_labels, .n_exempt_labels = pc->exempt_label_count,
	};
	if (rules.harness_skip && rc->suite && ab_suite_load_file(&suite, rc->suite) == 0) {
		rules.harness_paths = (const char *const *)suite->harness_paths;
		rules.n_harness_paths = (size_t)suite->harness_path_count;
	}
	snprintf(path, sizeof(path), "/repos/%s/pulls?state=open&per_page=100", rc->name);
	if (ab_gh_get_all(p->gh, &list, path, NULL, MAX_PRS) < 0)
		goto cleanup;
	if (!(prs = arena_calloc(&a, json_array_size(list), sizeof(*prs))) ||
	    !(acts = arena_calloc(&a, MAX_ACTIONS, sizeof(*acts)))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	json_array_foreach(list, i, item) {
		struct ab_policy_pr *f = &prs[n];
		json_t *user = json_object_get(item, "user");
		const char *sha = json_string_value(json_object_get(json_object_get(item, "head"), "sha"));
		const char *assoc = json_string_value(json_object_get(item, "author_association"));
		const char *type = json_string_value(json_object_get(user, "type"));
		struct head_rec h;
		f->number = (int)json_integer_value(json_object_get(item, "number"));
		if (f->number <= 0 || !sha)
			continue;
		if (g && f->number == g->pr)
			g->seen = 1;
		f->author = arena_strdup(&a, json_string_value(json_object_get(user, "login")));
		f->head_sha = arena_strdup(&a, sha);
		f->draft = json_is_true(json_object_get(item, "draft"));
		f->created_at = iso_time(json_string_value(json_object_get(item, "created_at")));
		f->draft_since = f->created_at;
		/* Only a draft older than the limit may be stale: then its last conversion to draft counts. */
		if (f->draft && pc->draft_stale_days > 0 && now - f->created_at > (int64_t)pc->draft_stale_days * 86400) {
			int64_t conv = 0;
			if (ab_pr_history_draft_since(p->history, &conv, rc->name, f->number) < 0)
				goto cleanup;
			if (conv > f->draft_since)
				f->draft_since = conv;
		}
		f->author_exempt = (type && !strcmp(type, "Bot")) ||
				   (assoc && (!strcmp(assoc, "OWNER") || !strcmp(assoc, "MEMBER") || !strcmp(assoc, "COLLABORATOR")));
		json_t *labels = json_array(), *l;
		size_t k;
		json_array_foreach(json_object_get(item, "labels"), k, l)
			json_array_append(labels, json_object_get(l, "name"));
		f->labels = strings_of(&a, labels, &f->n_labels);
		json_decref(labels);
		int have = head_load(p, &h, rc->name, f->number, sha);
		if (have == AB_ENOTFOUND)
			have = head_fetch(p, &h, rc->name, f->number, sha, dry_run);
		if (have < 0) {
			AB_WARN("policies: %s#%d: %s", rc->name, f->number, ab_error_last());
			goto cleanup;
		}
		f->files = strings_of(&a, h.files, &f->n_files);
		f->commit_logins = strings_of(&a, h.logins, &f->n_commit_logins);
		f->lines = arena_keep(&a, h.lines);
		h.lines = NULL;
		f->n_lines = h.n_lines;
		f->last_commit_at = h.last_commit_at;
		int64_t seen = h.first_seen / 1000, head_id = h.id;
		head_rec_clear(&h);
		if (heads_history(p, &a, (struct ab_policy_snapshot **)&f->heads, &f->n_heads, rc->name, f->number) < 0)
			goto cleanup;
		/* A head abgate saw replace an earlier one is a push at that time; the first head it ever saw
		 * of a PR says nothing about when it was pushed (the commits' dates do). */
		if (f->n_heads > 1 && f->heads[0].seq != head_id)
			f->head_seen_at = seen;
		if (dry_run && !f->n_heads) {
			struct ab_policy_snapshot *s = arena_calloc(&a, 1, sizeof(*s));
			if (s) {
				*s = (struct ab_policy_snapshot){ now, INT64_MAX, f->head_sha, f->lines, f->n_lines };
				f->heads = s, f->n_heads = 1;
			}
		}
		evals_of(p, &a, f, rc->name);
		/* The author's comments matter only when nothing newer says the PR is alive. */
		int64_t act = f->created_at > f->last_commit_at ? f->created_at : f->last_commit_at;
		if (f->head_seen_at > act)
			act = f->head_seen_at;
		if (!f->draft && pc->stale_days > 0 && now - act > (int64_t)pc->stale_days * 86400) {
			int64_t c = author_comment_at(p, rc->name, f->number, f->author);
			if (c < 0)
				goto cleanup;
			f->last_author_comment_at = c;
		}
		n++;
	}
	if (commits_where_wanted(p, &a, &rules, prs, n, rc->name) < 0)
		goto cleanup;
	if (ab_policy_decide(acts, MAX_ACTIONS, &n_acts, &rules, prs, n, now) < 0)
		AB_WARN("policies: %s: more than %d actions in one sweep; the rest wait for the next", rc->name, MAX_ACTIONS);
	error = 0;
	for (i = 0; i < n_acts; i++) {
		const struct ab_policy_action *x = &acts[i];
		const char *head = NULL;
		for (size_t k = 0; k < n; k++)
			if (prs[k].number == x->pr)
				head = prs[k].head_sha;
		if (dry_run) {
			describe(did, sizeof(did), x);
		} else {
			int e = ab_policy_actions_apply(p->db, p->gh, rc->name, x, &rules, head, did, sizeof(did));
			if (e < 0 && error == 0)
				error = e;
		}
		if (g && x->pr == g->pr && (x->no_eval || x->close)) {
			if (!g->no_eval || x->close)
				ab_policy_check_note(g->note, g->note_size, x);
			g->no_eval = 1;
			g->closed |= x->close;
		}
		if (row) {
			struct ab_policies_row r = { rc->name, x->pr, ab_policy_rule_name(x->rule), x->key, did, x->figures,
						     x->no_eval, x->close };
			row(payload, &r);
		}
	}
	if (pc->merge_first) {
		int e = merge_first(p, &a, rc->name, prs, n, acts, n_acts, dry_run, row, payload);
		if (e < 0 && error == 0)
			error = e;
	}
cleanup:
	if (error < 0 && !n_acts)
		AB_WARN("policies: %s: %s", rc->name, ab_error_last());
	ab_suite_free(suite);
	json_decref(list);
	arena_free(&a);
	return error;
}

int ab_policies_sweep(ab_policies *p, const char *repo, int dry_run, ab_policies_row_fn row, void *payload)
{
	int error = 0;

	if (!p->gh)
		return ab_error_set("policies: no GitHub credentials configured");
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->cfg->repo_count; i++) {
		const struct ab_repo_config *rc = &p->cfg->repos[i];
		if (repo && strcasecmp(repo, rc->name))
			continue;
		int e = sweep_repo(p, rc, dry_run, row, payload, NULL);
		if (e < 0 && error == 0)
			error = e;
	}
	pthread_mutex_unlock(&p->lock);
	return error;
}

int ab_policies_gate(ab_policies *p, const char *repo, int pr, const char *head_sha, char *note, size_t note_size,
		     int *out_closed)
{
	const struct ab_repo_config *rc = ab_config_repo(p->cfg, repo);
	struct gate g = { pr, 0, 0, 0, note, note_size };

	*out_closed = 0;
	note[0] = '\0';
	if (!rc || !p->gh)
		return 1;
	pthread_mutex_lock(&p->lock);
	int error = sweep_repo(p, rc, 0, NULL, NULL, &g);
	pthread_mutex_unlock(&p->lock);
	if (error < 0 && !g.no_eval) {
		AB_WARN("policies: %s#%d %.12s: evaluating without the policies' say: %s", repo, pr, head_sha, ab_error_last());
		return 1;
	}
	if (error == 0 && !g.seen) {
		/* Not open any more (a sweep just closed it, or someone did): nothing to evaluate. */
		snprintf(note, note_size, "the pull request is no longer open");
		*out_closed = 1;
		return 0;
	}
	*out_closed = g.closed;
	return !g.no_eval;
}
