/*
 * serve_http.c - `ember serve --http` (serve_http.h) on libmicrohttpd in thread-per-connection
 * mode. A streamed completion is a callback response whose reader runs one generation step per
 * call (the prefill first, then one decode step) and hands back that token's SSE event, so each
 * event is sent as soon as its token exists, and a client that goes away stops the generation at
 * the next token (libmicrohttpd stops reading and frees the stream). Request bodies are capped and
 * every field is checked before the engine sees it; a busy flag admits one generation at a time.
 * An OpenAI echo + logprobs request is scored teacher-forced (score.c, as the stdio score op) and
 * answered in one piece (echo.c).
 */
#define _GNU_SOURCE
#include "serve_http.h"

#include "completion.h"
#include "echo.h"
#include "error.h"

#ifdef EMBER_HAVE_MHD

#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define DEFAULT_IDLE_S 300
#define STREAM_BLOCK (16 << 10)     /* libmicrohttpd's buffer for one reader call */
#define BUSY_MESSAGE "busy: ember serve runs one generation at a time; retry when it ends"

struct server {
	const struct ember_serve_http_config *config;
	struct ember_session *ss;
	FILE *log;
	size_t max_body;
	pthread_mutex_t lock;
	int busy;                   /* a generation holds the engine (under lock) */
	unsigned long next_id;      /* completion ids (under lock) */
	atomic_int stopping;        /* SIGTERM/SIGINT arrived: generations end at their next token */
	struct ember_scorer scorer; /* echo + logprobs scratch, made at the first such request (under busy) */
};

enum route_id { ROUTE_NONE, ROUTE_HEALTH, ROUTE_PROPS, ROUTE_MODELS, ROUTE_COMPLETION, ROUTE_V1_COMPLETIONS };

static const struct route {
	const char *path, *method;
	enum route_id id;
} routes[] = {
	{"/health", "GET", ROUTE_HEALTH},
	{"/props", "GET", ROUTE_PROPS},
	{"/v1/models", "GET", ROUTE_MODELS},
	{"/completion", "POST", ROUTE_COMPLETION},
	{"/v1/completions", "POST", ROUTE_V1_COMPLETIONS},
};

/* One HTTP request, from the handler's first call to libmicrohttpd's completion notice. */
struct request {
	const struct route *route;  /* NULL: unknown path */
	int method_ok;
	int too_large;              /* the body grew past the cap: drained, not kept */
	char *body;
	size_t len, cap;
};

enum phase { PHASE_GEN, PHASE_FINAL, PHASE_END };

/* A generation in progress; owned by its libmicrohttpd response when streamed. */
struct stream {
	struct server *srv;
	struct ember_completion c;
	struct ember_session_gen gen;
	int32_t *tokens;            /* [n_gen], owned */
	char id[40];                /* "cmpl-N" */
	long long created;
	enum phase phase;
	int released;               /* the engine was handed back (at the last event, or at free) */
	char *out;                  /* the pending bytes of the current event(s), owned */
	size_t out_len, out_pos;
};

/* ---- small helpers ---- */

static void logf_(struct server *srv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct server *srv, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	flockfile(srv->log);
	fputs("ember serve: ", srv->log);
	vfprintf(srv->log, fmt, ap);
	fputc('\n', srv->log);
	fflush(srv->log);
	funlockfile(srv->log);
	va_end(ap);
}

/* Queues `text` (copied) with the given status and content type. */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *type, const char *text,
                               const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	if (allow)
		MHD_add_response_header(r, "Allow", allow);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Queues `v` (stolen) as a JSON answer. */
static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned status, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json",
		               "{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\"}}", NULL);
	enum MHD_Result ret = respond(conn, status, "application/json", text, NULL);
	free(text);
	return ret;
}

static const char *error_type(unsigned status)
{
	switch (status) {
	case MHD_HTTP_NOT_FOUND: return "not_found_error";
	case MHD_HTTP_SERVICE_UNAVAILABLE: return "unavailable_error";
	default: return status >= 500 ? "server_error" : "invalid_request_error";
	}
}

/* The error body of llama-server and OpenAI: {"error":{"code","message","type"}}. New reference. */
static json_t *error_json(unsigned status, const char *message)
{
	return json_pack("{s:{s:i, s:s, s:s}}", "error", "code", (int)status, "message", message, "type",
	                 error_type(status));
}

