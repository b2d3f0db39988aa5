/*
 * pool.c - parallel-for thread pool (see pool.h). The job lives in the pool; `state` is even
 * while a job is open (its number) and odd while closed. A worker joins a job by incrementing
 * `active` and re-checking that the same job is still open; the caller closes the job once every
 * chunk is done and then waits only for workers inside it (they are leaving: no chunks remain).
 * Job fields are written only while closed with no worker active, so a late worker never sees a
 * half-written job.
 */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define SPIN_ITERATIONS 4000   /* ~0.1 ms of pause before sleeping: short gaps stay cheap */

struct ember_pool {
	int n_threads;
	pthread_t *threads;
	int n_started;
	pthread_mutex_t mutex;
	pthread_cond_t work_cv, done_cv;
	_Atomic uint64_t state;   /* even: open job number; odd: no open job */
	_Atomic int active;       /* workers inside the open job */
	_Atomic int stop;
	ember_pool_fn fn;         /* the job; written only while closed and active == 0 */
	void *arg;
	int64_t n, grain;
	_Atomic int64_t next, done;
};

struct worker_start {
	struct ember_pool *pool;
	int index;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Takes chunks until none remain; the thread completing the last one wakes the caller. */
static void run_chunks(struct ember_pool *pool, int thread)
{
	for (;;) {
		int64_t begin = atomic_fetch_add(&pool->next, pool->grain);
		if (begin >= pool->n)
			return;
		int64_t end = begin + pool->grain < pool->n ? begin + pool->grain : pool->n;
		pool->fn(pool->arg, begin, end, thread);
		if (atomic_fetch_add(&pool->done, end - begin) + (end - begin) == pool->n) {
			pthread_mutex_lock(&pool->mutex);
			pthread_cond_signal(&pool->done_cv);
			pthread_mutex_unlock(&pool->mutex);
		}
	}
}

static int has_new_job(struct ember_pool *pool, uint64_t last, uint64_t *state)
{
	*state = atomic_load(&pool->state);
	return (*state & 1) == 0 && *state != last;
}

static void *worker_main(void *p)
{
	struct worker_start start = *(struct worker_start *)p;
	struct ember_pool *pool = start.pool;
	uint64_t last = 1, state = 1;
	free(p);
	for (;;) {
		int found = 0;
		for (int spin = 0; spin < SPIN_ITERATIONS && !(found = has_new_job(pool, last, &state)); spin++)
			if (atomic_load(&pool->stop))
				return NULL;
			else
				cpu_relax();
		if (!found) {
			pthread_mutex_lock(&pool->mutex);
			while (!has_new_job(pool, last, &state) && !atomic_load(&pool->stop))
				pthread_cond_wait(&pool->work_cv, &pool->mutex);
			pthread_mutex_unlock(&pool->mutex);
		}
		if (atomic_load(&pool->stop))
			return NULL;
		atomic_fetch_add(&pool->active, 1);
		if (atomic_load(&pool->state) == state) { /* still the same open job: safe to read it */
			last = state;
			run_chunks(pool, start.index);
		}
		atomic_fetch_sub(&pool->active, 1);
	}
}

int ember_pool_create(struct ember_pool **out, int n_threads)
{
	if (n_threads < 1)
		return ember_error_set(EMBER_ERROR, "thread pool needs at least one thread (got %d)", n_threads);
	struct ember_pool *pool = calloc(1, sizeof(*pool));
	if (!pool)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	pool->n_threads = n_threads;
	atomic_init(&pool->state, 1);
	pthread_mutex_init(&pool->mutex, NULL);
	pthread_cond_init(&pool->work_cv, NULL);
	pthread_cond_init(&pool->done_cv, NULL);
	if (n_threads > 1 && !(pool->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t)))) {
		ember_pool_free(pool);
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	}
	for (int i = 1; i < n_threads; i++) {
		struct worker_start *start = malloc(sizeof(*start));
		int rc = start ? 0 : -1;
		if (start) {
			*start = (struct worker_start){pool, i};
			rc = pthread_create(&pool->threads[i - 1], NULL, worker_main, start);
			if (rc != 0)
				free(start);
		}
		if (rc != 0) {
			ember_pool_free(pool);
			return ember_error_set(EMBER_ERROR, "cannot start worker thread %d: %s", i,
			                       rc > 0 ? strerror(rc) : "out of memory");
		}
		pool->n_started = i;
	}
	*out = pool;
	return 0;
}

void ember_pool_for(struct ember_pool *pool, int64_t n, int64_t grain, ember_pool_fn fn, void *arg)
{
	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (pool->n_threads == 1 || n <= grain) {
		fn(arg, 0, n, 0);
		return;
	}
	/* Closed, no worker active (the previous run ended that way): the job may be written. */
	pool->fn = fn;
	pool->arg = arg;
	pool->n = n;
	pool->grain = grain;
	atomic_store(&pool->next, 0);
	atomic_store(&pool->done, 0);
	pthread_mutex_lock(&pool->mutex);
	atomic_fetch_add(&pool->state, 1); /* open */
	pthread_cond_broadcast(&pool->work_cv);
	pthread_mutex_unlock(&pool->mutex);

	run_chunks(pool, 0);

	for (int spin = 0; spin < SPIN_ITERATIONS && atomic_load(&pool->done) != n; spin++)
		cpu_relax();
	if (atomic_load(&pool->done) != n) {
		pthread_mutex_lock(&pool->mutex);
		while (atomic_load(&pool->done) != n)
			pthread_cond_wait(&pool->done_cv, &pool->mutex);
		pthread_mutex_unlock(&pool->mutex);
	}
	atomic_fetch_add(&pool->state, 1); /* close: late workers back out without reading the job */
	for (int spin = 0; atomic_load(&pool->active) != 0; spin++) {
		if (spin < SPIN_ITERATIONS)
			cpu_relax();
		else
			sched_yield(); /* a worker preempted inside the job: let it run */
	}
}

int ember_pool_threads(const struct ember_pool *pool) { return pool->n_threads; }

void ember_pool_free(struct ember_pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->mutex);
	atomic_store(&pool->stop, 1);
	pthread_cond_broadcast(&pool->work_cv);
	pthread_mutex_unlock(&pool->mutex);
	for (int i = 1; i <= pool->n_started; i++)
		pthread_join(pool->threads[i - 1], NULL);
	pthread_mutex_destroy(&pool->mutex);
	pthread_cond_destroy(&pool->work_cv);
	pthread_cond_destroy(&pool->done_cv);
	free(pool->threads);
	free(pool);
}
