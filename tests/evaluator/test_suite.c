/*
 * test_suite.c - the abgate.suite/1 parser: guards/cpu.json loads, a full suite survives a round
 * trip through ab_suite_to_json, defaults are filled in, and every kind of invalid suite (unknown
 * key at any depth, wrong type, bad range, missing key, bad JSON) is refused with its JSON path.
 */
#include "testutil.h"

#include <math.h>
#include <unistd.h>

#include <jansson.h>

#include "suite.h"

static char source_dir[1024];   /* the source tree, for guards/cpu.json */

static const char *minimal_suite =
	"{\"schema\":\"abgate.suite/1\",\"name\":\"mini\","
	" \"build\":{\"build\":[\"make\",\"-C\",\"{src}\"]},"
	" \"sut\":{\"command\":[\"{build}/sut\",\"--model\",\"{model}\"]},"
	" \"models\":[{\"name\":\"m1\",\"path\":\"{state}/m1.bin\"}],"
	" \"speed\":{\"decode\":{\"contexts\":[128,512]}}}";

static const char *full_suite =
	"{\"schema\":\"abgate.suite/1\",\"name\":\"full.suite-1\","
	" \"build\":{\"configure\":[\"cmake\",\"-S\",\"{src}\",\"-B\",\"{build}\"],"
	"            \"build\":[\"cmake\",\"--build\",\"{build}\",\"-j\",\"{jobs}\"],\"timeout_s\":900},"
	" \"sut\":{\"command\":[\"{build}/bin/ember\",\"serve\",\"--stdio\",\"--model\",\"{model}\"],"
	"          \"env\":{\"OMP_NUM_THREADS\":\"2\",\"EMPTY\":\"\"},\"ready_timeout_s\":60,\"request_timeout_s\":120},"
	" \"models\":[{\"name\":\"tiny\",\"path\":\"{state}/models/tiny.gguf\","
	"              \"generate\":[\"{build}/bin/ember\",\"gen\",\"-o\",\"{model}\"],"
	"              \"sha256\":\"ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789\","
	"              \"reference\":{\"command\":[\"sh\",\"-c\",\"exec ref ${HOME} {model}\"],\"env\":{},"
	"                             \"ready_timeout_s\":120,\"request_timeout_s\":600}},"
	"             {\"name\":\"small\",\"path\":\"/models/small.gguf\",\"sha256\":null}],"
	" \"speed\":{\"decode\":{\"contexts\":[128,512,4096],\"gen_tokens\":32},\"prefill\":{\"contexts\":[512]},"
	"            \"pairs_min\":7,\"pairs_max\":16,\"confirm_pairs\":4,\"margin\":0.015,\"regression_ratio\":0.97,"
	"            \"alpha\":0.1,\"max_failed_fraction\":0.2,\"method\":\"bootstrap\"},"
	" \"accuracy\":{\"enabled\":true,\"windows\":3,\"window_len\":100,\"top_k\":8,\"corpus\":\"{state}/corpus.bin\","
	"               \"top1_min\":0.8,\"kl_max\":0.3,\"top1_drop_max\":0.02,\"kl_rise_max\":0.05,\"greedy_check\":false},"
	" \"tiers\":{\"XS\":0.01,\"S\":0.03,\"M\":0.05,\"L\":0.1,\"XL\":0.2},"
	" \"harness_paths\":[\"guards/\",\"bench/x.py\"]}";

/* Sets (value != NULL) or deletes the member at `path` ("a.b[2].c": one index per segment at most)
 * of `root`; steals `value`. */
static void patch(json_t *root, const char *path, json_t *value)
{
	char buf[256], *tok, *save = NULL, *next;
	json_t *node = root, *parent = NULL;
	long index = -1;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok; tok = next) {
		char *bracket = strchr(tok, '[');
		next = strtok_r(NULL, ".", &save);
		index = -1;
		if (bracket) {
			*bracket = '\0';
			index = strtol(bracket + 1, NULL, 10);
		}
		if (!next) {
			if (index >= 0) {
				parent = json_object_get(node, tok);
				if (value)
					json_array_set_new(parent, (size_t)index, value);
				else
					json_array_remove(parent, (size_t)index);
			} else if (value) {
				json_object_set_new(node, tok, value);
			} else {
				json_object_del(node, tok);
			}
			return;
		}
		node = json_object_get(node, tok);
		if (index >= 0)
			node = json_array_get(node, (size_t)index);
	}
}

