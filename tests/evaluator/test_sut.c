/*
 * test_sut.c - Contract 1 against the mock SUT: ready parsing, generate timing, score parsing, and
 * every failure mode ending as the right classified fault (crash, abort, OOM, hang, never ready,
 * garbage, oversized line, wrong id, short reply, SUT error event), plus the line parsers on
 * malformed and oversized input.
 */
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <unistd.h>

#include "sut.h"

#define MAX_ARGS 32

/* Starts the mock with flags (NULL-terminated); expects success. */
static ab_sut *start_mock_cfg(struct ab_sut_config *cfg, struct ab_sut_fault *fault, int expect_ok, ...)
{
	static const char *argv[MAX_ARGS];
	va_list ap;
	int n = 0;
	ab_sut *sut = NULL;

	argv[n++] = MOCK_SUT_PATH;
	va_start(ap, expect_ok);
	for (const char *a; (a = va_arg(ap, const char *)) && n < MAX_ARGS - 1;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	cfg->argv = argv;
	int rc = ab_sut_start(&sut, fault, cfg);
	if (expect_ok) {
		CHECK(rc == 0);
		CHECK(sut);
	} else {
		CHECK(rc < 0);
		CHECK(!sut);
	}
	return sut;
}

#define START_MOCK(...) start_mock_cfg(&cfg, &fault, 1, __VA_ARGS__, NULL)
#define START_MOCK_FAIL(...) start_mock_cfg(&cfg, &fault, 0, __VA_ARGS__, NULL)

static struct ab_sut_config default_cfg(void)
{
	struct ab_sut_config cfg = {
		.stderr_log = tu_path("sut-stderr.log"), .ready_timeout_ms = 10000, .request_timeout_ms = 10000,
		.quit_grace_ms = 2000,
	};
	return cfg;
}

static void make_prompt(int32_t *prompt, int n, int vocab, int salt)
{
	for (int i = 0; i < n; i++)
		prompt[i] = (int32_t)((i * 7919 + salt * 104729) % vocab);
}

static void parse_ready(void)
{
	json_t *ready = NULL;
	int vocab = 0;
	const char *good = "{\"ready\":true,\"protocol\":1,\"engine\":\"x\",\"model\":{\"vocab_size\":151936},\"device\":\"cpu\"}";
	CHECK(ab_sut_parse_ready(&ready, &vocab, good, strlen(good), 1 << 20) == 0);
	CHECK_EQ(vocab, 151936);
	CHECK(strcmp(json_string_value(json_object_get(ready, "engine")), "x") == 0);
	json_decref(ready);

	static const struct {
		const char *line, *why;
	} bad[] = {
		{"", "not a JSON object"},
		{"loading weights...", "not a JSON object"},
		{"[1,2,3]", "not a JSON object"},
		{"{\"ready\":true", "not a JSON object"},
		{"{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":5}} trailing", "not a JSON object"},
		{"{\"ready\":false,\"protocol\":1,\"model\":{\"vocab_size\":5}}", "\"ready\""},
		{"{\"ready\":1,\"protocol\":1,\"model\":{\"vocab_size\":5}}", "\"ready\""},
		{"{\"ready\":true,\"protocol\":2,\"model\":{\"vocab_size\":5}}", "\"protocol\""},
		{"{\"ready\":true,\"protocol\":\"1\",\"model\":{\"vocab_size\":5}}", "\"protocol\""},
		{"{\"ready\":true,\"model\":{\"vocab_size\":5}}", "\"protocol\""},
		{"{\"ready\":true,\"protocol\":1}", "\"model\""},
		{"{\"ready\":true,\"protocol\":1,\"model\":[]}", "\"model\""},
		{"{\"ready\":true,\"protocol\":1,\"model\":{}}", "vocab_size"},
		{"{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":0}}", "vocab_size"},
		{"{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":-3}}", "vocab_size"},
		{"{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":1.5}}", "vocab_size"},
		{"{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":\"100\"}}", "vocab_size"},
		{"{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":99999999999}}", "vocab_size"},
		{"{\"ready\":true,\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":5}}", "not a JSON object"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ready = NULL;
		int rc = ab_sut_parse_ready(&ready, &vocab, bad[i].line, strlen(bad[i].line), 1 << 20);
		if (rc != AB_EINVALID || ready)
			fprintf(stderr, "accepted bad ready line: %s\n", bad[i].line);
		CHECK_EQ(rc, AB_EINVALID);
		CHECK(!ready);
		CHECK_STR_HAS(ab_error_last(), bad[i].why);
	}
	/* NUL byte inside, and a line over the cap */
	const char nul_line[] = "{\"ready\":true,\0\"protocol\":1}";
	CHECK_EQ(ab_sut_parse_ready(&ready, &vocab, nul_line, sizeof(nul_line) - 1, 1 << 20), AB_EINVALID);
	CHECK_STR_HAS(ab_error_last(), "NUL");
	CHECK_EQ(ab_sut_parse_ready(&ready, &vocab, good, strlen(good), 16), AB_EINVALID);
	CHECK_STR_HAS(ab_error_last(), "exceeds");
	/* deep nesting is refused by the parser, not a stack overflow */
	size_t depth = 100000;
	char *deep = malloc(depth * 2 + 1);
	CHECK(deep);
	memset(deep, '[', depth);
	memset(deep + depth, ']', depth);
	deep[depth * 2] = '\0';
	CHECK_EQ(ab_sut_parse_ready(&ready, &vocab, deep, depth * 2, 1 << 20), AB_EINVALID);
	free(deep);
}