static enum MHD_Result respond_error(struct server *srv, struct MHD_Connection *conn, unsigned status,
                                     const char *allow, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result respond_error(struct server *srv, struct MHD_Connection *conn, unsigned status,
                                     const char *allow, const char *fmt, ...)
{
	char message[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	logf_(srv, "HTTP %u: %s", status, message);
	if (!allow)
		return respond_json(conn, status, error_json(status, message));
	json_t *v = error_json(status, message);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	enum MHD_Result ret = respond(conn, status, "application/json", text ? text : "{}", allow);
	free(text);
	return ret;
}

/* ---- GET endpoints ---- */

/* llama-server's /props fields where ember has them; with a draft also "spec", the object the stdio
 * ready line carries ({"kind": "dflash", "block_size": B, "depth": D, ...}), which abgate reads. */
static json_t *props_json(struct server *srv)
{
	const struct ember_session *ss = srv->ss;
	const struct ember_model *m = ss->model;
	const int depth = ss->draft ? ss->spec_depth : 0;
	json_t *v = json_pack("{s:i, s:i, s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:b, s:{s:i, s:{s:f, s:i, s:i, s:i}}}",
	                      "vocab_size", m->hp.n_vocab, "n_vocab", m->hp.n_vocab, "n_ctx", ss->n_ctx, "model", m->name,
	                      "model_path", srv->config->session.model_path, "engine", "ember", "backend", ss->ops->name,
	                      "device", ss->ops->device_name(ss->be), "total_slots", 1, "speculative", ss->draft != NULL,
	                      "default_generation_settings", "n_ctx", ss->n_ctx, "params", "temperature", 0.0, "top_k", 1,
	                      "n_predict", -1, "speculative.n_max", depth);
	if (v && ss->draft)
		json_object_set_new(v, "spec", json_pack("{s:s, s:i, s:i, s:s, s:i}", "kind", "dflash", "block_size",
		                                         ss->draft->block_size, "depth", depth, "draft", ss->draft->name,
		                                         "draft_layers", ss->draft->hp.n_layer));
	return v;
}

static json_t *models_json(struct server *srv)
{
	const struct ember_model *m = srv->ss->model;
	return json_pack("{s:s, s:[{s:s, s:s, s:i, s:s, s:{s:i, s:i, s:i, s:I, s:I, s:s}}]}", "object", "list", "data",
	                 "id", m->name, "object", "model", "created", 0, "owned_by", "ember", "meta", "n_vocab",
	                 m->hp.n_vocab, "n_ctx_train", m->hp.n_ctx_train, "n_embd", m->hp.n_embd, "n_params",
	                 (json_int_t)m->n_params, "size", (json_int_t)m->weight_bytes, "file_type", m->file_type);
}

/* ---- generation ---- */

static int acquire(struct server *srv, unsigned long *id)
{
	pthread_mutex_lock(&srv->lock);
	const int busy = srv->busy;
	if (!busy) {
		srv->busy = 1;
		*id = ++srv->next_id;
	}
	pthread_mutex_unlock(&srv->lock);
	return busy ? -1 : 0;
}

static void release(struct server *srv)
{
	pthread_mutex_lock(&srv->lock);
	srv->busy = 0;
	pthread_mutex_unlock(&srv->lock);
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	if (!st)
		return;
	if (st->srv && st->c.stream && (st->phase != PHASE_END || st->out_pos < st->out_len))
		logf_(st->srv, "%s: the client went away after %d of %d tokens; generation stopped", st->id, st->gen.n_done,
		      st->gen.n_gen);
	if (st->srv && !st->released)
		release(st->srv);
	ember_completion_clear(&st->c);
	free(st->tokens);
	free(st->out);
	free(st);
}

/* The engine's own clock, in llama-server's field names. predicted_* cover the decode steps after
 * the first token (which comes out of the prompt pass): rate = (n - 1) / predicted_ms. A
 * speculative generation adds llama-server's draft_n / draft_n_accepted and ember's own
 * target_steps, accept_mean (tau, bonus token included), draft_ms and verify_ms. */
static json_t *timings_json(const struct ember_session_gen *g)
{
	const int steps = g->n_done - 1;
	json_t *t = json_pack("{s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "prompt_n", g->n_prompt, "prompt_ms",
	                      g->prefill_ms, "prompt_per_token_ms", g->prefill_ms / g->n_prompt, "prompt_per_second",
	                      g->prefill_ms > 0 ? g->n_prompt * 1e3 / g->prefill_ms : 0.0, "predicted_n", g->n_done,
	                      "predicted_ms", g->decode_ms, "predicted_per_token_ms", steps > 0 ? g->decode_ms / steps : 0.0,
	                      "predicted_per_second", steps > 0 && g->decode_ms > 0 ? steps * 1e3 / g->decode_ms : 0.0);
	if (t && g->injected_ms > 0)
		json_object_set_new(t, "debug_wait_ms", json_real(g->injected_ms));
	if (t && g->spec) {
		const struct ember_spec_stats *st = &g->run.stats;
		json_t *extra = json_pack("{s:i, s:i, s:i, s:f, s:i, s:f, s:f}", "draft_n", st->drafted, "draft_n_accepted",
		                          st->accepted, "target_steps", st->target_steps, "accept_mean", st->accept_mean,
		                          "spec_depth", g->run.depth, "draft_ms", st->draft_ms, "verify_ms", st->verify_ms);
		if (!extra || json_object_update(t, extra)) {
			json_decref(extra);
			json_decref(t);
			return NULL;
		}
		json_decref(extra);
	}
	return t;
}

/* A token's text: ember serve has no tokenizer, so a stable placeholder per id. */
static void token_text(char *buf, size_t cap, int32_t token) { snprintf(buf, cap, "[%d]", (int)token); }

static json_t *usage_json(const struct stream *st)
{
	return json_pack("{s:i, s:i, s:i}", "prompt_tokens", st->c.n_prompt, "completion_tokens", st->gen.n_done,
	                 "total_tokens", st->c.n_prompt + st->gen.n_done);
}

static json_t *openai_object(const struct stream *st, json_t *choices)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", st->id, "object", "text_completion", "created",
	                 (json_int_t)st->created, "model", st->srv->ss->model->name, "choices", choices);
}

