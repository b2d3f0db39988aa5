/*
 * test_sut_http.c - the HTTP SUT adapter (sut_http.c through sut.h) against tests/http_mock.js:
 * both APIs (ids and timing from llama's /completion, text-only completions), vocab from /props,
 * and each fault classified (never ready, 500, garbage SSE, a lying usage count, a dropped stream,
 * a crash, a hang, an oversized body), plus the bounded SSE reader on its own. Scoring through
 * echo + logprobs on both APIs: positions, top-k and asked ids as the stdio score op gives them, the
 * bound for unlisted ids, every malformed answer a PROTOCOL fault, a refusal "scoring unavailable".
 */
#include "testutil.h"

#include <math.h>
#include <jansson.h>

#include "sut.h"
#include "sut_echo.h"
#include "sut_http.h"
#include "sut_sse.h"

static struct ab_sut_http_config hc;
static struct ab_sut_config cfg;
static struct ab_sut_fault fault;
static int with_draft;   /* hc.draft of the next start() */

/* Starts the mock with `api` and extra args (NULL-terminated); expect_ok 0: returns NULL. */
static ab_sut *start(enum ab_sut_http_api api, int vocab_given, const char *a1, const char *a2, const char *a3)
{
	static const char *argv[16];
	int n = 0;
	argv[n++] = "node";
	argv[n++] = MOCK_HTTP_PATH;
	argv[n++] = "--port";
	argv[n++] = "{port}";
	if (a1) argv[n++] = a1;
	if (a2) argv[n++] = a2;
	if (a3) argv[n++] = a3;
	argv[n] = NULL;
	hc = (struct ab_sut_http_config){ .api = api, .url = "http://127.0.0.1:{port}", .ready_path = "/health",
		.vocab_size = vocab_given, .draft = with_draft };
	cfg = (struct ab_sut_config){ .http = &hc, .argv = argv, .ready_timeout_ms = 3000, .request_timeout_ms = 2000,
		.quit_grace_ms = 1000 };
	ab_sut *sut = NULL;
	if (ab_sut_start(&sut, &fault, &cfg) < 0)
		return NULL;
	return sut;
}

static const int32_t prompt[8] = { 1, 2, 3, 4, 5, 6, 7, 9 };

static void test_llama(void)
{
	ab_sut *sut = start(AB_SUT_HTTP_LLAMA, 0, "--vocab", "500", NULL);
	CHECK(sut != NULL);
	CHECK_EQ(ab_sut_vocab_size(sut), 500);
	CHECK(json_is_true(json_object_get(ab_sut_ready(sut), "token_ids")));
	CHECK(!ab_sut_spec(sut)->present);
	struct ab_sut_gen gen = { 0 };
	CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 6, 0), 0);
	CHECK_EQ(gen.n_tokens, 6);
	int prev = 9;
	for (int i = 0; i < 6; i++) {
		prev = (prev * 31 + 7) % 500;
		CHECK_EQ(gen.tokens[i], prev);
	}
	CHECK(gen.t_write_ns > 0 && gen.t_first_ns >= gen.t_write_ns && gen.t_done_ns >= gen.t_first_ns);
	CHECK(gen.ttft_s >= 0 && isfinite(gen.decode_tps) && gen.decode_tps > 0);
	CHECK(json_is_object(json_object_get(gen.stats, "engine_timings")));
	ab_sut_gen_clear(&gen);
	/* a second request on the same kept-alive connection */
	CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 4, 2, 0), 0);
	CHECK_EQ(gen.n_tokens, 2);
	ab_sut_gen_clear(&gen);
	/* Round trip of a 1-token request (the figure test_sut prints for the stdio mock; here node's
	 * own handling of the request is part of it): printed, not asserted. */
	enum { N = 300 };
	int64_t rtt[N];
	for (int i = 0; i < N; i++) {
		CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 1, 0), 0);
		rtt[i] = gen.t_done_ns - gen.t_write_ns;
		ab_sut_gen_clear(&gen);
	}
	for (int i = 1; i < N; i++)   /* insertion sort: N is small */
		for (int j = i; j > 0 && rtt[j - 1] > rtt[j]; j--) {
			int64_t t = rtt[j];
			rtt[j] = rtt[j - 1];
			rtt[j - 1] = t;
		}
	fprintf(stderr, "HTTP round trip (llama API, 8-token prompt, 1 token, zero-delay node mock, %d "
		"requests, one kept-alive connection): p50 %.1f us, p99 %.1f us\n", N, rtt[N / 2] / 1e3,
		rtt[N * 99 / 100] / 1e3);
	struct ab_proc_status st;
	CHECK_EQ(ab_sut_quit(&st, sut), 0);
	ab_sut_free(sut);
}