/* The ready line's spec object and the stats of a speculative answer; a SUT without a draft. */
static void spec(void)
{
	struct ab_sut_spec_info info;
	json_error_t jerr;
	static const struct { const char *json; int ok, present, block; } cases[] = {
		{ "{\"ready\":true}", 1, 0, 0 },
		{ "{\"spec\":null}", 1, 0, 0 },
		{ "{\"spec\":{\"kind\":\"dflash\",\"block_size\":16}}", 1, 1, 16 },
		{ "{\"spec\":{\"kind\":\"eagle-3\"}}", 1, 1, 0 },
		{ "{\"spec\":true}", 0, 0, 0 },
		{ "{\"spec\":{}}", 0, 0, 0 },
		{ "{\"spec\":{\"kind\":\"\"}}", 0, 0, 0 },
		{ "{\"spec\":{\"kind\":\"a b\"}}", 0, 0, 0 },
		{ "{\"spec\":{\"kind\":\"dflash\",\"block_size\":1}}", 0, 0, 0 },
		{ "{\"spec\":{\"kind\":\"dflash\",\"block_size\":\"16\"}}", 0, 0, 0 },
		{ "{\"spec\":{\"kind\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}", 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *ready = json_loads(cases[i].json, 0, &jerr);
		int rc = ab_sut_parse_spec(&info, ready);
		CHECK_EQ(rc == 0, cases[i].ok);
		if (rc == 0)
			CHECK(info.present == cases[i].present && info.block_size == cases[i].block);
		json_decref(ready);
	}

	static const struct { const char *json; int ok; } stats[] = {
		{ "{\"target_steps\":16,\"drafted\":240,\"accepted\":47,\"accept_mean\":3.9375}", 1 },
		{ "{\"target_steps\":63,\"drafted\":0,\"accepted\":0,\"accept_mean\":1}", 1 },
		{ "{\"target_steps\":0,\"drafted\":0,\"accepted\":0,\"accept_mean\":1}", 0 },
		{ "{\"target_steps\":64,\"drafted\":0,\"accepted\":0,\"accept_mean\":1}", 0 },   /* > n - 1 */
		{ "{\"target_steps\":16,\"drafted\":10,\"accepted\":11,\"accept_mean\":3.9}", 0 },
		{ "{\"target_steps\":16,\"drafted\":240,\"accepted\":47}", 0 },
		{ "{\"target_steps\":16,\"drafted\":240,\"accepted\":47,\"accept_mean\":0.5}", 0 },
		{ "{\"target_steps\":16.5,\"drafted\":240,\"accepted\":47,\"accept_mean\":3.9}", 0 },
		{ "{\"target_steps\":16,\"drafted\":-1,\"accepted\":0,\"accept_mean\":3.9}", 0 },
		{ "[]", 0 },
	};
	for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++) {
		struct ab_sut_spec_stats st;
		json_t *o = json_loads(stats[i].json, 0, &jerr);
		CHECK_EQ(ab_sut_parse_spec_stats(&st, o, 64) == 0, stats[i].ok);
		json_decref(o);
	}
	struct ab_sut_spec_stats st;
	CHECK_EQ(ab_sut_parse_spec_stats(&st, NULL, 64), AB_EINVALID);

	/* Without a draft the ready line says nothing and spec:true is an error event, the SUT serving on. */
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_sut_gen gen;
	int32_t prompt[32];
	make_prompt(prompt, 32, 1000, 2);
	ab_sut *sut = START_MOCK("--vocab", "1000");
	CHECK(!ab_sut_spec(sut)->present);
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 32, 8, 1) < 0);
	CHECK_EQ(fault.kind, AB_SUT_SUT_ERROR);
	CHECK(strstr(fault.reason, "draft") != NULL);
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 32, 8, 0) == 0);
	ab_sut_gen_clear(&gen);
	CHECK(ab_sut_quit(NULL, sut) == 0);
	ab_sut_free(sut);
}