/* The whole answer of a request with "stream": false. New reference. */
static json_t *answer_json(const struct stream *st)
{
	char text[24];
	json_t *tokens = json_array();
	char *content = NULL;
	size_t content_len = 0;
	FILE *f = open_memstream(&content, &content_len);
	for (int i = 0; f && tokens && i < st->gen.n_done; i++) {
		token_text(text, sizeof(text), st->tokens[i]);
		fputs(text, f);
		json_array_append_new(tokens, json_integer(st->tokens[i]));
	}
	if (!f || fclose(f) != 0 || !tokens) {
		json_decref(tokens);
		free(content);
		return NULL;
	}
	json_t *v;
	if (st->c.api == EMBER_COMPLETION_LLAMA) {
		v = json_pack("{s:i, s:s, s:b, s:s, s:s, s:i, s:i, s:b, s:o}", "index", 0, "content", content, "stop", 1,
		              "stop_type", "limit", "model", st->srv->ss->model->name, "tokens_predicted", st->gen.n_done,
		              "tokens_evaluated", st->c.n_prompt, "truncated", 0, "timings", timings_json(&st->gen));
		if (v && st->c.return_tokens)
			json_object_set(v, "tokens", tokens);
	} else {
		v = openai_object(st, json_pack("[{s:i, s:s, s:n, s:s}]", "index", 0, "text", content, "logprobs",
		                                "finish_reason", "length"));
		if (v) {
			json_object_set_new(v, "usage", usage_json(st));
			json_object_set_new(v, "timings", timings_json(&st->gen));
		}
	}
	json_decref(tokens);
	free(content);
	return v;
}

/* Appends "data: JSON\n\n" for `v` (stolen) to the pending output. 0 or -1 (out of memory). */
static int put_event(struct stream *st, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return -1;
	size_t n = strlen(text);
	char *grown = realloc(st->out, st->out_len + n + 9);
	if (!grown) {
		free(text);
		return -1;
	}
	st->out = grown;
	memcpy(st->out + st->out_len, "data: ", 6);
	memcpy(st->out + st->out_len + 6, text, n);
	memcpy(st->out + st->out_len + 6 + n, "\n\n", 3);
	st->out_len += n + 8;
	free(text);
	return 0;
}

