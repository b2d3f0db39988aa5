/*
 * sut.c - Contract 1, harness side (see sut.h). Requests are written as one JSON line; replies are
 * read through proc's bounded line reader and parsed with jansson after a size check against what
 * was asked. Timestamps are the CLOCK_MONOTONIC times at which reply bytes were read, so the SUT
 * cannot report a speed it did not achieve. Faults are sticky: after anything but an error event
 * the group is killed and the handle keeps answering with the same fault. The line parsers, which
 * need no process, are in sut_parse.c.
 */
#define _GNU_SOURCE
#include "sut.h"
#include "sut_http.h"
#include "sandbox.h"

#include "error.h"
#include "log.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_READY_MS 60000
#define DEFAULT_REQUEST_MS 120000
#define DEFAULT_QUIT_GRACE_MS 5000
#define EXIT_AFTER_EOF_MS 2000   /* how long a SUT that closed stdout gets to finish exiting */
#define TOP_K_MAX 4096

struct ab_sut {
	ab_sut_http *http;        /* kind openai: every call goes there */
	ab_proc *proc;
	int ready_timeout_ms, request_timeout_ms, quit_grace_ms;
	size_t line_max;
	json_t *ready;
	int vocab_size;
	struct ab_sut_spec_info spec;
	int64_t next_id;
	int dead;                 /* faulted or quit: no more requests */
	int quit;
	int sandbox_status;       /* argv runs under bwrap with its status on fd 3 */
	struct ab_sut_fault fault;
	char *req;                /* request line being built */
	size_t req_len, req_cap;
};

static const char *const oom_hints[] = {
	"out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "std::bad_alloc",
};

const char *ab_sut_fault_kind_name(enum ab_sut_fault_kind kind)
{
	switch (kind) {
	case AB_SUT_OK: return "ok";
	case AB_SUT_TIMEOUT: return "timeout";
	case AB_SUT_CRASH: return "crash";
	case AB_SUT_PROTOCOL: return "protocol";
	case AB_SUT_OOM: return "oom";
	case AB_SUT_SUT_ERROR: return "sut-error";
	case AB_SUT_SANDBOX: return "sandbox";
	}
	return "unknown";
}

/* "30 s" or "250 ms" */
static const char *fmt_ms(char *buf, size_t len, int ms)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%d s", ms / 1000);
	else
		snprintf(buf, len, "%d ms", ms);
	return buf;
}

static int has_oom_hint(const char *text)
{
	for (size_t i = 0; i < sizeof(oom_hints) / sizeof(oom_hints[0]); i++)
		if (strcasestr(text, oom_hints[i]))
			return 1;
	return 0;
}

/* The last non-empty line of text, as a snippet. */
static void last_line(char *dst, size_t cap, const char *text)
{
	size_t len = strlen(text);
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
		len--;
	size_t from = len;
	while (from && text[from - 1] != '\n')
		from--;
	ab_sut_snippet(dst, cap, text + from, len - from);
}

int ab_sut_fault_code(enum ab_sut_fault_kind kind)
{
	return kind == AB_SUT_TIMEOUT ? AB_ETIMEOUT : kind == AB_SUT_PROTOCOL ? AB_EINVALID : AB_ERROR;
}

int ab_sut_fault_record(struct ab_sut_fault *f, struct ab_sut_fault *out, ab_proc *proc, int *dead,
	enum ab_sut_fault_kind kind, const char *reason)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	snprintf(f->reason, sizeof(f->reason), "%s", reason);
	if (kind != AB_SUT_SUT_ERROR && proc) {
		char *tail = NULL;
		ab_proc_kill(&f->exit, proc, kind == AB_SUT_TIMEOUT ? 1000 : 200, kind == AB_SUT_TIMEOUT);
		if (ab_proc_stderr_tail(&tail, proc, sizeof(f->stderr_tail) - 1) == 0)
			snprintf(f->stderr_tail, sizeof(f->stderr_tail), "%s", tail);
		free(tail);
		*dead = 1;
	}
	if (out)
		*out = *f;
	ab_error_setc(ab_sut_fault_code(kind), "sut: %s", f->reason);
	return ab_sut_fault_code(kind);
}

