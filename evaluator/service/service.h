/*
 * service.h - `abgate serve`: the webhook receiver, the durable queue, N evaluation workers, a
 * heartbeat thread (leases, cancel requests, recovery of dead workers' jobs) and a dispatcher
 * (/eval permission checks, retries of posts that failed, the polling sweep). One instance owns a
 * state dir (an flock on <state>/serve.lock); a restart resumes every job where it stopped.
 */
#ifndef AB_SERVICE_H
#define AB_SERVICE_H

#include <stdatomic.h>
#include <stdint.h>
#include <jansson.h>

#include "config.h"
#include "eval.h"
#include "queue.h"

typedef struct ab_service ab_service;

/* The evaluation entry point (ab_eval_run, or a stand-in in tests). */
typedef int (*ab_service_eval_fn)(json_t **out_result, int64_t *out_eval_id, const struct ab_eval_options *opts);

/*
 * Starts everything. `cfg` is borrowed and must outlive the service. On success the webhook
 * listens (its address is also written to <state_dir>/serve.addr as "host:port"). Caller stops
 * with ab_service_stop.
 */
int ab_service_start(ab_service **out, const struct ab_config *cfg, ab_service_eval_fn eval);

/* The port the webhook receiver listens on. */
int ab_service_port(const ab_service *svc);

/* The service's queue (borrowed; tests and status). */
ab_queue *ab_service_queue(ab_service *svc);

/*
 * Stops: no new deliveries, running evaluations are asked to stop at their next safe point and
 * go back to the queue without counting an attempt, threads are joined, everything is freed.
 */
void ab_service_stop(ab_service *svc);

#endif
