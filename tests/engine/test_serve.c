/*
 * test_serve.c - `ember serve --stdio` as the harness sees it: a child process spoken to over
 * pipes. Checks the ready line, generate (first before done, determinism, agreement with score's
 * teacher-forced argmax), score normalization and consistency, every kind of bad request answered
 * with an error event while the server keeps serving, quit and EOF exit 0, a bad model path, an
 * unknown backend; with a DFlash draft (--draft): the ready line's spec object, "spec": true
 * tokens equal to plain ones with consistent stats, EMBER_SPEC_DEPTH, and bad drafts refused.
 * usage: test_serve EMBER_BINARY
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "error.h"
#include "gen.h"
#include "gguf.h"

#define READ_TIMEOUT_MS 60000

struct child {
	pid_t pid;
	FILE *to;       /* child's stdin */
	int from;       /* child's stdout */
	char buf[1 << 20];
	size_t len;
};

/* Starts `ember serve` on model, with one more option `flag value` when flag is not NULL. */
static void spawn(struct child *c, const char *ember, const char *model, const char *flag, const char *value)
{
	int in[2], out[2];
	REQUIRE(pipe(in) == 0 && pipe(out) == 0, "pipe");
	c->pid = fork();
	REQUIRE(c->pid >= 0, "fork");
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		const char *argv[16] = {ember, "serve", "--stdio", "--model", model, "--threads", "2", "--ctx", "256"};
		int argc = 9;
		if (flag) {
			argv[argc++] = flag;
			argv[argc++] = value;
		}
		argv[argc] = NULL;
		execv(ember, (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->to = fdopen(in[1], "w");
	c->from = out[0];
	c->len = 0;
}

/* Next line from the child as JSON (NULL on EOF/timeout/parse error). */
static json_t *next(struct child *c)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			json_error_t err;
			size_t n = (size_t)(nl - c->buf);
			json_t *j = json_loadb(c->buf, n, 0, &err);
			CHECK(j, "child printed a non-JSON line: %.*s", (int)(n > 200 ? 200 : n), c->buf);
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return j;
		}
		struct pollfd p = {c->from, POLLIN, 0};
		if (poll(&p, 1, READ_TIMEOUT_MS) <= 0 || c->len == sizeof(c->buf)) {
			CHECK(0, "no line from the server within %d ms", READ_TIMEOUT_MS);
			return NULL;
		}
		ssize_t k = read(c->from, c->buf + c->len, sizeof(c->buf) - c->len);
		if (k <= 0)
			return NULL;
		c->len += (size_t)k;
	}
}

static void send_line(struct child *c, const char *line)
{
	fputs(line, c->to);
	fputc('\n', c->to);
	fflush(c->to);
}