static void test_completions(void)
{
	ab_sut *sut = start(AB_SUT_HTTP_COMPLETIONS, 321, "--delay-ms", "10", NULL);
	CHECK(sut != NULL);
	CHECK_EQ(ab_sut_vocab_size(sut), 321);   /* given by the suite: /props is not asked */
	CHECK(json_is_false(json_object_get(ab_sut_ready(sut), "token_ids")));
	struct ab_sut_gen gen = { 0 };
	CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 5, 0), 0);
	CHECK_EQ(gen.n_tokens, 5);
	CHECK(gen.tokens == NULL);   /* text only: no ids */
	/* 4 gaps of 10 ms (node's timers may fire up to 1 ms early) between first and last token */
	CHECK(gen.t_done_ns - gen.t_first_ns >= 4 * 9 * 1000000LL);
	CHECK(gen.decode_tps < 1000.0 / 9);
	ab_sut_gen_clear(&gen);
	CHECK_EQ(ab_sut_quit(NULL, sut), 0);
	ab_sut_free(sut);
}

static void expect_fault(enum ab_sut_http_api api, const char *mode, enum ab_sut_fault_kind kind, const char *want)
{
	ab_sut *sut = start(api, 0, "--fault", mode, NULL);
	if (sut) {
		struct ab_sut_gen gen = { 0 };
		CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 6, 0) < 0);
		CHECK(gen.tokens == NULL && gen.stats == NULL);
	}
	if (fault.kind != kind || !strstr(fault.reason, want)) {
		fprintf(stderr, "fault %s: kind %s, reason \"%s\"; wanted %s, \"%s\"\n", mode,
			ab_sut_fault_kind_name(fault.kind), fault.reason, ab_sut_fault_kind_name(kind), want);
		exit(1);
	}
	if (sut && kind != AB_SUT_SUT_ERROR) {   /* sticky: the handle keeps the fault */
		struct ab_sut_gen gen = { 0 };
		CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 6, 0) < 0);
		CHECK(fault.kind == kind);
	}
	if (sut)
		ab_sut_quit(NULL, sut);
	ab_sut_free(sut);
}

static void test_faults(void)
{
	expect_fault(AB_SUT_HTTP_LLAMA, "never-ready", AB_SUT_TIMEOUT, "/health did not answer 200 within 3 s");
	expect_fault(AB_SUT_HTTP_LLAMA, "no-vocab", AB_SUT_PROTOCOL, "vocabulary size");
	expect_fault(AB_SUT_HTTP_LLAMA, "500", AB_SUT_SUT_ERROR, "HTTP 500");
	expect_fault(AB_SUT_HTTP_COMPLETIONS, "500", AB_SUT_SUT_ERROR, "mock internal error");
	expect_fault(AB_SUT_HTTP_LLAMA, "garbage-sse", AB_SUT_PROTOCOL, "malformed SSE");
	expect_fault(AB_SUT_HTTP_LLAMA, "lie-usage", AB_SUT_PROTOCOL, "usage says 7 tokens, it streamed 6");
	expect_fault(AB_SUT_HTTP_COMPLETIONS, "lie-usage", AB_SUT_PROTOCOL, "usage says 7 tokens, it streamed 6");
	expect_fault(AB_SUT_HTTP_LLAMA, "drop", AB_SUT_PROTOCOL, "stream");
	expect_fault(AB_SUT_HTTP_COMPLETIONS, "crash", AB_SUT_CRASH, "exited during generate");
	expect_fault(AB_SUT_HTTP_LLAMA, "hang", AB_SUT_TIMEOUT, "did not end within 2 s");
	expect_fault(AB_SUT_HTTP_LLAMA, "big", AB_SUT_PROTOCOL, "body over the size cap");
	expect_fault(AB_SUT_HTTP_COMPLETIONS, "long-line", AB_SUT_PROTOCOL, "line longer than the cap");
}

/* prompt[1] is the mock's greedy successor of prompt[0], so entry 1's own token is listed. */
static const int32_t sprompt[8] = { 1, 38, 5, 7, 100, 200, 300, 499 };
static int mock_next(int t) { return (t * 31 + 7) % 500; }

