/*
 * test_spec.c - DFlash drafts and speculative decoding on the CPU backend with generated `tiny`
 * models. `draft`: the generated draft's GGUF round trip, a corrupt-draft corpus (wrong arch,
 * layer ids out of range, d / vocab / mask mismatch, bad fc, truncated files) and the draft ops'
 * argument errors. `decode`: a verify window's rows bit-identical to single-token steps, spec
 * tokens equal to plain greedy tokens (20 prompts x 64 tokens at depths 1, 3 and B-1) with
 * consistent stats, and two scripted drafts (proposal op replaced by the test, see oracle_propose)
 * for exact partial acceptance and for a draft that is always wrong (tau = 1); per prompt, the
 * prompt prefilled and committed in pieces of 4 rows (a backend whose capture keeps fewer rows
 * than the prompt) gives the same draft proposals and logits and greedy spec tokens.
 * usage: test_spec draft|decode
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

#include "backend.h"
#include "check.h"
#include "draft.h"
#include "error.h"
#include "gen.h"
#include "gguf.h"
#include "info.h"
#include "model.h"
#include "probe.h"
#include "spec.h"

#define BLOCK 8
#define N_GEN 64
#define N_PROMPTS 20

static char *g_dir;

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

static struct ember_model *make_target(const char *name, uint64_t seed)
{
	char path[4200];
	path_in(path, sizeof(path), name);
	struct ember_gen_config g = {.shape = "tiny", .quant = "q8_0", .seed = seed, .n_threads = 2};
	REQUIRE(ember_gen_write(&g, path) == 0, "gen: %s", ember_error_last());
	struct ember_model *m = NULL;
	REQUIRE(ember_model_load(&m, path) == 0, "load: %s", ember_error_last());
	return m;
}

static void make_draft(char *path, size_t n, const char *name, int layers, int block, const char *quant, uint64_t seed)
{
	path_in(path, n, name);
	struct ember_gen_draft_config c = {.target_shape = "tiny", .n_layer = layers, .block_size = block, .quant = quant,
	                                   .seed = seed, .n_threads = 2};
	REQUIRE(ember_gen_draft_write(&c, path) == 0, "gen draft: %s", ember_error_last());
}

static struct ember_backend *make_backend(const struct ember_model *m, const struct ember_draft *d, int n_ctx)
{
	struct ember_backend *be = NULL;
	struct ember_backend_config c = {.n_ctx = n_ctx, .n_threads = 2, .max_batch = 32};
	if (d) {
		c.capture_layers = d->target_layers;
		c.n_capture = d->n_target_layers;
	}
	REQUIRE(ember_backend_cpu_ops.create(&be, m, &c) == 0, "backend: %s", ember_error_last());
	if (d)
		REQUIRE(ember_backend_cpu_ops.draft_attach(be, d) == 0, "attach: %s", ember_error_last());
	return be;
}

/* ---- draft files ---- */

struct draft_file {
	const char *arch;
	int n_embd, block, n_tl, fc_tl, vocab_rows, mask, skip_layers_key;
	int32_t layers[4];
};

