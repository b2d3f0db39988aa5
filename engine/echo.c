/*
 * echo.c - OpenAI echo + logprobs answers (echo.h). score.c runs the prompt once; its per-position
 * callback keeps the numbers each answer entry needs (entry i + 1 is position i), and the answer
 * is then written as text in one pass (no JSON tree: it can hold (n + 1) * K log-probs).
 */
#define _GNU_SOURCE
#include "echo.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* What the answer needs from the scored positions. */
struct collect {
	const int32_t *prompt;
	int n_prompt;
	int k;              /* top entries kept per position (>= 1: the greedy next token is top[0]) */
	double *token_lp;   /* [n_prompt + 1]: entry i's own token's log-prob (entry 0 unused) */
	int32_t *top_ids;   /* [n_prompt][k]: position p's top-k */
	double *top_lp;     /* [n_prompt][k] */
	int32_t next;       /* the greedy token after the prompt */
};

static int keep_position(void *user, const struct ember_score_position *sp)
{
	struct collect *col = user;
	const int p = sp->pos;
	for (int j = 0; j < col->k; j++) {
		col->top_ids[(size_t)p * col->k + j] = sp->top[j];
		col->top_lp[(size_t)p * col->k + j] = (double)sp->logits[sp->top[j]] - sp->lse;
	}
	if (p + 1 < col->n_prompt)
		col->token_lp[p + 1] = (double)sp->logits[col->prompt[p + 1]] - sp->lse;
	else {
		col->next = sp->top[0];
		col->token_lp[p + 1] = col->top_lp[(size_t)p * col->k];
	}
	return 0;
}

/* A log-prob as JSON: -inf as vLLM clamps it (-9999.0), NaN as null (a client must refuse it). */
static void put_logprob(FILE *f, double lp)
{
	if (isnan(lp))
		fputs("null", f);
	else
		fprintf(f, "%.9g", lp < -9999.0 ? -9999.0 : lp);
}

static void put_name(FILE *f, int token_ids, int32_t id)
{
	fprintf(f, token_ids ? "\"token_id:%d\"" : "\"[%d]\"", (int)id);
}

static int text_len(int32_t id) { return snprintf(NULL, 0, "[%d]", (int)id); }

/* choices[0].logprobs: entries 0 .. n_entries-1; entry i's token is prompt[i] or, at n_prompt, next. */
static void put_logprobs(FILE *f, const struct collect *col, const struct ember_completion *c, int n_entries)
{
	fputs("{\"tokens\":[", f);
	for (int i = 0; i < n_entries; i++) {
		if (i)
			fputc(',', f);
		put_name(f, c->token_ids, i < col->n_prompt ? col->prompt[i] : col->next);
	}
	fputs("],\"token_logprobs\":[null", f);
	for (int i = 1; i < n_entries; i++) {
		fputc(',', f);
		put_logprob(f, col->token_lp[i]);
	}
	fputs("],\"top_logprobs\":[null", f);
	for (int i = 1; i < n_entries; i++) {
		const size_t row = (size_t)(i - 1) * col->k;
		fputs(",{", f);
		for (int j = 0; j < c->logprobs; j++) {
			if (j)
				fputc(',', f);
			put_name(f, c->token_ids, col->top_ids[row + j]);
			fputc(':', f);
			put_logprob(f, col->top_lp[row + j]);
		}
		fputc('}', f);
	}
	fputs("],\"text_offset\":[", f);
	long offset = 0;
	for (int i = 0; i < n_entries; i++) {
		fprintf(f, "%s%ld", i ? "," : "", offset);
		offset += text_len(i < col->n_prompt ? col->prompt[i] : col->next);
	}
	fputs("]}", f);
}

int ember_echo_answer(char **out, size_t *out_len, struct ember_session *ss, struct ember_scorer *sc,
                      const struct ember_completion *c, const char *id, long long created)
{
	const int n = c->n_prompt, n_gen = (int)c->n_gen;
	struct collect col = {.prompt = c->prompt, .n_prompt = n, .k = c->logprobs > 0 ? c->logprobs : 1};
	char *buf = NULL, *model = NULL;
	size_t len = 0;
	FILE *f = NULL;
	int error = EMBER_ENOMEM;

	if (!c->echo || n < 1 || n_gen < 0 || n_gen > 1 || c->logprobs < 0 || c->logprobs > EMBER_COMPLETION_LOGPROBS_MAX)
		return ember_error_set(EMBER_EFORMAT, "echo: bad request (%d tokens, max_tokens %d, logprobs %d)", n, n_gen,
		                       c->logprobs);
	col.token_lp = calloc((size_t)n + 1, sizeof(double));
	col.top_ids = malloc((size_t)n * col.k * sizeof(int32_t));
	col.top_lp = malloc((size_t)n * col.k * sizeof(double));
	json_t *name = json_string(ss->model->name);
	model = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
	json_decref(name);
	if (!col.token_lp || !col.top_ids || !col.top_lp || !model) {
		ember_error_set(EMBER_ENOMEM, "out of memory for an echo answer of %d positions", n + 1);
		goto cleanup;
	}
	/* Every entry's numbers with logprobs; only the last position's argmax for the next token. */
	const double t0 = ember_session_now_ms();
	if ((c->logprobs > 0 || n_gen == 1) &&
	    (error = ember_score_prompt(sc, ss, c->prompt, n, c->logprobs > 0 ? 0 : n - 1, col.k, keep_position, &col)))
		goto cleanup;
	const double score_ms = ember_session_now_ms() - t0;
	error = EMBER_ENOMEM;
	if (!(f = open_memstream(&buf, &len))) {
		ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	fprintf(f, "{\"id\":\"%s\",\"object\":\"text_completion\",\"created\":%lld,\"model\":%s,\"choices\":[{\"index\":0,"
	        "\"text\":\"", id, created, model);
	for (int i = 0; i < n + n_gen; i++)
		fprintf(f, "[%d]", (int)(i < n ? c->prompt[i] : col.next));
	fputs("\",\"logprobs\":", f);
	if (c->logprobs > 0)
		put_logprobs(f, &col, c, n + n_gen);
	else
		fputs("null", f);
	fprintf(f, ",\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
	        "\"total_tokens\":%d},\"timings\":{\"prompt_n\":%d,\"prompt_ms\":%.3f,\"predicted_n\":%d}}",
	        n, n_gen, n + n_gen, n, score_ms, n_gen);
	if (fclose(f) != 0 || !buf) {
		f = NULL;
		ember_error_set(EMBER_ENOMEM, "out of memory formatting an echo answer");
		goto cleanup;
	}
	f = NULL;
	*out = buf;
	*out_len = len;
	buf = NULL;
	error = 0;
cleanup:
	if (f)
		fclose(f);
	free(buf);
	free(model);
	free(col.token_lp);
	free(col.top_ids);
	free(col.top_lp);
	return error;
}