static void parse_reply(void)
{
	enum ab_sut_event ev;
	json_t *obj = NULL;
	const char *first = "{\"id\":7,\"event\":\"first\"}";
	CHECK(ab_sut_parse_reply(&ev, &obj, first, strlen(first), 1024, 7) == 0);
	CHECK_EQ(ev, AB_SUT_EVENT_FIRST);
	json_decref(obj);
	const char *done = "{\"id\":7,\"event\":\"done\",\"tokens\":[1,2]}";
	CHECK(ab_sut_parse_reply(&ev, &obj, done, strlen(done), 1024, 7) == 0);
	CHECK_EQ(ev, AB_SUT_EVENT_DONE);
	json_decref(obj);
	const char *err_noid = "{\"id\":null,\"event\":\"error\",\"message\":\"bad line\"}";
	CHECK(ab_sut_parse_reply(&ev, &obj, err_noid, strlen(err_noid), 1024, 7) == 0);
	CHECK_EQ(ev, AB_SUT_EVENT_ERROR);
	json_decref(obj);

	static const struct {
		const char *line, *why;
	} bad[] = {
		{"{\"id\":8,\"event\":\"first\"}", "waiting for id 7"},
		{"{\"id\":\"7\",\"event\":\"first\"}", "\"id\""},
		{"{\"event\":\"done\"}", "\"id\""},
		{"{\"id\":7}", "\"event\""},
		{"{\"id\":7,\"event\":3}", "\"event\""},
		{"{\"id\":7,\"event\":\"progress\"}", "unknown event"},
		{"{\"id\":7,\"event\":\"done\"", "not a JSON object"},
		{"\"done\"", "not a JSON object"},
		{"null", "not a JSON object"},
		{"\xff\xfe garbage", "not a JSON object"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		obj = NULL;
		CHECK_EQ(ab_sut_parse_reply(&ev, &obj, bad[i].line, strlen(bad[i].line), 1024, 7), AB_EINVALID);
		CHECK(!obj);
		CHECK_STR_HAS(ab_error_last(), bad[i].why);
	}
	CHECK_EQ(ab_sut_parse_reply(&ev, &obj, done, strlen(done), 10, 7), AB_EINVALID);
}

static void ready(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_proc_status st;
	ab_sut *sut = START_MOCK("--vocab", "777", "--ready_delay_ms", "50");

	CHECK_EQ(ab_sut_vocab_size(sut), 777);
	const json_t *r = ab_sut_ready(sut);
	CHECK(strcmp(json_string_value(json_object_get(r, "engine")), "mock_sut") == 0);
	CHECK(json_is_string(json_object_get(r, "device")));
	CHECK(ab_sut_quit(&st, sut) == 0);
	CHECK(ab_proc_status_ok(&st));
	/* requests after quit are refused, not sent */
	int32_t prompt[4] = {1, 2, 3, 4};
	struct ab_sut_gen gen;
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 4, 2, 0) < 0);
	CHECK_STR_HAS(ab_error_last(), "quit");
	ab_sut_free(sut);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void generate(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_sut_gen gen, again;
	int32_t prompt[500];
	ab_sut *sut = START_MOCK("--vocab", "1000", "--decode_tps", "2000", "--prefill_tps", "50000", "--draft", "d.bin");

	make_prompt(prompt, 500, 1000, 1);
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 500, 64, 0) == 0);
	CHECK_EQ(fault.kind, AB_SUT_OK);
	CHECK_EQ(gen.n_tokens, 64);
	CHECK_EQ(gen.prompt_len, 500);
	for (int i = 0; i < 64; i++)
		CHECK(gen.tokens[i] >= 0 && gen.tokens[i] < 1000);
	CHECK(gen.t_write_ns < gen.t_first_ns && gen.t_first_ns < gen.t_done_ns);
	CHECK(gen.ttft_s > 0 && isfinite(gen.prefill_tps) && isfinite(gen.decode_tps));
	CHECK(gen.prefill_tps > 0 && gen.decode_tps > 0);
	/* The clock starts before the request is delivered and stops after the reply is read, so the
	 * whole request can never look shorter than the mock's sleeps (10 ms prefill + 63 tokens at
	 * 2000 tok/s). Each rate alone can only be flattered by scheduling delay at "first": 3x would
	 * take a 21 ms stall. */
	CHECK((double)(gen.t_done_ns - gen.t_write_ns) / 1e9 >= 500.0 / 50000 + 63.0 / 2000 - 1e-4);
	CHECK(gen.decode_tps < 2000 * 3);
	CHECK(gen.prefill_tps < 50000 * 3);
	CHECK(json_is_object(gen.stats));
	CHECK(json_is_number(json_object_get(gen.stats, "decode_ms")));
	fprintf(stderr, "mock at 2000 tok/s decode, 50000 tok/s prefill: harness measured %.0f and %.0f (ttft %.2f ms)\n",
		gen.decode_tps, gen.prefill_tps, gen.ttft_s * 1e3);

	/* tokens are a function of the prompt: same prompt, same tokens; spec (the mock has a draft) is
	 * exact and its stats are consistent */
	CHECK(ab_sut_spec(sut)->present && strcmp(ab_sut_spec(sut)->kind, "dflash") == 0);
	CHECK(ab_sut_generate(&again, &fault, sut, prompt, 500, 64, 1) == 0);
	CHECK(memcmp(gen.tokens, again.tokens, sizeof(int32_t) * 64) == 0);
	struct ab_sut_spec_stats st;
	CHECK(ab_sut_parse_spec_stats(&st, again.stats, 64) == 0);
	CHECK(fabs(st.accept_mean - 63.0 / st.target_steps) < 1e-4 && st.accepted <= st.drafted);
	ab_sut_gen_clear(&again);
	ab_sut_gen_clear(&gen);
	CHECK(ab_sut_quit(NULL, sut) == 0);
	ab_sut_free(sut);

	/* harness overhead: round trip of a 1-token request to a zero-delay mock */
	enum { N = 300 };
	int64_t rtt[N];
	sut = START_MOCK("--vocab", "1000");
	int64_t wall0 = ab_proc_now_ns();
	for (int i = 0; i < N; i++) {
		CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 16, 1, 0) == 0);
		rtt[i] = gen.t_done_ns - gen.t_write_ns;
		CHECK(isnan(gen.decode_tps));  /* one token: no decode rate */
		ab_sut_gen_clear(&gen);
	}
	double wall_us = (double)(ab_proc_now_ns() - wall0) / 1e3 / N;
	qsort(rtt, N, sizeof(rtt[0]), cmp_i64);
	fprintf(stderr, "harness round trip (16-token prompt, 1 token, zero-delay mock, %d requests): "
		"p50 %.1f us, p99 %.1f us; %.1f us per request including parsing\n", N, rtt[N / 2] / 1e3,
		rtt[N * 99 / 100] / 1e3, wall_us);
	ab_sut_free(sut);  /* free without quit kills it */
}