/* Records a fault. Anything but an error event kills the group and makes the handle dead. */
static int sut_fail(ab_sut *s, struct ab_sut_fault *out, enum ab_sut_fault_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int sut_fail(ab_sut *s, struct ab_sut_fault *out, enum ab_sut_fault_kind kind, const char *fmt, ...)
{
	char reason[sizeof(s->fault.reason)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return ab_sut_fault_record(&s->fault, out, s->proc, &s->dead, kind, reason);
}

static int sut_refuse(ab_sut *s, struct ab_sut_fault *out)
{
	if (out)
		*out = s->fault;
	if (s->quit && s->fault.kind == AB_SUT_OK)
		return ab_error_set("sut: the SUT has quit");
	return ab_error_setc(ab_sut_fault_code(s->fault.kind), "sut: %s", s->fault.reason);
}

/* stdout ended or stdin broke: the SUT exited (or is about to). Classify how. */
static int sut_ended(ab_sut *s, struct ab_sut_fault *out, const char *during)
{
	struct ab_proc_status st;
	char desc[96], tail_line[128] = "", *tail = NULL;

	ab_proc_close_stdin(s->proc);
	if (ab_proc_wait(&st, s->proc, ab_proc_deadline_ms(EXIT_AFTER_EOF_MS)) != 0)
		return sut_fail(s, out, AB_SUT_PROTOCOL, "closed its stdout during %s but kept running", during);
	ab_proc_status_describe(desc, sizeof(desc), &st);
	if (ab_proc_stderr_tail(&tail, s->proc, 4096) == 0)
		last_line(tail_line, sizeof(tail_line), tail);
	int oom = tail && has_oom_hint(tail);
	/* bubblewrap's own failure: no exit-code record on its status fd, so the command never ran
	 * (whatever the command printed, it cannot write that fd's records). Its last "bwrap: " line
	 * says why. */
	if (s->sandbox_status && !st.signaled && ab_sandbox_start_failed(ab_proc_status_text(s->proc))) {
		char why[200];
		ab_sandbox_failure_reason(why, sizeof(why), tail);
		free(tail);
		return sut_fail(s, out, AB_SUT_SANDBOX, "sandbox: %s (during %s)", why, during);
	}
	free(tail);
	const char *sep = tail_line[0] ? "; stderr: " : "";
	if (oom)
		return sut_fail(s, out, AB_SUT_OOM, "out of memory during %s (%s)%s%s", during, desc, sep, tail_line);
	if (st.signaled && st.signal_number == SIGKILL)
		return sut_fail(s, out, AB_SUT_CRASH,
			"crashed during %s: %s, not sent by abgate (possibly the kernel OOM killer)%s%s",
			during, desc, sep, tail_line);
	if (st.signaled)
		return sut_fail(s, out, AB_SUT_CRASH, "crashed during %s: %s%s%s", during, desc, sep, tail_line);
	return sut_fail(s, out, AB_SUT_CRASH, "exited during %s: %s%s%s", during, desc, sep, tail_line);
}

const struct ab_sut_spec_info *ab_sut_spec(const ab_sut *sut)
{
	if (sut->http)
		return ab_sut_http_spec(sut->http);
	return &sut->spec;
}

/* ---- request building ---- */

static int req_add(ab_sut *s, const char *text, size_t len)
{
	if (s->req_len + len + 1 > s->req_cap) {
		size_t cap = s->req_cap ? s->req_cap : 4096;
		while (cap < s->req_len + len + 1)
			cap *= 2;
		char *grown = realloc(s->req, cap);
		if (!grown)
			return ab_error_set("out of memory");
		s->req = grown;
		s->req_cap = cap;
	}
	memcpy(s->req + s->req_len, text, len);
	s->req_len += len;
	s->req[s->req_len] = '\0';
	return 0;
}

static int req_printf(ab_sut *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int req_printf(ab_sut *s, const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return ab_error_set("request field too long");
	return req_add(s, buf, (size_t)n);
}

static int req_ids(ab_sut *s, const int32_t *ids, int n)
{
	int error = req_add(s, "[", 1);
	for (int i = 0; i < n && error == 0; i++)
		error = req_printf(s, i ? ",%d" : "%d", (int)ids[i]);
	return error ? error : req_add(s, "]", 1);
}

/* ---- process lifecycle ---- */

int ab_sut_start(ab_sut **out, struct ab_sut_fault *fault, const struct ab_sut_config *cfg)
{
	ab_sut *s = calloc(1, sizeof(*s));
	const char *line;
	size_t len;
	char dur[32];
	int error;

	if (!s)
		return ab_error_set("out of memory");
	if (cfg->http) {
		if ((error = ab_sut_http_start(&s->http, fault, cfg)) == 0)
			*out = s;
		else
			free(s);
		return error;
	}
	s->ready_timeout_ms = cfg->ready_timeout_ms > 0 ? cfg->ready_timeout_ms : DEFAULT_READY_MS;
	s->request_timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : DEFAULT_REQUEST_MS;
	s->quit_grace_ms = cfg->quit_grace_ms > 0 ? cfg->quit_grace_ms : DEFAULT_QUIT_GRACE_MS;
	s->line_max = cfg->line_max ? cfg->line_max : AB_PROC_LINE_MAX_DEFAULT;
	s->next_id = 1;

	struct ab_proc_spec spec = {
		.argv = cfg->argv, .env = cfg->env, .cwd = cfg->cwd, .stdin_pipe = 1, .stdout_pipe = 1,
		.log_path = cfg->stderr_log, .line_max = s->line_max, .status_fd = cfg->sandbox_status != 0,
	};
	s->sandbox_status = cfg->sandbox_status != 0;
	if (ab_proc_spawn(&s->proc, &spec) < 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		error = sut_fail(s, fault, AB_SUT_CRASH, "could not start: %s", msg);
		goto cleanup;
	}
	int64_t deadline = ab_proc_deadline_ms(s->ready_timeout_ms);
	error = ab_proc_read_line(&line, &len, NULL, s->proc, deadline);
	if (error == AB_ETIMEOUT) {
		error = sut_fail(s, fault, AB_SUT_TIMEOUT, "timeout: no ready line within %s",
			fmt_ms(dur, sizeof(dur), s->ready_timeout_ms));
		goto cleanup;
	}
	if (error == AB_PROC_EOF) {
		error = sut_ended(s, fault, "start-up");
		goto cleanup;
	}
	if (error < 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "ready line: %s", msg);
		goto cleanup;
	}
	if (ab_sut_parse_ready(&s->ready, &s->vocab_size, line, len, s->line_max) < 0 ||
	    ab_sut_parse_spec(&s->spec, s->ready) < 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s", msg);
		goto cleanup;
	}
	if (fault)
		memset(fault, 0, sizeof(*fault));
	*out = s;
	s = NULL;
	error = 0;
cleanup:
	ab_sut_free(s);
	return error;
}

const json_t *ab_sut_ready(const ab_sut *sut)
{
	return sut->http ? ab_sut_http_ready(sut->http) : sut->ready;
}

int ab_sut_vocab_size(const ab_sut *sut)
{
	return sut->http ? ab_sut_http_vocab_size(sut->http) : sut->vocab_size;
}

/* Writes the built request and returns its write time; classifies failures. */
static int send_request(int64_t *out_t_write, ab_sut *s, struct ab_sut_fault *fault, const char *what,
	int64_t deadline)
{
	char during[64], dur[32];
	int error = ab_proc_write(out_t_write, s->proc, s->req, s->req_len, deadline);
	if (error == 0)
		return 0;
	if (error == AB_ETIMEOUT)
		return sut_fail(s, fault, AB_SUT_TIMEOUT, "timeout: %s not read within %s", what,
			fmt_ms(dur, sizeof(dur), s->request_timeout_ms));
	snprintf(during, sizeof(during), "%s", what);
	return sut_ended(s, fault, during);
}

/* Reads the next reply to `id`. A PROTOCOL/TIMEOUT/CRASH fault is recorded on failure. */
static int next_reply(enum ab_sut_event *out_event, json_t **out_obj, int64_t *out_t, ab_sut *s,
	struct ab_sut_fault *fault, const char *what, int64_t id, int64_t deadline, size_t max_len)
{
	const char *line;
	size_t len;
	char dur[32], msg[224];
	int error = ab_proc_read_line(&line, &len, out_t, s->proc, deadline);
	if (error == AB_ETIMEOUT)
		return sut_fail(s, fault, AB_SUT_TIMEOUT, "timeout: no reply to %s within %s", what,
			fmt_ms(dur, sizeof(dur), s->request_timeout_ms));
	if (error == AB_PROC_EOF)
		return sut_ended(s, fault, what);
	if (error < 0) {
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		return sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: %s", what, msg);
	}
	if (len > max_len)
		return sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: reply of %zu bytes is larger than the %zu bytes "
			"the request can need", what, len, max_len);
	if (ab_sut_parse_reply(out_event, out_obj, line, len, max_len, id) < 0) {
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		return sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: %s", what, msg);
	}
	if (*out_event == AB_SUT_EVENT_ERROR) {
		const char *m = json_string_value(json_object_get(*out_obj, "message"));
		char snip[160];
		ab_sut_snippet(snip, sizeof(snip), m ? m : "(no message)", m ? strlen(m) : 12);
		json_decref(*out_obj);
		*out_obj = NULL;
		return sut_fail(s, fault, AB_SUT_SUT_ERROR, "SUT error for %s: %s", what, snip);
	}
	return 0;
}

int ab_sut_generate(struct ab_sut_gen *out, struct ab_sut_fault *fault, ab_sut *s,
	const int32_t *prompt, int prompt_len, int max_tokens, int spec)
{
	struct ab_sut_gen gen = {0};
	json_t *obj = NULL;
	enum ab_sut_event ev;
	char what[64];
	int64_t t_recv = 0;
	int error = -1, got_first = 0;

	if (s->http)
		return ab_sut_http_generate(out, fault, s->http, prompt, prompt_len, max_tokens, spec);

	if (s->dead)
		return sut_refuse(s, fault);
	if (prompt_len < 1 || max_tokens < 1)
		return ab_error_setc(AB_EINVALID, "generate: prompt_len and max_tokens must be positive");
	int64_t id = s->next_id++;
	snprintf(what, sizeof(what), "generate #%lld", (long long)id);
	s->req_len = 0;
	if (req_printf(s, "{\"op\":\"generate\",\"id\":%lld,\"prompt\":", (long long)id) < 0 ||
	    req_ids(s, prompt, prompt_len) < 0 ||
	    req_printf(s, ",\"max_tokens\":%d,\"spec\":%s}\n", max_tokens, spec ? "true" : "false") < 0)
		return AB_ERROR;

	int64_t deadline = ab_proc_deadline_ms(s->request_timeout_ms);
	size_t reply_max = (size_t)max_tokens * 24 + 65536;
	if (reply_max > s->line_max)
		reply_max = s->line_max;
	if ((error = send_request(&gen.t_write_ns, s, fault, what, deadline)) < 0)
		goto cleanup;
	for (;;) {
		if ((error = next_reply(&ev, &obj, &t_recv, s, fault, what, id, deadline, reply_max)) < 0)
			goto cleanup;
		if (ev == AB_SUT_EVENT_FIRST) {
			if (got_first) {
				error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: a second \"first\" event", what);
				goto cleanup;
			}
			got_first = 1;
			gen.t_first_ns = t_recv;
			json_decref(obj);
			obj = NULL;
			continue;
		}
		break;
	}
	if (!got_first) {
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: \"done\" before \"first\"", what);
		goto cleanup;
	}
	gen.t_done_ns = t_recv;
	json_t *tokens = json_object_get(obj, "tokens"), *stats = json_object_get(obj, "stats");
	if (!json_is_array(tokens)) {
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: \"tokens\" must be an array", what);
		goto cleanup;
	}
	if (json_array_size(tokens) != (size_t)max_tokens) {
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: %zu tokens returned, %d asked", what,
			json_array_size(tokens), max_tokens);
		goto cleanup;
	}
	if (stats && !json_is_object(stats)) {
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: \"stats\" must be an object", what);
		goto cleanup;
	}
	if (!(gen.tokens = malloc(sizeof(*gen.tokens) * (size_t)max_tokens))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	for (int i = 0; i < max_tokens; i++) {
		json_t *t = json_array_get(tokens, (size_t)i);
		json_int_t v = json_is_integer(t) ? json_integer_value(t) : -1;
		if (v < 0 || v >= s->vocab_size) {
			error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: token %d is not an id in [0, %d)", what, i,
				s->vocab_size);
			goto cleanup;
		}
		gen.tokens[i] = (int32_t)v;
	}
	gen.n_tokens = max_tokens;
	gen.prompt_len = prompt_len;
	gen.stats = stats ? json_incref(stats) : NULL;
	gen.ttft_s = (double)(gen.t_first_ns - gen.t_write_ns) / 1e9;
	gen.prefill_tps = gen.ttft_s > 0 ? prompt_len / gen.ttft_s : NAN;
	double decode_s = (double)(gen.t_done_ns - gen.t_first_ns) / 1e9;
	gen.decode_tps = max_tokens >= 2 && decode_s > 0 ? (max_tokens - 1) / decode_s : NAN;
	if (fault)
		memset(fault, 0, sizeof(*fault));
	*out = gen;
	memset(&gen, 0, sizeof(gen));
	error = 0;
