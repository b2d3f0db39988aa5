/*
 * test_forward.c - the model loader and the CPU backend on generated `tiny` models: batched
 * prefill against token-by-token decoding, independence from the thread count and the prefill
 * chunk size, greedy decode, cache reuse, forward() argument errors, the generator's
 * reproducibility and peakedness, and the loader's errors on broken model files.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>

#include "backend.h"
#include "check.h"
#include "error.h"
#include "gen.h"
#include "gguf.h"
#include "model.h"
#include "probe.h"
#include "quant.h"

#define N_TOK 80
/* Batched and token-by-token logits may differ only by float reassociation; ember's kernels are
 * built to give identical bits, so the tolerance is far above what is observed (0). */
#define BATCH_TOL 1e-4

static float max_abs_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmaxf(m, fabsf(a[i] - b[i]));
	return m;
}

static struct ember_backend *make_backend(const struct ember_model *m, int threads, int max_batch, int n_ctx)
{
	struct ember_backend *be = NULL;
	struct ember_backend_config c = {.n_ctx = n_ctx, .n_threads = threads, .max_batch = max_batch};
	REQUIRE(ember_backend_cpu_ops.create(&be, m, &c) == 0, "backend: %s", ember_error_last());
	return be;
}

static void test_model_forward(const char *path, const char *label)
{
	const struct ember_backend_ops *ops = &ember_backend_cpu_ops;
	struct ember_model *m = NULL;
	REQUIRE(ember_model_load(&m, path) == 0, "load %s: %s", path, ember_error_last());
	const struct ember_gen_shape *s = ember_gen_find_shape("tiny");
	CHECK(m->hp.n_vocab == s->n_vocab && m->hp.n_embd == s->n_embd && m->hp.n_layer == s->n_layer &&
	      m->hp.n_head == s->n_head && m->hp.n_head_kv == s->n_head_kv && m->hp.head_dim == s->head_dim &&
	      m->hp.n_ff == s->n_ff && m->hp.tied_output == 1, "%s: hparams", label);
	CHECK(m->hp.rope_theta == 1e6f && m->hp.rms_eps == 1e-6f && strcmp(m->hp.arch, "qwen3") == 0, "%s: rope/eps", label);
	CHECK(m->output.data == m->token_embd.data, "%s: tied head reuses token_embd", label);
	const int V = m->hp.n_vocab;
	int32_t tokens[N_TOK], argmax[N_TOK];
	ember_probe_random_tokens(tokens, N_TOK, V, 42);
	float *batched = malloc(sizeof(float) * N_TOK * V), *stepwise = malloc(sizeof(float) * N_TOK * V),
	      *other = malloc(sizeof(float) * N_TOK * V);

	struct ember_backend *be2 = make_backend(m, 2, 0, 256);
	REQUIRE(ops->forward(be2, tokens, N_TOK, 0, 1, batched, argmax) == 0, "forward: %s", ember_error_last());
	for (int i = 0; i < N_TOK; i++) {
		int32_t out;
		REQUIRE(ops->forward(be2, &tokens[i], 1, i, 0, stepwise + (size_t)i * V, &out) == 0, "step %d", i);
		CHECK(out == argmax[i], "%s: argmax at %d: stepwise %d, batched %d", label, i, out, argmax[i]);
	}
	float d = max_abs_diff(batched, stepwise, (size_t)N_TOK * V);
	printf("%s: batched prefill vs token-by-token: max |logit diff| %.3g (tolerance %.0e)\n", label, d, BATCH_TOL);
	CHECK(d <= BATCH_TOL, "%s: batched vs stepwise differ by %g", label, d);

	/* One thread, and prefill in chunks of 7 tokens: identical bits. */
	struct ember_backend *be1 = make_backend(m, 1, 7, 256);
	REQUIRE(ops->forward(be1, tokens, N_TOK, 0, 1, other, NULL) == 0, "forward 1 thread");
	CHECK(memcmp(other, batched, sizeof(float) * N_TOK * V) == 0,
	      "%s: 1 thread / 7-token chunks differ from 2 threads (max %g)", label, max_abs_diff(other, batched, (size_t)N_TOK * V));

	/* argmax without logits, last row only, and all rows. */
	int32_t last = -1, rows[N_TOK];
	CHECK(ops->forward(be1, tokens, N_TOK, 0, 0, NULL, &last) == 0 && last == argmax[N_TOK - 1], "%s: last-row argmax",
	      label);
	CHECK(ops->forward(be1, tokens, N_TOK, 0, 1, NULL, rows) == 0 && memcmp(rows, argmax, sizeof(rows)) == 0,
	      "%s: all-rows argmax without logits", label);

	/* Greedy decode = repeated forward(argmax); the cache is reused from position 0. */
	int32_t greedy[16], manual[16];
	CHECK(ops->forward(be1, tokens, 10, 0, 0, NULL, &greedy[0]) == 0, "prefill");
	CHECK(ops->decode_greedy(be1, greedy[0], 10, 15, greedy + 1) == 0, "decode_greedy");
	CHECK(ops->forward(be2, tokens, 10, 0, 0, NULL, &manual[0]) == 0, "prefill");
	for (int i = 1; i < 16; i++)
		CHECK(ops->forward(be2, &manual[i - 1], 1, 10 + i - 1, 0, NULL, &manual[i]) == 0, "step");
	CHECK(memcmp(greedy, manual, sizeof(greedy)) == 0, "%s: decode_greedy differs from forward steps", label);
	/* ember_backend_decode: the backend's own loop, and the forward loop for a backend without one. */
	struct ember_backend_ops no_loop = *ops;
	no_loop.decode_greedy = NULL;
	int32_t via_own[15], via_forward[15];
	CHECK(ops->forward(be1, tokens, 10, 0, 0, NULL, &greedy[0]) == 0, "prefill");
	CHECK(ember_backend_decode(ops, be1, greedy[0], 10, 15, via_own) == 0, "ember_backend_decode");
	CHECK(ops->forward(be1, tokens, 10, 0, 0, NULL, &greedy[0]) == 0, "prefill");
	CHECK(ember_backend_decode(&no_loop, be1, greedy[0], 10, 15, via_forward) == 0, "ember_backend_decode fallback");
	CHECK(memcmp(via_own, greedy + 1, sizeof(via_own)) == 0 && memcmp(via_forward, greedy + 1, sizeof(via_forward)) == 0,
	      "%s: ember_backend_decode differs from decode_greedy", label);

	/* A second sequence from position 0 overwrites the first. */
	float *again = malloc(sizeof(float) * V);
	CHECK(ops->forward(be2, tokens + 1, 5, 0, 0, again, NULL) == 0, "other sequence");
	CHECK(ops->forward(be2, tokens, N_TOK, 0, 0, again, NULL) == 0, "original sequence");
	CHECK(memcmp(again, batched + (size_t)(N_TOK - 1) * V, sizeof(float) * V) == 0, "%s: cache reuse changed logits",
	      label);

	/* Argument errors. */
	int32_t bad = V;
	CHECK(ops->forward(be2, &bad, 1, 0, 0, NULL, NULL) < 0 && strstr(ember_error_last(), "outside the vocabulary"),
	      "token id %d accepted", V);
	CHECK(ops->forward(be2, tokens, 1, N_TOK + 5, 0, NULL, NULL) < 0, "position past the cache accepted");
	int32_t *many = calloc(300, sizeof(int32_t));
	CHECK(ops->forward(be2, many, 300, 0, 0, NULL, NULL) < 0 && strstr(ember_error_last(), "256"), "n_ctx overflow");
	free(many);

	/* The synthetic model is peaked but context-dependent (see gen.h). */
	struct ember_probe_stats st;
	ember_probe_stats(&st, batched, N_TOK, V, tokens);
	printf("%s: top-1 probability mean %.3f, entropy %.3f nats, %d distinct argmax of %d, argmax = input %.2f\n", label,
	       st.top1_mean, st.entropy_mean, st.distinct_top1, N_TOK, st.repeat_frac);
	CHECK(st.top1_mean > 0.3 && st.entropy_mean < 3.0, "%s: distributions not peaked", label);
	CHECK(st.distinct_top1 > N_TOK / 4 && st.repeat_frac < 0.2, "%s: predictions degenerate", label);

	ops->destroy(be1);
	ops->destroy(be2);
	free(again);
	free(batched);
	free(stepwise);
	free(other);
	ember_model_free(m);
}