/* Loads `base` with one patch applied; expects failure whose message contains every `want`. */
static void expect_invalid(const char *base, const char *path, json_t *value, const char *want1, const char *want2)
{
	json_t *root = json_loads(base, 0, NULL);
	char *text;
	struct ab_suite *suite = NULL;
	int rc;

	if (path)
		patch(root, path, value);
	text = json_dumps(root, JSON_COMPACT);
	rc = ab_suite_load_buffer(&suite, text, strlen(text), NULL);
	if (rc != AB_EINVALID || suite || !strstr(ab_error_last(), want1) || (want2 && !strstr(ab_error_last(), want2))) {
		fprintf(stderr, "patch %s: rc %d, message \"%s\"; wanted \"%s\"%s%s\n", path ? path : "-", rc,
			ab_error_last(), want1, want2 ? " and " : "", want2 ? want2 : "");
		exit(1);
	} else if (getenv("AB_TEST_VERBOSE")) {
		printf("  %s\n", ab_error_last());
	}
	ab_suite_free(suite);
	free(text);
	json_decref(root);
}

static void expect_invalid_text(const char *text, const char *want)
{
	struct ab_suite *suite = NULL;
	int rc = ab_suite_load_buffer(&suite, text, strlen(text), "inline.json");
	if (rc != AB_EINVALID || suite || !strstr(ab_error_last(), want) || !strstr(ab_error_last(), "suite inline.json")) {
		fprintf(stderr, "text %.40s: rc %d, message \"%s\"; wanted \"%s\"\n", text, rc, ab_error_last(), want);
		exit(1);
	} else if (getenv("AB_TEST_VERBOSE")) {
		printf("  %s\n", ab_error_last());
	}
	ab_suite_free(suite);
}

static void test_suite_cpu_json(void)
{
	char path[1100];
	struct ab_suite *suite = NULL;
	const struct ab_suite_model *tiny;

	snprintf(path, sizeof(path), "%s/guards/cpu.json", source_dir);
	CHECK(ab_suite_load_file(&suite, path) == 0);
	CHECK(strcmp(suite->name, "cpu") == 0);
	CHECK(suite->configure.argc > 0 && suite->configure.argv[suite->configure.argc] == NULL);
	CHECK(suite->build.argc > 0);
	CHECK((tiny = ab_suite_model_find(suite, "tiny")) != NULL);
	CHECK(tiny && tiny->generate.argc > 0 && tiny->has_reference);
	CHECK(suite->speed.decode_count == 2 && suite->speed.decode_contexts[0] == 64);
	CHECK(suite->speed.prefill_count == 2 && suite->speed.pairs_min == 6 && suite->speed.pairs_max == 12);
	CHECK(suite->accuracy.enabled);
	CHECK(strlen(suite->sha256) == 64 && strlen(suite->build_hash) == 64);
	ab_suite_free(suite);
}

/* Every suite the repository ships loads; the spec suites give each model a draft, and the GPU
 * spec suite generates its pairs from the shipped trained files (ember gen --embed). */
static void test_suite_shipped(void)
{
	static const char *const names[] = { "cpu", "default", "gpu-quick", "spec-cpu", "spec-gpu" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[1100];
		struct ab_suite *suite = NULL;
		snprintf(path, sizeof(path), "%s/guards/%s.json", source_dir, names[i]);
		if (ab_suite_load_file(&suite, path) != 0) {
			fprintf(stderr, "%s: %s\n", path, ab_error_last());
			CHECK(0);
			continue;
		}
		if (strncmp(names[i], "spec-", 5) == 0) {
			CHECK(suite->spec.count == 2 && suite->spec.prompts != NULL);
			for (int m = 0; m < suite->model_count; m++)
				CHECK(suite->models[m].has_draft);
		}
		if (strcmp(names[i], "spec-gpu") == 0) {
			CHECK(suite->model_count == 2);
			for (int m = 0; m < suite->model_count; m++)
				CHECK(suite->models[m].generate.argc > 0 && suite->models[m].draft.generate.argc > 0);
		}
		ab_suite_free(suite);
	}
}

