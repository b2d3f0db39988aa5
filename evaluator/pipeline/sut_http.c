/*
 * sut_http.c - an HTTP server as a SUT (see sut_http.h). One libcurl easy handle per process keeps
 * its loopback connection alive across requests. Responses are read through a bounded SSE reader
 * (sut_sse.c) inside the write callback, which stamps every event with abgate's CLOCK_MONOTONIC
 * time as its bytes arrive; a body over the cap, malformed SSE or JSON, ids outside the vocabulary
 * or a usage count that disagrees with the streamed events end the request as a classified fault.
 * Scoring is one non-streamed echo + logprobs request whose answer sut_echo.c checks.
 */
#define _GNU_SOURCE
#include "sut_http.h"

#include "build.h"
#include "error.h"
#include "sandbox.h"
#include "sut_echo.h"
#include "sut_relay.h"
#include "sut_sse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_READY_MS 60000
#define DEFAULT_REQUEST_MS 120000
#define DEFAULT_QUIT_GRACE_MS 5000
#define POLL_MS 50
#define SMALL_BODY_MAX (1 << 20)       /* /health, /props, /v1/models */
#define EVENT_MAX (64 << 10)           /* one SSE line */
#define BODY_FIXED (64 << 10)          /* a generate body may hold this + PER_TOKEN per token */
#define PER_TOKEN (8 << 10)

struct ab_sut_http {
	ab_proc *proc;
	ab_sut_relay *relay;      /* sandboxed: the server is reached through abgate-relay's socket */
	int sandbox_status;       /* sandboxed: bwrap's status records come back on the proc's status pipe */
	CURL *curl;
	int api, port, vocab_size;
	int ready_timeout_ms, request_timeout_ms, quit_grace_ms;
	char base[512];
	char *model_name;
	json_t *ready;
	struct ab_sut_spec_info spec;
	const char *spec_from;    /* where spec came from: "/props" (ember) or "suite" (a draft, nothing said) */
	int dead, quit;
	struct ab_sut_fault fault;
};

/* ---- faults (as sut.c classifies them) ---- */

static int hfail(ab_sut_http *h, struct ab_sut_fault *out, enum ab_sut_fault_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int hfail(ab_sut_http *h, struct ab_sut_fault *out, enum ab_sut_fault_kind kind, const char *fmt, ...)
{
	char reason[sizeof(h->fault.reason)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return ab_sut_fault_record(&h->fault, out, h->proc, &h->dead, kind, reason);
}

/* The server is gone (or the connection broke): a crash when it exited, else `fallback`. */
static int hgone(ab_sut_http *h, struct ab_sut_fault *out, const char *during, const char *fallback)
{
	struct ab_proc_status st;
	char desc[96];
	if (ab_proc_wait(&st, h->proc, ab_proc_deadline_ms(300)) == 0) {
		char *tail = NULL;
		int oom = ab_proc_stderr_tail(&tail, h->proc, 4096) == 0 && tail &&
			(strstr(tail, "out of memory") || strstr(tail, "std::bad_alloc"));
		/* bubblewrap's own failure (no exit-code record on its status fd: the relay and the
		 * server never ran), as sut.c classifies a stdio SUT's: the box's, with its last
		 * "bwrap: " line */
		if (h->sandbox_status && !st.signaled && ab_sandbox_start_failed(ab_proc_status_text(h->proc))) {
			char why[200];
			ab_sandbox_failure_reason(why, sizeof(why), tail);
			free(tail);
			return hfail(h, out, AB_SUT_SANDBOX, "sandbox: %s (during %s)", why, during);
		}
		free(tail);
		ab_proc_status_describe(desc, sizeof(desc), &st);
		return hfail(h, out, oom ? AB_SUT_OOM : AB_SUT_CRASH, "%s during %s: %s",
			st.signaled ? "crashed" : "exited", during, desc);
	}
	return hfail(h, out, AB_SUT_PROTOCOL, "%s: %s", during, fallback);
}

static const char *fmt_ms(char *buf, size_t len, int ms)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%d s", ms / 1000);
	else
		snprintf(buf, len, "%d ms", ms);
	return buf;
}

static void printable(char *dst, size_t cap, const char *src, size_t len)
{
	size_t j = 0;
	for (size_t i = 0; i < len && j + 1 < cap; i++)
		dst[j++] = src[i] >= ' ' && src[i] <= '~' ? src[i] : '?';
	dst[j] = '\0';
}

/* ---- transport ---- */

struct xfer {
	ab_sut_http *h;
	size_t cap, got;           /* bytes allowed, bytes received */
	size_t keep;               /* bytes of a non-SSE body kept in `body`; 0: SMALL_BODY_MAX */
	char *body;                /* small bodies and non-200 answers (bounded) */
	size_t body_len;
	int sse;                   /* 1: feed the SSE reader */
	struct ab_sse reader;
	ab_sse_data_fn on_data;
	void *user;
	int64_t t_write;           /* the last request bytes went out */
	int64_t t_now;             /* arrival of the bytes being fed */
	long status;
	char why[224];             /* set by a callback that stopped the transfer */
	enum ab_sut_fault_kind why_kind;
};

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct xfer *x = userdata;
	size_t n = size * nmemb;
	x->t_now = ab_proc_now_ns();
	if (x->got + n > x->cap) {
		snprintf(x->why, sizeof(x->why), "body over the size cap of %zu bytes", x->cap);
		x->why_kind = AB_SUT_PROTOCOL;
		return 0;
	}
	x->got += n;
	if (x->status == 0)
		curl_easy_getinfo(x->h->curl, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->sse && x->status == 200) {
		int rc = ab_sse_feed(&x->reader, ptr, n, x->on_data, x->user);
		if (rc < 0) {
			if (!x->why[0]) {
				snprintf(x->why, sizeof(x->why), "%s", x->reader.error);
				x->why_kind = AB_SUT_PROTOCOL;
			}
			return 0;
		}
		return n;
	}
	size_t keep = n, keep_max = x->keep ? x->keep : SMALL_BODY_MAX;
	if (x->body_len + keep > keep_max)
		keep = keep_max - x->body_len;
	char *g = realloc(x->body, x->body_len + keep + 1);
	if (!g)
		return 0;
	x->body = g;
	memcpy(x->body + x->body_len, ptr, keep);
	x->body_len += keep;
	x->body[x->body_len] = '\0';
	return n;
}

