/*
 * pr_history.c - a PR's past from GitHub for the policies (see pr_history.h): the timeline's
 * draft conversions, and the per-commit added lines behind the copycat rule's commit-date
 * evidence. Two small in-memory caches, least recently used out first: commit lists per head
 * (a head's commits are fixed) and added lines per commit sha.
 */
#define _GNU_SOURCE
#include "pr_history.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>

#include "error.h"
#include "policy.h"

#define LINES_CACHE 4096
#define LISTS_CACHE 256
#define TIMELINE_MAX 3000

struct lines_entry {
	char key[256];          /* "repo@sha" */
	uint64_t *lines;
	size_t n_lines;
	uint64_t used;
};

struct list_entry {
	char key[256];          /* "repo#pr@head" */
	size_t n;
	int truncated;
	char sha[AB_PR_HISTORY_MAX_COMMITS][41];
	int64_t at[AB_PR_HISTORY_MAX_COMMITS];
	uint64_t used;
};

struct ab_pr_history {
	ab_gh *gh;
	pthread_mutex_t lock;
	uint64_t clock;
	long patch_requests;
	struct lines_entry *lines;   /* LINES_CACHE slots, key[0] == 0: free */
	struct list_entry *lists;    /* LISTS_CACHE slots */
};

int ab_pr_history_new(ab_pr_history **out, ab_gh *gh)
{
	ab_pr_history *h = calloc(1, sizeof(*h));

	if (!h || !(h->lines = calloc(LINES_CACHE, sizeof(*h->lines))) || !(h->lists = calloc(LISTS_CACHE, sizeof(*h->lists)))) {
		if (h)
			free(h->lines);
		free(h);
		return ab_error_set("out of memory");
	}
	h->gh = gh;
	pthread_mutex_init(&h->lock, NULL);
	*out = h;
	return 0;
}

void ab_pr_history_free(ab_pr_history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < LINES_CACHE; i++)
		free(h->lines[i].lines);
	free(h->lines);
	free(h->lists);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

long ab_pr_history_patch_requests(ab_pr_history *h)
{
	pthread_mutex_lock(&h->lock);
	long n = h->patch_requests;
	pthread_mutex_unlock(&h->lock);
	return n;
}

static int64_t iso_time(const char *s)
{
	time_t t;
	return s && ab_gh_parse_time(&t, s) == 0 ? (int64_t)t : 0;
}

int ab_pr_history_draft_since(ab_pr_history *h, int64_t *out_at, const char *repo, int pr)
{
	char path[512];
	json_t *events = NULL, *e;
	size_t i;
	int64_t last = 0;

	snprintf(path, sizeof(path), "/repos/%s/issues/%d/timeline?per_page=100", repo, pr);
	if (ab_gh_get_all(h->gh, &events, path, NULL, TIMELINE_MAX) < 0)
		return -1;
	json_array_foreach(events, i, e) {
		const char *kind = json_string_value(json_object_get(e, "event"));
		int64_t at = iso_time(json_string_value(json_object_get(e, "created_at")));
		if (kind && !strcmp(kind, "convert_to_draft") && at > last)
			last = at;
	}
	json_decref(events);
	*out_at = last;
	return 0;
}

/* The slot holding `key` (*hit = 1), else the least recently used one, for the caller to refill. */
static struct lines_entry *lines_slot(ab_pr_history *h, const char *key, int *hit)
{
	size_t best = 0;
	*hit = 0;
	for (size_t i = 0; i < LINES_CACHE; i++) {
		if (h->lines[i].key[0] && !strcmp(h->lines[i].key, key)) {
			*hit = 1;
			return &h->lines[i];
		}
		if (h->lines[i].used < h->lines[best].used)
			best = i;
	}
	return &h->lines[best];
}

static struct list_entry *list_slot(ab_pr_history *h, const char *key, int *hit)
{
	size_t best = 0;
	*hit = 0;
	for (size_t i = 0; i < LISTS_CACHE; i++) {
		if (h->lists[i].key[0] && !strcmp(h->lists[i].key, key)) {
			*hit = 1;
			return &h->lists[i];
		}
		if (h->lists[i].used < h->lists[best].used)
			best = i;
	}
	return &h->lists[best];
}

