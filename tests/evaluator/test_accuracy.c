/*
 * test_accuracy.c - the accuracy workload (evaluator/accuracy.h) against the mock SUT: an A/A run
 * passes every gate and fills the reference cache; a reference that lists its top entries least
 * likely first is read by log-prob, not by position; cache entries of the wrong shape are scored
 * again, never trusted; a reference answering fewer positions than asked, or one of two references
 * failing, makes only its own gates "not measured".
 */
#include "testutil.h"

#include <math.h>
#include <sqlite3.h>

#include "accuracy.h"
#include "store.h"
#include "suite.h"

#define VOCAB 4096

static const char *suite_text =
	"{\"schema\":\"abgate.suite/1\",\"name\":\"acc\","
	" \"build\":{\"build\":[\"true\"]},"
	" \"sut\":{\"command\":[\"sut\"],\"ready_timeout_s\":20,\"request_timeout_s\":20},"
	" \"models\":[{\"name\":\"m\",\"path\":\"/nonexistent/m.bin\","
	"              \"references\":{\"good\":{\"command\":[\"ref\"]},\"bad\":{\"command\":[\"ref\"]}}}],"
	" \"speed\":{\"decode\":{\"contexts\":[8]}},"
	" \"accuracy\":{\"windows\":2,\"window_len\":24,\"score_from\":16,\"top_k\":8,\"kl_rise_max\":0.001}}";

static const char *const mock_argv[] = { MOCK_SUT_PATH, "--vocab", "4096", NULL };
static const char *const mock_ascending_argv[] = {
	MOCK_SUT_PATH, "--vocab", "4096", "--score_ascending", "1", NULL
};
static const char *const missing_argv[] = { "/nonexistent/abgate-reference", NULL };

struct fixture {
	struct ab_suite *suite;
	ab_store *store;
	struct ab_accuracy_model models[2];
	struct ab_accuracy_result result;
};

/* One (model, reference) entry per reference command given (NULL: none), labelled as eval.c does. */
static void fixture_init(struct fixture *fx, const char *const *ref_good, const char *const *ref_bad)
{
	memset(fx, 0, sizeof(*fx));
	CHECK(ab_suite_load_buffer(&fx->suite, suite_text, strlen(suite_text), NULL) == 0);
	CHECK(ab_fs_mkdirs(tu_path("logs")) == 0);
	CHECK(ab_store_open(&fx->store, tu_path("state")) == 0);
	const struct ab_suite_model *m = &fx->suite->models[0];
	CHECK(m->ref_count == 2 && strcmp(m->refs[0].name, "good") == 0);
	static const char *const labels[2] = { "m/good", "m/bad" };
	for (int r = 0; r < 2; r++) {
		struct ab_accuracy_model *am = &fx->models[r];
		am->model = m;
		am->ref = &m->refs[r];
		am->label = labels[r];
		am->model_path = "/nonexistent/m.bin";
		am->side[0].argv = am->side[1].argv = mock_argv;
		am->reference.argv = r == 0 ? ref_good : ref_bad;
		am->vocab_size = VOCAB;
	}
}

static int fixture_run(struct fixture *fx, int n_models)
{
	struct ab_accuracy_config cfg = {
		.suite = fx->suite, .models = fx->models, .n_models = n_models, .seed = 11,
		.store = fx->store, .log_dir = tu_path("logs"), .quiet = 1,
	};
	ab_accuracy_result_clear(&fx->result);
	return ab_accuracy_run(&fx->result, &cfg);
}

static void fixture_free(struct fixture *fx)
{
	ab_accuracy_result_clear(&fx->result);
	ab_store_close(fx->store);
	ab_suite_free(fx->suite);
	/* The next case starts with an empty cache. */
	CHECK(ab_fs_rmtree(tu_path("state")) == 0);
}

static const struct ab_gate_result *gate(const struct fixture *fx, const char *name, const char *model)
{
	for (size_t i = 0; i < fx->result.n_gates; i++)
		if (strcmp(fx->result.gates[i].name, name) == 0 && strcmp(fx->result.gates[i].model, model) == 0)
			return &fx->result.gates[i];
	return NULL;
}