cleanup:
	json_decref(obj);
	ab_sut_gen_clear(&gen);
	return error;
}

void ab_sut_gen_clear(struct ab_sut_gen *gen)
{
	if (!gen)
		return;
	free(gen->tokens);
	json_decref(gen->stats);
	memset(gen, 0, sizeof(*gen));
}

void ab_sut_scores_clear(struct ab_sut_scores *scores)
{
	if (!scores)
		return;
	for (int i = 0; i < scores->n_positions && scores->positions; i++) {
		free(scores->positions[i].top_ids);
		free(scores->positions[i].top_logprobs);
		free(scores->positions[i].id_logprobs);
	}
	free(scores->positions);
	memset(scores, 0, sizeof(*scores));
}

/* Fills one position from its reply object; returns 0 or a message in `why`. */
static int parse_position(struct ab_sut_position *pos, json_t *p, int top_k, int n_ids, int vocab,
	char *why, size_t why_len)
{
	json_t *top = json_object_get(p, "top"), *ids = json_object_get(p, "ids");
	if (!json_is_object(p) || !json_is_array(top)) {
		snprintf(why, why_len, "needs an object with a \"top\" array");
		return -1;
	}
	size_t n_top = json_array_size(top);
	if (n_top < 1 || n_top > (size_t)top_k) {
		snprintf(why, why_len, "\"top\" has %zu entries, expected 1..%d", n_top, top_k);
		return -1;
	}
	size_t got_ids = ids ? json_array_size(ids) : 0;
	if ((ids && !json_is_array(ids)) || got_ids != (size_t)n_ids) {
		snprintf(why, why_len, "\"ids\" has %zu log-probs, %d asked", got_ids, n_ids);
		return -1;
	}
	pos->top_ids = malloc(sizeof(*pos->top_ids) * n_top);
	pos->top_logprobs = malloc(sizeof(*pos->top_logprobs) * n_top);
	pos->id_logprobs = malloc(sizeof(*pos->id_logprobs) * (got_ids ? got_ids : 1));
	if (!pos->top_ids || !pos->top_logprobs || !pos->id_logprobs) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	pos->n_top = (int)n_top;
	pos->n_ids = n_ids;
	for (size_t i = 0; i < n_top; i++) {
		json_t *pair = json_array_get(top, i), *id = json_array_get(pair, 0);
		json_int_t v = json_is_integer(id) ? json_integer_value(id) : -1;
		if (!json_is_array(pair) || json_array_size(pair) != 2 || v < 0 || v >= vocab ||
		    !ab_sut_logprob_ok(json_array_get(pair, 1), &pos->top_logprobs[i])) {
			snprintf(why, why_len, "\"top\"[%zu] must be [id in [0,%d), log-prob <= 0]", i, vocab);
			return -1;
		}
		pos->top_ids[i] = (int32_t)v;
	}
	for (size_t i = 0; i < got_ids; i++)
		if (!ab_sut_logprob_ok(json_array_get(ids, i), &pos->id_logprobs[i])) {
			snprintf(why, why_len, "\"ids\"[%zu] must be a finite log-prob <= 0", i);
			return -1;
		}
	return 0;
}