/* The PR's commit list at this head (oldest first, capped), from the cache or GitHub. */
static int commit_list(ab_pr_history *h, struct list_entry *out, const char *repo, int pr, const char *head)
{
	char key[256], path[512];
	int hit;
	json_t *commits = NULL, *c;
	size_t i;

	snprintf(key, sizeof(key), "%s#%d@%s", repo, pr, head);
	pthread_mutex_lock(&h->lock);
	struct list_entry *slot = list_slot(h, key, &hit);
	if (hit) {
		slot->used = ++h->clock;
		*out = *slot;
	}
	pthread_mutex_unlock(&h->lock);
	if (hit)
		return 0;
	snprintf(path, sizeof(path), "/repos/%s/pulls/%d/commits?per_page=100", repo, pr);
	if (ab_gh_get_all(h->gh, &commits, path, NULL, 250) < 0)
		return -1;
	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "%s", key);
	json_array_foreach(commits, i, c) {
		const char *sha = json_string_value(json_object_get(c, "sha"));
		if (!sha || strlen(sha) != 40)
			continue;
		if (out->n == AB_PR_HISTORY_MAX_COMMITS) {
			out->truncated = 1;
			break;
		}
		snprintf(out->sha[out->n], sizeof(out->sha[0]), "%s", sha);
		out->at[out->n++] = iso_time(json_string_value(
			json_object_get(json_object_get(json_object_get(c, "commit"), "committer"), "date")));
	}
	json_decref(commits);
	pthread_mutex_lock(&h->lock);
	slot = list_slot(h, key, &hit);
	*slot = *out;
	slot->used = ++h->clock;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* One commit's own added lines (a copy: caller frees), from the cache or GitHub. */
static int commit_lines(ab_pr_history *h, uint64_t **out, size_t *out_n, const char *repo, const char *sha)
{
	char key[256], path[512];
	int hit, error = -1;
	json_t *commit = NULL, *f;
	uint64_t *lines = NULL;
	size_t n = 0, i;

	snprintf(key, sizeof(key), "%s@%s", repo, sha);
	pthread_mutex_lock(&h->lock);
	struct lines_entry *slot = lines_slot(h, key, &hit);
	if (hit) {
		slot->used = ++h->clock;
		*out = malloc(slot->n_lines ? slot->n_lines * sizeof(uint64_t) : 1);
		if (*out && slot->n_lines)
			memcpy(*out, slot->lines, slot->n_lines * sizeof(uint64_t));
		*out_n = slot->n_lines;
	}
	pthread_mutex_unlock(&h->lock);
	if (hit)
		return *out ? 0 : ab_error_set("out of memory");
	snprintf(path, sizeof(path), "/repos/%s/commits/%s", repo, sha);
	pthread_mutex_lock(&h->lock);
	h->patch_requests++;
	pthread_mutex_unlock(&h->lock);
	if (ab_gh_request(h->gh, &commit, NULL, "GET", path, NULL, 0) < 0)
		goto cleanup;
	json_array_foreach(json_object_get(commit, "files"), i, f) {
		if (ab_policy_patch_lines(&lines, &n, json_string_value(json_object_get(f, "patch"))) < 0) {
			ab_error_set("out of memory");
			goto cleanup;
		}
	}
	n = ab_policy_lines_finish(lines, n);
	if (!lines && !(lines = malloc(1))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	uint64_t *keep = malloc(n ? n * sizeof(*keep) : 1);
	if (!keep) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	memcpy(keep, lines, n * sizeof(*keep));
	pthread_mutex_lock(&h->lock);
	slot = lines_slot(h, key, &hit);
	free(slot->lines);
	snprintf(slot->key, sizeof(slot->key), "%s", key);
	slot->lines = keep;
	slot->n_lines = n;
	slot->used = ++h->clock;
	pthread_mutex_unlock(&h->lock);
	*out = lines;
	*out_n = n;
	lines = NULL;
	error = 0;
cleanup:
	free(lines);
	json_decref(commit);
	return error;
}

void ab_pr_history_commits_free(struct ab_pr_commit *c, size_t n)
{
	if (!c)
		return;
	for (size_t i = 0; i < n; i++)
		free(c[i].lines);
	free(c);
}

int ab_pr_history_commits(ab_pr_history *h, struct ab_pr_commit **out, size_t *out_n, int *out_truncated,
			  const char *repo, int pr, const char *head_sha)
{
	struct list_entry list;
	struct ab_pr_commit *c = NULL;
	size_t n = 0;

	if (commit_list(h, &list, repo, pr, head_sha) < 0)
		return -1;
	if (!(c = calloc(list.n ? list.n : 1, sizeof(*c))))
		return ab_error_set("out of memory");
	for (; n < list.n; n++) {
		snprintf(c[n].sha, sizeof(c[n].sha), "%s", list.sha[n]);
		c[n].at = list.at[n];
		if (commit_lines(h, &c[n].lines, &c[n].n_lines, repo, list.sha[n]) < 0) {
			ab_pr_history_commits_free(c, n);
			return -1;
		}
	}
	*out = c;
	*out_n = n;
	if (out_truncated)
		*out_truncated = list.truncated;
	return 0;
}