static int put_token_event(struct stream *st, int32_t token)
{
	char text[24];
	token_text(text, sizeof(text), token);
	if (st->c.api == EMBER_COMPLETION_LLAMA) {
		json_t *v = json_pack("{s:i, s:s, s:b}", "index", 0, "content", text, "stop", 0);
		if (v && st->c.return_tokens)
			json_object_set_new(v, "tokens", json_pack("[i]", (int)token));
		return put_event(st, v);
	}
	return put_event(st, openai_object(st, json_pack("[{s:i, s:s, s:n, s:n}]", "index", 0, "text", text, "logprobs",
	                                                 "finish_reason")));
}

static int put_final_events(struct stream *st)
{
	if (st->c.api == EMBER_COMPLETION_LLAMA) {
		json_t *v = json_pack("{s:i, s:s, s:b, s:s, s:s, s:i, s:i, s:b, s:o}", "index", 0, "content", "", "stop", 1,
		                      "stop_type", "limit", "model", st->srv->ss->model->name, "tokens_predicted",
		                      st->gen.n_done, "tokens_evaluated", st->c.n_prompt, "truncated", 0, "timings",
		                      timings_json(&st->gen));
		if (v && st->c.return_tokens)
			json_object_set_new(v, "tokens", json_array());
		return put_event(st, v);
	}
	json_t *last = openai_object(st, json_pack("[{s:i, s:s, s:n, s:s}]", "index", 0, "text", "", "logprobs",
	                                           "finish_reason", "length"));
	if (last)
		json_object_set_new(last, "timings", timings_json(&st->gen));
	if (put_event(st, last))
		return -1;
	if (st->c.include_usage) { /* OpenAI's usage chunk: no choices */
		json_t *usage = openai_object(st, json_array());
		if (usage)
			json_object_set_new(usage, "usage", usage_json(st));
		if (put_event(st, usage))
			return -1;
	}
	char *grown = realloc(st->out, st->out_len + 15);
	if (!grown)
		return -1;
	st->out = grown;
	memcpy(st->out + st->out_len, "data: [DONE]\n\n", 15);
	st->out_len += 14;
	return 0;
}

/* The engine is free again once the last event is formatted: before the client can read it and
 * send its next request (libmicrohttpd frees the stream only a little later). */
static void end_generation(struct stream *st)
{
	if (!st->released) {
		st->released = 1;
		release(st->srv);
	}
}

/* Fills st->out with the next event(s): one token, or the closing events. 0, or -1 when the stream
 * must end with an error (out of memory). A failed step becomes an error event. */