static int files_equal(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int equal = fa && fb, ca, cb;
	while (equal && (ca = fgetc(fa)) != EOF) {
		cb = fgetc(fb);
		equal = ca == cb;
	}
	if (equal)
		equal = fgetc(fb) == EOF;
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return equal;
}

static void test_generator(const char *dir)
{
	char a[4200], b[4200];
	struct ember_gen_config c = {.shape = "tiny", .quant = "f32", .seed = 9, .n_threads = 1};
	snprintf(a, sizeof(a), "%s/gen1.gguf", dir);
	snprintf(b, sizeof(b), "%s/gen2.gguf", dir);
	REQUIRE(ember_gen_write(&c, a) == 0, "gen: %s", ember_error_last());
	c.n_threads = 3;
	REQUIRE(ember_gen_write(&c, b) == 0, "gen: %s", ember_error_last());
	CHECK(files_equal(a, b), "generated file depends on the thread count");

	/* Stored values are the documented weight function. */
	struct ember_gguf *g = NULL;
	const struct ember_gen_shape *s = ember_gen_find_shape("tiny");
	REQUIRE(ember_gguf_open(&g, a) == 0, "open: %s", ember_error_last());
	const char *names[] = {"token_embd.weight", "output_norm.weight", "blk.2.attn_k.weight", "blk.3.ffn_down.weight",
	                       "blk.0.attn_q_norm.weight"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct ember_gguf_tensor *t = ember_gguf_find_tensor(g, names[i]);
		REQUIRE(t && t->type == 0, "%s", names[i]);
		for (int64_t row = 0; row < t->ne[1]; row += 37)
			for (int64_t col = 0; col < t->ne[0]; col += 11) {
				float v = ((const float *)t->data)[row * t->ne[0] + col];
				CHECK(v == ember_gen_weight(9, names[i], s, row, col), "%s[%lld][%lld]", names[i], (long long)row,
				      (long long)col);
			}
	}
	ember_gguf_close(g);

	/* The Q4_K_M mix: Q6_K head (tied token_embd) and attn_v/ffn_down in use_more_bits layers
	 * (for 4 layers: i < 0 || i >= 3 || i % 3 == 2, so layers 2 and 3). */
	c.quant = "q4_k_m";
	REQUIRE(ember_gen_write(&c, b) == 0, "gen: %s", ember_error_last());
	REQUIRE(ember_gguf_open(&g, b) == 0, "open");
	struct { const char *name; uint32_t type; } mix[] = {
		{"token_embd.weight", EMBER_TYPE_Q6_K}, {"blk.0.attn_v.weight", EMBER_TYPE_Q4_K},
		{"blk.2.attn_v.weight", EMBER_TYPE_Q6_K}, {"blk.0.ffn_down.weight", EMBER_TYPE_Q4_K},
		{"blk.1.attn_v.weight", EMBER_TYPE_Q4_K}, {"blk.2.ffn_down.weight", EMBER_TYPE_Q6_K},
		{"blk.3.ffn_down.weight", EMBER_TYPE_Q6_K}, {"blk.1.attn_q.weight", EMBER_TYPE_Q4_K},
		{"blk.1.ffn_norm.weight", EMBER_TYPE_F32},
	};
	for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
		const struct ember_gguf_tensor *t = ember_gguf_find_tensor(g, mix[i].name);
		CHECK(t && t->type == mix[i].type, "%s: type %s", mix[i].name, t ? ember_gguf_type_name(t->type) : "missing");
	}
	uint64_t ft = 0;
	CHECK(ember_gguf_get_uint(g, "general.file_type", &ft) == 0 && ft == 15, "file_type %" PRIu64, ft);
	ember_gguf_close(g);
	c.shape = "qwen3-9b";
	CHECK(ember_gen_write(&c, b) < 0 && strstr(ember_error_last(), "unknown shape"), "unknown shape accepted");
	c.shape = "tiny";
	c.quant = "q2_k";
	CHECK(ember_gen_write(&c, b) < 0 && strstr(ember_error_last(), "unknown quant"), "unknown quant accepted");
	unlink(a);
	unlink(b);
}