static json_t *model_json(const struct fixture *fx, size_t i)
{
	return json_array_get(json_object_get(fx->result.json, "models"), i);
}

static int cached_windows(const struct fixture *fx, size_t i)
{
	return (int)json_integer_value(json_object_get(model_json(fx, i), "reference_cached_windows"));
}

static void expect_all_pass(const struct fixture *fx, const char *model)
{
	static const char *const names[] = { "top1", "kl_mean", "top1_drop", "kl_rise" };
	for (int g = 0; g < 4; g++) {
		const struct ab_gate_result *r = gate(fx, names[g], model);
		CHECK(r != NULL);
		if (!r->pass || r->error)
			fprintf(stderr, "gate %s %s: %s\n", model, names[g], r->detail);
		CHECK(r->pass && !r->error);
	}
}

/* A/A: every gate passes, head agrees with the reference at every position; a second run answers
 * the reference from the cache with the same figures. */
static void aa(void)
{
	struct fixture fx;
	fixture_init(&fx, mock_argv, NULL);
	CHECK(fixture_run(&fx, 1) == 0);
	CHECK_EQ(fx.result.n_gates, 4);
	expect_all_pass(&fx, "m/good");
	json_t *mj = model_json(&fx, 0);
	CHECK_EQ(json_integer_value(json_object_get(mj, "positions")), 2 * (24 - 16));
	CHECK(json_real_value(json_object_get(json_object_get(mj, "head"), "top1")) == 1.0);
	CHECK_EQ(cached_windows(&fx, 0), 0);
	double kl = gate(&fx, "kl_mean", "m/good")->value;

	CHECK(fixture_run(&fx, 1) == 0);
	CHECK_EQ(cached_windows(&fx, 0), 2);
	expect_all_pass(&fx, "m/good");
	CHECK(gate(&fx, "kl_mean", "m/good")->value == kl);
	fixture_free(&fx);
}

/* The protocol does not order "top": a reference listing its entries least likely first must still
 * be read as having its argmax where the SUT has it. */
static void unordered_reference(void)
{
	struct fixture fx;
	fixture_init(&fx, mock_ascending_argv, NULL);
	CHECK(fixture_run(&fx, 1) == 0);
	expect_all_pass(&fx, "m/good");
	CHECK(json_real_value(json_object_get(json_object_get(model_json(&fx, 0), "head"), "top1")) == 1.0);
	fixture_free(&fx);
}

/* Rewrites every cached reference answer with `sql` (an UPDATE on the cache table). */
static void cache_rewrite(const char *sql)
{
	char path[1024];
	sqlite3 *db = NULL;
	snprintf(path, sizeof(path), "%s/abgate.db", tu_path("state"));
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
	CHECK(sqlite3_changes(db) == 2);
	sqlite3_close(db);
}

/* Cached answers of the wrong shape (wrong types, ids outside the vocabulary, log-probs above 0,
 * too few positions) are scored again and replaced; the figures stay those of a live reference. */
static void cache_wrong_shape(void)
{
	static const char *const poison[] = {
		"UPDATE cache SET value = json_set(CAST(value AS TEXT), '$.ids[1]', 'x')",
		"UPDATE cache SET value = json_set(CAST(value AS TEXT), '$.ids[0]', 4096)",
		"UPDATE cache SET value = json_set(CAST(value AS TEXT), '$.ids[2]', -1)",
		"UPDATE cache SET value = json_set(CAST(value AS TEXT), '$.lp[3]', 2.5)",
		"UPDATE cache SET value = json_set(CAST(value AS TEXT), '$.lp[4]', 'x')",
		"UPDATE cache SET value = json_set(CAST(value AS TEXT), '$.n_pos', 7)",
		"UPDATE cache SET value = 'not json'",
	};
	struct fixture fx;
	fixture_init(&fx, mock_argv, NULL);
	CHECK(fixture_run(&fx, 1) == 0);
	double kl = gate(&fx, "kl_mean", "m/good")->value;
	for (size_t i = 0; i < sizeof(poison) / sizeof(poison[0]); i++) {
		cache_rewrite(poison[i]);
		CHECK(fixture_run(&fx, 1) == 0);
		if (cached_windows(&fx, 0) != 0)
			fprintf(stderr, "poisoned cache entry trusted: %s\n", poison[i]);
		CHECK_EQ(cached_windows(&fx, 0), 0);
		expect_all_pass(&fx, "m/good");
		CHECK(gate(&fx, "kl_mean", "m/good")->value == kl);
	}
	CHECK(fixture_run(&fx, 1) == 0);       /* the entries were replaced */
	CHECK_EQ(cached_windows(&fx, 0), 2);
	fixture_free(&fx);
}

