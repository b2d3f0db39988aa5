/*
 * metrics.h - the service's counters and histograms, rendered as Prometheus text (GET /metrics):
 * webhook deliveries by status and their handling time, GitHub API requests and errors by status,
 * evaluations by outcome and their duration, and the queue's depth and jobs by state.
 */
#ifndef AB_METRICS_H
#define AB_METRICS_H

#include "queue.h"

typedef struct ab_metrics ab_metrics;

int ab_metrics_new(ab_metrics **out);
void ab_metrics_free(ab_metrics *m);

/* A POST /webhook answered with `status` after `seconds`. */
void ab_metrics_webhook(ab_metrics *m, int status, double seconds);
/* A GitHub API exchange (status 0: no response). */
void ab_metrics_github(ab_metrics *m, long status, double seconds);
/* An evaluation ended with `outcome` ("pass", "reject", "infra", ...) after `seconds`. */
void ab_metrics_eval(ab_metrics *m, const char *outcome, double seconds);
/* A post that failed and was deferred. */
void ab_metrics_report_deferred(ab_metrics *m);

/* Prometheus text exposition of everything, plus the queue's stats (may be NULL). Caller frees. */
int ab_metrics_render(char **out, ab_metrics *m, const struct ab_queue_stats *queue);

#endif