static void score(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_sut_scores sc, sc2;
	int32_t prompt[20], ids_store[15][3];
	const int32_t *ids[15];
	int n_ids[15];
	ab_sut *sut = START_MOCK("--vocab", "5000");

	make_prompt(prompt, 20, 5000, 2);
	for (int p = 0; p < 15; p++) {
		ids_store[p][0] = 1;
		ids_store[p][1] = 2;
		ids_store[p][2] = 3;
		ids[p] = ids_store[p];
		n_ids[p] = 3;
	}
	struct ab_sut_score_request rq = {.prompt = prompt, .prompt_len = 20, .top_k = 8, .first = 5,
		.ids = ids, .n_ids = n_ids};
	CHECK(ab_sut_score(&sc, &fault, sut, &rq) == 0);
	CHECK_EQ(sc.n_positions, 15);
	for (int p = 0; p < 15; p++) {
		struct ab_sut_position *pos = &sc.positions[p];
		double mass = 0;
		CHECK_EQ(pos->n_top, 8);
		CHECK_EQ(pos->n_ids, 3);
		for (int j = 0; j < pos->n_top; j++) {
			CHECK(pos->top_logprobs[j] <= 0);
			CHECK(j == 0 || pos->top_logprobs[j] <= pos->top_logprobs[j - 1]);
			mass += exp(pos->top_logprobs[j]);
		}
		CHECK(mass > 0.05 && mass <= 1.0 + 1e-6);
		/* ask for this position's reference top-k next time */
		memcpy(ids_store[p], pos->top_ids, sizeof(int32_t) * 3);
	}
	/* asking for the top ids must give their top log-probs back: the two lists agree */
	CHECK(ab_sut_score(&sc2, &fault, sut, &rq) == 0);
	for (int p = 0; p < 15; p++)
		for (int j = 0; j < 3; j++)
			CHECK(fabs(sc2.positions[p].id_logprobs[j] - sc.positions[p].top_logprobs[j]) < 1e-5);
	ab_sut_scores_clear(&sc);
	ab_sut_scores_clear(&sc2);

	/* no ids, all positions */
	struct ab_sut_score_request all = {.prompt = prompt, .prompt_len = 20, .top_k = 4};
	CHECK(ab_sut_score(&sc, &fault, sut, &all) == 0);
	CHECK_EQ(sc.n_positions, 20);
	CHECK_EQ(sc.positions[0].n_ids, 0);
	ab_sut_scores_clear(&sc);
	/* a bad request is refused before anything is sent, and the SUT stays usable */
	struct ab_sut_score_request badrq = {.prompt = prompt, .prompt_len = 20, .top_k = 0};
	CHECK_EQ(ab_sut_score(&sc, &fault, sut, &badrq), AB_EINVALID);
	CHECK(ab_sut_score(&sc, &fault, sut, &all) == 0);
	ab_sut_scores_clear(&sc);
	CHECK(ab_sut_quit(NULL, sut) == 0);
	ab_sut_free(sut);

	/* a SUT that answers a small score request with a giant reply: refused by size, not parsed */
	const char *script = tu_path("fat_score.sh"), *reply = tu_path("fat_reply.txt");
	FILE *f = fopen(reply, "w");
	CHECK(f);
	fprintf(f, "{\"id\":1,\"event\":\"done\",\"positions\":[{\"top\":[");
	for (int i = 0; i < 20000; i++)
		fprintf(f, "%s[%d,-1.0]", i ? "," : "", i % 100);
	fprintf(f, "],\"ids\":[]}]}\n");
	fclose(f);
	char text[1024];
	snprintf(text, sizeof(text), "#!/bin/sh\necho '{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":100}}'\n"
		"read line\ncat '%s'\nsleep 100\n", reply);
	tu_write_file(script, text);
	const char *argv[] = {"sh", script, NULL};
	cfg.argv = argv;
	CHECK(ab_sut_start(&sut, &fault, &cfg) == 0);
	struct ab_sut_score_request one = {.prompt = prompt, .prompt_len = 1, .top_k = 4};
	CHECK_EQ(ab_sut_score(&sc, &fault, sut, &one), AB_EINVALID);
	CHECK_EQ(fault.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(fault.reason, "larger than");
	ab_sut_free(sut);
}

