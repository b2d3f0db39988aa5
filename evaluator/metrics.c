/*
 * metrics.c - Prometheus text exposition (format 0.0.4) of the service's counters. Labels come
 * from small fixed sets (HTTP statuses, outcomes), kept in fixed tables so no input can grow them
 * without bound; a status outside the table is counted as "other".
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "text.h"

#define STATUS_SLOTS 24
#define OUTCOME_SLOTS 8

static const double webhook_buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
static const double github_buckets[] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };
static const double eval_buckets[] = { 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200 };
#define NB(a) (sizeof(a) / sizeof(a[0]))

struct histogram {
	const double *bounds;
	size_t n;
	unsigned long long counts[16];  /* per bucket (non-cumulative), last one is +Inf */
	unsigned long long total;
	double sum;
};

struct status_counter {
	int status;  /* -1: free slot; 0: no response */
	unsigned long long count;
};

struct ab_metrics {
	pthread_mutex_t lock;
	struct status_counter webhook[STATUS_SLOTS];
	struct status_counter github[STATUS_SLOTS];
	struct histogram webhook_seconds, github_seconds;
	struct {
		char name[16];
		unsigned long long count;
		struct histogram seconds;
	} evals[OUTCOME_SLOTS];
	unsigned long long reports_deferred;
};

static void hist_init(struct histogram *h, const double *bounds, size_t n)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n = n;
}

static void hist_add(struct histogram *h, double v)
{
	size_t i = 0;
	while (i < h->n && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->total++;
	h->sum += v;
}

int ab_metrics_new(ab_metrics **out)
{
	ab_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return ab_error_set("out of memory");
	pthread_mutex_init(&m->lock, NULL);
	for (int i = 0; i < STATUS_SLOTS; i++)
		m->webhook[i].status = m->github[i].status = -1;
	hist_init(&m->webhook_seconds, webhook_buckets, NB(webhook_buckets));
	hist_init(&m->github_seconds, github_buckets, NB(github_buckets));
	for (int i = 0; i < OUTCOME_SLOTS; i++)
		hist_init(&m->evals[i].seconds, eval_buckets, NB(eval_buckets));
	*out = m;
	return 0;
}

void ab_metrics_free(ab_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static void count_status(struct status_counter *slots, int status)
{
	int i;
	for (i = 0; i < STATUS_SLOTS - 1; i++) {
		if (slots[i].status == status)
			break;
		if (slots[i].status == -1) {
			slots[i].status = status;
			break;
		}
	}
	if (i == STATUS_SLOTS - 1)
		slots[i].status = 999;  /* "other" */
	slots[i].count++;
}

void ab_metrics_webhook(ab_metrics *m, int status, double seconds)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	count_status(m->webhook, status);
	hist_add(&m->webhook_seconds, seconds);
	pthread_mutex_unlock(&m->lock);
}

void ab_metrics_github(ab_metrics *m, long status, double seconds)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	count_status(m->github, (int)status);
	hist_add(&m->github_seconds, seconds);
	pthread_mutex_unlock(&m->lock);
}

void ab_metrics_eval(ab_metrics *m, const char *outcome, double seconds)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	int i;
	for (i = 0; i < OUTCOME_SLOTS - 1; i++) {
		if (!strcmp(m->evals[i].name, outcome))
			break;
		if (!m->evals[i].name[0]) {
			snprintf(m->evals[i].name, sizeof(m->evals[i].name), "%s", outcome);
			break;
		}
	}
	if (i == OUTCOME_SLOTS - 1)
		snprintf(m->evals[i].name, sizeof(m->evals[i].name), "other");
	m->evals[i].count++;
	hist_add(&m->evals[i].seconds, seconds);
	pthread_mutex_unlock(&m->lock);
}

void ab_metrics_report_deferred(ab_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->reports_deferred++;
	pthread_mutex_unlock(&m->lock);
}


static void add_hist(struct ab_text *t, const char *name, const char *labels, const struct histogram *h)
{
	unsigned long long cum = 0;
	const char *sep = labels[0] ? "," : "";
	for (size_t i = 0; i < h->n; i++) {
		cum += h->counts[i];
		ab_text_printf(t, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->bounds[i], cum);
	}
	ab_text_printf(t, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, h->total);
	ab_text_printf(t, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "", h->sum);
	ab_text_printf(t, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "", h->total);
}

