/*
 * session.c - a loaded model answering requests (session.h): loading, the checks every request's
 * token ids go through, and greedy generation as a sequence of steps (prefill, then one decode
 * step per token) so that the stdio and HTTP servers drive the same loop, each at its own pace.
 */
#include "session.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "spec.h"

double ember_session_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_us(int us)
{
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* The slowdown injection: busy-waits until (1000 + pm) / 1000 of the work's time since t0 has passed
 * (spinning, not sleeping: a sleep overshoots by the timer slack, tens of microseconds, more than a
 * 2% share of a sub-millisecond decode step). Adds the wait to *injected_ms. */
static void slow_down(int pm, double t0, double *injected_ms)
{
	if (pm <= 0)
		return;
	const double t1 = ember_session_now_ms(), until = t1 + (t1 - t0) * pm / 1000.0;
	double now = t1;
	while (now < until)
		now = ember_session_now_ms();
	*injected_ms += now - t1;
}

int ember_session_open(struct ember_session **out, const struct ember_session_config *c)
{
	struct ember_session *s = calloc(1, sizeof(*s));
	int error = EMBER_ERROR;
	if (!s)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	if ((error = ember_model_load(&s->model, c->model_path)) || (error = ember_backend_select(&s->ops, c->backend)))
		goto cleanup;
	const int train = s->model->hp.n_ctx_train;
	s->n_ctx = c->n_ctx > 0 ? c->n_ctx : (train < EMBER_SESSION_DEFAULT_CTX ? train : EMBER_SESSION_DEFAULT_CTX);
	s->token_delay_us = c->token_delay_us > 0 ? c->token_delay_us : 0;
	s->slow_prefill_pm = c->slow_prefill_pm > 0 ? c->slow_prefill_pm : EMBER_SLOW_PREFILL_PM;
	s->slow_decode_pm = c->slow_decode_pm > 0 ? c->slow_decode_pm : EMBER_SLOW_DECODE_PM;
	struct ember_backend_config bc = {.n_ctx = s->n_ctx, .n_threads = c->n_threads, .max_batch = c->max_batch};
	if (c->draft_path) {
		if (!ember_spec_supported(s->ops)) {
			error = ember_error_set(EMBER_EUNSUPPORTED, "backend %s has no speculative decoding (draft_attach, "
			                        "draft_commit, draft_propose); --draft needs one that has (cpu, cuda)", s->ops->name);
			goto cleanup;
		}
		if ((error = ember_draft_load(&s->draft, c->draft_path, s->model)) ||
		    (error = ember_spec_depth_from_env(s->draft->block_size, &s->spec_depth)))
			goto cleanup;
		bc.capture_layers = s->draft->target_layers;
		bc.n_capture = s->draft->n_target_layers;
	}
	if (s->ops->create(&s->be, s->model, &bc)) {
		error = ember_error_wrap(EMBER_ERROR, "backend %s", s->ops->name);
		goto cleanup;
	}
	if (s->draft && s->ops->draft_attach(s->be, s->draft)) {
		error = ember_error_wrap(EMBER_ERROR, "backend %s: attaching the draft", s->ops->name);
		goto cleanup;
	}
	*out = s;
	s = NULL;
	error = 0;
cleanup:
	ember_session_free(s);
	return error;
}

void ember_session_free(struct ember_session *s)
{
	if (!s)
		return;
	if (s->be)
		s->ops->destroy(s->be);
	ember_draft_free(s->draft);
	ember_model_free(s->model);
	free(s);
}

int ember_session_read_tokens(const struct ember_session *s, const json_t *arr, const char *field, size_t max_len,
                              const char *limit_name, int32_t **out, int *n_out)
{
	if (!json_is_array(arr))
		return ember_error_set(EMBER_EFORMAT, "'%s' must be an array of token ids", field);
	size_t n = json_array_size(arr);
	if (n > max_len)
		return ember_error_set(EMBER_EFORMAT, "'%s' has %zu tokens, more than the %s (%zu)", field, n, limit_name,
		                       max_len);
	int32_t *tokens = malloc((n ? n : 1) * sizeof(*tokens));
	if (!tokens)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *v = json_array_get(arr, i);
		if (!json_is_integer(v)) {
			free(tokens);
			return ember_error_set(EMBER_EFORMAT, "'%s'[%zu] is not an integer token id", field, i);
		}
		json_int_t t = json_integer_value(v);
		if (t < 0 || t >= s->model->hp.n_vocab) {
			free(tokens);
			return ember_error_set(EMBER_EFORMAT, "'%s'[%zu] = %" JSON_INTEGER_FORMAT " is outside the vocabulary (0..%d)",
			                       field, i, t, s->model->hp.n_vocab - 1);
		}
		tokens[i] = (int32_t)t;
	}
	*out = tokens;
	*n_out = (int)n;
	return 0;
}