/* A one-layer F32 draft of tiny's head shapes with zero weights, from the fields of f. */
static void write_draft_file(const char *path, const struct draft_file *f)
{
	struct ember_gguf_writer *w = NULL;
	REQUIRE(ember_gguf_writer_create(&w) == 0, "writer");
	const int d = f->n_embd, ff = 768, q = 256, kv = 128;
	int ok = ember_gguf_writer_set_str(w, "general.architecture", f->arch) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.block_count", 1) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.context_length", 4096) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.embedding_length", (uint32_t)d) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.feed_forward_length", ff) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.attention.head_count", 4) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.attention.head_count_kv", 2) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.attention.key_length", 64) == 0 &&
	         ember_gguf_writer_set_u32(w, "dflash.block_size", (uint32_t)f->block) == 0 &&
	         (f->skip_layers_key ||
	          ember_gguf_writer_set_array(w, "dflash.target_layers", EMBER_GGUF_I32, f->layers, (uint64_t)f->n_tl) == 0) &&
	         (f->mask < 0 || ember_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)f->mask) == 0);
	REQUIRE(ok, "metadata: %s", ember_error_last());
	struct { const char *name; int64_t ne0, ne1; } t[16] = {
		{"fc.weight", (int64_t)d * f->fc_tl, d}, {"hidden_norm.weight", d, 1}, {"output_norm.weight", d, 1},
		{"blk.0.attn_norm.weight", d, 1}, {"blk.0.attn_q.weight", d, q}, {"blk.0.attn_k.weight", d, kv},
		{"blk.0.attn_v.weight", d, kv}, {"blk.0.attn_output.weight", q, d}, {"blk.0.attn_q_norm.weight", 64, 1},
		{"blk.0.attn_k_norm.weight", 64, 1}, {"blk.0.ffn_norm.weight", d, 1}, {"blk.0.ffn_gate.weight", d, ff},
		{"blk.0.ffn_up.weight", d, ff}, {"blk.0.ffn_down.weight", ff, d}, {"token_embd.weight", d, f->vocab_rows}};
	const int n_t = f->vocab_rows ? 15 : 14;
	int idx[16];
	for (int i = 0; i < n_t; i++) {
		int64_t ne[2] = {t[i].ne0, t[i].ne1};
		idx[i] = ember_gguf_writer_add_tensor(w, t[i].name, EMBER_TYPE_F32, t[i].ne1 > 1 ? 2 : 1, ne);
		REQUIRE(idx[i] >= 0, "add tensor %s", t[i].name);
	}
	REQUIRE(ember_gguf_writer_open(w, path) == 0, "open: %s", ember_error_last());
	for (int i = 0; i < n_t; i++) {
		uint64_t bytes = ember_gguf_writer_tensor_bytes(w, idx[i]);
		void *zero = calloc(1, (size_t)bytes);
		REQUIRE(zero && ember_gguf_writer_write(w, idx[i], 0, zero, (size_t)bytes) == 0, "write");
		free(zero);
	}
	REQUIRE(ember_gguf_writer_finish(w) == 0, "finish: %s", ember_error_last());
	ember_gguf_writer_free(w);
}

static void expect_draft_error(const struct ember_model *target, const struct draft_file *f, const char *want,
                               const char *what)
{
	char path[4200];
	path_in(path, sizeof(path), "corrupt.gguf");
	write_draft_file(path, f);
	struct ember_draft *d = NULL;
	int rc = ember_draft_load(&d, path, target);
	CHECK(rc != 0 && !d, "%s: loaded", what);
	CHECK(rc == 0 || strstr(ember_error_last(), want), "%s: error '%s' lacks '%s'", what, ember_error_last(), want);
	ember_draft_free(d);
	unlink(path);
}

static void test_corpus(const struct ember_model *target)
{
	const struct draft_file good = {"dflash", 256, 8, 2, 2, 0, -1, 0, {1, 4}};
	char path[4200];
	path_in(path, sizeof(path), "good.gguf");
	write_draft_file(path, &good);
	struct ember_draft *d = NULL;
	CHECK(ember_draft_load(&d, path, target) == 0, "hand-written draft: %s", ember_error_last());
	CHECK(d && d->mask_token_id == 2047 && d->target_layers[1] == 3 && !d->own_token_embd, "defaults");
	ember_draft_free(d);
	unlink(path);

	struct draft_file f;
#define CASE(field_edit, want, what) do { f = good; field_edit; expect_draft_error(target, &f, want, what); } while (0)
	CASE(f.arch = "qwen3", "is not a DFlash draft", "wrong arch");
	CASE(f.layers[1] = 9, "names target layer 8, but the target has 4 layers", "layer id past the target");
	CASE(f.layers[0] = 0, "outside 1..4096", "layer id 0 (embedding output)");
	CASE(f.layers[0] = -3, "outside 1..4096", "negative layer id");
	CASE(f.n_embd = 128, "embedding_length 128 differs from the target's 256", "d mismatch");
	CASE(f.vocab_rows = 1000, "has 1000 rows but the target's vocabulary has 2048", "vocab mismatch");
	CASE(f.mask = 5000, "mask token id 5000 is outside the target's vocabulary", "mask id");
	CASE(f.block = 1, "dflash.block_size", "block size 1");
	CASE(f.fc_tl = 3, "fc.weight", "fc input width");
	CASE(f.skip_layers_key = 1, "dflash.target_layers' is missing", "no target layers");
	CASE(f.n_tl = 0, "0 entries", "empty target layers");
#undef CASE
}