static void test_suite_round_trip(void)
{
	struct ab_suite *a = NULL, *b = NULL;
	json_t *ja = NULL, *jb = NULL;
	char *text = NULL;

	CHECK(ab_suite_load_buffer(&a, full_suite, strlen(full_suite), NULL) == 0);
	CHECK(a->speed.pairs_min == 8);                      /* odd counts round up to even */
	CHECK(a->speed.method == AB_SUITE_METHOD_BOOTSTRAP);
	CHECK(a->sut.env_count == 2 && strcmp(a->sut.env[0].name, "OMP_NUM_THREADS") == 0 && a->sut.env[1].value[0] == 0);
	CHECK(a->model_count == 2 && a->models[0].has_reference && !a->models[1].has_reference);
	CHECK(strcmp(a->models[0].sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789") == 0);
	CHECK(a->models[1].sha256[0] == '\0' && a->models[1].generate.argc == 0);
	CHECK(a->accuracy.score_from == 50 && !a->accuracy.greedy_check);
	CHECK(strcmp(a->accuracy.corpus, "{state}/corpus.bin") == 0);
	CHECK(a->tiers[4].min_gain == 0.2 && strcmp(a->tiers[4].name, "XL") == 0);
	CHECK(a->harness_path_count == 2 && strcmp(a->harness_paths[1], "bench/x.py") == 0);

	ja = ab_suite_to_json(a);
	CHECK(ja != NULL);
	text = ja ? json_dumps(ja, JSON_INDENT(2)) : NULL;
	CHECK(text && ab_suite_load_buffer(&b, text, strlen(text), NULL) == 0);
	if (b) {
		jb = ab_suite_to_json(b);
		CHECK(json_equal(ja, jb));
		CHECK(strcmp(a->build_hash, b->build_hash) == 0);   /* the hash ignores layout */
		CHECK(strcmp(a->sha256, b->sha256) != 0);           /* the text hash does not */
	}
	free(text);
	json_decref(ja);
	json_decref(jb);
	ab_suite_free(a);
	ab_suite_free(b);
}

static void test_suite_defaults_and_build_hash(void)
{
	struct ab_suite *a = NULL, *b = NULL, *c = NULL;
	json_t *root = json_loads(minimal_suite, 0, NULL);
	char *text;

	CHECK(ab_suite_load_buffer(&a, minimal_suite, strlen(minimal_suite), NULL) == 0);
	if (!a)
		return;
	CHECK(a->configure.argc == 0 && a->configure.argv == NULL);
	CHECK(a->build_timeout_s == 1800 && a->sut.ready_timeout_s == 120 && a->sut.request_timeout_s == 300);
	CHECK(a->speed.gen_tokens == 128 && a->speed.prefill_count == 0);
	CHECK(a->speed.pairs_min == 6 && a->speed.pairs_max == 16 && a->speed.confirm_pairs == 6);
	CHECK(a->speed.margin == 0.01 && a->speed.regression_ratio == 0.98 && a->speed.alpha == 0.05);
	CHECK(a->speed.method == AB_SUITE_METHOD_WILCOXON);
	CHECK(a->speed.reps == 3 && !a->speed.gate_first_request && a->speed.engine_clock_ratio == 1.5 &&
	      a->speed.equivalence_level == 0.90);
	CHECK(!a->accuracy.enabled && a->accuracy.windows == 4 && a->accuracy.window_len == 256);
	CHECK(a->tiers[0].min_gain == 0.02 && a->tiers[2].min_gain == 0.06 && a->tiers[4].min_gain == 0.18);
	CHECK(a->harness_path_count == 4 && strcmp(a->harness_paths[3], "ci/") == 0);
	CHECK(ab_suite_model_find(a, "nope") == NULL);

	/* The build timeout does not change the artifact, so not the key; the commands do. */
	patch(root, "build.timeout_s", json_integer(5));
	text = json_dumps(root, 0);
	CHECK(ab_suite_load_buffer(&b, text, strlen(text), NULL) == 0);
	free(text);
	patch(root, "build.build[2]", json_string("{build}"));
	text = json_dumps(root, 0);
	CHECK(ab_suite_load_buffer(&c, text, strlen(text), NULL) == 0);
	free(text);
	if (b && c) {
		CHECK(strcmp(a->build_hash, b->build_hash) == 0);
		CHECK(strcmp(a->build_hash, c->build_hash) != 0);
	}
	ab_suite_free(a);
	ab_suite_free(b);
	ab_suite_free(c);
	json_decref(root);
}

static void test_suite_errors(void)
{
	const char *m = minimal_suite, *f = full_suite;
	char *big;

	/* unknown keys, at every depth */
	expect_invalid(m, "bogus", json_true(), "suite: bogus: unknown key", NULL);
	expect_invalid(m, "speed.decode.foo", json_integer(1), "speed.decode.foo: unknown key", "gen_tokens");
	expect_invalid(f, "models[0].reference.bogus", json_integer(1), "models[0].reference.bogus: unknown key", NULL);
	expect_invalid(m, "accuracy", json_pack("{s:i}", "windws", 3), "accuracy.windws: unknown key", NULL);
	/* wrong types */
	{
		/* One SUT process measures every context: decode and prefill together are capped. */
		json_t *many = json_array();
		for (int i = 1; i <= AB_SUITE_CONTEXTS_MAX + 1; i++)
			json_array_append_new(many, json_integer(64 * i));
		expect_invalid(m, "speed.decode.contexts", many, "distinct contexts in decode and prefill together", NULL);
	}
	expect_invalid(f, "speed.decode.contexts[2]", json_string("4k"),
		       "suite: speed.decode.contexts[2]: expected a positive integer", "got \"4k\"");
	expect_invalid(m, "sut.command", json_string("ember serve"), "sut.command: expected a non-empty array", NULL);
	expect_invalid(m, "build.build[1]", json_integer(5), "build.build[1]: expected a string", "got 5");
	expect_invalid(m, "speed.margin", json_string("1%"), "speed.margin: expected a number", NULL);
	expect_invalid(m, "speed", json_array(), "speed: expected an object", "got an empty array");
	expect_invalid(f, "accuracy.greedy_check", json_integer(1), "accuracy.greedy_check: expected true or false", NULL);
	expect_invalid(m, "speed.method", json_string("ttest"), "speed.method", "\"ttest\"");
	expect_invalid(m, "speed.reps", json_integer(0), "speed.reps", NULL);
	expect_invalid(m, "speed.reps", json_integer(AB_SUITE_REPS_MAX + 1), "speed.reps", NULL);
	expect_invalid(m, "speed.engine_clock_ratio", json_real(1.0), "speed.engine_clock_ratio", NULL);
	expect_invalid(m, "speed.equivalence_level", json_real(0.4), "speed.equivalence_level", NULL);
	expect_invalid(m, "speed.gate_first_request", json_integer(1), "speed.gate_first_request", NULL);
	expect_invalid(m, "schema", json_string("abgate.suite/2"), "schema: expected \"abgate.suite/1\"", NULL);
	expect_invalid(f, "sut.env.OMP_NUM_THREADS", json_integer(2), "sut.env.OMP_NUM_THREADS: expected a string", NULL);
	expect_invalid(f, "sut.env.1BAD", json_string("x"), "sut.env.1BAD: not a valid environment variable", NULL);
	/* ranges */
	expect_invalid(m, "speed.pairs_min", json_integer(1), "speed.pairs_min: expected an integer in [2, 10000]", "got 1");
	expect_invalid(m, "speed.pairs_max", json_integer(4), "speed.pairs_max: pairs_max (4) is below pairs_min (6)", NULL);
	expect_invalid(m, "speed.regression_ratio", json_real(1.5), "speed.regression_ratio: expected a number in (0, 1]", NULL);
	expect_invalid(m, "speed.regression_ratio", json_integer(0), "speed.regression_ratio", NULL);
	expect_invalid(m, "speed.margin", json_real(0.5), "speed.margin: expected a number in [0, 0.5)", NULL);
	expect_invalid(m, "speed.decode.contexts[1]", json_integer(128), "speed.decode.contexts[1]: context 128 is listed twice", NULL);
	expect_invalid(m, "speed.decode.contexts[0]", json_integer(0), "speed.decode.contexts[0]: expected a positive", NULL);
	expect_invalid(m, "sut.ready_timeout_s", json_integer(0), "sut.ready_timeout_s: expected a positive integer", NULL);
	expect_invalid(f, "tiers.M", json_real(0.03), "tiers.M: tier thresholds must increase", NULL);
	expect_invalid(f, "accuracy.score_from", json_integer(100), "accuracy.score_from: expected an integer in [0, 99]", NULL);
	expect_invalid(m, "name", json_string("has space"), "name: expected a name", NULL);
	expect_invalid(f, "models[1].name", json_string("tiny"), "models[1].name: model name \"tiny\" is used twice", NULL);
	expect_invalid(f, "models[0].sha256", json_string("abc"), "models[0].sha256: expected 64 hexadecimal digits", NULL);
	expect_invalid(m, "sut.command[0]", json_string("{bild}/sut"), "sut.command[0]: unknown placeholder {bild}", NULL);
	expect_invalid(m, "harness_paths", json_pack("[s]", "/etc/"), "harness_paths[0]: expected a path relative", NULL);
	expect_invalid(m, "harness_paths", json_pack("[s,s]", "ok/", "a/../b"), "harness_paths[1]", NULL);
	expect_invalid(m, "accuracy", json_object(), "accuracy: accuracy is enabled but no model has a reference", NULL);
	expect_invalid(m, "models", json_array(), "models: expected a non-empty array", NULL);
	json_t *many = json_array();
	for (int i = 0; i <= AB_SUITE_MODELS_MAX; i++) {
		char name[16];
		snprintf(name, sizeof(name), "m%d", i);
		json_array_append_new(many, json_pack("{s:s, s:s}", "name", name, "path", "{state}/m.bin"));
	}
	expect_invalid(m, "models", many, "models: more than 16 models", NULL);
	expect_invalid(m, "speed.decode", NULL, "speed: no workload", NULL);
	/* missing required keys */
	expect_invalid(m, "build.build", NULL, "suite: build.build: required key is missing", NULL);
	expect_invalid(m, "models", NULL, "suite: models: required key is missing", NULL);
	expect_invalid(m, "models[0].path", NULL, "models[0].path: required key is missing", NULL);
	expect_invalid(m, "sut.command", json_null(), "sut.command: expected a non-empty array", "got null");
	expect_invalid(m, "name", NULL, "suite: name: required key is missing", NULL);
	/* not a suite at all */
	expect_invalid_text("{", "line 1");
	expect_invalid_text("[1, 2]", "expected an object, got an array");
	expect_invalid_text("{\"schema\":\"abgate.suite/1\",\"schema\":\"x\"}", "duplicate");
	big = malloc(AB_SUITE_MAX_BYTES + 2);
	memset(big, ' ', AB_SUITE_MAX_BYTES + 1);
	big[AB_SUITE_MAX_BYTES + 1] = '\0';
	big[0] = '{';
	big[AB_SUITE_MAX_BYTES] = '}';
	expect_invalid_text(big, "limit");
	free(big);
}

/* minimal_suite with a draft on m1, the SUT started with it, and a spec section. */
static const char *spec_suite =
	"{\"schema\":\"abgate.suite/1\",\"name\":\"spec\","
	" \"build\":{\"build\":[\"make\",\"-C\",\"{src}\"]},"
	" \"sut\":{\"command\":[\"{build}/sut\",\"--model\",\"{model}\",\"--draft\",\"{draft}\"]},"
	" \"models\":[{\"name\":\"m1\",\"path\":\"{state}/m1.bin\","
	"              \"draft\":{\"path\":\"{state}/m1-draft.bin\","
	"                         \"generate\":[\"gen\",\"--for\",\"{model}\",\"-o\",\"{draft}\"]}}],"
	" \"speed\":{\"decode\":{\"contexts\":[128,512]}},"
	" \"spec\":{\"contexts\":[128,4096],\"gen_tokens\":64,\"prompts\":\"{state}/spec.json\","
	"           \"regression_ratio\":0.97,\"tau_floor_ratio\":0.9,\"tiers\":{\"XS\":0.05,\"S\":0.1,\"M\":0.2,"
	"           \"L\":0.3,\"XL\":0.5}}}";

/* The spec section and models[].draft: values, defaults, the round trip and every error. */
static void test_suite_spec(void)
{
	struct ab_suite *suite = NULL, *again = NULL;
	CHECK(ab_suite_load_buffer(&suite, spec_suite, strlen(spec_suite), NULL) == 0);
	if (suite) {
		CHECK(suite->models[0].has_draft);
		CHECK_STR(suite->models[0].draft.path, "{state}/m1-draft.bin");
		CHECK(suite->models[0].draft.generate.argc == 5);
		CHECK(suite->spec.count == 2 && suite->spec.contexts[1] == 4096);
		CHECK(suite->spec.gen_tokens == 64);
		CHECK_STR(suite->spec.prompts, "{state}/spec.json");
		CHECK(fabs(suite->spec.regression_ratio - 0.97) < 1e-12);
		CHECK(fabs(suite->spec.tau_floor_ratio - 0.9) < 1e-12);
		CHECK(suite->spec.own_tiers && fabs(suite->spec.tiers[2].min_gain - 0.2) < 1e-12);
		CHECK(fabs(suite->tiers[2].min_gain - 0.06) < 1e-12);   /* the suite's own stay the defaults */
		json_t *dump = ab_suite_to_json(suite);
		char *text = json_dumps(dump, 0);
		CHECK(text && ab_suite_load_buffer(&again, text, strlen(text), NULL) == 0);
		if (again) {
			CHECK(again->models[0].has_draft && again->spec.count == 2 && again->spec.own_tiers);
			CHECK_STR(again->models[0].draft.generate.argv[4], "{draft}");
			CHECK(fabs(again->spec.tiers[4].min_gain - 0.5) < 1e-12);
		}
		free(text);
		json_decref(dump);
	}
	ab_suite_free(suite);
	ab_suite_free(again);

	/* Defaults: the suite's tiers, 128 tokens, 0.98 and 0.95, no corpus. */
	const char *defaults =
		"{\"schema\":\"abgate.suite/1\",\"name\":\"d\",\"build\":{\"build\":[\"make\"]},"
		" \"sut\":{\"command\":[\"sut\",\"{draft}\"]},"
		" \"models\":[{\"name\":\"m\",\"path\":\"m.bin\",\"draft\":{\"path\":\"d.bin\"}}],"
		" \"speed\":{\"decode\":{\"contexts\":[128]}},\"tiers\":{\"XS\":0.03},\"spec\":{\"contexts\":[256]}}";
	suite = NULL;
	CHECK(ab_suite_load_buffer(&suite, defaults, strlen(defaults), NULL) == 0);
	if (suite) {
		CHECK(suite->spec.gen_tokens == 128 && suite->spec.prompts == NULL && !suite->spec.own_tiers);
		CHECK(fabs(suite->spec.regression_ratio - 0.98) < 1e-12 && fabs(suite->spec.tau_floor_ratio - 0.95) < 1e-12);
		CHECK(fabs(suite->spec.tiers[0].min_gain - 0.03) < 1e-12);
	}
	ab_suite_free(suite);

	const char *s = spec_suite, *m = minimal_suite;
	expect_invalid(s, "spec.bogus", json_integer(1), "spec.bogus: unknown key", NULL);
	expect_invalid(s, "models[0].draft.bogus", json_integer(1), "models[0].draft.bogus: unknown key", NULL);
	expect_invalid(s, "models[0].draft.path", NULL, "models[0].draft.path: required key is missing", NULL);
	expect_invalid(s, "models[0].draft.path", json_integer(3), "models[0].draft.path: expected a string", NULL);
	expect_invalid(s, "models[0].draft.sha256", json_string("xyz"), "models[0].draft.sha256: expected 64 hexadecimal", NULL);
	expect_invalid(s, "models[0].draft.generate", json_string("gen"), "models[0].draft.generate: expected a non-empty array", NULL);
	expect_invalid(s, "models[0].draft", json_array(), "models[0].draft: expected an object", NULL);
	expect_invalid(s, "spec.contexts[0]", json_string("4k"), "spec.contexts[0]: expected a positive integer", NULL);
	expect_invalid(s, "spec.contexts[1]", json_integer(128), "spec.contexts[1]: context 128 is listed twice", NULL);
	expect_invalid(s, "spec.gen_tokens", json_integer(1), "spec.gen_tokens: expected an integer in [2,", NULL);
	expect_invalid(s, "spec.prompts", json_integer(1), "spec.prompts: expected a string", NULL);
	expect_invalid(s, "spec.regression_ratio", json_real(1.2), "spec.regression_ratio: expected a number in (0, 1]", NULL);
	expect_invalid(s, "spec.tau_floor_ratio", json_integer(0), "spec.tau_floor_ratio: expected a number in (0, 1]", NULL);
	expect_invalid(s, "spec.tiers.S", json_real(0.01), "spec.tiers.S: tier thresholds must increase", NULL);
	expect_invalid(s, "spec.tiers.XXL", json_real(0.9), "spec.tiers.XXL: unknown key", NULL);
	expect_invalid(s, "spec", json_array(), "spec: expected an object", NULL);
	/* spec contexts need a model with a draft; {draft} needs every model to have one */
	expect_invalid(m, "spec", json_pack("{s:[i]}", "contexts", 128), "spec: spec.contexts are given but no model has a draft", NULL);
	expect_invalid(m, "sut.command[0]", json_string("{draft}/x"), "sut.command: uses {draft}, but model \"m1\" has no draft", NULL);
	expect_invalid(s, "build.build[0]", json_string("{draft}"), "build: {draft} is only substituted in SUT commands", NULL);
	expect_invalid(s, "models[0].path", json_string("{draft}.gguf"), "models[0] (m1): {draft} is only substituted", NULL);
	{
		json_t *many = json_array();
		for (int i = 1; i <= AB_SUITE_CONTEXTS_MAX - 1; i++)
			json_array_append_new(many, json_integer(1000 + i));
		expect_invalid(s, "spec.contexts", many, "distinct contexts in decode, prefill and spec together", NULL);
	}
}

/* A model may name several references (the CPU engine and HF transformers, say). */
static void test_suite_references(void)
{
	json_error_t jerr;
	json_t *root = json_loads(minimal_suite, 0, &jerr);
	struct ab_suite *suite = NULL;
	char *text;

	CHECK(root != NULL);
	json_t *sut = json_pack("{s:[s,s]}", "command", "ref", "--stdio");
	json_t *model = json_array_get(json_object_get(root, "models"), 0);
	json_object_set_new(model, "references", json_pack("{s:O, s:O}", "cpu", sut, "hf", sut));
	json_object_set_new(root, "accuracy", json_pack("{s:b}", "enabled", 1));
	text = json_dumps(root, 0);
	CHECK(text && ab_suite_load_buffer(&suite, text, strlen(text), NULL) == 0);
	if (suite) {
		CHECK(suite->models[0].ref_count == 2 && suite->models[0].has_reference);
		CHECK(strcmp(suite->models[0].refs[0].name, "cpu") == 0 && strcmp(suite->models[0].refs[1].name, "hf") == 0);
		CHECK(suite->models[0].refs[1].sut.command.argc == 2);
		ab_suite_free(suite);
		suite = NULL;
	}
	free(text);
	/* Not both forms at once, and names are checked. */
	json_object_set(model, "reference", sut);
	text = json_dumps(root, 0);
	CHECK(text && ab_suite_load_buffer(&suite, text, strlen(text), NULL) == AB_EINVALID && !suite);
	CHECK(strstr(ab_error_last(), "either reference or references") != NULL);
	free(text);
	json_object_del(model, "reference");
	json_object_set_new(model, "references", json_pack("{s:O}", "bad name!", sut));
	text = json_dumps(root, 0);
	CHECK(text && ab_suite_load_buffer(&suite, text, strlen(text), NULL) == AB_EINVALID && !suite);
	CHECK(strstr(ab_error_last(), "models[0].references") != NULL);
	free(text);
	json_decref(sut);
	json_decref(root);
}

static void test_suite_files(void)
{
	const char *path = tu_path("bad.json");
	struct ab_suite *suite = NULL;

	CHECK(ab_suite_load_file(&suite, "/nonexistent/abgate/suite.json") == AB_ENOTFOUND && !suite);
	tu_write_file(path, "{\"schema\":\"abgate.suite/1\",\"name\":\"x\",\"speed\":{\"decode\":{\"contexts\":\"all\"}}}");
	CHECK(ab_suite_load_file(&suite, path) == AB_EINVALID && !suite);
	CHECK(strstr(ab_error_last(), path) != NULL);   /* the file is named in the message */
}

static const char *openai_suite =
	"{\"schema\":\"abgate.suite/1\",\"name\":\"http\","
	" \"build\":{\"build\":[\"make\",\"-C\",\"{src}\"]},"
	" \"sut\":{\"kind\":\"openai\",\"command\":[\"{build}/srv\",\"-m\",\"{model}\",\"--port\",\"{port}\"],"
	"          \"url\":\"http://127.0.0.1:{port}\",\"api\":\"llama\",\"vocab_size\":1000,\"env\":{\"P\":\"{port}\"}},"
	" \"models\":[{\"name\":\"m1\",\"path\":\"{state}/m1.bin\","
	"              \"reference\":{\"kind\":\"openai\",\"command\":[\"ref\",\"{port}\"],\"url\":\"http://localhost:{port}/v1x\","
	"                             \"ready_path\":\"/ready\",\"model_name\":\"qwen\"}}],"
	" \"speed\":{\"decode\":{\"contexts\":[128]}}}";

/* kind "openai": defaults, the HTTP keys, a round trip, and every bad value refused naming its key. */
static void test_suite_openai(void)
{
	struct ab_suite *suite = NULL, *again = NULL;
	CHECK(ab_suite_load_buffer(&suite, openai_suite, strlen(openai_suite), NULL) == 0);
	CHECK(suite->sut.kind == AB_SUITE_SUT_OPENAI && suite->sut.api == AB_SUITE_API_LLAMA);
	CHECK(strcmp(suite->sut.url, "http://127.0.0.1:{port}") == 0);
	CHECK(strcmp(suite->sut.ready_path, "/health") == 0 && suite->sut.model_name == NULL);
	CHECK(suite->sut.vocab_size == 1000);
	const struct ab_suite_sut *ref = &suite->models[0].refs[0].sut;
	CHECK(ref->kind == AB_SUITE_SUT_OPENAI && ref->api == AB_SUITE_API_COMPLETIONS);
	CHECK(strcmp(ref->ready_path, "/ready") == 0 && strcmp(ref->model_name, "qwen") == 0 && ref->vocab_size == 0);
	json_t *dump = ab_suite_to_json(suite);
	char *text = json_dumps(dump, JSON_COMPACT);
	CHECK(ab_suite_load_buffer(&again, text, strlen(text), NULL) == 0);
	CHECK(again->sut.kind == AB_SUITE_SUT_OPENAI && again->sut.api == AB_SUITE_API_LLAMA &&
		  again->sut.vocab_size == 1000 && strcmp(again->models[0].refs[0].sut.model_name, "qwen") == 0);
	free(text);
	json_decref(dump);
	ab_suite_free(again);
	ab_suite_free(suite);
	/* stdio stays the default and its dump has no HTTP keys */
	CHECK(ab_suite_load_buffer(&suite, minimal_suite, strlen(minimal_suite), NULL) == 0);
	CHECK(suite->sut.kind == AB_SUITE_SUT_STDIO && suite->sut.url == NULL);
	dump = ab_suite_to_json(suite);
	CHECK(json_object_get(json_object_get(dump, "sut"), "url") == NULL);
	json_decref(dump);
	ab_suite_free(suite);

	const char *o = openai_suite, *m = minimal_suite;
	expect_invalid(m, "sut.kind", json_string("grpc"), "sut.kind: expected \"stdio\" or \"openai\"", "\"grpc\"");
	expect_invalid(m, "sut.kind", json_integer(1), "sut.kind: expected a string", NULL);
	expect_invalid(m, "sut.url", json_string("http://127.0.0.1:8080"), "sut.url: only for \"kind\": \"openai\"", NULL);
	expect_invalid(m, "sut.api", json_string("llama"), "sut.api: only for \"kind\": \"openai\"", NULL);
	expect_invalid(m, "sut.command[1]", json_string("{port}"), "sut: command: {port} is only substituted", NULL);
	expect_invalid(o, "sut.url", NULL, "sut.url", "missing");
	expect_invalid(o, "sut.url", json_string("http://example.com:80"), "sut.url: expected http://127.0.0.1:PORT", NULL);
	expect_invalid(o, "sut.url", json_string("https://127.0.0.1:{port}"), "sut.url: expected", NULL);
	expect_invalid(o, "sut.url", json_string("http://127.0.0.1:99999"), "sut.url: expected", NULL);
	expect_invalid(o, "sut.url", json_string("http://127.0.0.1:{port}/a b"), "sut.url: expected", NULL);
	expect_invalid(o, "sut.url", json_string("http://127.0.0.1:{prot}"), "sut.url: unknown placeholder {prot}", NULL);
	expect_invalid(o, "sut.ready_path", json_string("health"), "sut.ready_path: expected an absolute path", NULL);
	expect_invalid(o, "sut.api", json_string("chat"), "sut.api: expected \"completions\" or \"llama\"", NULL);
	expect_invalid(o, "sut.vocab_size", json_integer(0), "sut.vocab_size", NULL);
	expect_invalid(o, "sut.vocab_size", json_string("1k"), "sut.vocab_size", NULL);
	expect_invalid(o, "sut.model_name", json_integer(3), "sut.model_name: expected a string", NULL);
	expect_invalid(o, "models[0].reference.url", json_string("http://10.0.0.1:80"), "models[0].reference.url: expected", NULL);
	expect_invalid(o, "models[0].path", json_string("{state}/{port}.bin"), "models[0] (m1): {port} is only substituted", NULL);
	expect_invalid(o, "build.build[1]", json_string("{port}"), "build: {port} is only substituted", NULL);

	/* spec over HTTP: api "llama" (token ids) loads, "completions" is refused naming why */
	static const char spec_llama[] =
		"{\"schema\":\"abgate.suite/1\",\"name\":\"h\",\"build\":{\"build\":[\"make\"]},"
		" \"sut\":{\"kind\":\"openai\",\"api\":\"llama\",\"command\":[\"srv\",\"{port}\",\"{draft}\"],"
		"          \"url\":\"http://127.0.0.1:{port}\"},"
		" \"models\":[{\"name\":\"m\",\"path\":\"m.bin\",\"draft\":{\"path\":\"d.bin\"}}],"
		" \"speed\":{\"decode\":{\"contexts\":[128]}},\"spec\":{\"contexts\":[256]}}";
	struct ab_suite *sp = NULL;
	CHECK(ab_suite_load_buffer(&sp, spec_llama, strlen(spec_llama), NULL) == 0 && sp && sp->spec.count == 1);
	ab_suite_free(sp);
	expect_invalid(spec_llama, "sut.api", json_string("completions"),
		"spec.contexts with an openai SUT need sut.api \"llama\"", "token ids");
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "cpu_json", test_suite_cpu_json }, { "shipped", test_suite_shipped }, { "round_trip", test_suite_round_trip },
		{ "defaults_and_build_hash", test_suite_defaults_and_build_hash }, { "errors", test_suite_errors },
		{ "references", test_suite_references }, { "files", test_suite_files }, { "spec", test_suite_spec },
		{ "openai", test_suite_openai },
	};

#ifdef ABGATE_SOURCE_DIR
	snprintf(source_dir, sizeof(source_dir), "%s", ABGATE_SOURCE_DIR);
#else
	/* CMake compiles by absolute path: strip "/tests/evaluator/test_suite.c". */
	snprintf(source_dir, sizeof(source_dir), "%s", __FILE__);
	if (strstr(source_dir, "/tests/evaluator/"))
		*strstr(source_dir, "/tests/evaluator/") = '\0';
#endif
	return TU_RUN(argc, argv, cases);
}
