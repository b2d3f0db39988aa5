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

/* One exchange: its status counted, its duration in the histogram. */
static void observe(ab_metrics *m, struct status_counter *slots, struct histogram *h, int status, double seconds)
{
	pthread_mutex_lock(&m->lock);
	count_status(slots, status);
	hist_add(h, seconds);
	pthread_mutex_unlock(&m->lock);
}

void ab_metrics_webhook(ab_metrics *m, int status, double seconds)
{
	if (m)
		observe(m, m->webhook, &m->webhook_seconds, status, seconds);
}

void ab_metrics_github(ab_metrics *m, long status, double seconds)
{
	if (m)
		observe(m, m->github, &m->github_seconds, (int)status, seconds);
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

/* The HELP and TYPE lines that open a metric family. */
static void family(struct ab_text *t, const char *name, const char *type, const char *help)
{
	ab_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram series; `labels` ("" or `key="value"`) is added to every sample. */
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

/* A counter family by HTTP status (errors_only: statuses >= 400 and "network"). */
static void status_family(struct ab_text *t, const char *name, const char *help, const struct status_counter *slots,
			  int errors_only)
{
	family(t, name, "counter", help);
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

/* A histogram family of one unlabelled series. */
static void hist_family(struct ab_text *t, const char *name, const char *help, const struct histogram *h)
{
	family(t, name, "histogram", help);
	add_hist(t, name, "", h);
}

/* A gauge family of one unlabelled sample. */
static void gauge(struct ab_text *t, const char *name, const char *help, long long value)
{
	family(t, name, "gauge", help);
	ab_text_printf(t, "%s %lld\n", name, value);
}

int ab_metrics_render(char **out, ab_metrics *m, const struct ab_queue_stats *q)
{
	struct ab_text t = { 0 };
	char *text;

	pthread_mutex_lock(&m->lock);
	status_family(&t, "abgate_webhook_deliveries_total", "POST /webhook requests by HTTP status answered.",
		      m->webhook, 0);
	hist_family(&t, "abgate_webhook_ack_seconds", "Time from request to answer for POST /webhook.",
		    &m->webhook_seconds);
	status_family(&t, "abgate_github_requests_total", "GitHub API exchanges by HTTP status (network: no response).",
		      m->github, 0);
	status_family(&t, "abgate_github_api_errors_total", "GitHub API answers >= 400 and network errors, by status.",
		      m->github, 1);
	hist_family(&t, "abgate_github_request_seconds", "GitHub API exchange duration.", &m->github_seconds);
	family(&t, "abgate_evaluations_total", "counter", "Evaluations finished, by outcome.");
	for (int i = 0; i < OUTCOME_SLOTS; i++)
		if (m->evals[i].name[0])
			ab_text_printf(&t, "abgate_evaluations_total{outcome=\"%s\"} %llu\n", m->evals[i].name, m->evals[i].count);
	family(&t, "abgate_evaluation_seconds", "histogram", "Evaluation wall time, by outcome.");
	for (int i = 0; i < OUTCOME_SLOTS; i++)
		if (m->evals[i].name[0]) {
			char labels[40];
			snprintf(labels, sizeof(labels), "outcome=\"%s\"", m->evals[i].name);
			add_hist(&t, "abgate_evaluation_seconds", labels, &m->evals[i].seconds);
		}
	family(&t, "abgate_reports_deferred_total", "counter", "Posts that failed and were scheduled for a retry.");
	ab_text_printf(&t, "abgate_reports_deferred_total %llu\n", m->reports_deferred);
	pthread_mutex_unlock(&m->lock);
	if (q) {
		gauge(&t, "abgate_queue_depth", "Jobs waiting for a worker.", (long long)q->queued);
		family(&t, "abgate_jobs", "gauge", "Jobs by state.");
		ab_text_printf(&t, "abgate_jobs{state=\"queued\"} %lld\nabgate_jobs{state=\"running\"} %lld\n"
			       "abgate_jobs{state=\"reporting\"} %lld\nabgate_jobs{state=\"done\"} %lld\n"
			       "abgate_jobs{state=\"canceled\"} %lld\nabgate_jobs{state=\"superseded\"} %lld\n",
			       (long long)q->queued, (long long)q->running, (long long)q->reporting, (long long)q->done,
			       (long long)q->canceled, (long long)q->superseded);
		gauge(&t, "abgate_commands_pending", "/eval commands waiting for their permission check.",
		      (long long)q->commands_pending);
	}
	if (!(text = ab_text_take(&t)))
		return ab_error_set("out of memory");
	*out = text;
	return 0;
}