static void test_truncated(const struct ember_model *target, const char *good_path)
{
	FILE *in = fopen(good_path, "rb");
	REQUIRE(in, "open %s", good_path);
	fseek(in, 0, SEEK_END);
	long size = ftell(in);
	fseek(in, 0, SEEK_SET);
	uint8_t *bytes = malloc((size_t)size);
	REQUIRE(bytes && fread(bytes, 1, (size_t)size, in) == (size_t)size, "read");
	fclose(in);
	char path[4200];
	path_in(path, sizeof(path), "truncated.gguf");
	int tried = 0, failed_ok = 0;
	for (long cut = 0; cut < size; cut += cut < 4096 ? 97 : size / 23) {
		FILE *out = fopen(path, "wb");
		REQUIRE(out && fwrite(bytes, 1, (size_t)cut, out) == (size_t)cut && fclose(out) == 0, "write prefix");
		struct ember_draft *d = NULL;
		tried++;
		if (ember_draft_load(&d, path, target) != 0 && !d && ember_error_last()[0])
			failed_ok++;
		ember_draft_free(d);
	}
	CHECK(failed_ok == tried, "%d of %d truncated drafts loaded or failed without a message", tried - failed_ok, tried);
	unlink(path);
	free(bytes);
}

static void test_draft_files(void)
{
	static const int want64[5] = {1, 16, 31, 46, 61}, want40[5] = {1, 10, 19, 28, 37};
	int ids[5];
	ember_draft_default_layers(ids, 5, 64);
	CHECK(memcmp(ids, want64, sizeof(ids)) == 0, "64-layer target: %d %d %d %d %d", ids[0], ids[1], ids[2], ids[3], ids[4]);
	ember_draft_default_layers(ids, 5, 40);
	CHECK(memcmp(ids, want40, sizeof(ids)) == 0, "40-layer target: %d %d %d %d %d", ids[0], ids[1], ids[2], ids[3], ids[4]);

	struct ember_model *target = make_target("target.gguf", 3);
	char p1[4200], p2[4200], p3[4200];
	make_draft(p1, sizeof(p1), "draft-a.gguf", 2, BLOCK, "q8_0", 5);
	make_draft(p2, sizeof(p2), "draft-b.gguf", 2, BLOCK, "q8_0", 5);
	make_draft(p3, sizeof(p3), "draft-c.gguf", 2, BLOCK, "q8_0", 6);
	struct ember_draft *d = NULL;
	REQUIRE(ember_draft_load(&d, p1, target) == 0, "load draft: %s", ember_error_last());
	const struct ember_hparams *hp = &d->hp;
	CHECK(strcmp(hp->arch, "dflash") == 0 && hp->n_layer == 2 && hp->n_embd == 256 && hp->n_head == 4 &&
	      hp->n_head_kv == 2 && hp->head_dim == 64 && hp->n_ff == 768 && hp->n_vocab == 2048, "draft hparams");
	CHECK(d->block_size == BLOCK && d->mask_token_id == 2047 && d->n_target_layers == 2 && d->target_layers[0] == 0 &&
	      d->target_layers[1] == 3, "block %d, mask %d, target layers %d: %d %d", d->block_size, d->mask_token_id,
	      d->n_target_layers, d->target_layers[0], d->target_layers[1]);
	CHECK(!d->own_token_embd && !d->own_output && d->token_embd.data == target->token_embd.data &&
	      d->output.data == target->output.data, "embedding and head shared from the target");
	CHECK(d->fc.ne[0] == 512 && d->fc.ne[1] == 256 && d->fc.type == EMBER_TYPE_Q8_0 &&
	      d->hidden_norm.type == EMBER_TYPE_F32 && d->layers[1].ffn_down.ne[0] == 768 &&
	      d->layers[1].attn_k.ne[1] == 128, "tensor views");
	CHECK(strcmp(d->file_type, "Q8_0") == 0 && d->n_params > 0, "file type %s", d->file_type);
	ember_draft_free(d);
	/* the file keeps llama.cpp's +1 convention */
	struct ember_gguf *g = NULL;
	REQUIRE(ember_gguf_open(&g, p1) == 0, "gguf: %s", ember_error_last());
	int64_t kv = ember_gguf_find_kv(g, "dflash.target_layers");
	const int32_t *raw = kv >= 0 ? ember_gguf_kv_array_data(g, kv) : NULL;
	CHECK(raw && raw[0] == 1 && raw[1] == 4, "stored target layers");
	ember_gguf_close(g);
	/* reproducible from the seed, different across seeds */
	struct stat s1, s3;
	FILE *a = fopen(p1, "rb"), *b = fopen(p2, "rb"), *c = fopen(p3, "rb");
	REQUIRE(a && b && c && stat(p1, &s1) == 0 && stat(p3, &s3) == 0, "stat");
	int same_ab = 1, same_ac = 1, ca, cb, cc;
	while ((ca = fgetc(a)) != EOF) {
		cb = fgetc(b);
		cc = fgetc(c);
		same_ab &= ca == cb;
		same_ac &= ca == cc;
	}
	fclose(a);
	fclose(b);
	fclose(c);
	CHECK(same_ab && !same_ac, "seeded draft: same seed equal %d, other seed equal %d", same_ab, same_ac);
	/* ember info's report */
	char *report = NULL;
	size_t report_len = 0;
	FILE *mem = open_memstream(&report, &report_len);
	REQUIRE(mem, "memstream");
	int info_rc = ember_info_print(mem, p1);
	fclose(mem);
	CHECK(info_rc == 0 && strstr(report, "arch dflash") && strstr(report, "block size 8, mask token id 2047") &&
	      strstr(report, "the file stores id + 1): 0 3\n") && strstr(report, "2 layers, n_embd 256"),
	      "ember info of a draft (rc %d):\n%s", info_rc, report);
	free(report);
	/* without a target (ember info) */
	REQUIRE(ember_draft_load(&d, p1, NULL) == 0, "load without target: %s", ember_error_last());
	CHECK(d->hp.n_vocab == 0 && !d->token_embd.data, "no vocabulary without a target");
	ember_draft_free(d);
	/* a target model is not a draft, and a draft is not a target */
	char tpath[4200];
	path_in(tpath, sizeof(tpath), "target.gguf");
	CHECK(ember_draft_load(&d, tpath, target) != 0 && strstr(ember_error_last(), "not a DFlash draft"), "target as draft");
	struct ember_model *m = NULL;
	CHECK(ember_model_load(&m, p1) != 0 && strstr(ember_error_last(), "'dflash' is not supported"), "draft as model");

	test_corpus(target);
	test_truncated(target, p1);

	/* draft ops: argument errors */
	REQUIRE(ember_draft_load(&d, p1, target) == 0, "load draft: %s", ember_error_last());
	struct ember_backend *plain = make_backend(target, NULL, 64);
	CHECK(ember_backend_cpu_ops.draft_attach(plain, d) != 0 && strstr(ember_error_last(), "must capture"),
	      "attach without capture");
	ember_backend_cpu_ops.destroy(plain);
	struct ember_backend *be = make_backend(target, d, 64);
	const struct ember_backend_ops *ops = &ember_backend_cpu_ops;
	int32_t prompt[6] = {1, 2, 3, 4, 5, 6}, out[BLOCK], first;
	CHECK(ops->draft_attach(be, d) != 0, "second attach");
	REQUIRE(ops->forward(be, prompt, 6, 0, 0, NULL, &first) == 0, "prefill");
	CHECK(ops->draft_commit(be, 1, 5) != 0, "commit at a position the forward did not start at");
	CHECK(ops->draft_commit(be, 0, 7) != 0, "commit of more rows than computed");
	REQUIRE(ops->draft_commit(be, 0, 6) == 0, "commit: %s", ember_error_last());
	CHECK(ops->draft_propose(be, first, 5, 3, out, NULL) != 0, "propose off the context length");
	CHECK(ops->draft_propose(be, first, 6, BLOCK, out, NULL) != 0, "depth B");
	CHECK(ops->draft_propose(be, first, 6, 0, out, NULL) != 0, "depth 0");
	CHECK(ops->draft_propose(be, 2048, 6, 3, out, NULL) != 0, "token outside the vocabulary");
	int32_t again[BLOCK];
	CHECK(ops->draft_propose(be, first, 6, BLOCK - 1, out, NULL) == 0, "propose: %s", ember_error_last());
	CHECK(ops->draft_propose(be, first, 6, BLOCK - 1, again, NULL) == 0 && memcmp(out, again, sizeof(int32_t) * (BLOCK - 1)) == 0,
	      "propose is not repeatable");
	ops->destroy(be);
	ember_draft_free(d);
	ember_model_free(target);
}