/* ---- loader errors on hand-made model files ---- */

enum breakage { OK_TIED, OK_UNTIED, BAD_ARCH, NO_BLOCK_COUNT, MISSING_TENSOR, BAD_SHAPE, NORM_F16, Q4_0_WEIGHT, HUGE_LAYERS, HUGE_HEADS };

static void write_mini(const char *path, enum breakage how)
{
	const int E = 32, L = 2, H = 2, KV = 1, D = 16, F = 64, V = 64;
	struct ember_gguf_writer *w = NULL;
	REQUIRE(ember_gguf_writer_create(&w) == 0, "writer");
	ember_gguf_writer_set_str(w, "general.architecture", how == BAD_ARCH ? "llama" : "qwen3");
	if (how != NO_BLOCK_COUNT)
		ember_gguf_writer_set_u64(w, "qwen3.block_count", how == HUGE_LAYERS ? 100000 : (uint64_t)L); /* u64 on purpose */
	ember_gguf_writer_set_u32(w, "qwen3.context_length", 128);
	ember_gguf_writer_set_u32(w, "qwen3.embedding_length", E);
	ember_gguf_writer_set_i32(w, "qwen3.feed_forward_length", F); /* i32 on purpose */
	ember_gguf_writer_set_u32(w, "qwen3.attention.head_count", how == HUGE_HEADS ? 64 : H);
	ember_gguf_writer_set_u32(w, "qwen3.attention.head_count_kv", KV);
	ember_gguf_writer_set_u32(w, "qwen3.attention.key_length", how == HUGE_HEADS ? 65536 : D);
	int64_t v2[2];
	int64_t v1[1];
#define T2(name, a, b, type) (v2[0] = (a), v2[1] = (b), ember_gguf_writer_add_tensor(w, name, type, 2, v2))
#define T1(name, a, type) (v1[0] = (a), ember_gguf_writer_add_tensor(w, name, type, 1, v1))
	T2("token_embd.weight", E, V, 0);
	if (how == OK_UNTIED)
		T2("output.weight", E, V, 0);
	T1("output_norm.weight", E, 0);
	for (int i = 0; i < L; i++) {
		char n[64];
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d.%s.weight", i, s), n)
		T1(NAME("attn_norm"), E, how == NORM_F16 && i == 1 ? 1 : 0);
		T2(NAME("attn_q"), E, H * D, how == Q4_0_WEIGHT ? 2 : 0);
		T2(NAME("attn_k"), E, KV * D, 0);
		T2(NAME("attn_v"), E, how == BAD_SHAPE && i == 1 ? KV * D + 1 : KV * D, 0);
		T2(NAME("attn_output"), H * D, E, 0);
		T1(NAME("attn_q_norm"), D, 0);
		T1(NAME("attn_k_norm"), D, 0);
		T1(NAME("ffn_norm"), E, 0);
		T2(NAME("ffn_gate"), E, F, 0);
		if (!(how == MISSING_TENSOR && i == 1))
			T2(NAME("ffn_up"), E, F, 0);
		T2(NAME("ffn_down"), F, E, 0);
#undef NAME
	}
#undef T1
#undef T2
	REQUIRE(ember_gguf_writer_open(w, path) == 0, "open: %s", ember_error_last());
	uint8_t *zeros = calloc(1, 1 << 16);
	for (int i = 0;; i++) {
		uint64_t n = ember_gguf_writer_tensor_bytes(w, i);
		if (!n)
			break;
		ember_gguf_writer_write(w, i, 0, zeros, n);
	}
	free(zeros);
	REQUIRE(ember_gguf_writer_finish(w) == 0, "finish: %s", ember_error_last());
	ember_gguf_writer_free(w);
}