/* Positions 2..7, top 4; each asks for its 2nd best, an id far outside the top, and its best. */
static int score_request(struct ab_sut_scores *sc, ab_sut *sut)
{
	static int32_t rows[6][3];
	static const int32_t *ids[6];
	static int n_ids[6];
	for (int p = 0; p < 6; p++) {
		int next = mock_next(sprompt[2 + p]);
		rows[p][0] = (next + 1) % 500;
		rows[p][1] = (next + 100) % 500;
		rows[p][2] = next;
		ids[p] = rows[p];
		n_ids[p] = 3;
	}
	struct ab_sut_score_request rq = { .prompt = sprompt, .prompt_len = 8, .top_k = 4, .first = 2, .ids = ids,
		.n_ids = n_ids };
	return ab_sut_score(sc, &fault, sut, &rq);
}

static void test_score(void)
{
	for (int api = 0; api < 2; api++) {   /* both APIs score through /v1/completions */
		ab_sut *sut = start(api ? AB_SUT_HTTP_LLAMA : AB_SUT_HTTP_COMPLETIONS, 0, "--vocab", "500", NULL);
		CHECK(sut != NULL);
		struct ab_sut_scores sc = { 0 };
		CHECK_EQ(score_request(&sc, sut), 0);
		CHECK_EQ(sc.n_positions, 6);
		CHECK_EQ(sc.n_ids_bounded, 6);
		for (int p = 0; p < 6; p++) {
			const struct ab_sut_position *pos = &sc.positions[p];
			const int next = mock_next(sprompt[2 + p]);   /* position P: the token after prompt[0..P] */
			CHECK_EQ(pos->n_top, 4);
			for (int j = 0; j < 4; j++) {
				CHECK_EQ(pos->top_ids[j], (next + j) % 500);
				CHECK(fabs(pos->top_logprobs[j] + (j + 1) * M_LN2) < 1e-12);
			}
			CHECK_EQ(pos->n_ids, 3);
			CHECK(fabs(pos->id_logprobs[0] + 2 * M_LN2) < 1e-12);
			CHECK(fabs(pos->id_logprobs[2] + M_LN2) < 1e-12);
			/* unlisted: at most the smallest listed log-prob (-7 ln 2 where the own token is outside
			 * the top), and at most log(unlisted mass): exactly -4 ln 2 at the last position */
			CHECK(isfinite(pos->id_logprobs[1]) && pos->id_logprobs[1] <= -4 * M_LN2 + 1e-12);
			if (p < 5)
				CHECK(pos->id_logprobs[1] <= -7 * M_LN2 + 1e-12);
		}
		CHECK(fabs(sc.positions[5].id_logprobs[1] + 4 * M_LN2) < 1e-9);
		ab_sut_scores_clear(&sc);
		struct ab_sut_gen gen = { 0 };   /* the same connection generates after scoring */
		CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 3, 0), 0);
		ab_sut_gen_clear(&gen);
		CHECK_EQ(ab_sut_quit(NULL, sut), 0);
		ab_sut_free(sut);
	}
}

static void expect_score_fault(const char *mode, enum ab_sut_fault_kind kind, const char *want, const char *want2)
{
	ab_sut *sut = NULL;
	static const char *argv[] = { "node", MOCK_HTTP_PATH, "--port", "{port}", "--vocab", "500", "--fault", NULL, NULL };
	argv[7] = mode;
	hc = (struct ab_sut_http_config){ .api = AB_SUT_HTTP_COMPLETIONS, .url = "http://127.0.0.1:{port}" };
	cfg = (struct ab_sut_config){ .http = &hc, .argv = argv, .ready_timeout_ms = 3000, .request_timeout_ms = 2000,
		.quit_grace_ms = 1000 };
	CHECK_EQ(ab_sut_start(&sut, &fault, &cfg), 0);
	struct ab_sut_scores sc = { 0 };
	CHECK(score_request(&sc, sut) < 0);
	CHECK(sc.positions == NULL);
	if (fault.kind != kind || !strstr(fault.reason, want) || (want2 && !strstr(fault.reason, want2))) {
		fprintf(stderr, "score fault %s: kind %s, reason \"%s\"; wanted %s, \"%s\"\n", mode,
			ab_sut_fault_kind_name(fault.kind), fault.reason, ab_sut_fault_kind_name(kind), want);
		exit(1);
	}
	struct ab_sut_gen gen = { 0 };
	if (kind == AB_SUT_SUT_ERROR) {   /* unavailable, not broken: the server keeps serving */
		CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 3, 0), 0);
		ab_sut_gen_clear(&gen);
	} else {                          /* sticky */
		CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 3, 0) < 0);
		CHECK(fault.kind == kind);
	}
	ab_sut_quit(NULL, sut);
	ab_sut_free(sut);
}