/* libcurl reports sent bytes here after it wrote them: the last one is the request's write time. */
static int on_debug(CURL *c, curl_infotype type, char *data, size_t size, void *userdata)
{
	(void)c; (void)data; (void)size;
	struct xfer *x = userdata;
	if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT)
		x->t_write = ab_proc_now_ns();
	return 0;
}

/* One request; body NULL: GET. Returns the curl code; x->status the HTTP status. */
static CURLcode perform(struct xfer *x, const char *path, const char *body, long timeout_ms)
{
	CURL *c = x->h->curl;
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", x->h->base, path);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (x->h->relay)   /* the URL's host and path stay as they are; only the transport changes */
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, ab_sut_relay_socket(x->h->relay));
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_VERBOSE, 1L);
	curl_easy_setopt(c, CURLOPT_DEBUGFUNCTION, on_debug);
	curl_easy_setopt(c, CURLOPT_DEBUGDATA, x);
	curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
	struct curl_slist *hdr = NULL;
	if (body) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		hdr = curl_slist_append(hdr, "Expect:");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	x->t_write = ab_proc_now_ns();
	CURLcode rc = curl_easy_perform(c);
	if (x->status == 0)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
	curl_slist_free_all(hdr);
	return rc;
}

static json_t *get_json(ab_sut_http *h, const char *path)
{
	struct xfer x = { .h = h, .cap = SMALL_BODY_MAX };
	json_t *v = NULL;
	if (perform(&x, path, NULL, 5000) == CURLE_OK && x.status == 200 && x.body)
		v = json_loadb(x.body, x.body_len, JSON_REJECT_DUPLICATES, NULL);
	free(x.body);
	if (v && !json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

/* ---- start ---- */

int ab_sut_http_free_port(int *out)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (fd < 0)
		return ab_error_set("socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return ab_error_set("bind 127.0.0.1:0: %s", strerror(errno));
	}
	close(fd);
	*out = ntohs(a.sin_port);
	return 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_rc;
static void curl_init(void) { curl_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* vocab_size from the server: its /props (ember: vocab_size; n_vocab; NULL when it has none) or
 * /v1/models (llama-server: data[0].meta.n_vocab). */
static int read_vocab(ab_sut_http *h, const json_t *props, const char **from)
{
	json_t *models;
	json_int_t n = 0;
	if (props) {
		json_t *v = json_object_get(props, "vocab_size");
		if (!v)
			v = json_object_get(props, "n_vocab");
		n = json_is_integer(v) ? json_integer_value(v) : 0;
		*from = "/props";
	}
	if (n <= 0 && (models = get_json(h, "/v1/models"))) {
		json_t *v = json_object_get(json_object_get(json_array_get(json_object_get(models, "data"), 0), "meta"),
			"n_vocab");
		n = json_is_integer(v) ? json_integer_value(v) : 0;
		json_decref(models);
		*from = "/v1/models";
	}
	return n > 0 && n <= (1 << 24) ? (int)n : 0;
}

/* A server started with a draft: what it says of it in /props "spec" (ember: the stdio ready line's
 * object), else kind "draft" with the block unknown (llama-server -md says nothing there). A "spec"
 * that is there but malformed is a protocol fault. */
static int read_spec(ab_sut_http *h, const json_t *props, struct ab_sut_fault *fault)
{
	h->spec_from = "suite";
	if (props && json_object_get(props, "spec")) {
		if (ab_sut_parse_spec(&h->spec, props) < 0)
			return hfail(h, fault, AB_SUT_PROTOCOL, "/props: %s", ab_error_last());
		h->spec_from = "/props";
	}
	if (!h->spec.present) {
		h->spec = (struct ab_sut_spec_info){ .present = 1, .block_size = 0 };
		snprintf(h->spec.kind, sizeof(h->spec.kind), "draft");
	}
	return 0;
}

int ab_sut_http_start(ab_sut_http **out, struct ab_sut_fault *fault, const struct ab_sut_config *cfg)
{
	const struct ab_sut_http_config *hc = cfg->http;
	ab_sut_http *h = calloc(1, sizeof(*h));
	char **argv = NULL, **env = NULL, **boxed = NULL, *url = NULL, port[16], dur[32];
	json_t *props = NULL;
	int error;

	if (!h)
		return ab_error_set("out of memory");
	pthread_once(&curl_once, curl_init);
	if (curl_rc != CURLE_OK || !(h->curl = curl_easy_init())) {
		free(h);
		return ab_error_set("libcurl: could not initialise");
	}
	h->api = hc->api;
	h->ready_timeout_ms = cfg->ready_timeout_ms > 0 ? cfg->ready_timeout_ms : DEFAULT_READY_MS;
	h->request_timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : DEFAULT_REQUEST_MS;
	h->quit_grace_ms = cfg->quit_grace_ms > 0 ? cfg->quit_grace_ms : DEFAULT_QUIT_GRACE_MS;
	if (hc->model_name && !(h->model_name = strdup(hc->model_name))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	if ((error = ab_sut_http_free_port(&h->port)) < 0)
		goto cleanup;
	snprintf(port, sizeof(port), "%d", h->port);
	struct ab_subst vars[] = { { "port", port } };
	if ((error = ab_build_subst_argv(&argv, cfg->argv, vars, 1)) < 0 ||
	    (cfg->env && (error = ab_build_subst_argv(&env, cfg->env, vars, 1)) < 0) ||
	    (error = ab_build_subst(&url, hc->url, vars, 1)) < 0)
		goto cleanup;
	snprintf(h->base, sizeof(h->base), "%s", url);
	if (h->base[0] && h->base[strlen(h->base) - 1] == '/')
		h->base[strlen(h->base) - 1] = '\0';

	struct ab_proc_spec spec = { .argv = (const char *const *)argv, .env = (const char *const *)env,
		.cwd = cfg->cwd, .log_path = cfg->stderr_log };
	/* Under the sandbox the server has its own network namespace: abgate-relay, its parent there,
	 * carries the connections from a unix socket to its loopback (sut_relay.h). */
	if (hc->sandbox.config) {
		if (ab_sut_relay_open(&h->relay, &boxed, &hc->sandbox, (const char *const *)argv,
			(const char *const *)env, cfg->cwd, h->port) < 0) {
			char msg[200];
			snprintf(msg, sizeof(msg), "%s", ab_error_last());
			error = hfail(h, fault, AB_SUT_CRASH, "could not start: %s", msg);
			goto cleanup;
		}
		spec.argv = (const char *const *)boxed;
		spec.env = NULL;
		spec.pass_fd = ab_sut_relay_fd(h->relay);
		spec.status_fd = 1;   /* bwrap's status records on fd 4 (sut_relay.c) */
		h->sandbox_status = 1;
	}
	int spawned = ab_proc_spawn(&h->proc, &spec);
	ab_sut_relay_started(h->relay);
	if (spawned < 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		error = hfail(h, fault, AB_SUT_CRASH, "could not start: %s", msg);
		goto cleanup;
	}
	const char *ready_path = hc->ready_path ? hc->ready_path : "/health";
	int64_t deadline = ab_proc_deadline_ms(h->ready_timeout_ms);
	long last_status = 0;
	for (;;) {
		if (!ab_proc_running(h->proc)) {
			error = hgone(h, fault, "start-up", "not running");
			goto cleanup;
		}
		struct xfer x = { .h = h, .cap = SMALL_BODY_MAX };
		CURLcode rc = perform(&x, ready_path, NULL, 1000);
		free(x.body);
		if (rc == CURLE_OK && x.status == 200)
			break;
		if (rc == CURLE_OK)
			last_status = x.status;
		if (ab_proc_now_ns() >= deadline) {
			char st[48] = "";
			if (last_status)
				snprintf(st, sizeof(st), " (last answer: HTTP %ld)", last_status);
			error = hfail(h, fault, AB_SUT_TIMEOUT, "timeout: %s did not answer 200 within %s%s", ready_path,
				fmt_ms(dur, sizeof(dur), h->ready_timeout_ms), st);
			goto cleanup;
		}
		struct timespec ts = { 0, POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	const char *vocab_from = "suite";
	/* /props once: the vocabulary and, with a draft, the spec capability */
	props = hc->vocab_size <= 0 || hc->draft ? get_json(h, "/props") : NULL;
	h->vocab_size = hc->vocab_size > 0 ? hc->vocab_size : read_vocab(h, props, &vocab_from);
	if (h->vocab_size <= 0) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "the server does not say its vocabulary size (/props, "
			"/v1/models): give sut.vocab_size");
		goto cleanup;
	}
	if (hc->draft && (error = read_spec(h, props, fault)) < 0)
		goto cleanup;
	h->ready = json_pack("{s:b, s:s, s:s, s:i, s:b, s:{s:i}, s:s, s:s}", "ready", 1, "kind", "openai", "api",
		h->api == AB_SUT_HTTP_LLAMA ? "llama" : "completions", "port", h->port, "token_ids",
		h->api == AB_SUT_HTTP_LLAMA, "model", "vocab_size", h->vocab_size, "vocab_from", vocab_from,
		"transport", h->relay ? "sandbox relay (unix socket)" : "tcp");
	if (!h->ready || (h->spec.present && json_object_set_new(h->ready, "spec", json_pack("{s:s, s:i, s:s}",
		"kind", h->spec.kind, "block_size", h->spec.block_size, "from", h->spec_from)) < 0)) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	if (fault)
		memset(fault, 0, sizeof(*fault));
	*out = h;
	h = NULL;
	error = 0;
cleanup:
	json_decref(props);
	ab_build_argv_free(argv);
	ab_build_argv_free(env);
	ab_build_argv_free(boxed);
	free(url);
	ab_sut_http_free(h);
	return error;
}

const json_t *ab_sut_http_ready(const ab_sut_http *h) { return h->ready; }
int ab_sut_http_vocab_size(const ab_sut_http *h) { return h->vocab_size; }
const struct ab_sut_spec_info *ab_sut_http_spec(const ab_sut_http *h) { return &h->spec; }

/* ---- generate ---- */

struct stream {
	struct xfer *x;
	int api, vocab, max_tokens;
	int32_t *ids;
	int n_ids, n_events;          /* ids read, token events seen */
	long usage;                   /* the server's token count, -1 until it says */
	int64_t t_first, t_last;
	int done;                     /* the last event was read ([DONE] or stop:true) */
	json_t *timings;
};

static int stream_fail(struct stream *st, enum ab_sut_fault_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int stream_fail(struct stream *st, enum ab_sut_fault_kind kind, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->x->why, sizeof(st->x->why), fmt, ap);
	va_end(ap);
	st->x->why_kind = kind;
	return -2;
}

static void token_event(struct stream *st)
{
	if (st->n_events++ == 0)
		st->t_first = st->x->t_now;
	st->t_last = st->x->t_now;
}

static int on_event(void *user, const char *payload, size_t len)
{
	struct stream *st = user;
	if (st->done)
		return stream_fail(st, AB_SUT_PROTOCOL, "data after the stream's last event");
	if (st->api == AB_SUT_HTTP_COMPLETIONS && len == 6 && memcmp(payload, "[DONE]", 6) == 0) {
		st->done = 1;
		return 0;
	}
	json_error_t jerr;
	json_t *ev = json_loadb(payload, len, JSON_REJECT_DUPLICATES, &jerr);
	char snip[64];
	if (!json_is_object(ev)) {
		json_decref(ev);
		printable(snip, sizeof(snip), payload, len < 40 ? len : 40);
		return stream_fail(st, AB_SUT_PROTOCOL, "event is not a JSON object (\"%s\")", snip);
	}
	int rc = 0;
	json_t *err = json_object_get(ev, "error");
	if (err) {
		const char *m = json_string_value(json_is_object(err) ? json_object_get(err, "message") : err);
		printable(snip, sizeof(snip), m ? m : "(no message)", m ? strlen(m) : 12);
		rc = stream_fail(st, AB_SUT_SUT_ERROR, "server error event: %s", snip);
	} else if (st->api == AB_SUT_HTTP_LLAMA) {
		json_t *tokens = json_object_get(ev, "tokens"), *t;
		size_t i;
		if (tokens && !json_is_array(tokens))
			rc = stream_fail(st, AB_SUT_PROTOCOL, "\"tokens\" is not an array");
		json_array_foreach(tokens, i, t) {
			json_int_t id = json_is_integer(t) ? json_integer_value(t) : -1;
			if (rc == 0 && (id < 0 || id >= st->vocab))
				rc = stream_fail(st, AB_SUT_PROTOCOL, "token %zu of an event is not an id in [0, %d)", i,
					st->vocab);
			else if (rc == 0 && st->n_ids >= st->max_tokens)
				rc = stream_fail(st, AB_SUT_PROTOCOL, "more tokens than the %d asked for", st->max_tokens);
			else if (rc == 0)
				st->ids[st->n_ids++] = (int32_t)id;
		}
		if (rc == 0 && json_array_size(tokens) > 0)
			token_event(st);
		if (rc == 0 && json_is_true(json_object_get(ev, "stop"))) {
			json_t *n = json_object_get(ev, "tokens_predicted");
			st->usage = json_is_integer(n) ? (long)json_integer_value(n) : -1;
			json_t *tm = json_object_get(ev, "timings");
			if (json_is_object(tm))
				st->timings = json_deep_copy(tm);
			st->done = 1;
		}
	} else {
		json_t *choices = json_object_get(ev, "choices"), *usage = json_object_get(ev, "usage");
		if (choices && !json_is_array(choices))
			rc = stream_fail(st, AB_SUT_PROTOCOL, "\"choices\" is not an array");
		else if (json_array_size(choices) > 1)
			rc = stream_fail(st, AB_SUT_PROTOCOL, "%zu choices for one prompt", json_array_size(choices));
		else if (json_array_size(choices) == 1) {
			json_t *text = json_object_get(json_array_get(choices, 0), "text");
			if (!json_is_string(text))
				rc = stream_fail(st, AB_SUT_PROTOCOL, "choices[0].text is not a string");
			else if (json_string_length(text) > 0 || !json_object_get(json_array_get(choices, 0), "finish_reason") ||
				 json_is_null(json_object_get(json_array_get(choices, 0), "finish_reason")))
				token_event(st);
			if (rc == 0 && st->n_events > st->max_tokens)
				rc = stream_fail(st, AB_SUT_PROTOCOL, "more token events than the %d asked for", st->max_tokens);
		}
		if (rc == 0 && json_is_object(usage)) {
			json_t *n = json_object_get(usage, "completion_tokens");
			st->usage = json_is_integer(n) ? (long)json_integer_value(n) : -1;
		}
		json_t *tm = json_object_get(ev, "timings");   /* llama-server adds its timings here too */
		if (rc == 0 && json_is_object(tm)) {
			json_decref(st->timings);
			st->timings = json_deep_copy(tm);
		}
	}
	json_decref(ev);
	return rc;
}

/* With a draft loaded, a plain request sends llama-server's "speculative.n_max": 0 (no proposals);
 * a speculative one leaves the server's own depth (a PR's change of depth is what is measured). */
static char *request_body(ab_sut_http *h, const int32_t *prompt, int prompt_len, int max_tokens, int spec)
{
	json_t *ids = json_array();
	for (int i = 0; ids && i < prompt_len; i++)
		json_array_append_new(ids, json_integer(prompt[i]));
	json_t *rq;
	if (h->api == AB_SUT_HTTP_LLAMA)
		rq = json_pack("{s:o, s:i, s:f, s:i, s:b, s:b, s:b, s:b}", "prompt", ids, "n_predict", max_tokens,
			"temperature", 0.0, "top_k", 1, "stream", 1, "return_tokens", 1, "ignore_eos", 1, "cache_prompt", 0);
	else
		rq = json_pack("{s:o, s:i, s:f, s:b, s:{s:b}, s:b}", "prompt", ids, "max_tokens", max_tokens,
			"temperature", 0.0, "stream", 1, "stream_options", "include_usage", 1, "ignore_eos", 1);
	if (rq && h->model_name)
		json_object_set_new(rq, "model", json_string(h->model_name));
	if (rq && h->spec.present && !spec)
		json_object_set_new(rq, "speculative.n_max", json_integer(0));
	char *text = rq ? json_dumps(rq, JSON_COMPACT) : NULL;
	json_decref(rq);
	return text;
}

static int request_fault(ab_sut_http *h, struct ab_sut_fault *fault, struct xfer *x, CURLcode rc, const char *what)
{
	char dur[32], snip[96];
	if (x->why[0])
		return hfail(h, fault, x->why_kind, "%s: %s", what, x->why);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return hfail(h, fault, AB_SUT_TIMEOUT, "timeout: %s did not end within %s", what,
			fmt_ms(dur, sizeof(dur), h->request_timeout_ms));
	if (rc != CURLE_OK) {
		char msg[160];
		snprintf(msg, sizeof(msg), "stream dropped (%s)", curl_easy_strerror(rc));
		return hgone(h, fault, what, msg);
	}
	printable(snip, sizeof(snip), x->body ? x->body : "", x->body_len < 80 ? x->body_len : 80);
	return hfail(h, fault, x->status >= 500 ? AB_SUT_SUT_ERROR : AB_SUT_PROTOCOL, "%s: HTTP %ld%s%s", what,
		x->status, snip[0] ? ": " : "", snip);
}

/* The answer's timings into Contract 1's stats: llama-server's draft_n / draft_n_accepted become
 * drafted / accepted; target_steps and accept_mean are the server's own where it gives them (ember),
 * else derived: each target step yields its accepted proposals plus one token, so target_steps =
 * (n - 1) - accepted ("derived" is set: the harness's tau check then only checks the counts). The
 * timings themselves stay as engine_timings. 0 or -1 (out of memory). */
static int spec_stats(json_t *stats, json_t *timings, int n_tokens)
{
	json_t *dn = json_object_get(timings, "draft_n"), *da = json_object_get(timings, "draft_n_accepted");
	json_t *steps = json_object_get(timings, "target_steps"), *mean = json_object_get(timings, "accept_mean");
	if (json_object_set(stats, "engine_timings", timings) < 0)
		return -1;
	if (!json_is_integer(dn) || !json_is_integer(da))
		return 0;
	if (json_object_set(stats, "drafted", dn) < 0 || json_object_set(stats, "accepted", da) < 0)
		return -1;
	if (json_is_integer(steps) && json_is_number(mean))
		return json_object_set(stats, "target_steps", steps) < 0 || json_object_set(stats, "accept_mean", mean) < 0
			? -1 : 0;
	json_int_t derived = (json_int_t)(n_tokens - 1) - json_integer_value(da);
	if (derived < 1)
		return 0;   /* counts that cannot be: ab_sut_parse_spec_stats says why */
	return json_object_set_new(stats, "target_steps", json_integer(derived)) < 0 ||
		json_object_set_new(stats, "accept_mean", json_real((double)(n_tokens - 1) / (double)derived)) < 0 ||
		json_object_set_new(stats, "derived", json_true()) < 0 ? -1 : 0;
}

int ab_sut_http_generate(struct ab_sut_gen *out, struct ab_sut_fault *fault, ab_sut_http *h,
	const int32_t *prompt, int prompt_len, int max_tokens, int spec)
{
	struct ab_sut_gen gen = { 0 };
	struct xfer x = { .h = h, .sse = 1, .on_data = on_event };
	struct stream st = { .x = &x, .api = h->api, .vocab = h->vocab_size, .max_tokens = max_tokens, .usage = -1 };
	char what[64], *body = NULL;
	int error;

	if (h->dead) {
		if (fault)
			*fault = h->fault;
		return ab_error_setc(ab_sut_fault_code(h->fault.kind), "sut: %s", h->quit ? "the SUT has quit" : h->fault.reason);
	}
	if (spec && !h->spec.present)
		return hfail(h, fault, AB_SUT_SUT_ERROR, "speculative decoding needs a server started with a draft "
			"(models[].draft and {draft} in sut.command)");
	if (spec && h->api != AB_SUT_HTTP_LLAMA)
		return hfail(h, fault, AB_SUT_SUT_ERROR, "speculative decoding over HTTP needs api \"llama\" (token ids "
			"to check agreement with plain greedy)");
	if (prompt_len < 1 || max_tokens < 1)
		return ab_error_setc(AB_EINVALID, "sut: generate needs a prompt and max_tokens >= 1");
	snprintf(what, sizeof(what), "generate (%d+%d tokens)", prompt_len, max_tokens);
	x.user = &st;
	x.cap = BODY_FIXED + (size_t)max_tokens * PER_TOKEN;
	ab_sse_init(&x.reader, EVENT_MAX);
	if (!(body = request_body(h, prompt, prompt_len, max_tokens, spec)) ||
	    (h->api == AB_SUT_HTTP_LLAMA && !(st.ids = malloc((size_t)max_tokens * sizeof(int32_t))))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	CURLcode rc = perform(&x, h->api == AB_SUT_HTTP_LLAMA ? "/completion" : "/v1/completions", body,
		h->request_timeout_ms);
	if (rc != CURLE_OK || x.status != 200 || x.why[0]) {
		error = request_fault(h, fault, &x, rc, what);
		goto cleanup;
	}
	if (!st.done || ab_sse_pending(&x.reader)) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "%s: the stream ended before its last event", what);
		goto cleanup;
	}
	if (st.usage < 0) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "%s: no usage count (%s)", what,
			h->api == AB_SUT_HTTP_LLAMA ? "tokens_predicted" : "usage.completion_tokens");
		goto cleanup;
	}
	int streamed = h->api == AB_SUT_HTTP_LLAMA ? st.n_ids : st.n_events;
	if (st.usage != streamed) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "%s: the server's usage says %ld tokens, it streamed %d", what,
			st.usage, streamed);
		goto cleanup;
	}
	if (streamed != max_tokens) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "%s: %d tokens instead of %d", what, streamed, max_tokens);
		goto cleanup;
	}
	gen.tokens = st.ids;
	st.ids = NULL;
	gen.n_tokens = streamed;
	gen.prompt_len = prompt_len;
	gen.t_write_ns = x.t_write;
	gen.t_first_ns = st.t_first;
	gen.t_done_ns = st.t_last;
	gen.ttft_s = (double)(st.t_first - x.t_write) / 1e9;
	gen.prefill_tps = gen.ttft_s > 0 ? prompt_len / gen.ttft_s : NAN;
	gen.decode_tps = streamed >= 2 && st.t_last > st.t_first ? (streamed - 1) / ((double)(st.t_last - st.t_first) / 1e9)
		: NAN;
	if (!(gen.stats = json_object()) || (st.timings && spec_stats(gen.stats, st.timings, streamed) < 0)) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	if (!spec && h->spec.present && json_integer_value(json_object_get(gen.stats, "drafted")) > 0) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "%s: asked for plain decoding (\"speculative.n_max\": 0), the "
			"server drafted %" JSON_INTEGER_FORMAT " tokens", what,
			json_integer_value(json_object_get(gen.stats, "drafted")));
		goto cleanup;
	}
	if (fault)
		memset(fault, 0, sizeof(*fault));
	*out = gen;
	error = 0;