static int finish(struct child *c)
{
	int status = -1;
	fclose(c->to);
	for (int i = 0; i < 600; i++) {
		if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
			close(c->from);
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	close(c->from);
	CHECK(0, "server did not exit");
	return -1;
}

static const char *event(json_t *j) { return json_string_value(json_object_get(j, "event")); }

/* Sends a request expected to fail; checks the error event, its id and message. */
static void expect_error(struct child *c, const char *req, json_int_t id, const char *want)
{
	send_line(c, req);
	json_t *r = next(c);
	REQUIRE(r, "no answer to %s", req);
	json_t *jid = json_object_get(r, "id");
	CHECK(event(r) && strcmp(event(r), "error") == 0, "%s: event %s", req, event(r));
	CHECK(id < 0 ? json_is_null(jid) : json_integer_value(jid) == id, "%s: wrong id", req);
	const char *msg = json_string_value(json_object_get(r, "message"));
	CHECK(msg && strstr(msg, want), "%s: message '%s' lacks '%s'", req, msg ? msg : "(none)", want);
	json_decref(r);
}

/* generate: returns the tokens array (new reference) after checking first-then-done. */
static json_t *generate(struct child *c, int id, const char *prompt, int max_tokens)
{
	char req[4096];
	snprintf(req, sizeof(req), "{\"op\":\"generate\",\"id\":%d,\"prompt\":%s,\"max_tokens\":%d,\"spec\":false}", id, prompt,
	         max_tokens);
	send_line(c, req);
	json_t *first = next(c), *done = next(c);
	REQUIRE(first && done, "generate answers");
	CHECK(strcmp(event(first), "first") == 0 && json_integer_value(json_object_get(first, "id")) == id,
	      "first event before done");
	CHECK(strcmp(event(done), "done") == 0 && json_integer_value(json_object_get(done, "id")) == id, "done event");
	json_t *tokens = json_object_get(done, "tokens"), *stats = json_object_get(done, "stats");
	CHECK(json_array_size(tokens) == (size_t)max_tokens, "%zu tokens for max_tokens %d", json_array_size(tokens),
	      max_tokens);
	CHECK(json_is_number(json_object_get(stats, "prefill_ms")) && json_is_number(json_object_get(stats, "decode_ms")) &&
	      json_integer_value(json_object_get(stats, "gen_tokens")) == max_tokens &&
	      json_integer_value(json_object_get(stats, "prompt_tokens")) > 0 &&
	      !json_object_get(stats, "debug_wait_ms"), "stats");
	json_incref(tokens);
	json_decref(first);
	json_decref(done);
	return tokens;
}

static void test_session(const char *ember, const char *model, int vocab)
{
	struct child c;
	spawn(&c, ember, model, "--max-line", "4096");
	json_t *ready = next(&c);
	REQUIRE(ready, "no ready line");
	json_t *m = json_object_get(ready, "model");
	CHECK(json_is_true(json_object_get(ready, "ready")) && json_integer_value(json_object_get(ready, "protocol")) == 1 &&
	      strcmp(json_string_value(json_object_get(ready, "engine")), "ember") == 0 &&
	      strcmp(json_string_value(json_object_get(ready, "backend")), "cpu") == 0 &&
	      json_is_string(json_object_get(ready, "device")) && json_integer_value(json_object_get(ready, "n_ctx")) == 256,
	      "ready line fields");
	CHECK(m && strcmp(json_string_value(json_object_get(m, "arch")), "qwen3") == 0 &&
	      json_integer_value(json_object_get(m, "vocab_size")) == vocab &&
	      json_integer_value(json_object_get(m, "n_layer")) == 4 && json_integer_value(json_object_get(m, "n_embd")) == 256 &&
	      json_integer_value(json_object_get(m, "n_head")) == 4 && json_integer_value(json_object_get(m, "n_head_kv")) == 2 &&
	      json_integer_value(json_object_get(m, "head_dim")) == 64 && json_integer_value(json_object_get(m, "n_ff")) == 768 &&
	      strcmp(json_string_value(json_object_get(m, "file_type")), "Q8_0") == 0 &&
	      json_integer_value(json_object_get(m, "n_params")) > 3000000 &&
	      json_integer_value(json_object_get(m, "weight_bytes")) > 3000000 && json_is_string(json_object_get(m, "name")),
	      "ready model fields");
	json_decref(ready);

	/* generate: deterministic, and equal to the teacher-forced argmax of score */
	const char *prompt = "[11,22,33,44,55,66,77,88,99,111]";
	json_t *g1 = generate(&c, 7, prompt, 12), *g2 = generate(&c, 8, prompt, 12);
	CHECK(json_equal(g1, g2), "generate is not deterministic");
	json_t *g3 = generate(&c, 9, "[5]", 1);
	json_decref(g3);
	char req[8192];
	int k = snprintf(req, sizeof(req), "{\"op\":\"score\",\"id\":10,\"top_k\":1,\"first\":9,\"prompt\":[11,22,33,44,55,66,77,88,99,111");
	for (size_t i = 0; i + 1 < json_array_size(g1); i++)
		k += snprintf(req + k, sizeof(req) - (size_t)k, ",%lld", (long long)json_integer_value(json_array_get(g1, i)));
	snprintf(req + k, sizeof(req) - (size_t)k, "]}");
	send_line(&c, req);
	json_t *sc = next(&c);
	REQUIRE(sc, "score answer");
	json_t *pos = json_object_get(sc, "positions");
	CHECK(json_array_size(pos) == json_array_size(g1), "score positions %zu", json_array_size(pos));
	for (size_t i = 0; i < json_array_size(pos) && i < json_array_size(g1); i++) {
		json_t *top = json_array_get(json_object_get(json_array_get(pos, i), "top"), 0);
		CHECK(json_integer_value(json_array_get(top, 0)) == json_integer_value(json_array_get(g1, i)),
		      "position %zu: score argmax %lld, generate %lld", i, (long long)json_integer_value(json_array_get(top, 0)),
		      (long long)json_integer_value(json_array_get(g1, i)));
	}
	json_decref(sc);
	json_decref(g1);
	json_decref(g2);

	/* score over the whole vocabulary: normalized, sorted, consistent with the requested ids */
	send_line(&c, "{\"op\":\"score\",\"id\":\"s1\",\"prompt\":[3,1,4,1,5,9],\"top_k\":2048,"
	              "\"ids\":[[0,1,2047],[],[9,9],[100],[5],[2000,7]]}");
	sc = next(&c);
	REQUIRE(sc, "score answer");
	CHECK(strcmp(json_string_value(json_object_get(sc, "id")), "s1") == 0 && strcmp(event(sc), "done") == 0, "string id");
	pos = json_object_get(sc, "positions");
	CHECK(json_array_size(pos) == 6, "6 positions");
	for (size_t p = 0; p < json_array_size(pos); p++) {
		json_t *top = json_object_get(json_array_get(pos, p), "top"), *ids = json_object_get(json_array_get(pos, p), "ids");
		double sum = 0, prev = 0, lp_of[2048];
		CHECK(json_array_size(top) == 2048, "top size");
		for (size_t j = 0; j < json_array_size(top); j++) {
			json_int_t id = json_integer_value(json_array_get(json_array_get(top, j), 0));
			double lp = json_number_value(json_array_get(json_array_get(top, j), 1));
			CHECK(lp <= 0 && (j == 0 || lp <= prev), "position %zu: top not sorted or positive", p);
			if (id >= 0 && id < 2048)
				lp_of[id] = lp;
			prev = lp;
			sum += exp(lp);
		}
		CHECK(fabs(sum - 1.0) < 1e-5, "position %zu: probabilities sum to %.9f", p, sum);
		static const int want[6][3] = {{0, 1, 2047}, {0}, {9, 9}, {100}, {5}, {2000, 7}};
		static const int want_n[6] = {3, 0, 2, 1, 1, 2};
		CHECK(json_array_size(ids) == (size_t)want_n[p], "position %zu: %zu requested log-probs", p, json_array_size(ids));
		for (int j = 0; j < want_n[p] && j < (int)json_array_size(ids); j++)
			CHECK(json_number_value(json_array_get(ids, (size_t)j)) == lp_of[want[p][j]],
			      "position %zu: requested id %d log-prob differs from its top entry", p, want[p][j]);
	}
	json_decref(sc);
	/* first=4 gives positions 4.. of the same distributions */
	send_line(&c, "{\"op\":\"score\",\"id\":11,\"prompt\":[3,1,4,1,5,9],\"top_k\":3,\"first\":4}");
	sc = next(&c);
	CHECK(sc && json_array_size(json_object_get(sc, "positions")) == 2, "first=4 positions");
	json_decref(sc);

	/* bad requests: each answered, the server keeps serving */
	expect_error(&c, "this is not json", -1, "malformed JSON");
	expect_error(&c, "[1,2,3]", -1, "must be a JSON object");
	expect_error(&c, "{\"id\":1}", 1, "missing field 'op'");
	expect_error(&c, "{\"id\":2,\"op\":\"fly\"}", 2, "unknown op 'fly'");
	expect_error(&c, "{\"id\":[1],\"op\":\"quit\"}", -1, "'id' must be an integer or a string");
	expect_error(&c, "{\"id\":3,\"op\":\"generate\",\"max_tokens\":4}", 3, "missing field 'prompt'");
	expect_error(&c, "{\"id\":4,\"op\":\"generate\",\"prompt\":[1,2]}", 4, "missing field 'max_tokens'");
	expect_error(&c, "{\"id\":5,\"op\":\"generate\",\"prompt\":[1,2048],\"max_tokens\":4}", 5, "outside the vocabulary");
	expect_error(&c, "{\"id\":6,\"op\":\"generate\",\"prompt\":[1,-1],\"max_tokens\":4}", 6, "outside the vocabulary");
	expect_error(&c, "{\"id\":7,\"op\":\"generate\",\"prompt\":[1,\"a\"],\"max_tokens\":4}", 7, "not an integer");
	expect_error(&c, "{\"id\":8,\"op\":\"generate\",\"prompt\":[],\"max_tokens\":4}", 8, "'prompt' is empty");
	expect_error(&c, "{\"id\":9,\"op\":\"generate\",\"prompt\":[1],\"max_tokens\":0}", 9, "'max_tokens' must be");
	expect_error(&c, "{\"id\":10,\"op\":\"generate\",\"prompt\":[1,2,3],\"max_tokens\":254}", 10, "exceeds the context");
	expect_error(&c, "{\"id\":11,\"op\":\"generate\",\"prompt\":[1],\"max_tokens\":4,\"spec\":true}", 11,
	             "speculative decoding is not supported by this engine build without a draft model");
	expect_error(&c, "{\"id\":12,\"op\":\"score\",\"prompt\":[1,2]}", 12, "missing field 'top_k'");
	expect_error(&c, "{\"id\":13,\"op\":\"score\",\"prompt\":[1,2],\"top_k\":4096}", 13, "'top_k' must be");
	expect_error(&c, "{\"id\":14,\"op\":\"score\",\"prompt\":[1,2],\"top_k\":4,\"first\":2}", 14, "'first' must be");
	expect_error(&c, "{\"id\":15,\"op\":\"score\",\"prompt\":[1,2],\"top_k\":4,\"ids\":[[1]]}", 15, "one array of token ids");
	expect_error(&c, "{\"id\":16,\"op\":\"score\",\"prompt\":[1,2],\"top_k\":4,\"ids\":[[1],[9999]]}", 16,
	             "outside the vocabulary");
	expect_error(&c, "{\"id\":17,\"op\":\"generate\",\"id\":18}", -1, "malformed JSON");
	char *big = malloc(10000);
	memset(big, ' ', 9999);
	memcpy(big, "{\"id\":19,\"op\":\"quit\"", 20);
	big[9998] = '}';
	big[9999] = '\0';
	expect_error(&c, big, -1, "longer than 4096 bytes");
	free(big);
	/* still serving, and a blank line is ignored */
	send_line(&c, "");
	json_t *g4 = generate(&c, 20, prompt, 12), *again = generate(&c, 21, prompt, 12);
	CHECK(json_equal(g4, again), "results changed after errors");
	json_decref(g4);
	json_decref(again);
	send_line(&c, "{\"op\":\"quit\"}");
	CHECK(finish(&c) == 0, "quit: exit status not 0");

	/* EOF on stdin ends the server with status 0 too */
	spawn(&c, ember, model, NULL, NULL);
	json_decref(next(&c));
	CHECK(finish(&c) == 0, "EOF: exit status not 0");
}

/* --debug-slowdown-prefill / -decode PM: the pass's time grows by PM/1000 of its own (a busy wait),
 * reported as debug_wait_ms; one process per switch, so the wait belongs to one pass. */
static void test_slowdown(const char *ember, const char *model)
{
	const char *flags[2] = {"--debug-slowdown-prefill", "--debug-slowdown-decode"};
	for (int k = 0; k < 2; k++) {
		struct child c;
		spawn(&c, ember, model, flags[k], "1000");
		json_t *ready = next(&c);
		REQUIRE(ready, "%s: no ready line", flags[k]);
		json_decref(ready);
		char prompt[1024];
		int n = snprintf(prompt, sizeof(prompt), "[1");
		for (int i = 2; i <= 96; i++)
			n += snprintf(prompt + n, sizeof(prompt) - (size_t)n, ",%d", 7 * i % 2000);
		snprintf(prompt + n, sizeof(prompt) - (size_t)n, "]");
		char req[1200];
		snprintf(req, sizeof(req), "{\"op\":\"generate\",\"id\":1,\"prompt\":%s,\"max_tokens\":32}", prompt);
		send_line(&c, req);
		json_t *first = next(&c), *done = next(&c);
		REQUIRE(first && done, "%s: generate answers", flags[k]);
		json_t *st = json_object_get(done, "stats");
		const double wait = json_number_value(json_object_get(st, "debug_wait_ms"));
		const double pass = json_number_value(json_object_get(st, k == 0 ? "prefill_ms" : "decode_ms"));
		const double work = pass - wait;
		/* the wait ends once it has lasted the work's time: never shorter; longer only by the last
		 * clock read and whatever preempted it */
		CHECK(json_is_real(json_object_get(st, "debug_wait_ms")) && work > 0 && wait >= 0.98 * work - 0.01 &&
		      wait <= 1.5 * work + 5.0, "%s 1000: waited %.3f ms for %.3f ms of work", flags[k], wait, work);
		json_decref(first);
		json_decref(done);
		CHECK(finish(&c) == 0, "%s: exit status", flags[k]);
	}
}

static void test_bad_model(const char *ember, const char *dir)
{
	struct child c;
	char path[4200];
	snprintf(path, sizeof(path), "%s/not-a-model.gguf", dir);
	FILE *f = fopen(path, "w");
	fputs("hello", f);
	fclose(f);
	spawn(&c, ember, path, NULL, NULL);
	json_t *r = next(&c);
	CHECK(r && json_is_false(json_object_get(r, "ready")) && strstr(json_string_value(json_object_get(r, "error")),
	                                                                 "not a GGUF file"), "ready:false with the reason");
	json_decref(r);
	CHECK(finish(&c) == 1, "bad model: exit status not 1");
	unlink(path);
}

static void test_bad_backend(const char *ember, const char *model)
{
	struct child c;
	spawn(&c, ember, model, "--backend", "nope");
	json_t *r = next(&c);
	const char *error = r ? json_string_value(json_object_get(r, "error")) : NULL;
	CHECK(r && json_is_false(json_object_get(r, "ready")) && error && strstr(error, "backend 'nope' is not built into"),
	      "ready:false naming the backend (got %s)", error ? error : "no error");
	json_decref(r);
	CHECK(finish(&c) == 1, "bad backend: exit status not 1");
}

/* generate with "spec": true; returns the done event (new reference) after checking first-then-done. */
static json_t *generate_spec(struct child *c, int id, const char *prompt, int max_tokens)
{
	char req[4096];
	snprintf(req, sizeof(req), "{\"op\":\"generate\",\"id\":%d,\"prompt\":%s,\"max_tokens\":%d,\"spec\":true}", id, prompt,
	         max_tokens);
	send_line(c, req);
	json_t *first = next(c), *done = next(c);
	REQUIRE(first && done, "spec generate answers");
	CHECK(event(first) && strcmp(event(first), "first") == 0, "spec: first event before done (got %s)", event(first));
	CHECK(event(done) && strcmp(event(done), "done") == 0, "spec: done event (got %s: %s)", event(done),
	      json_string_value(json_object_get(done, "message")));
	json_decref(first);
	return done;
}

static void test_spec(const char *ember, const char *model, const char *draft, const char *dir)
{
	struct child c;
	spawn(&c, ember, model, "--draft", draft);
	json_t *ready = next(&c);
	REQUIRE(ready, "no ready line with a draft");
	json_t *spec = json_object_get(ready, "spec");
	CHECK(json_is_true(json_object_get(ready, "ready")) && spec &&
	      strcmp(json_string_value(json_object_get(spec, "kind")), "dflash") == 0 &&
	      json_integer_value(json_object_get(spec, "block_size")) == 8 &&
	      json_integer_value(json_object_get(spec, "depth")) == 7, "ready line spec object");
	json_decref(ready);
	const char *prompts[3] = {"[11,22,33,44,55,66,77,88,99,111]", "[5]", "[1000,2000,3,4,5,6,7]"};
	for (int p = 0; p < 3; p++) {
		const int n = p == 1 ? 1 : 40;
		json_t *plain = generate(&c, 30 + p, prompts[p], n);
		json_t *done = generate_spec(&c, 40 + p, prompts[p], n);
		json_t *tokens = json_object_get(done, "tokens"), *st = json_object_get(done, "stats");
		CHECK(json_equal(tokens, plain), "prompt %d: spec tokens differ from plain tokens", p);
		json_int_t steps = json_integer_value(json_object_get(st, "target_steps"));
		json_int_t drafted = json_integer_value(json_object_get(st, "drafted"));
		json_int_t accepted = json_integer_value(json_object_get(st, "accepted"));
		double tau = json_number_value(json_object_get(st, "accept_mean"));
		const size_t len = json_array_size(tokens);
		CHECK(json_is_integer(json_object_get(st, "target_steps")) && json_is_integer(json_object_get(st, "drafted")) &&
		      json_is_integer(json_object_get(st, "accepted")) && json_is_number(json_object_get(st, "accept_mean")),
		      "prompt %d: spec stats present", p);
		CHECK(accepted >= 0 && accepted <= drafted && (size_t)(steps + accepted) == len - 1 &&
		      (steps == 0 ? tau == 0.0 : fabs(tau - (double)(len - 1) / (double)steps) < 1e-9),
		      "prompt %d: steps %lld drafted %lld accepted %lld tau %g for %zu tokens", p, (long long)steps,
		      (long long)drafted, (long long)accepted, tau, len);
		json_decref(plain);
		json_decref(done);
	}
	send_line(&c, "{\"op\":\"quit\"}");
	CHECK(finish(&c) == 0, "spec server: exit status not 0");

	/* EMBER_SPEC_DEPTH: proposals per step; a bad value refuses to start */
	setenv("EMBER_SPEC_DEPTH", "2", 1);
	spawn(&c, ember, model, "--draft", draft);
	ready = next(&c);
	CHECK(ready && json_integer_value(json_object_get(json_object_get(ready, "spec"), "depth")) == 2, "depth 2");
	json_decref(ready);
	json_t *done = generate_spec(&c, 50, prompts[0], 30);
	CHECK(json_integer_value(json_object_get(json_object_get(done, "stats"), "drafted")) <=
	      2 * json_integer_value(json_object_get(json_object_get(done, "stats"), "target_steps")), "depth 2: drafted");
	json_decref(done);
	CHECK(finish(&c) == 0, "depth 2 server: exit status not 0");
	setenv("EMBER_SPEC_DEPTH", "9", 1);
	spawn(&c, ember, model, "--draft", draft);
	ready = next(&c);
	const char *error = ready ? json_string_value(json_object_get(ready, "error")) : NULL;
	CHECK(ready && json_is_false(json_object_get(ready, "ready")) && error && strstr(error, "EMBER_SPEC_DEPTH"),
	      "bad EMBER_SPEC_DEPTH: %s", error ? error : "no error");
	json_decref(ready);
	CHECK(finish(&c) == 1, "bad depth: exit status not 1");
	unsetenv("EMBER_SPEC_DEPTH");

	/* a draft for another target is refused with the reason */
	char other[4200];
	snprintf(other, sizeof(other), "%s/draft-wide.gguf", dir);
	struct ember_gguf_writer *w = NULL;
	REQUIRE(ember_gguf_writer_create(&w) == 0 && ember_gguf_writer_set_str(w, "general.architecture", "qwen3") == 0 &&
	        ember_gguf_writer_open(w, other) == 0 && ember_gguf_writer_finish(w) == 0, "write");
	ember_gguf_writer_free(w);
	spawn(&c, ember, model, "--draft", other);
	ready = next(&c);
	error = ready ? json_string_value(json_object_get(ready, "error")) : NULL;
	CHECK(ready && json_is_false(json_object_get(ready, "ready")) && error && strstr(error, "not a DFlash draft"),
	      "target model as draft: %s", error ? error : "no error");
	json_decref(ready);
	CHECK(finish(&c) == 1, "bad draft: exit status not 1");
	unlink(other);
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2, "usage: test_serve EMBER_BINARY");
	signal(SIGPIPE, SIG_IGN);
	char *dir = check_tmpdir("serve");
	char model[4200];
	snprintf(model, sizeof(model), "%s/tiny-q8_0.gguf", dir);
	struct ember_gen_config g = {.shape = "tiny", .quant = "q8_0", .seed = 3};
	REQUIRE(ember_gen_write(&g, model) == 0, "gen: %s", ember_error_last());
	test_session(argv[1], model, 2048);
	test_slowdown(argv[1], model);
	char draft[4200];
	snprintf(draft, sizeof(draft), "%s/draft.gguf", dir);
	struct ember_gen_draft_config dc = {.target_shape = "tiny", .n_layer = 2, .block_size = 8, .seed = 4};
	REQUIRE(ember_gen_draft_write(&dc, draft) == 0, "gen draft: %s", ember_error_last());
	test_spec(argv[1], model, draft, dir);
	test_bad_model(argv[1], dir);
	test_bad_backend(argv[1], model);
	check_rmdir(dir);
	return check_exit("test_serve");
}