static void test_score_faults(void)
{
	expect_score_fault("echo-400", AB_SUT_SUT_ERROR, "scoring unavailable", "HTTP 400");
	expect_score_fault("echo-500", AB_SUT_SUT_ERROR, "scoring unavailable", "Unsupported param: echo");
	expect_score_fault("bad-key", AB_SUT_PROTOCOL, "top_logprobs[2] key \"tok_5\" is not \"token_id:N\"", NULL);
	expect_score_fault("big-id", AB_SUT_PROTOCOL, "key \"token_id:500\"", "[0, 500)");
	expect_score_fault("wrong-count", AB_SUT_PROTOCOL, "8 tokens", "expected 9 each");
	expect_score_fault("nan", AB_SUT_PROTOCOL, "not JSON", NULL);
	expect_score_fault("null-lp", AB_SUT_PROTOCOL, "token_logprobs[3] is not a finite log-prob", NULL);
	expect_score_fault("positive", AB_SUT_PROTOCOL, "top_logprobs[2][", "not a finite log-prob <= 0");
	expect_score_fault("no-logprobs", AB_SUT_PROTOCOL, "choices[0].logprobs is missing", NULL);
	expect_score_fault("misecho", AB_SUT_PROTOCOL, "the echo is not the prompt", NULL);
	expect_score_fault("own-disagrees", AB_SUT_PROTOCOL, "token_logprobs[1] = ", "but top_logprobs[1]");
	/* the key reader on its own */
	int32_t id = -1;
	CHECK(ab_sut_echo_token_key(&id, "token_id:499", 500) == 0 && id == 499);
	CHECK(ab_sut_echo_token_key(&id, "token_id:500", 500) < 0);
	CHECK(ab_sut_echo_token_key(&id, "token_id:", 500) < 0);
	CHECK(ab_sut_echo_token_key(&id, "token_id:-1", 500) < 0);
	CHECK(ab_sut_echo_token_key(&id, "token_id:+1", 500) < 0);
	CHECK(ab_sut_echo_token_key(&id, "token_id:1 ", 500) < 0);
	CHECK(ab_sut_echo_token_key(&id, "token_id:0000000001", 1 << 24) < 0);
	CHECK(ab_sut_echo_token_key(&id, "[12]", 500) < 0);
	CHECK(ab_sut_echo_token_key(&id, NULL, 500) < 0);
}

static int count_data(void *user, const char *payload, size_t len)
{
	(void)payload;
	int *n = user;
	*n += (int)len;
	return 0;
}

static void test_sse(void)
{
	struct ab_sse s;
	int n = 0;
	ab_sse_init(&s, 32);
	static const char ok[] = ": comment\r\nevent: x\ndata: abc\n\ndata:de\nid: 4\n\n";
	for (size_t i = 0; i < sizeof(ok) - 1; i++)   /* byte by byte: lines split across reads */
		CHECK_EQ(ab_sse_feed(&s, ok + i, 1, count_data, &n), 0);
	CHECK_EQ(n, 5);
	CHECK_EQ(ab_sse_pending(&s), 0);
	CHECK_EQ(ab_sse_feed(&s, "data: partial", 13, count_data, &n), 0);
	CHECK(ab_sse_pending(&s) > 0);
	ab_sse_clear(&s);
	ab_sse_init(&s, 32);
	CHECK(ab_sse_feed(&s, "hello\n", 6, count_data, &n) < 0 && strstr(s.error, "not a field"));
	ab_sse_clear(&s);
	ab_sse_init(&s, 32);
	char big[64];
	memset(big, 'a', sizeof(big));
	CHECK(ab_sse_feed(&s, big, sizeof(big), count_data, &n) < 0 && strstr(s.error, "longer than the cap"));
	ab_sse_clear(&s);
	ab_sse_init(&s, 32);
	CHECK(ab_sse_feed(&s, "data: a\0b\n", 10, count_data, &n) < 0 && strstr(s.error, "NUL"));
	ab_sse_clear(&s);
}