/* ---- decoding ---- */

/* A scripted draft: proposals from the plain greedy answer, corrupted (token + 1) always
 * (ORACLE_WRONG) or where (position + slot) % 3 == 0 (ORACLE_PARTIAL); the backend's real draft
 * ops still commit. The spec loop cannot tell it from a draft; the test knows which proposals
 * are right, so it knows the exact acceptance. */
enum oracle_mode { ORACLE_WRONG, ORACLE_PARTIAL };
static struct {
	const int32_t *greedy;
	int n_prompt, n_gen, bad_last;
	enum oracle_mode mode;
} oracle;

static int oracle_corrupts(int pos, int j) { return oracle.mode == ORACLE_WRONG || (pos + j) % 3 == 0; }

static int oracle_propose(struct ember_backend *be, int32_t last, int pos, int depth, int32_t *out, float *logits)
{
	(void)be;
	(void)logits;
	const int i = pos - oracle.n_prompt; /* last = greedy[i] */
	if (i < 0 || i >= oracle.n_gen || oracle.greedy[i] != last)
		oracle.bad_last++;
	for (int j = 1; j <= depth; j++) {
		int32_t t = i + j < oracle.n_gen ? oracle.greedy[i + j] : 0;
		out[j - 1] = oracle_corrupts(pos, j) ? (t + 1) % 2048 : t;
	}
	return 0;
}

