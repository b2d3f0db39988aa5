/*
 * pool.h - a small persistent thread pool for the CPU backend and the generator: a parallel
 * "for" over [0, n) in chunks that the caller and the workers take from a shared counter as they
 * come. The caller never waits for a worker that did not start (a preempted worker costs nothing
 * on a busy machine); workers spin briefly, then sleep on a condition variable.
 */
#ifndef EMBER_POOL_H
#define EMBER_POOL_H

#include <stdint.h>

struct ember_pool;

/* Work function: processes items [begin, end). `thread` (0 = the caller, 1.. = workers) is
 * stable per thread, for per-thread scratch buffers. Which thread gets which chunk varies from run
 * to run, so an item's result must not depend on it. */
typedef void (*ember_pool_fn)(void *arg, int64_t begin, int64_t end, int thread);

/* Starts n_threads - 1 workers (n_threads >= 1). On success *out is owned by the caller and
 * released with ember_pool_free. */
int ember_pool_create(struct ember_pool **out, int n_threads);
/* Runs fn over [0, n) in chunks of `grain` items (the last may be shorter) and returns when all
 * are done. n <= grain runs on the caller alone. Not re-entrant: one run at a time per pool. */
void ember_pool_for(struct ember_pool *pool, int64_t n, int64_t grain, ember_pool_fn fn, void *arg);
int ember_pool_threads(const struct ember_pool *pool);
/* Stops and joins the workers; accepts NULL. */
void ember_pool_free(struct ember_pool *pool);

#endif