/* A server started with a draft (the mock as llama-server -md): speculative answers carry Contract
 * 1's stats derived from draft_n / draft_n_accepted, plain requests send "speculative.n_max": 0
 * (the mock then does not draft), and the same tokens come back both ways. */
static void test_spec(void)
{
	ab_sut *sut = start(AB_SUT_HTTP_LLAMA, 0, "--vocab", "500", "--draft");
	CHECK(sut != NULL);
	CHECK(!ab_sut_spec(sut)->present);   /* hc.draft unset: the suite gave no draft */
	struct ab_sut_gen gen = { 0 }, plain = { 0 };
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 9, 1) < 0);
	CHECK(fault.kind == AB_SUT_SUT_ERROR && strstr(fault.reason, "started with a draft"));
	ab_sut_quit(NULL, sut);
	ab_sut_free(sut);

	with_draft = 1;
	sut = start(AB_SUT_HTTP_LLAMA, 0, "--vocab", "500", "--draft");
	CHECK(sut != NULL);
	const struct ab_sut_spec_info *si = ab_sut_spec(sut);
	CHECK(si->present && strcmp(si->kind, "draft") == 0 && si->block_size == 0);
	CHECK(json_is_object(json_object_get(ab_sut_ready(sut), "spec")));
	CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 9, 1), 0);
	CHECK_EQ(ab_sut_generate(&plain, &fault, sut, prompt, 8, 9, 0), 0);
	struct ab_sut_spec_stats st;
	CHECK_EQ(ab_sut_parse_spec_stats(&st, gen.stats, gen.n_tokens), 0);
	CHECK_EQ(st.target_steps, 2);      /* 8 tokens after the first, 4 per step */
	CHECK_EQ(st.drafted, 8);
	CHECK_EQ(st.accepted, 6);
	CHECK(fabs(st.accept_mean - 4.0) < 1e-9);
	CHECK(json_is_true(json_object_get(gen.stats, "derived")));
	CHECK(json_object_get(plain.stats, "drafted") == NULL);   /* n_max 0 reached the server */
	CHECK(ab_sut_parse_spec_stats(&st, plain.stats, plain.n_tokens) < 0 && strstr(ab_error_last(), "no speculative stats"));
	CHECK_EQ(gen.n_tokens, plain.n_tokens);
	CHECK(memcmp(gen.tokens, plain.tokens, (size_t)gen.n_tokens * sizeof(int32_t)) == 0);
	ab_sut_gen_clear(&gen);
	ab_sut_gen_clear(&plain);
	ab_sut_quit(NULL, sut);
	ab_sut_free(sut);

	/* a server that drafts on a plain request: PROTOCOL (the plain side would not be plain) */
	sut = start(AB_SUT_HTTP_LLAMA, 0, "--draft", "--fault", "spec-plain-drafts");
	CHECK(sut != NULL);
	CHECK(ab_sut_generate(&plain, &fault, sut, prompt, 8, 9, 0) < 0);
	CHECK(fault.kind == AB_SUT_PROTOCOL && strstr(fault.reason, "the server drafted 8 tokens"));
	ab_sut_free(sut);

	/* no draft fields in a speculative answer: the sample's stats say so (not the process) */
	sut = start(AB_SUT_HTTP_LLAMA, 0, "--draft", "--fault", "spec-no-stats");
	CHECK(sut != NULL);
	CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 9, 1), 0);
	CHECK(ab_sut_parse_spec_stats(&st, gen.stats, gen.n_tokens) < 0 && strstr(ab_error_last(), "no speculative stats"));
	ab_sut_gen_clear(&gen);
	ab_sut_quit(NULL, sut);
	ab_sut_free(sut);

	/* the completions API streams no ids: no agreement check possible, so no spec */
	sut = start(AB_SUT_HTTP_COMPLETIONS, 0, "--draft", NULL, NULL);
	CHECK(sut != NULL);
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 9, 1) < 0);
	CHECK(fault.kind == AB_SUT_SUT_ERROR && strstr(fault.reason, "api \"llama\""));
	ab_sut_quit(NULL, sut);
	ab_sut_free(sut);
	with_draft = 0;
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "sse", test_sse }, { "llama", test_llama }, { "completions", test_completions }, { "faults", test_faults },
		{ "score", test_score }, { "score_faults", test_score_faults }, { "spec", test_spec },
	};
	return TU_RUN(argc, argv, cases);
}