/* Runs one generate against a mock started with the given flags and returns the fault. */
static struct ab_sut_fault one_request_fault(struct ab_sut_config *cfg, int requests_ok, const char **flags)
{
	const char *argv[MAX_ARGS];
	int n = 0;
	struct ab_sut_fault fault, again;
	struct ab_sut_gen gen;
	int32_t prompt[8];
	ab_sut *sut = NULL;

	argv[n++] = MOCK_SUT_PATH;
	for (int i = 0; flags[i]; i++)
		argv[n++] = flags[i];
	argv[n] = NULL;
	cfg->argv = argv;
	CHECK(ab_sut_start(&sut, &fault, cfg) == 0);
	make_prompt(prompt, 8, 100, 3);
	for (int i = 0; i < requests_ok; i++) {
		CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 4, 0) == 0);
		ab_sut_gen_clear(&gen);
	}
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 4, 0) < 0);
	CHECK(fault.kind != AB_SUT_OK);
	CHECK_STR_HAS(ab_error_last(), fault.reason);
	fprintf(stderr, "fault %s: %s\n", ab_sut_fault_kind_name(fault.kind), fault.reason);
	if (fault.kind != AB_SUT_SUT_ERROR) {
		/* sticky: the next request gets the same fault without touching the dead process */
		CHECK(ab_sut_generate(&gen, &again, sut, prompt, 8, 4, 0) < 0);
		CHECK_EQ(again.kind, fault.kind);
		CHECK(strcmp(again.reason, fault.reason) == 0);
		CHECK(ab_sut_quit(NULL, sut) < 0);
	}
	ab_sut_free(sut);
	return fault;
}