int ember_session_gen_init(struct ember_session_gen *g, const struct ember_session *s, const int32_t *prompt,
                           int n_prompt, long long n_gen, const char *gen_field, int32_t *tokens)
{
	if (n_prompt < 1)
		return ember_error_set(EMBER_EFORMAT, "'prompt' is empty");
	if (n_gen < 1)
		return ember_error_set(EMBER_EFORMAT, "'%s' must be at least 1", gen_field);
	if (n_prompt + n_gen > s->n_ctx)
		return ember_error_set(EMBER_EFORMAT, "prompt (%d tokens) + %s (%lld) exceeds the context of %d", n_prompt,
		                       gen_field, n_gen, s->n_ctx);
	*g = (struct ember_session_gen){.prompt = prompt, .n_prompt = n_prompt, .n_gen = (int)n_gen, .tokens = tokens};
	return 0;
}

int ember_session_gen_spec(struct ember_session_gen *g, const struct ember_session *s, int depth)
{
	if (!s->draft)
		return ember_error_set(EMBER_EUNSUPPORTED, "speculative decoding needs a draft: start ember serve with --draft");
	if (!ember_spec_supported(s->ops))
		return ember_error_set(EMBER_EUNSUPPORTED, "backend %s has no speculative decoding", s->ops->name);
	if (depth < 1 || depth > s->draft->block_size - 1)
		return ember_error_set(EMBER_EFORMAT, "speculative depth %d must be in 1..%d (the draft's block %d - 1)", depth,
		                       s->draft->block_size - 1, s->draft->block_size);
	if (g->n_done)
		return ember_error_set(EMBER_ERROR, "a generation becomes speculative before its first step");
	g->spec = 1;
	g->run.depth = depth;
	return 0;
}

/* The speculative step: the prefill (through ember_spec_begin, which also fills the draft's context)
 * or one propose + verify; the token delay is paid once per target step. */
static int spec_step(struct ember_session *s, struct ember_session_gen *g)
{
	const double t0 = ember_session_now_ms();
	if (g->n_done == 0) {
		if (ember_spec_begin(&g->run, s->ops, s->be, s->draft, g->prompt, g->n_prompt, g->n_gen, g->run.depth,
		                     g->tokens))
			return EMBER_ERROR;
		g->prefill_ms = ember_session_now_ms() - t0;
	} else {
		if (ember_spec_step(&g->run))
			return EMBER_ERROR;
		if (s->token_delay_us)
			sleep_us(s->token_delay_us);
		g->decode_ms += ember_session_now_ms() - t0;
	}
	g->n_done = g->run.produced;
	if (g->n_done == g->n_gen)
		ember_spec_finish(&g->run);
	return 0;
}

int ember_session_step(struct ember_session *s, struct ember_session_gen *g)
{
	if (g->n_done >= g->n_gen)
		return ember_error_set(EMBER_ERROR, "generation already complete (%d tokens)", g->n_gen);
	if (g->spec)
		return spec_step(s, g);
	const double t0 = ember_session_now_ms();
	if (g->n_done == 0) {
		if (s->ops->forward(s->be, g->prompt, g->n_prompt, 0, 0, NULL, &g->tokens[0]))
			return ember_error_wrap(EMBER_ERROR, "prefill");
		slow_down(s->slow_prefill_pm, t0, &g->injected_ms);
		g->prefill_ms = ember_session_now_ms() - t0;
	} else {
		const int i = g->n_done;
		if (ember_backend_decode(s->ops, s->be, g->tokens[i - 1], g->n_prompt + i - 1, 1, &g->tokens[i]))
			return ember_error_wrap(EMBER_ERROR, "decode");
		slow_down(s->slow_decode_pm, t0, &g->injected_ms);
		if (s->token_delay_us)
			sleep_us(s->token_delay_us);
		g->decode_ms += ember_session_now_ms() - t0;
	}
	g->n_done++;
	return 0;
}

int ember_session_rest(struct ember_session *s, struct ember_session_gen *g)
{
	if (g->n_done < 1)
		return ember_error_set(EMBER_ERROR, "ember_session_rest before the prefill");
	if (s->token_delay_us || g->spec) {
		while (g->n_done < g->n_gen)
			if (ember_session_step(s, g))
				return EMBER_ERROR;
		return 0;
	}
	const int i = g->n_done, n_steps = g->n_gen - i;
	if (n_steps <= 0)
		return 0;
	const double t0 = ember_session_now_ms();
	if (ember_backend_decode(s->ops, s->be, g->tokens[i - 1], g->n_prompt + i - 1, n_steps, g->tokens + i))
		return ember_error_wrap(EMBER_ERROR, "decode");
	slow_down(s->slow_decode_pm, t0, &g->injected_ms);
	g->decode_ms += ember_session_now_ms() - t0;
	g->n_done = g->n_gen;
	return 0;
}