static int stream_next(struct stream *st)
{
	free(st->out);
	st->out = NULL;
	st->out_len = st->out_pos = 0;
	if (st->phase == PHASE_FINAL) {
		st->phase = PHASE_END;
		const int rc = put_final_events(st);
		end_generation(st);
		return rc;
	}
	const char *why = atomic_load(&st->srv->stopping) ? "the server is stopping" : NULL;
	const int before = st->gen.n_done;
	if (!why && ember_session_step(st->srv->ss, &st->gen))
		why = ember_error_last();
	if (why) {
		logf_(st->srv, "%s stopped after %d of %d tokens: %s", st->id, st->gen.n_done, st->gen.n_gen, why);
		st->phase = PHASE_END;
		const int rc = put_event(st, error_json(500, why));
		end_generation(st);
		return rc;
	}
	if (st->gen.n_done == st->gen.n_gen)
		st->phase = PHASE_FINAL;
	for (int i = before; i < st->gen.n_done; i++) /* a speculative step yields several */
		if (put_token_event(st, st->tokens[i]))
			return -1;
	return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	(void)pos;
	while (st->out_pos == st->out_len) {
		if (st->phase == PHASE_END)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (stream_next(st))
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = st->out_len - st->out_pos < max ? st->out_len - st->out_pos : max;
	memcpy(buf, st->out + st->out_pos, n);
	st->out_pos += n;
	return (ssize_t)n;
}

/* echo (+ logprobs): the prompt scored teacher-forced by score.c, as the stdio score op scores it,
 * and answered in one piece (echo.c). Takes the parsed request (st, freed here). */
static enum MHD_Result handle_echo(struct server *srv, struct MHD_Connection *conn, struct stream *st)
{
	unsigned long id;
	char *text = NULL, cid[40];
	size_t len = 0;
	if (acquire(srv, &id)) {
		stream_free(st);
		return respond_error(srv, conn, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, BUSY_MESSAGE);
	}
	snprintf(cid, sizeof(cid), "cmpl-%lu", id);
	int rc = srv->scorer.logits ? 0 : ember_scorer_init(&srv->scorer, srv->ss);
	if (!rc)
		rc = ember_echo_answer(&text, &len, srv->ss, &srv->scorer, &st->c, cid, (long long)time(NULL));
	release(srv);
	stream_free(st); /* st->srv is unset: freeing it releases nothing */
	if (rc)
		return respond_error(srv, conn, rc == EMBER_EFORMAT ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_INTERNAL_SERVER_ERROR,
		                     NULL, "echo failed: %s", ember_error_last());
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result handle_completion(struct server *srv, struct MHD_Connection *conn, struct request *r,
                                         enum ember_completion_api api)
{
	struct stream *st = calloc(1, sizeof(*st));
	unsigned long id;
	if (!st)
		return respond_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "out of memory");
	int rc = ember_completion_parse(&st->c, srv->ss, r->body ? r->body : "", r->len, api);
	if (rc) {
		stream_free(st);
		return respond_error(srv, conn, rc == EMBER_ENOMEM ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_BAD_REQUEST,
		                     NULL, "%s", ember_error_last());
	}
	if (st->c.echo)
		return handle_echo(srv, conn, st);
	if (ember_session_gen_init(&st->gen, srv->ss, st->c.prompt, st->c.n_prompt, st->c.n_gen,
	                           api == EMBER_COMPLETION_LLAMA ? "n_predict" : "max_tokens", NULL)) {
		stream_free(st);
		return respond_error(srv, conn, MHD_HTTP_BAD_REQUEST, NULL, "%s", ember_error_last());
	}
	if (st->c.spec_depth != 0 && srv->ss->draft &&
	    ember_session_gen_spec(&st->gen, srv->ss, st->c.spec_depth < 0 ? srv->ss->spec_depth : st->c.spec_depth)) {
		stream_free(st);
		return respond_error(srv, conn, MHD_HTTP_BAD_REQUEST, NULL, "%s", ember_error_last());
	}
	if (!(st->tokens = st->gen.tokens = malloc((size_t)st->gen.n_gen * sizeof(int32_t)))) { /* n_gen <= n_ctx */
		stream_free(st);
		return respond_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "out of memory");
	}
	if (acquire(srv, &id)) {
		stream_free(st);
		return respond_error(srv, conn, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, BUSY_MESSAGE);
	}
	st->srv = srv; /* from here on, freeing the stream releases the engine */
	snprintf(st->id, sizeof(st->id), "cmpl-%lu", id);
	st->created = (long long)time(NULL);
	if (st->c.stream) {
		struct MHD_Response *resp =
			MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, st, stream_free);
		if (!resp) {
			stream_free(st);
			return MHD_NO;
		}
		MHD_add_response_header(resp, "Content-Type", "text/event-stream");
		MHD_add_response_header(resp, "Cache-Control", "no-cache");
		enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
		MHD_destroy_response(resp); /* the connection keeps it (and the stream) until it is sent or dropped */
		return ret;
	}
	while (st->gen.n_done < st->gen.n_gen) {
		if (atomic_load(&srv->stopping) || ember_session_step(srv->ss, &st->gen)) {
			char why[512];
			snprintf(why, sizeof(why), "%s", atomic_load(&srv->stopping) ? "the server is stopping" : ember_error_last());
			stream_free(st);
			return respond_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "generate failed: %s", why);
		}
	}
	json_t *answer = answer_json(st);
	stream_free(st);
	return respond_json(conn, answer ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR,
	                    answer ? answer : error_json(500, "out of memory"));
}

/* ---- dispatch ---- */

static const struct route *route_find(const char *url, int *path_known)
{
	*path_known = 0;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (strcmp(url, routes[i].path) == 0) {
			*path_known = 1;
			return &routes[i];
		}
	return NULL;
}