static void error_event(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_sut_gen gen;
	int32_t prompt[4] = {1, 2, 3, 500};  /* 500 is outside the mock's vocab of 100 */
	ab_sut *sut = START_MOCK("--vocab", "100");

	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 4, 4, 0) < 0);
	CHECK_EQ(fault.kind, AB_SUT_SUT_ERROR);
	CHECK_STR_HAS(fault.reason, "prompt ids must be integers in [0, vocab)");
	/* an error event leaves the SUT serving */
	prompt[3] = 50;
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 4, 4, 0) == 0);
	ab_sut_gen_clear(&gen);
	CHECK(ab_sut_quit(NULL, sut) == 0);
	ab_sut_free(sut);

	const char *flags[] = {"--vocab", "100", "--error_after", "1", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 1, flags);
	CHECK_EQ(f.kind, AB_SUT_SUT_ERROR);
	CHECK_STR_HAS(f.reason, "injected error");
}

static void crash(void)
{
	struct ab_sut_config cfg = default_cfg();
	const char *flags[] = {"--vocab", "100", "--crash_after", "2", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 2, flags);
	CHECK_EQ(f.kind, AB_SUT_CRASH);
	CHECK_STR_HAS(f.reason, "signal 11 (SIGSEGV)");
	CHECK_STR_HAS(f.reason, "generate #3");
	CHECK_STR_HAS(f.stderr_tail, "crashing on request 3");
	CHECK(f.exit.signaled && f.exit.signal_number == SIGSEGV && !f.exit.killed);

	/* the same with stderr kept in memory instead of a log file */
	cfg.stderr_log = NULL;
	const char *flags2[] = {"--vocab", "100", "--crash_after", "0", "--crash_signal", "kill", NULL};
	f = one_request_fault(&cfg, 0, flags2);
	CHECK_EQ(f.kind, AB_SUT_CRASH);
	CHECK_STR_HAS(f.reason, "SIGKILL");
	CHECK_STR_HAS(f.reason, "not sent by abgate");
	CHECK_STR_HAS(f.stderr_tail, "crashing on request 1");
}

static void abort_(void)
{
	struct ab_sut_config cfg = default_cfg();
	const char *flags[] = {"--vocab", "100", "--crash_after", "0", "--crash_signal", "abort", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 0, flags);
	CHECK_EQ(f.kind, AB_SUT_CRASH);
	CHECK_STR_HAS(f.reason, "SIGABRT");
}

static void oom(void)
{
	struct ab_sut_config cfg = default_cfg();
	const char *flags[] = {"--vocab", "100", "--oom_after", "0", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 0, flags);
	CHECK_EQ(f.kind, AB_SUT_OOM);
	CHECK_STR_HAS(f.reason, "out of memory");
	CHECK_STR_HAS(f.stderr_tail, "CUDA_ERROR_OUT_OF_MEMORY");
}

static void hang(void)
{
	struct ab_sut_config cfg = default_cfg();
	cfg.request_timeout_ms = 500;
	const char *flags[] = {"--vocab", "100", "--hang_after", "1", "--ignore_term", "1", NULL};
	int64_t t0 = ab_proc_now_ns();
	struct ab_sut_fault f = one_request_fault(&cfg, 1, flags);
	double secs = (double)(ab_proc_now_ns() - t0) / 1e9;
	fprintf(stderr, "hang detected and killed after %.2f s (request timeout 0.5 s, SIGTERM ignored)\n", secs);
	CHECK(secs < 8);
	CHECK_EQ(f.kind, AB_SUT_TIMEOUT);
	CHECK_STR_HAS(f.reason, "no reply to generate #2 within 500 ms");
	CHECK(f.exit.timed_out && f.exit.signaled && f.exit.signal_number == SIGKILL);
	CHECK_STR_HAS(f.stderr_tail, "hanging on request 2");
}

static void never_ready(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	cfg.ready_timeout_ms = 400;
	int64_t t0 = ab_proc_now_ns();
	START_MOCK_FAIL("--never_ready", "1");
	CHECK((ab_proc_now_ns() - t0) / 1000000 < 8000);
	CHECK_EQ(fault.kind, AB_SUT_TIMEOUT);
	CHECK_STR_HAS(fault.reason, "no ready line within 400 ms");
	CHECK_STR_HAS(ab_error_last(), "sut: timeout");
	CHECK(fault.exit.timed_out);
}