cleanup:
	if (error)
		ab_sut_gen_clear(&gen);   /* tokens and stats of an answer refused after parsing */
	free(body);
	free(x.body);
	free(st.ids);
	json_decref(st.timings);
	ab_sse_clear(&x.reader);
	return error;
}

/* A refusal of echo + logprobs: any 4xx, or a 5xx that names the feature (llama-server answers
 * "Unsupported param: echo" with 500). */
static int refuses_echo(const struct xfer *x)
{
	if (x->status >= 400 && x->status < 500)
		return 1;
	const char *b = x->body ? x->body : "";
	return x->status >= 500 && (strstr(b, "echo") || strstr(b, "logprobs") || strstr(b, "nsupported"));
}

int ab_sut_http_score(struct ab_sut_scores *out, struct ab_sut_fault *fault, ab_sut_http *h,
	const struct ab_sut_score_request *rq)
{
	struct xfer x = { .h = h };
	char what[64], why[224], snip[120], *body = NULL;
	int error;

	if (h->dead) {
		if (fault)
			*fault = h->fault;
		return ab_error_setc(ab_sut_fault_code(h->fault.kind), "sut: %s", h->quit ? "the SUT has quit" : h->fault.reason);
	}
	if (rq->prompt_len < 1 || rq->first < 0 || rq->first >= rq->prompt_len || rq->top_k < 1 || rq->top_k > 4096 ||
	    (rq->ids && !rq->n_ids))
		return ab_error_setc(AB_EINVALID, "score: bad request (prompt_len %d, first %d, top_k %d)", rq->prompt_len,
			rq->first, rq->top_k);
	snprintf(what, sizeof(what), "score (%d tokens, top %d)", rq->prompt_len, rq->top_k);
	x.cap = x.keep = ab_sut_echo_body_cap(rq);
	if (!(body = ab_sut_echo_body(rq, h->model_name))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	CURLcode rc = perform(&x, "/v1/completions", body, h->request_timeout_ms);
	if (rc == CURLE_OK && !x.why[0] && x.status != 200 && refuses_echo(&x)) {
		/* the server's own words: error.message of an OpenAI error body, else the body's start */
		json_t *eb = x.body ? json_loadb(x.body, x.body_len, 0, NULL) : NULL, *err = json_object_get(eb, "error");
		const char *m = json_string_value(json_is_object(err) ? json_object_get(err, "message") : err);
		printable(snip, sizeof(snip), m ? m : x.body ? x.body : "", m ? strlen(m) : x.body_len);
		json_decref(eb);
		error = hfail(h, fault, AB_SUT_SUT_ERROR, "scoring unavailable: POST /v1/completions with echo + logprobs "
			"%d answered HTTP %ld%s%s (accuracy gates unavailable for this SUT)", rq->top_k, x.status,
			snip[0] ? ": " : "", snip);
		goto cleanup;
	}
	if (rc != CURLE_OK || x.status != 200 || x.why[0]) {
		error = request_fault(h, fault, &x, rc, what);
		goto cleanup;
	}
	if ((error = ab_sut_echo_parse(out, why, sizeof(why), x.body ? x.body : "", x.body_len, rq, h->vocab_size)) ==
	    AB_EINVALID) {
		error = hfail(h, fault, AB_SUT_PROTOCOL, "%s: %s", what, why);
		goto cleanup;
	}
	if (error == 0 && fault)
		memset(fault, 0, sizeof(*fault));
cleanup:
	free(body);
	free(x.body);
	return error;
}

int ab_sut_http_quit(struct ab_proc_status *out, ab_sut_http *h)
{
	struct ab_proc_status st = { 0 };
	int error = 0;
	if (!h->proc)
		return ab_error_set("sut: never started");
	if (!h->dead) {
		ab_proc_kill(&st, h->proc, h->quit_grace_ms, 0);
		h->dead = 1;
		h->quit = 1;
		memset(&h->fault, 0, sizeof(h->fault));
		h->fault.exit = st;
		int term = st.signaled && st.signal_number == SIGTERM;
		if (!ab_proc_status_ok(&st) && !term && !(st.exited && (st.exit_code == 0 || st.exit_code == 143))) {
			char desc[96];
			error = ab_error_set("sut: ended with %s after SIGTERM", ab_proc_status_describe(desc, sizeof(desc), &st));
		}
	} else {
		st = h->fault.exit;
		if (!h->quit)
			error = ab_error_setc(ab_sut_fault_code(h->fault.kind), "sut: %s", h->fault.reason);
	}
	if (out)
		*out = st;
	return error;
}

void ab_sut_http_free(ab_sut_http *h)
{
	if (!h)
		return;
	ab_proc_free(h->proc);
	ab_sut_relay_free(h->relay);
	if (h->curl)
		curl_easy_cleanup(h->curl);
	json_decref(h->ready);
	free(h->model_name);
	free(h);
}