static void check_stats(const struct ember_spec_stats *st, int depth, const char *what)
{
	CHECK(st->target_steps > 0 && st->accepted <= st->drafted && st->drafted <= depth * st->target_steps &&
	      st->target_steps + st->accepted == N_GEN - 1 &&
	      fabs(st->accept_mean - (double)(N_GEN - 1) / st->target_steps) < 1e-12,
	      "%s: steps %d drafted %d accepted %d tau %.4f", what, st->target_steps, st->drafted, st->accepted,
	      st->accept_mean);
}

static void test_window_bits(const struct ember_backend_ops *ops, struct ember_backend *be)
{
	int32_t prompt[12], window[BLOCK];
	static float batched[BLOCK * 2048], single[2048];
	ember_probe_random_tokens(prompt, 12, 2048, 11);
	ember_probe_random_tokens(window, BLOCK, 2048, 12);
	REQUIRE(ops->forward(be, prompt, 12, 0, 0, NULL, NULL) == 0, "prefill");
	int differ = 0;
	for (int n = 1; n <= BLOCK; n++) {
		int32_t arg[BLOCK];
		REQUIRE(ops->forward(be, window, n, 12, 1, batched, arg) == 0, "window");
		for (int i = 0; i < n; i++) {
			int32_t a;
			REQUIRE(ops->forward(be, window + i, 1, 12 + i, 0, single, &a) == 0, "step");
			if (memcmp(single, batched + (size_t)i * 2048, sizeof(single)) != 0 || a != arg[i])
				differ++;
		}
	}
	CHECK(differ == 0, "%d window rows differ from single-token steps", differ);
}

/* A capture of four rows (the CUDA backend's capture keeps its last prefill chunk): the spec loop
 * must prefill and commit a longer prompt in pieces. */
static int four_rows(struct ember_backend *be)
{
	(void)be;
	return 4;
}

/* The CPU forward, recording the longest last-row-only call (the prefill's pieces). */
static int longest_prefill;
static int recording_forward(struct ember_backend *be, const int32_t *tokens, int n_tokens, int pos, int all_rows,
                             float *logits, int32_t *argmax)
{
	if (!all_rows && n_tokens > longest_prefill)
		longest_prefill = n_tokens;
	return ember_backend_cpu_ops.forward(be, tokens, n_tokens, pos, all_rows, logits, argmax);
}