static void test_loader_errors(const char *dir)
{
	char path[4200];
	struct ember_model *m = NULL;
	struct { enum breakage how; const char *want; } cases[] = {
		{BAD_ARCH, "architecture 'llama' is not supported"},
		{NO_BLOCK_COUNT, "required metadata 'qwen3.block_count' is missing"},
		{MISSING_TENSOR, "tensor 'blk.1.ffn_up.weight' is missing"},
		{BAD_SHAPE, "tensor 'blk.1.attn_v.weight' has shape {32, 17"},
		{NORM_F16, "ember needs F32 norm weights"},
		{Q4_0_WEIGHT, "has type Q4_0, which ember does not support"},
		{HUGE_LAYERS, "'qwen3.block_count' = 100000 is outside"},
		{HUGE_HEADS, "head_count 64 x key_length 65536 exceeds 2^20"},
	};
	snprintf(path, sizeof(path), "%s/mini.gguf", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_mini(path, cases[i].how);
		CHECK(ember_model_load(&m, path) < 0, "case %zu loaded", i);
		CHECK(strstr(ember_error_last(), cases[i].want) && strstr(ember_error_last(), path),
		      "case %zu: '%s' lacks '%s' or the path", i, ember_error_last(), cases[i].want);
	}
	write_mini(path, OK_UNTIED);
	REQUIRE(ember_model_load(&m, path) == 0, "untied mini model: %s", ember_error_last());
	CHECK(m->hp.tied_output == 0 && m->output.data != m->token_embd.data && strcmp(m->output.name, "output.weight") == 0,
	      "untied head");
	CHECK(m->hp.n_layer == 2 && m->hp.n_ff == 64 && m->hp.head_dim == 16, "u64/i32 hparams");
	CHECK(strcmp(m->file_type, "unknown") == 0 && strcmp(m->name, "mini.gguf") == 0, "name/file type defaults");
	/* an all-zero model still runs: uniform logits */
	struct ember_backend *be = make_backend(m, 2, 0, 16);
	float logits[64];
	int32_t tok[3] = {1, 2, 3};
	CHECK(ember_backend_cpu_ops.forward(be, tok, 3, 0, 0, logits, NULL) == 0 && logits[0] == 0.0f && logits[63] == 0.0f,
	      "zero model");
	ember_backend_cpu_ops.destroy(be);
	ember_model_free(m);
	CHECK(ember_model_load(&m, "/nonexistent/model.gguf") < 0 && strstr(ember_error_last(), "cannot open"),
	      "missing file");
	CHECK(ember_backend_find("cpu") == &ember_backend_cpu_ops && ember_backend_find("tpu") == NULL, "registry");
	CHECK(ember_backend_default() != NULL, "default backend");
	unlink(path);
}

int main(void)
{
	char *dir = check_tmpdir("fwd");
	char path[4200];
	const char *quants[] = {"q8_0", "q4_k_m", "bf16"};
	for (size_t i = 0; i < sizeof(quants) / sizeof(quants[0]); i++) {
		struct ember_gen_config c = {.shape = "tiny", .quant = quants[i], .seed = 1};
		snprintf(path, sizeof(path), "%s/tiny-%s.gguf", dir, quants[i]);
		REQUIRE(ember_gen_write(&c, path) == 0, "gen: %s", ember_error_last());
		test_model_forward(path, quants[i]);
		unlink(path);
	}
	test_generator(dir);
	test_loader_errors(dir);
	check_rmdir(dir);
	return check_exit("test_forward");
}