static void exit_immediately(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	START_MOCK_FAIL("--exit_immediately", "3");
	CHECK_EQ(fault.kind, AB_SUT_CRASH);
	CHECK_STR_HAS(fault.reason, "exited during start-up: exit code 3");
	CHECK_STR_HAS(fault.reason, "exiting immediately");  /* the last stderr line is quoted */
	CHECK_STR_HAS(fault.stderr_tail, "loading model");
	/* clean exit before ready is still a crash from the harness' side */
	START_MOCK_FAIL("--exit_immediately", "0");
	CHECK_EQ(fault.kind, AB_SUT_CRASH);
}

static void garbage(void)
{
	struct ab_sut_config cfg = default_cfg();
	const char *flags[] = {"--vocab", "100", "--garbage_after", "1", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 1, flags);
	CHECK_EQ(f.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(f.reason, "not a JSON object");
	CHECK_STR_HAS(f.reason, "Segmentation fault??");
}

static void oversize(void)
{
	struct ab_sut_config cfg = default_cfg();
	cfg.line_max = 1 << 20;
	const char *flags[] = {"--vocab", "100", "--huge_after", "0", "--huge_bytes", "3000000", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 0, flags);
	CHECK_EQ(f.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(f.reason, "limit");

	/* within line_max but far beyond what a 4-token reply can need */
	cfg.line_max = 0;
	const char *flags2[] = {"--vocab", "100", "--huge_after", "0", "--huge_bytes", "300000", NULL};
	f = one_request_fault(&cfg, 0, flags2);
	CHECK_EQ(f.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(f.reason, "larger than");
}

static void wrong_id(void)
{
	struct ab_sut_config cfg = default_cfg();
	const char *flags[] = {"--vocab", "100", "--wrong_id_after", "0", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 0, flags);
	CHECK_EQ(f.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(f.reason, "reply for id 987654321 while waiting for id 1");
}

static void short_reply(void)
{
	struct ab_sut_config cfg = default_cfg();
	const char *flags[] = {"--vocab", "100", "--short_after", "0", NULL};
	struct ab_sut_fault f = one_request_fault(&cfg, 0, flags);
	CHECK_EQ(f.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(f.reason, "3 tokens returned, 4 asked");
}

static void bad_ready(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	START_MOCK_FAIL("--ready_json", "{\"ready\":true,\"protocol\":2,\"model\":{\"vocab_size\":10}}");
	CHECK_EQ(fault.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(fault.reason, "\"protocol\"");
	START_MOCK_FAIL("--ready_json", "Loading model weights from disk...");
	CHECK_EQ(fault.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(fault.reason, "Loading model weights");
	START_MOCK_FAIL("--ready_json", "{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":0}}");
	CHECK_EQ(fault.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(fault.reason, "vocab_size");
	/* an oversized ready line */
	static char long_ready[6000];
	memset(long_ready, 'x', sizeof(long_ready) - 1);
	cfg.line_max = 4096;
	START_MOCK_FAIL("--ready_json", long_ready);
	CHECK_EQ(fault.kind, AB_SUT_PROTOCOL);
	CHECK_STR_HAS(fault.reason, "4096-byte limit");
}

static void quit_grace(void)
{
	/* a SUT that ignores quit and SIGTERM: quit kills it after the grace period */
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_proc_status st;
	ab_sut *sut = NULL;
	const char *argv[] = {"sh", "-c", "trap '' TERM; echo '{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":9}}'; "
		"exec sleep 100", NULL};
	cfg.argv = argv;
	cfg.quit_grace_ms = 300;
	CHECK(ab_sut_start(&sut, &fault, &cfg) == 0);
	int64_t t0 = ab_proc_now_ns();
	CHECK(ab_sut_quit(&st, sut) < 0);
	CHECK_STR_HAS(ab_error_last(), "did not exit within 300 ms");
	CHECK((ab_proc_now_ns() - t0) / 1000000 < 8000);
	CHECK(st.killed && st.signaled);
	ab_sut_free(sut);
}

static void missing_command(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	ab_sut *sut = NULL;
	const char *argv[] = {"/nonexistent/bin/ember", "serve", "--stdio", NULL};
	cfg.argv = argv;
	CHECK(ab_sut_start(&sut, &fault, &cfg) < 0);
	CHECK(!sut);
	CHECK_EQ(fault.kind, AB_SUT_CRASH);
	CHECK_STR_HAS(fault.reason, "could not start");
	CHECK_STR_HAS(fault.reason, "/nonexistent/bin/ember");
}

/* The mock's settings: config file (--config, $MOCK_SUT_CONFIG, next to the binary) < environment < flags. */
static void mock_config(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_sut_gen gen;
	int32_t prompt[4] = {1, 2, 3, 4};
	ab_sut *sut;

	tu_write_file(tu_path("m.conf"), "# a head that is 20% slower\nvocab = 4242   # comment\n\nspeed = 0.8\n");
	sut = START_MOCK("--config", tu_path("m.conf"));
	CHECK_EQ(ab_sut_vocab_size(sut), 4242);
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 4, 3, 0) == 0);
	ab_sut_gen_clear(&gen);
	ab_sut_free(sut);
	sut = START_MOCK("--config", tu_path("m.conf"), "--vocab", "77");  /* flags win */
	CHECK_EQ(ab_sut_vocab_size(sut), 77);
	ab_sut_free(sut);

	const char *env[] = {NULL, "MOCK_SUT_VOCAB=555", NULL};
	char env_conf[600];
	snprintf(env_conf, sizeof(env_conf), "MOCK_SUT_CONFIG=%s", tu_path("m.conf"));
	env[0] = env_conf;
	cfg.env = env;
	sut = START_MOCK("--seed", "1");  /* env beats the file */
	CHECK_EQ(ab_sut_vocab_size(sut), 555);
	ab_sut_free(sut);
	cfg.env = NULL;

	/* mock_sut.conf next to the executable is picked up without any flag */
	char cmd[1200];
	CHECK(ab_fs_mkdirs(tu_path("bin")) == 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", MOCK_SUT_PATH, tu_path("bin/mock_sut"));
	const char *cp[] = {"sh", "-c", cmd, NULL};
	struct ab_proc_status st;
	CHECK(ab_proc_run(&st, cp, NULL, NULL, NULL, 10000) == 0 && ab_proc_status_ok(&st));
	tu_write_file(tu_path("bin/mock_sut.conf"), "vocab=31\n");
	const char *argv[] = {tu_path("bin/mock_sut"), NULL};
	cfg.argv = argv;
	CHECK(ab_sut_start(&sut, &fault, &cfg) == 0);
	CHECK_EQ(ab_sut_vocab_size(sut), 31);
	ab_sut_free(sut);

	/* a bad setting is a start-up failure with the reason on stderr */
	START_MOCK_FAIL("--no_such_setting", "1");
	CHECK_EQ(fault.kind, AB_SUT_CRASH);
	CHECK_STR_HAS(fault.reason, "unknown setting");
}

/* Fixture repositories build the mock from source with plain cc: it must stay self-contained. */
static void mock_standalone(void)
{
	struct ab_sut_config cfg = default_cfg();
	struct ab_sut_fault fault;
	struct ab_proc_status st;
	struct ab_sut_gen gen;
	int32_t prompt[3] = {5, 6, 7};
	ab_sut *sut = NULL;
	const char *cc[] = {"cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", tu_path("mock_cc"), MOCK_SUT_SOURCE, "-lm", NULL};

	CHECK(ab_proc_run(&st, cc, NULL, NULL, tu_path("cc.log"), 120000) == 0);
	if (!ab_proc_status_ok(&st)) {
		char *tail = NULL;
		ab_fs_tail(&tail, tu_path("cc.log"), 4000, 0);
		fprintf(stderr, "%s\n", tail ? tail : "");
		CHECK(0);
	}
	const char *argv[] = {tu_path("mock_cc"), "--vocab", "50", NULL};
	cfg.argv = argv;
	CHECK(ab_sut_start(&sut, &fault, &cfg) == 0);
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 3, 5, 0) == 0);
	ab_sut_gen_clear(&gen);
	CHECK(ab_sut_quit(NULL, sut) == 0);
	ab_sut_free(sut);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{"parse_ready", parse_ready}, {"parse_reply", parse_reply}, {"ready", ready}, {"spec", spec},
		{"generate", generate}, {"score", score}, {"error_event", error_event}, {"crash", crash},
		{"abort", abort_}, {"oom", oom}, {"hang", hang}, {"never_ready", never_ready},
		{"exit_immediately", exit_immediately}, {"garbage", garbage}, {"oversize", oversize},
		{"wrong_id", wrong_id}, {"short_reply", short_reply}, {"bad_ready", bad_ready},
		{"quit_grace", quit_grace}, {"missing_command", missing_command}, {"mock_config", mock_config},
		{"mock_standalone", mock_standalone},
	};
	return TU_RUN(argc, argv, cases);
}