/* The draft context built from pieces of four rows proposes what the whole prompt's does, and
 * speculative decoding through it stays greedy. */
static void test_pieces(const struct ember_backend_ops *ops, struct ember_backend *be, const struct ember_draft *d,
                        const int32_t *prompt, int n, const int32_t *greedy)
{
	struct ember_backend_ops pieces = *ops;
	pieces.capture_rows = four_rows;
	pieces.forward = recording_forward;
	static float whole[(BLOCK - 1) * 2048], piecewise[(BLOCK - 1) * 2048];
	int32_t a = 0, b = 0, pa[BLOCK - 1], pb[BLOCK - 1], spec[N_GEN];
	REQUIRE(ops->forward(be, prompt, n, 0, 0, NULL, &a) == 0 && ops->draft_commit(be, 0, n) == 0 &&
	        ops->draft_propose(be, a, n, BLOCK - 1, pa, whole) == 0, "whole prompt: %s", ember_error_last());
	for (int p = 0; p < n; p += 4) {
		const int k = n - p < 4 ? n - p : 4;
		REQUIRE(ops->forward(be, prompt + p, k, p, 0, NULL, &b) == 0 && ops->draft_commit(be, p, k) == 0,
		        "piece at %d: %s", p, ember_error_last());
	}
	REQUIRE(ops->draft_propose(be, b, n, BLOCK - 1, pb, piecewise) == 0, "pieces: %s", ember_error_last());
	CHECK(a == b && memcmp(pa, pb, sizeof(pa)) == 0 && memcmp(whole, piecewise, sizeof(whole)) == 0,
	      "prompt of %d: the draft built from pieces of 4 rows proposes differently", n);
	struct ember_spec_stats st;
	longest_prefill = 0;
	REQUIRE(ember_spec_generate(&pieces, be, d, prompt, n, N_GEN, BLOCK - 1, spec, &st, NULL, NULL) == 0,
	        "spec in pieces: %s", ember_error_last());
	CHECK(longest_prefill == (n < 4 ? n : 4), "prompt of %d: the spec prefill ran %d tokens in one call, the capture "
	      "holds 4", n, longest_prefill);
	CHECK(memcmp(spec, greedy, sizeof(spec)) == 0, "prompt of %d: spec prefilled in pieces differs from greedy", n);
	check_stats(&st, BLOCK - 1, "prefill in pieces");
}

