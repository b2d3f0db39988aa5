/*
 * serve.c - the SUT protocol server (DESIGN.md, Contract 1). Requests are read with a bounded
 * line reader (an oversized line is discarded up to its newline and answered with an error),
 * parsed with jansson and validated field by field before the backend sees them. generate is
 * greedy from an empty cache with a "first" event right after prefill; score is teacher-forced
 * (score.c, shared with the HTTP server's echo + logprobs) and formats its (possibly large) answer
 * without building a JSON tree. With a DFlash draft
 * (--draft), "spec": true decodes speculatively through spec.c; the tokens equal plain greedy's.
 * Loading, token checks and the generate loop are session.c's, shared with the HTTP server.
 */
#include "serve.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "score.h"
#include "session.h"
#include "spec.h"

#define SCORE_MAX_ENTRIES (16 << 20) /* log-probs in one score answer */

struct server {
	const struct ember_serve_config *config;
	FILE *in, *out, *log;
	struct ember_session *ss;   /* model, backend, draft (NULL without --draft) */
	struct ember_scorer scorer; /* score op scratch (score.c) */
};

static double now_ms(void) { return ember_session_now_ms(); }

/* ---- output ---- */

static void emit_json(struct server *s, json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY);
	if (text) {
		fputs(text, s->out);
		fputc('\n', s->out);
		fflush(s->out);
		free(text);
	}
	json_decref(obj);
}

/* The request id as the client sent it (integer or string), or null. New reference. */
static json_t *id_copy(json_t *id) { return id ? json_incref(id) : json_null(); }