static enum MHD_Result dispatch(struct server *srv, struct MHD_Connection *conn, const char *url, const char *method,
                                struct request *r)
{
	if (!r->route)
		return respond_error(srv, conn, MHD_HTTP_NOT_FOUND, NULL, "no endpoint %.200s (GET /health, /props, "
		                     "/v1/models; POST /completion, /v1/completions)", url);
	if (!r->method_ok)
		return respond_error(srv, conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		                     strcmp(r->route->method, "GET") == 0 ? "GET, HEAD" : "POST", "%s needs %s, not %.16s",
		                     r->route->path, r->route->method, method);
	if (r->too_large)
		return respond_error(srv, conn, MHD_HTTP_CONTENT_TOO_LARGE, NULL, "request body over %zu bytes", srv->max_body);
	switch (r->route->id) {
	case ROUTE_HEALTH: return respond_json(conn, MHD_HTTP_OK, json_pack("{s:s}", "status", "ok"));
	case ROUTE_PROPS: return respond_json(conn, MHD_HTTP_OK, props_json(srv));
	case ROUTE_MODELS: return respond_json(conn, MHD_HTTP_OK, models_json(srv));
	case ROUTE_COMPLETION: return handle_completion(srv, conn, r, EMBER_COMPLETION_LLAMA);
	case ROUTE_V1_COMPLETIONS: return handle_completion(srv, conn, r, EMBER_COMPLETION_OPENAI);
	default: return respond_error(srv, conn, MHD_HTTP_NOT_FOUND, NULL, "no endpoint %.200s", url);
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
	struct server *srv = cls;
	struct request *r = *con_cls;
	(void)version;
	if (!r) {
		int known;
		if (!(r = calloc(1, sizeof(*r))))
			return MHD_NO;
		*con_cls = r;
		r->route = route_find(url, &known);
		r->method_ok = r->route && (strcmp(method, r->route->method) == 0 ||
		                            (strcmp(r->route->method, "GET") == 0 && strcmp(method, "HEAD") == 0));
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > srv->max_body) {
			/* Refused before reading: libmicrohttpd answers instead of reading and closes. */
			r->too_large = 1;
			return dispatch(srv, conn, url, method, r);
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (!r->route || !r->method_ok || r->route->id < ROUTE_COMPLETION || r->too_large)
			return MHD_YES; /* drained, not kept */
		if (r->len + n > srv->max_body) {
			r->too_large = 1;
			free(r->body);
			r->body = NULL;
			r->len = r->cap = 0;
			return MHD_YES;
		}
		if (r->len + n + 1 > r->cap) {
			size_t cap = r->cap ? r->cap : 16384;
			while (cap < r->len + n + 1)
				cap *= 2;
			if (cap > srv->max_body + 1)
				cap = srv->max_body + 1;
			char *grown = realloc(r->body, cap);
			if (!grown)
				return MHD_NO;
			r->body = grown;
			r->cap = cap;
		}
		memcpy(r->body + r->len, upload_data, n);
		r->len += n;
		r->body[r->len] = '\0';
		return MHD_YES;
	}
	return dispatch(srv, conn, url, method, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct request *r = *con_cls;
	(void)cls;
	(void)conn;
	(void)toe;
	if (!r)
		return;
	free(r->body);
	free(r);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	logf_(cls, "microhttpd: %s", line);
}

/* "HOST:PORT" or "[V6]:PORT" into an address (caller frees with freeaddrinfo). */
static int parse_listen(struct addrinfo **out, const char *listen)
{
	char host[256], port[16];
	const char *colon;
	if (!listen)
		return ember_error_set(EMBER_EFORMAT, "--http needs ADDR:PORT");
	if (listen[0] == '[') {
		const char *close = strchr(listen, ']');
		if (!close || close[1] != ':' || close - listen - 1 >= (long)sizeof(host))
			return ember_error_set(EMBER_EFORMAT, "bad listen address '%.200s' ([V6]:PORT)", listen);
		snprintf(host, sizeof(host), "%.*s", (int)(close - listen - 1), listen + 1);
		colon = close + 1;
	} else {
		if (!(colon = strrchr(listen, ':')) || colon == listen || colon - listen >= (long)sizeof(host))
			return ember_error_set(EMBER_EFORMAT, "bad listen address '%.200s' (HOST:PORT)", listen);
		snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
	}
	char *end;
	long p = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || p < 0 || p > 65535)
		return ember_error_set(EMBER_EFORMAT, "bad port in listen address '%.200s' (0..65535)", listen);
	snprintf(port, sizeof(port), "%ld", p);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	int rc = getaddrinfo(host, port, &hints, out);
	if (rc != 0)
		return ember_error_set(EMBER_EFORMAT, "listen address '%.200s': %s", listen, gai_strerror(rc));
	return 0;
}

int ember_serve_http_available(void) { return 1; }

int ember_serve_http_run(const struct ember_serve_http_config *config, FILE *log)
{
	struct server srv = {.config = config, .log = log, .lock = PTHREAD_MUTEX_INITIALIZER};
	struct addrinfo *ai = NULL;
	struct MHD_Daemon *daemon = NULL;
	sigset_t stop_set, blocked, old;
	int error = EMBER_ERROR, sig;

	if (parse_listen(&ai, config->listen))
		return EMBER_EFORMAT;
	/* Blocked here before any thread starts, so the server's threads inherit the mask and the
	 * signals reach sigwait below; SIGPIPE stays blocked (a write to a dropped client fails). */
	sigemptyset(&stop_set);
	sigaddset(&stop_set, SIGINT);
	sigaddset(&stop_set, SIGTERM);
	blocked = stop_set;
	sigaddset(&blocked, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &blocked, &old);
	srv.max_body = config->max_body ? config->max_body : EMBER_SERVE_HTTP_MAX_BODY;
	if (ember_session_open(&srv.ss, &config->session))
		goto cleanup;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &srv,
	                          MHD_OPTION_SOCK_ADDR, ai->ai_addr,
	                          MHD_OPTION_CONNECTION_TIMEOUT,
	                          (unsigned)(config->idle_timeout_s > 0 ? config->idle_timeout_s : DEFAULT_IDLE_S),
	                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
	                          &srv, MHD_OPTION_END);
	if (!daemon) {
		ember_error_set(EMBER_ERROR, "cannot listen on %s (address in use, or not this host's?)", config->listen);
		goto cleanup;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
	const struct ember_session *ss = srv.ss;
	char host[256];
	snprintf(host, sizeof(host), "%s", config->listen);
	*(host[0] == '[' ? strchr(host, ']') + 1 : strrchr(host, ':')) = '\0';
	logf_(&srv, "%s (%s, %d layers, vocab %d) on %s, n_ctx %d", ss->model->name, ss->model->file_type,
	      ss->model->hp.n_layer, ss->model->hp.n_vocab, ss->ops->device_name(ss->be), ss->n_ctx);
	if (ss->draft)
		logf_(&srv, "draft %s (dflash, %d layers, block %d): every request speculates with depth %d unless it sends "
		      "\"speculative.n_max\" (0: plain)", ss->draft->name, ss->draft->hp.n_layer, ss->draft->block_size,
		      ss->spec_depth);
	if (ss->token_delay_us)
		logf_(&srv, "debug token delay %d us per decode step", ss->token_delay_us);
	if (ss->slow_prefill_pm || ss->slow_decode_pm)
		logf_(&srv, "debug slowdown: prefill +%d/1000, decode +%d/1000 of their own time", ss->slow_prefill_pm,
		      ss->slow_decode_pm);
	logf_(&srv, "listening on http://%s:%u (body cap %zu bytes, one generation at a time, others get 503)", host,
	      di ? (unsigned)di->port : 0u, srv.max_body);
	while (sigwait(&stop_set, &sig) != 0)
		;
	logf_(&srv, "%s: stopping", strsignal(sig));
	atomic_store(&srv.stopping, 1);
	error = 0;
cleanup:
	if (daemon)
		MHD_stop_daemon(daemon);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ember_scorer_clear(&srv.scorer);
	ember_session_free(srv.ss);
	freeaddrinfo(ai);
	return error;
}

#else /* built without libmicrohttpd */

int ember_serve_http_available(void) { return 0; }

int ember_serve_http_run(const struct ember_serve_http_config *config, FILE *log)
{
	(void)config;
	(void)log;
	return ember_error_set(EMBER_EUNSUPPORTED, "this ember was built without libmicrohttpd, so ember serve --http is "
	                       "unavailable (install libmicrohttpd's development package and reconfigure; --stdio works)");
}

#endif