static void test_decode(void)
{
	struct ember_model *target = make_target("target.gguf", 3);
	char dpath[4200];
	make_draft(dpath, sizeof(dpath), "draft.gguf", 2, BLOCK, "q8_0", 5);
	struct ember_draft *d = NULL;
	REQUIRE(ember_draft_load(&d, dpath, target) == 0, "draft: %s", ember_error_last());
	const struct ember_backend_ops *ops = &ember_backend_cpu_ops;
	struct ember_backend *be = make_backend(target, d, 128);
	test_window_bits(ops, be);

	struct ember_backend_ops scripted = ember_backend_cpu_ops;
	scripted.draft_propose = oracle_propose;
	const int depths[3] = {1, 3, BLOCK - 1};
	int mismatches = 0, total_steps[3] = {0}, total_accepted[3] = {0};
	for (int p = 0; p < N_PROMPTS; p++) {
		int32_t prompt[32], greedy[N_GEN], spec[N_GEN];
		const int n = 3 + p;
		ember_probe_random_tokens(prompt, n, 2048, 100 + (uint64_t)p);
		REQUIRE(ops->forward(be, prompt, n, 0, 0, NULL, &greedy[0]) == 0, "prefill");
		REQUIRE(ember_backend_decode(ops, be, greedy[0], n, N_GEN - 1, greedy + 1) == 0, "greedy");
		for (int k = 0; k < 3; k++) {
			struct ember_spec_stats st;
			REQUIRE(ember_spec_generate(ops, be, d, prompt, n, N_GEN, depths[k], spec, &st, NULL, NULL) == 0,
			        "spec: %s", ember_error_last());
			if (memcmp(spec, greedy, sizeof(spec)) != 0)
				mismatches++;
			char what[64];
			snprintf(what, sizeof(what), "prompt %d depth %d", p, depths[k]);
			check_stats(&st, depths[k], what);
			total_steps[k] += st.target_steps;
			total_accepted[k] += st.accepted;
		}
		test_pieces(ops, be, d, prompt, n, greedy);
		/* scripted drafts: exact expected acceptance */
		oracle.greedy = greedy;
		oracle.n_prompt = n;
		oracle.n_gen = N_GEN;
		for (int mode = ORACLE_WRONG; mode <= ORACLE_PARTIAL; mode++) {
			oracle.mode = (enum oracle_mode)mode;
			const int depth = mode == ORACLE_WRONG ? BLOCK - 1 : 3 + p % 5;
			int want_steps = 0, want_acc = 0;
			for (int produced = 1, pos = n; produced < N_GEN; want_steps++) {
				const int k = N_GEN - produced - 1 < depth ? N_GEN - produced - 1 : depth;
				int acc = 0;
				while (acc < k && !oracle_corrupts(pos, acc + 1))
					acc++;
				want_acc += acc;
				produced += acc + 1;
				pos += acc + 1;
			}
			struct ember_spec_stats st;
			REQUIRE(ember_spec_generate(&scripted, be, d, prompt, n, N_GEN, depth, spec, &st, NULL, NULL) == 0,
			        "scripted spec: %s", ember_error_last());
			CHECK(memcmp(spec, greedy, sizeof(spec)) == 0, "prompt %d: scripted draft (mode %d) changed the tokens", p,
			      mode);
			check_stats(&st, depth, mode == ORACLE_WRONG ? "always-wrong draft" : "partial draft");
			CHECK(st.target_steps == want_steps && st.accepted == want_acc, "prompt %d mode %d: steps %d accepted %d, "
			      "expected %d and %d", p, mode, st.target_steps, st.accepted, want_steps, want_acc);
			if (mode == ORACLE_WRONG)
				CHECK(st.accepted == 0 && st.accept_mean == 1.0 && st.target_steps == N_GEN - 1,
				      "always-wrong draft: tau %.4f", st.accept_mean);
			else
				CHECK(st.accepted > 0 && st.accept_mean > 1.0, "partial draft accepted nothing");
		}
		CHECK(oracle.bad_last == 0, "the spec loop opened %d blocks with a token other than the last", oracle.bad_last);
	}
	CHECK(mismatches == 0, "%d of %d speculative answers differ from greedy", mismatches, 3 * N_PROMPTS);
	for (int k = 0; k < 3; k++)
		printf("seeded draft, depth %d: %d prompts x %d tokens equal to greedy; tau %.3f (%d accepted in %d steps)\n",
		       depths[k], N_PROMPTS, N_GEN, (double)N_PROMPTS * (N_GEN - 1) / total_steps[k], total_accepted[k],
		       total_steps[k]);
	/* depth from the environment */
	int depth = 0;
	setenv("EMBER_SPEC_DEPTH", "3", 1);
	CHECK(ember_spec_depth_from_env(BLOCK, &depth) == 0 && depth == 3, "EMBER_SPEC_DEPTH=3");
	setenv("EMBER_SPEC_DEPTH", "8", 1);
	CHECK(ember_spec_depth_from_env(BLOCK, &depth) != 0 && strstr(ember_error_last(), "1..7"), "EMBER_SPEC_DEPTH=8");
	unsetenv("EMBER_SPEC_DEPTH");
	CHECK(ember_spec_depth_from_env(BLOCK, &depth) == 0 && depth == BLOCK - 1, "default depth");
	ops->destroy(be);
	ember_draft_free(d);
	ember_model_free(target);
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2 && (strcmp(argv[1], "draft") == 0 || strcmp(argv[1], "decode") == 0),
	        "usage: test_spec draft|decode");
	g_dir = check_tmpdir("spec");
	if (strcmp(argv[1], "draft") == 0)
		test_draft_files();
	else
		test_decode();
	check_rmdir(g_dir);
	return check_exit(argv[1][0] == 'd' && argv[1][1] == 'r' ? "test_spec draft" : "test_spec decode");
}