static void emit_error(struct server *s, json_t *id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void emit_error(struct server *s, json_t *id, const char *fmt, ...)
{
	char message[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	fprintf(s->log, "ember serve: request error: %s\n", message);
	emit_json(s, json_pack("{s:o, s:s, s:s}", "id", id_copy(id), "event", "error", "message", message));
}

/* ---- request validation ---- */

/* Reads an array of token ids into a new buffer (caller frees). Returns its length or -1 after
 * sending an error event. */
static int read_tokens(struct server *s, json_t *id, json_t *arr, const char *field, size_t max_len,
                       const char *limit_name, int32_t **out)
{
	int n = 0;
	if (ember_session_read_tokens(s->ss, arr, field, max_len, limit_name, out, &n)) {
		emit_error(s, id, "%s", ember_error_last());
		return -1;
	}
	return n;
}

/* The request's non-empty "prompt" (at most n_ctx tokens) into a new buffer (caller frees).
 * Returns its length, or -1 after sending an error event. */
static int read_prompt(struct server *s, json_t *req, json_t *id, int32_t **out)
{
	json_t *arr = json_object_get(req, "prompt");
	int32_t *prompt = NULL;
	if (!arr) {
		emit_error(s, id, "missing field 'prompt'");
		return -1;
	}
	int n = read_tokens(s, id, arr, "prompt", (size_t)s->ss->n_ctx, "context", &prompt);
	if (n == 0) {
		emit_error(s, id, "'prompt' is empty");
		free(prompt);
		return -1;
	}
	if (n > 0)
		*out = prompt;
	return n;
}

/* An integer field in [lo, hi]; `dflt` when absent and not required. 0 ok, -1 after an error event. */
static int read_int(struct server *s, json_t *req, json_t *id, const char *field, int required, long long dflt,
                    long long lo, long long hi, long long *out)
{
	json_t *v = json_object_get(req, field);
	if (!v) {
		if (required) {
			emit_error(s, id, "missing field '%s'", field);
			return -1;
		}
		*out = dflt;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		emit_error(s, id, "'%s' must be an integer in %lld..%lld", field, lo, hi);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

/* ---- generate ---- */

struct first_event {
	struct server *s;
	json_t *id;
};

static void emit_first(void *payload)
{
	struct first_event *f = payload;
	emit_json(f->s, json_pack("{s:o, s:s}", "id", id_copy(f->id), "event", "first"));
}

/* generate with "spec": true: the DFlash loop, then done with the spec stats. */
static void generate_spec(struct server *s, json_t *id, const int32_t *prompt, int n, int max_tokens, int32_t *gen)
{
	struct ember_session *ss = s->ss;
	struct ember_spec_stats st;
	struct first_event first = {s, id};
	if (ember_spec_generate(ss->ops, ss->be, ss->draft, prompt, n, max_tokens, ss->spec_depth, gen, &st, emit_first,
	                        &first)) {
		emit_error(s, id, "speculative decode failed: %s", ember_error_last());
		return;
	}
	json_t *tokens = json_array();
	for (int i = 0; i < max_tokens; i++)
		json_array_append_new(tokens, json_integer(gen[i]));
	emit_json(s, json_pack("{s:o, s:s, s:o, s:{s:f, s:f, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:f, s:f}}", "id",
	                       id_copy(id), "event", "done", "tokens", tokens, "stats", "prefill_ms", st.prefill_ms,
	                       "decode_ms", st.total_ms - st.prefill_ms, "prompt_tokens", n, "gen_tokens", max_tokens,
	                       "target_steps", st.target_steps, "drafted", st.drafted, "accepted", st.accepted,
	                       "accept_mean", st.accept_mean, "spec_depth", ss->spec_depth, "draft_ms", st.draft_ms,
	                       "verify_ms", st.verify_ms));
}

static void op_generate(struct server *s, json_t *req, json_t *id)
{
	int32_t *prompt = NULL, *gen = NULL;
	long long max_tokens;
	struct ember_session_gen g;
	json_t *spec = json_object_get(req, "spec");
	if (spec && !json_is_boolean(spec)) {
		emit_error(s, id, "'spec' must be true or false");
		return;
	}
	const int speculative = spec && json_is_true(spec);
	if (speculative && !s->ss->draft) {
		emit_error(s, id, "speculative decoding is not supported by this engine build without a draft model "
		           "(start ember serve with --draft FILE)");
		return;
	}
	int n = read_prompt(s, req, id, &prompt);
	if (n < 0)
		return;
	if (read_int(s, req, id, "max_tokens", 1, 0, 1, s->ss->n_ctx, &max_tokens))
		goto cleanup;
	if (!(gen = malloc((size_t)max_tokens * sizeof(*gen)))) {
		emit_error(s, id, "out of memory");
		goto cleanup;
	}
	if (ember_session_gen_init(&g, s->ss, prompt, n, max_tokens, "max_tokens", gen)) {
		emit_error(s, id, "%s", ember_error_last());
		goto cleanup;
	}
	if (speculative) {
		generate_spec(s, id, prompt, n, (int)max_tokens, gen);
		goto cleanup;
	}
	if (ember_session_step(s->ss, &g)) {
		emit_error(s, id, "generate failed: %s", ember_error_last());
		goto cleanup;
	}
	emit_json(s, json_pack("{s:o, s:s}", "id", id_copy(id), "event", "first"));
	if (ember_session_rest(s->ss, &g)) {
		emit_error(s, id, "generate failed: %s", ember_error_last());
		goto cleanup;
	}
	json_t *tokens = json_array();
	for (long long i = 0; i < max_tokens; i++)
		json_array_append_new(tokens, json_integer(gen[i]));
	json_t *done = json_pack("{s:o, s:s, s:o, s:{s:f, s:f, s:i, s:I}}", "id", id_copy(id), "event", "done", "tokens",
	                         tokens, "stats", "prefill_ms", g.prefill_ms, "decode_ms", g.decode_ms, "prompt_tokens", n,
	                         "gen_tokens", (json_int_t)max_tokens);
	if (done && (s->ss->slow_prefill_pm || s->ss->slow_decode_pm))
		json_object_set_new(json_object_get(done, "stats"), "debug_wait_ms", json_real(g.injected_ms));
	emit_json(s, done);
cleanup:
	free(prompt);
	free(gen);
}

/* ---- score ---- */

static void put_logprob(FILE *out, double lp)
{
	if (isfinite(lp))
		fprintf(out, "%.9g", lp);
	else
		fputs("null", out);
}

/* Formats one scored position into the answer: {"top":[[id,lp],...],"ids":[lp,...]}. */
struct score_format {
	FILE *text;
	int first;
	int32_t **want;   /* per scored position, the asked ids (NULL: none asked) */
	int *want_n;
};

static int put_position(void *user, const struct ember_score_position *sp)
{
	struct score_format *f = user;
	fputs(sp->pos > f->first ? ",{\"top\":[" : "{\"top\":[", f->text);
	for (int j = 0; j < sp->top_k; j++) {
		fprintf(f->text, "%s[%d,", j ? "," : "", sp->top[j]);
		put_logprob(f->text, (double)sp->logits[sp->top[j]] - sp->lse);
		fputc(']', f->text);
	}
	fputs("],\"ids\":[", f->text);
	const int pi = sp->pos - f->first;
	for (int j = 0; f->want && j < f->want_n[pi]; j++) {
		if (j)
			fputc(',', f->text);
		put_logprob(f->text, (double)sp->logits[f->want[pi][j]] - sp->lse);
	}
	fputs("]}", f->text);
	return 0;
}

static void op_score(struct server *s, json_t *req, json_t *id)
{
	int32_t *prompt = NULL;
	int32_t **want = NULL;
	int *want_n = NULL;
	long long top = 0, first = 0;
	FILE *text = NULL;
	char *text_buf = NULL;
	size_t text_len = 0;
	const int n_vocab = s->ss->model->hp.n_vocab;
	int n = read_prompt(s, req, id, &prompt);
	if (n < 0)
		return;
	if (read_int(s, req, id, "top_k", 1, 0, 0, n_vocab, &top) || read_int(s, req, id, "first", 0, 0, 0, n - 1, &first))
		goto cleanup;
	const int n_pos = n - (int)first;
	json_t *ids = json_object_get(req, "ids");
	if (ids && !json_is_null(ids)) {
		if (!json_is_array(ids) || json_array_size(ids) != (size_t)n_pos) {
			emit_error(s, id, "'ids' must be an array with one array of token ids per scored position (%d)", n_pos);
			goto cleanup;
		}
		want = calloc((size_t)n_pos, sizeof(*want));
		want_n = calloc((size_t)n_pos, sizeof(*want_n));
		if (!want || !want_n) {
			emit_error(s, id, "out of memory");
			goto cleanup;
		}
		for (int p = 0; p < n_pos; p++) {
			char field[32];
			snprintf(field, sizeof(field), "ids[%d]", p);
			json_t *row = json_array_get(ids, (size_t)p);
			if ((want_n[p] = read_tokens(s, id, row, field, (size_t)n_vocab, "vocabulary size", &want[p])) < 0)
				goto cleanup;
		}
	}

	uint64_t entries = (uint64_t)n_pos * (uint64_t)top;
	for (int p = 0; want && p < n_pos; p++)
		entries += (uint64_t)want_n[p];
	if (entries > SCORE_MAX_ENTRIES) {
		emit_error(s, id, "score answer too large: %" PRIu64 " log-probs (positions x top_k + ids) exceed %d",
		           entries, SCORE_MAX_ENTRIES);
		goto cleanup;
	}
	/* The answer is formatted into memory (it can be large; no JSON tree) and sent only once every
	 * forward call has succeeded, so a backend failure is still an error event. */
	double t0 = now_ms();
	if (!(text = open_memstream(&text_buf, &text_len))) {
		emit_error(s, id, "out of memory");
		goto cleanup;
	}
	char *idtext = json_dumps(id ? id : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
	fprintf(text, "{\"id\":%s,\"event\":\"done\",\"positions\":[", idtext ? idtext : "null");
	free(idtext);
	struct score_format fmt = {text, (int)first, want, want_n};
	if (ember_score_prompt(&s->scorer, s->ss, prompt, n, (int)first, (int)top, put_position, &fmt)) {
		emit_error(s, id, "%s", ember_error_last());
		goto cleanup;
	}
	fprintf(text, "],\"stats\":{\"score_ms\":%.3f,\"positions\":%d}}\n", now_ms() - t0, n_pos);
	if (fclose(text) != 0 || !text_buf) {
		text = NULL;
		emit_error(s, id, "out of memory formatting the answer");
		goto cleanup;
	}
	text = NULL;
	fwrite(text_buf, 1, text_len, s->out);
	fflush(s->out);
cleanup:
	if (text)
		fclose(text);
	free(text_buf);
	for (int p = 0; want && p < n - (int)first; p++)
		free(want[p]);
	free(want);
	free(want_n);
	free(prompt);
}

/* ---- request loop ---- */

enum line_status { LINE_EOF, LINE_OK, LINE_OVERSIZED };

/* Reads one line (without its newline) into *buf, growing it up to max_line bytes. A longer line
 * is consumed and discarded up to its newline. */
static enum line_status read_line(FILE *in, char **buf, size_t *cap, size_t max_line, size_t *len)
{
	size_t n = 0;
	int c, oversized = 0;
	flockfile(in);
	while ((c = getc_unlocked(in)) != EOF && c != '\n') {
		if (oversized)
			continue;
		if (n >= max_line) {
			oversized = 1;
			continue;
		}
		if (n + 1 >= *cap) { /* room for this byte and the NUL; cap never exceeds max_line + 1 */
			size_t new_cap = *cap * 2 > max_line + 1 ? max_line + 1 : *cap * 2;
			char *p = realloc(*buf, new_cap);
			if (!p) {
				oversized = 1;
				continue;
			}
			*buf = p;
			*cap = new_cap;
		}
		(*buf)[n++] = (char)c;
	}
	funlockfile(in);
	if (c == EOF && n == 0 && !oversized)
		return LINE_EOF;
	(*buf)[n] = '\0';
	*len = n;
	return oversized ? LINE_OVERSIZED : LINE_OK;
}

/* Handles one request line; returns 1 when the client asked to quit. */
static int handle_line(struct server *s, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	int quit = 0;
	if (!req) {
		emit_error(s, NULL, "malformed JSON at column %d: %s", jerr.column, jerr.text);
		return 0;
	}
	json_t *id = NULL;
	if (!json_is_object(req)) {
		emit_error(s, NULL, "a request must be a JSON object");
		goto done;
	}
	id = json_object_get(req, "id");
	if (id && !json_is_integer(id) && !json_is_string(id) && !json_is_null(id)) {
		id = NULL;
		emit_error(s, NULL, "'id' must be an integer or a string");
		goto done;
	}
	json_t *op = json_object_get(req, "op");
	if (!json_is_string(op)) {
		emit_error(s, id, op ? "'op' must be a string" : "missing field 'op'");
		goto done;
	}
	const char *name = json_string_value(op);
	if (strcmp(name, "generate") == 0)
		op_generate(s, req, id);
	else if (strcmp(name, "score") == 0)
		op_score(s, req, id);
	else if (strcmp(name, "quit") == 0)
		quit = 1;
	else
		emit_error(s, id, "unknown op '%.64s' (generate, score, quit)", name);
done:
	json_decref(req);
	return quit;
}

static void emit_ready(struct server *s)
{
	const struct ember_session *ss = s->ss;
	const struct ember_model *m = ss->model;
	const struct ember_hparams *hp = &m->hp;
	json_t *model = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:I, s:I}", "name", m->name, "arch",
	                          hp->arch, "vocab_size", hp->n_vocab, "n_layer", hp->n_layer, "n_embd", hp->n_embd,
	                          "n_head", hp->n_head, "n_head_kv", hp->n_head_kv, "head_dim", hp->head_dim, "n_ff",
	                          hp->n_ff, "file_type", m->file_type, "n_params", (json_int_t)m->n_params,
	                          "weight_bytes", (json_int_t)m->weight_bytes);
	json_t *ready = json_pack("{s:b, s:i, s:s, s:s, s:s, s:i, s:o}", "ready", 1, "protocol", 1, "engine", "ember",
	                          "backend", ss->ops->name, "device", ss->ops->device_name(ss->be), "n_ctx", ss->n_ctx,
	                          "model", model);
	if (ss->draft) {
		const struct ember_draft *d = ss->draft;
		json_t *layers = json_array();
		for (int i = 0; i < d->n_target_layers; i++)
			json_array_append_new(layers, json_integer(d->target_layers[i]));
		json_object_set_new(ready, "spec", json_pack("{s:s, s:i, s:i, s:s, s:i, s:o, s:i}", "kind", "dflash",
		                                             "block_size", d->block_size, "depth", ss->spec_depth, "draft",
		                                             d->name, "draft_layers", d->hp.n_layer, "target_layers", layers,
		                                             "mask_token_id", d->mask_token_id));
	}
	emit_json(s, ready);
}

static int start(struct server *s)
{
	if (ember_session_open(&s->ss, &s->config->session))
		return EMBER_ERROR;
	return ember_scorer_init(&s->scorer, s->ss);
}

int ember_serve_run(const struct ember_serve_config *config, FILE *in, FILE *out, FILE *log)
{
	struct server s = {.config = config, .in = in, .out = out, .log = log};
	size_t max_line = config->max_line ? config->max_line : EMBER_SERVE_MAX_LINE;
	size_t cap = 65536 < max_line + 1 ? 65536 : max_line + 1, len = 0;
	char *line = NULL;
	int error = -1;

	if (start(&s)) {
		error = EMBER_ERROR;
		fprintf(log, "ember serve: %s\n", ember_error_last());
		emit_json(&s, json_pack("{s:b, s:i, s:s, s:s}", "ready", 0, "protocol", 1, "engine", "ember", "error",
		                        ember_error_last()));
		goto cleanup;
	}
	const struct ember_session *ss = s.ss;
	fprintf(log, "ember serve: %s (%s, %d layers) on %s, n_ctx %d\n", ss->model->name, ss->model->file_type,
	        ss->model->hp.n_layer, ss->ops->device_name(ss->be), ss->n_ctx);
	if (ss->draft)
		fprintf(log, "ember serve: draft %s (dflash, %d layers, block %d), spec depth %d\n", ss->draft->name,
		        ss->draft->hp.n_layer, ss->draft->block_size, ss->spec_depth);
	if (ss->token_delay_us)
		fprintf(log, "ember serve: debug token delay %d us per decode step\n", ss->token_delay_us);
	if (ss->slow_prefill_pm || ss->slow_decode_pm)
		fprintf(log, "ember serve: debug slowdown: prefill +%d/1000, decode +%d/1000 of their own time\n",
		        ss->slow_prefill_pm, ss->slow_decode_pm);
	emit_ready(&s);
	if (!(line = malloc(cap))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	for (;;) {
		enum line_status st = read_line(in, &line, &cap, max_line, &len);
		if (st == LINE_EOF)
			break;
		if (st == LINE_OVERSIZED) {
			emit_error(&s, NULL, "request line longer than %zu bytes was discarded", max_line);
			continue;
		}
		if (strspn(line, " \t\r") == len) /* blank line */
			continue;
		if (handle_line(&s, line, len))
			break;
	}
	error = 0;
cleanup:
	free(line);
	ember_scorer_clear(&s.scorer);
	ember_session_free(s.ss);
	return error;
}