int ab_sut_score(struct ab_sut_scores *out, struct ab_sut_fault *fault, ab_sut *s,
	const struct ab_sut_score_request *rq)
{
	struct ab_sut_scores scores = {0};
	json_t *obj = NULL;
	enum ab_sut_event ev;
	char what[64], why[160];
	int64_t t_write, t_recv;
	int error = -1;

	if (s->http)
		return ab_sut_http_score(out, fault, s->http, rq);

	if (s->dead)
		return sut_refuse(s, fault);
	if (rq->prompt_len < 1 || rq->first < 0 || rq->first >= rq->prompt_len || rq->top_k < 1 ||
	    rq->top_k > TOP_K_MAX || (rq->ids && !rq->n_ids))
		return ab_error_setc(AB_EINVALID, "score: bad request (prompt_len %d, first %d, top_k %d)",
			rq->prompt_len, rq->first, rq->top_k);
	int n_pos = rq->prompt_len - rq->first;
	int64_t id = s->next_id++;
	snprintf(what, sizeof(what), "score #%lld", (long long)id);
	s->req_len = 0;
	size_t reply_max = 256;
	error = req_printf(s, "{\"op\":\"score\",\"id\":%lld,\"prompt\":", (long long)id);
	if (!error)
		error = req_ids(s, rq->prompt, rq->prompt_len);
	if (!error)
		error = req_printf(s, ",\"top_k\":%d", rq->top_k);
	if (!error && rq->first > 0)
		error = req_printf(s, ",\"first\":%d", rq->first);
	if (!error && rq->ids) {
		error = req_add(s, ",\"ids\":[", 8);
		for (int p = 0; p < n_pos && !error; p++) {
			if (p)
				error = req_add(s, ",", 1);
			if (!error)
				error = req_ids(s, rq->ids[p], rq->n_ids[p]);
		}
		if (!error)
			error = req_add(s, "]", 1);
	}
	if (!error)
		error = req_add(s, "}\n", 2);
	if (error)
		return error;
	/* What an honest reply can need: ~48 bytes per [id, logprob] pair, ~32 per asked log-prob. */
	for (int p = 0; p < n_pos; p++)
		reply_max += 64 + (size_t)rq->top_k * 48 + (rq->ids ? (size_t)rq->n_ids[p] * 32 : 0);
	if (reply_max > s->line_max)
		reply_max = s->line_max;

	int64_t deadline = ab_proc_deadline_ms(s->request_timeout_ms);
	if ((error = send_request(&t_write, s, fault, what, deadline)) < 0)
		goto cleanup;
	do {
		json_decref(obj);
		obj = NULL;
		if ((error = next_reply(&ev, &obj, &t_recv, s, fault, what, id, deadline, reply_max)) < 0)
			goto cleanup;
	} while (ev == AB_SUT_EVENT_FIRST);  /* a "first" event means nothing for score: ignored */
	json_t *positions = json_object_get(obj, "positions");
	if (!json_is_array(positions) || json_array_size(positions) != (size_t)n_pos) {
		error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: \"positions\" must be an array of %d entries",
			what, n_pos);
		goto cleanup;
	}
	if (!(scores.positions = calloc((size_t)n_pos, sizeof(*scores.positions)))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	scores.n_positions = n_pos;
	for (int p = 0; p < n_pos; p++) {
		if (parse_position(&scores.positions[p], json_array_get(positions, (size_t)p), rq->top_k,
			rq->ids ? rq->n_ids[p] : 0, s->vocab_size, why, sizeof(why)) < 0) {
			error = sut_fail(s, fault, AB_SUT_PROTOCOL, "%s: position %d: %s", what, p, why);
			goto cleanup;
		}
	}
	if (fault)
		memset(fault, 0, sizeof(*fault));
	*out = scores;
	memset(&scores, 0, sizeof(scores));
	error = 0;
cleanup:
	json_decref(obj);
	ab_sut_scores_clear(&scores);
	return error;
}