static void add_status(struct ab_text *t, const char *name, const struct status_counter *slots, int errors_only)
{
	for (int i = 0; i < STATUS_SLOTS; i++) {
		if (slots[i].status < 0 || (errors_only && slots[i].status > 0 && slots[i].status < 400))
			continue;
		if (slots[i].status == 999)
			ab_text_printf(t, "%s{status=\"other\"} %llu\n", name, slots[i].count);
		else if (slots[i].status == 0)
			ab_text_printf(t, "%s{status=\"network\"} %llu\n", name, slots[i].count);
		else
			ab_text_printf(t, "%s{status=\"%d\"} %llu\n", name, slots[i].status, slots[i].count);
	}
}

int ab_metrics_render(char **out, ab_metrics *m, const struct ab_queue_stats *q)
{
	struct ab_text t = { 0 };

	pthread_mutex_lock(&m->lock);
	ab_text_printf(&t, "# HELP abgate_webhook_deliveries_total POST /webhook requests by HTTP status answered.\n"
		"# TYPE abgate_webhook_deliveries_total counter\n");
	add_status(&t, "abgate_webhook_deliveries_total", m->webhook, 0);
	ab_text_printf(&t, "# HELP abgate_webhook_ack_seconds Time from request to answer for POST /webhook.\n"
		"# TYPE abgate_webhook_ack_seconds histogram\n");
	add_hist(&t, "abgate_webhook_ack_seconds", "", &m->webhook_seconds);
	ab_text_printf(&t, "# HELP abgate_github_requests_total GitHub API exchanges by HTTP status (network: no response).\n"
		"# TYPE abgate_github_requests_total counter\n");
	add_status(&t, "abgate_github_requests_total", m->github, 0);
	ab_text_printf(&t, "# HELP abgate_github_api_errors_total GitHub API answers >= 400 and network errors, by status.\n"
		"# TYPE abgate_github_api_errors_total counter\n");
	add_status(&t, "abgate_github_api_errors_total", m->github, 1);
	ab_text_printf(&t, "# HELP abgate_github_request_seconds GitHub API exchange duration.\n"
		"# TYPE abgate_github_request_seconds histogram\n");
	add_hist(&t, "abgate_github_request_seconds", "", &m->github_seconds);
	ab_text_printf(&t, "# HELP abgate_evaluations_total Evaluations finished, by outcome.\n"
		"# TYPE abgate_evaluations_total counter\n");
	for (int i = 0; i < OUTCOME_SLOTS; i++)
		if (m->evals[i].name[0])
			ab_text_printf(&t, "abgate_evaluations_total{outcome=\"%s\"} %llu\n", m->evals[i].name, m->evals[i].count);
	ab_text_printf(&t, "# HELP abgate_evaluation_seconds Evaluation wall time, by outcome.\n"
		"# TYPE abgate_evaluation_seconds histogram\n");
	for (int i = 0; i < OUTCOME_SLOTS; i++)
		if (m->evals[i].name[0]) {
			char labels[40];
			snprintf(labels, sizeof(labels), "outcome=\"%s\"", m->evals[i].name);
			add_hist(&t, "abgate_evaluation_seconds", labels, &m->evals[i].seconds);
		}
	ab_text_printf(&t, "# HELP abgate_reports_deferred_total Posts that failed and were scheduled for a retry.\n"
		"# TYPE abgate_reports_deferred_total counter\nabgate_reports_deferred_total %llu\n",
	    m->reports_deferred);
	pthread_mutex_unlock(&m->lock);
	if (q) {
		ab_text_printf(&t, "# HELP abgate_queue_depth Jobs waiting for a worker.\n# TYPE abgate_queue_depth gauge\n"
			"abgate_queue_depth %lld\n", (long long)q->queued);
		ab_text_printf(&t, "# HELP abgate_jobs Jobs by state.\n# TYPE abgate_jobs gauge\n");
		ab_text_printf(&t, "abgate_jobs{state=\"queued\"} %lld\nabgate_jobs{state=\"running\"} %lld\n"
			"abgate_jobs{state=\"reporting\"} %lld\nabgate_jobs{state=\"done\"} %lld\n"
			"abgate_jobs{state=\"canceled\"} %lld\nabgate_jobs{state=\"superseded\"} %lld\n",
		    (long long)q->queued, (long long)q->running, (long long)q->reporting, (long long)q->done,
		    (long long)q->canceled, (long long)q->superseded);
		ab_text_printf(&t, "# HELP abgate_commands_pending /eval commands waiting for their permission check.\n"
			"# TYPE abgate_commands_pending gauge\nabgate_commands_pending %lld\n",
		    (long long)q->commands_pending);
	}
	if (t.failed || !t.buf) {
		free(t.buf);
		return ab_error_set("out of memory");
	}
	*out = t.buf;
	return 0;
}