/* Two references of one model, the second cannot start: its four gates are "not measured" under its
 * own label, its JSON entry says why; the first reference's gates and JSON are complete, and both
 * score the same windows. */
static void one_reference_fails(void)
{
	struct fixture fx;
	fixture_init(&fx, mock_argv, missing_argv);
	CHECK(fixture_run(&fx, 2) == 0);
	CHECK_EQ(fx.result.n_gates, 8);
	expect_all_pass(&fx, "m/good");
	static const char *const names[] = { "top1", "kl_mean", "top1_drop", "kl_rise" };
	for (int g = 0; g < 4; g++) {
		const struct ab_gate_result *r = gate(&fx, names[g], "m/bad");
		CHECK(r != NULL && r->error && !r->pass && isnan(r->value));
		CHECK_STR_HAS(r->detail, "reference SUT");
	}
	json_t *good = model_json(&fx, 0), *bad = model_json(&fx, 1);
	CHECK(json_object_get(good, "error") == NULL && json_object_get(good, "head") != NULL);
	CHECK(strcmp(json_string_value(json_object_get(good, "label")), "m/good") == 0);
	CHECK(strcmp(json_string_value(json_object_get(bad, "label")), "m/bad") == 0);
	CHECK(strcmp(json_string_value(json_object_get(bad, "reference_name")), "bad") == 0);
	CHECK_STR_HAS(json_string_value(json_object_get(bad, "error")), "abgate-reference");
	CHECK(json_object_get(bad, "head") == NULL);
	CHECK(json_equal(json_object_get(good, "windows"), json_object_get(bad, "windows")));
	fixture_free(&fx);
}

/* A reference that answers with fewer positions than asked: refused as a protocol fault, so the
 * gates are "not measured" and nothing of the short answer is cached. */
static void short_reference(void)
{
	const char *script = tu_path("short_ref.sh");
	tu_write_file(script, "#!/bin/sh\n"
		"echo '{\"ready\":true,\"protocol\":1,\"model\":{\"vocab_size\":4096}}'\n"
		"read line\n"
		"echo '{\"id\":1,\"event\":\"done\",\"positions\":[{\"top\":[[1,-0.1]],\"ids\":[]}]}'\n"
		"cat >/dev/null\n");
	const char *const ref_argv[] = { "sh", script, NULL };
	struct fixture fx;
	fixture_init(&fx, ref_argv, NULL);
	CHECK(fixture_run(&fx, 1) == 0);
	CHECK_EQ(fx.result.n_gates, 4);
	for (size_t i = 0; i < fx.result.n_gates; i++) {
		CHECK(fx.result.gates[i].error && !fx.result.gates[i].pass);
		CHECK_STR_HAS(fx.result.gates[i].detail, "reference SUT: protocol: score #1: \"positions\" must be "
			"an array of 8 entries");
	}
	CHECK(fixture_run(&fx, 1) == 0);
	CHECK_EQ(cached_windows(&fx, 0), 0);
	fixture_free(&fx);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "aa", aa }, { "unordered_reference", unordered_reference },
		{ "cache_wrong_shape", cache_wrong_shape }, { "one_reference_fails", one_reference_fails },
		{ "short_reference", short_reference },
	};
	return TU_RUN(argc, argv, cases);
}