int ab_sut_quit(struct ab_proc_status *out, ab_sut *s)
{
	struct ab_proc_status st = {0};
	char dur[32];
	int error = 0;

	if (s->http)
		return ab_sut_http_quit(out, s->http);
	if (!s->proc)
		return ab_error_set("sut: never started");
	if (!s->dead) {
		static const char quit_line[] = "{\"op\":\"quit\"}\n";
		ab_proc_write(NULL, s->proc, quit_line, sizeof(quit_line) - 1, ab_proc_deadline_ms(1000));
		ab_proc_close_stdin(s->proc);
		if (ab_proc_wait(&st, s->proc, ab_proc_deadline_ms(s->quit_grace_ms)) != 0) {
			ab_proc_kill(&st, s->proc, 1000, 1);
			error = ab_error_set("sut: did not exit within %s of quit; killed",
				fmt_ms(dur, sizeof(dur), s->quit_grace_ms));
		} else if (!ab_proc_status_ok(&st)) {
			char desc[96];
			error = ab_error_set("sut: ended with %s after quit",
				ab_proc_status_describe(desc, sizeof(desc), &st));
		}
		s->dead = 1;
		s->quit = 1;
		memset(&s->fault, 0, sizeof(s->fault));
		s->fault.exit = st;
	} else {
		st = s->fault.exit;
		if (!s->quit)
			error = ab_error_setc(ab_sut_fault_code(s->fault.kind), "sut: %s", s->fault.reason);
	}
	if (out)
		*out = st;
	return error;
}

void ab_sut_free(ab_sut *s)
{
	if (!s)
		return;
	ab_sut_http_free(s->http);
	ab_proc_free(s->proc);
	json_decref(s->ready);
	free(s->req);
	free(s);
}
