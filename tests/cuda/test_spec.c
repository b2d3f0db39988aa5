/*
 * test_spec.c - test_cuda_spec: DFlash speculative decoding on the CUDA backend. (1) draft_propose
 * on the GPU against the CPU backend's for the same target, draft and committed context (tiny and
 * qwen3-0.6b, f16 drafts): per block slot logits relative L2 <= 5e-2 and the argmax equal wherever
 * the CPU's top-1 margin exceeds twice the slot's largest logit difference, at four contexts
 * (plain launches, graph capture, graph replay; the second after a partial commit = rollback; the
 * fourth 150 positions longer), with EMBER_DRAFT_ATTN=block (the default) and =window, with the
 * block pass on int8 Q8R window GEMVs (EMBER_DRAFT_WEIGHTS=q8, the default) and on cuBLAS fp16
 * GEMMs (=f16); the same bounds for both.
 * (2) spec tokens == plain greedy tokens over 256 steps with the untrained draft and with an
 * oracle that replaces some proposals by the right tokens (partial acceptance, multi-row commits),
 * with consistent stats, at a generated qwen3-0.6b q4_k_m, once more with a 16-token prefill chunk
 * (the 40-token prompt prefilled and committed in three pieces), and with the f16 draft. usage: test_cuda_spec [TARGET DRAFT]:
 * with a pair of files (ci/gpu-spec.sh: qwen3-8b q4_k_m and a 5-layer block-16 draft), only (2)
 * on that pair. Exits 77 (CTest skip) without a CUDA device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cuda_testutil.h"
#include "draft.h"
#include "gen.h"
#include "model.h"
#include "spec.h"

#define N_GEN 256
#define PROMPT 40
#define LONG 150 /* the positions test_propose's fourth context adds */

static char g_dir[256];

static struct ember_backend *make_be(const struct ember_backend_ops *ops, const struct ember_model *m,
                                     const struct ember_draft *d, int n_ctx)
{
	struct ember_backend_config c = {.n_ctx = n_ctx, .capture_layers = d->target_layers, .n_capture = d->n_target_layers};
	struct ember_backend *be = NULL;
	MUST(ops->create(&be, m, &c));
	MUST(ops->draft_attach(be, d));
	return be;
}

/* CUDA's proposals/logits of one block vs the CPU's; returns nothing, CHECKs. */
static void compare_block(const char *label, const char *what, const float *lc, const float *lg, const int32_t *oc,
                          const int32_t *og, int depth, int V)
{
	double worst = 0;
	int agree = 0, must = 0, must_ok = 0;
	for (int t = 0; t < depth; t++) {
		const float *a = lc + (size_t)t * V, *b = lg + (size_t)t * V;
		double d2 = 0, s2 = 0, dmax = 0;
		int i1 = 0, i2 = -1, ig = 0;
		for (int v = 0; v < V; v++) {
			const double e = (double)b[v] - a[v];
			d2 += e * e;
			s2 += (double)a[v] * a[v];
			dmax = fabs(e) > dmax || e != e ? fabs(e) : dmax;
			if (a[v] > a[i1]) {
				i2 = i1;
				i1 = v;
			} else if (v != i1 && (i2 < 0 || a[v] > a[i2])) {
				i2 = v;
			}
			if (b[v] > b[ig])
				ig = v;
		}
		const double rel = sqrt(d2 / (s2 > 0 ? s2 : 1));
		worst = rel > worst || rel != rel ? rel : worst;
		CHECK(oc[t] == i1 && og[t] == ig, "%s %s slot %d: proposals %d/%d are not the logits' argmax %d/%d", label, what,
		      t + 1, oc[t], og[t], i1, ig);
		agree += oc[t] == og[t];
		if (a[i1] - a[i2] > 2 * dmax) {
			must++;
			must_ok += oc[t] == og[t];
		}
	}
	printf("%-6s %-22s depth %2d: logits rel L2 max %.2e, argmax agree %d/%d (%d/%d where the margin decides)\n", label,
	       what, depth, worst, agree, depth, must_ok, must);
	CHECK(worst <= 5e-2, "%s %s: draft logits rel L2 %.3g vs cpu", label, what, worst);
	CHECK(must_ok == must, "%s %s: argmax differs from cpu on %d clear slots", label, what, must - must_ok);
}

static void test_propose(const char *shape, int layers, int block, const char *attn)
{
	const struct ember_backend_ops *cpu = ember_backend_find("cpu"), *cuda = ember_backend_find("cuda");
	char tp[512], dp[512], label[32];
	const char *w = getenv("EMBER_DRAFT_WEIGHTS");
	snprintf(label, sizeof(label), "%s/%s%s", strcmp(shape, "tiny") ? "0.6b" : "tiny", attn, w && !strcmp(w, "f16") ? "/f16" : "");
	setenv("EMBER_DRAFT_ATTN", attn, 1);
	snprintf(tp, sizeof(tp), "%s/spec-%s-%d.gguf", g_dir, shape, (int)getpid());
	snprintf(dp, sizeof(dp), "%s/spec-%s-draft-%d.gguf", g_dir, shape, (int)getpid());
	struct ember_gen_config gc = {shape, "q8_0", 7, 0, NULL, NULL};
	MUST(ember_gen_write(&gc, tp));
	struct ember_gen_draft_config dc = {.target_shape = shape, .n_layer = layers, .block_size = block, .seed = 9};
	MUST(ember_gen_draft_write(&dc, dp));
	struct ember_model *m = NULL;
	struct ember_draft *d = NULL;
	MUST(ember_model_load(&m, tp));
	MUST(ember_draft_load(&d, dp, m));
	const int V = m->hp.n_vocab, depth = block - 1, n_ctx = 256;
	struct ember_backend *bc = make_be(cpu, m, d, n_ctx), *bg = make_be(cuda, m, d, n_ctx);
	int32_t prompt[PROMPT], win[16], oc[64], og[64], am[16];
	for (int i = 0; i < PROMPT; i++)
		prompt[i] = (int32_t)(urand() * V) % V;
	float *lc = malloc((size_t)depth * V * 4), *lg = malloc((size_t)depth * V * 4);
	/* context 1: the prompt */
	MUST(cpu->forward(bc, prompt, PROMPT, 0, 0, NULL, am));
	MUST(cuda->forward(bg, prompt, PROMPT, 0, 0, NULL, am + 1));
	MUST(cpu->draft_commit(bc, 0, PROMPT));
	MUST(cuda->draft_commit(bg, 0, PROMPT));
	const int32_t last = am[0];
	MUST(cpu->draft_propose(bc, last, PROMPT, depth, oc, lc));
	memset(lg, 0xFF, (size_t)depth * V * 4);
	MUST(cuda->draft_propose(bg, last, PROMPT, depth, og, lg));
	compare_block(label, "prompt (plain)", lc, lg, oc, og, depth, V);
	/* context 2: a window of 6 at PROMPT, 3 rows committed (the rest rolled back) */
	win[0] = last;
	for (int i = 1; i < 6; i++)
		win[i] = oc[(i - 1) % depth];
	MUST(cpu->forward(bc, win, 6, PROMPT, 1, NULL, am));
	MUST(cuda->forward(bg, win, 6, PROMPT, 1, NULL, am));
	MUST(cpu->draft_commit(bc, PROMPT, 3));
	MUST(cuda->draft_commit(bg, PROMPT, 3));
	MUST(cpu->draft_propose(bc, win[3], PROMPT + 3, depth, oc, lc));
	memset(lg, 0xFF, (size_t)depth * V * 4);
	MUST(cuda->draft_propose(bg, win[3], PROMPT + 3, depth, og, lg));
	compare_block(label, "after rollback (graph)", lc, lg, oc, og, depth, V);
	/* context 3: a full window of block rows committed; then the graph replayed twice, same bits */
	win[0] = win[3];
	for (int i = 1; i < block && i < 16; i++)
		win[i] = prompt[i];
	const int n3 = block < 16 ? block : 16, p3 = PROMPT + 3;
	MUST(cpu->forward(bc, win, n3, p3, 1, NULL, am));
	MUST(cuda->forward(bg, win, n3, p3, 1, NULL, am));
	MUST(cpu->draft_commit(bc, p3, n3));
	MUST(cuda->draft_commit(bg, p3, n3));
	MUST(cpu->draft_propose(bc, win[n3 - 1], p3 + n3, depth, oc, lc));
	memset(lg, 0xFF, (size_t)depth * V * 4);
	MUST(cuda->draft_propose(bg, win[n3 - 1], p3 + n3, depth, og, lg));
	compare_block(label, "window (graph replay)", lc, lg, oc, og, depth, V);
	float *lg2 = malloc((size_t)depth * V * 4);
	int32_t og2[64];
	MUST(cuda->draft_propose(bg, win[n3 - 1], p3 + n3, depth, og2, lg2));
	CHECK(memcmp(lg, lg2, (size_t)depth * V * 4) == 0 && memcmp(og, og2, (size_t)depth * 4) == 0,
	      "%s: the same block proposed twice differs", label);
	/* context 4: LONG more positions in one commit, so the block's keys span several 64-key tiles
	 * (the block kernel's splits and their merge) */
	int32_t *more = malloc(LONG * 4);
	for (int i = 0; i < LONG; i++)
		more[i] = (int32_t)(urand() * V) % V;
	const int p4 = p3 + n3;
	MUST(cpu->forward(bc, more, LONG, p4, 0, NULL, am));
	MUST(cuda->forward(bg, more, LONG, p4, 0, NULL, am + 1));
	MUST(cpu->draft_commit(bc, p4, LONG));
	MUST(cuda->draft_commit(bg, p4, LONG));
	MUST(cpu->draft_propose(bc, am[0], p4 + LONG, depth, oc, lc));
	memset(lg, 0xFF, (size_t)depth * V * 4);
	MUST(cuda->draft_propose(bg, am[0], p4 + LONG, depth, og, lg));
	compare_block(label, "long context (graph)", lc, lg, oc, og, depth, V);
	free(more);
	/* errors: propose away from the context length, commit past the capture */
	CHECK(cuda->draft_propose(bg, last, p3, depth, og2, NULL) != 0, "%s: propose off the context accepted", label);
	CHECK(cuda->draft_commit(bg, p4 + LONG, 1) != 0, "%s: commit of uncaptured rows accepted", label);
	CHECK(cuda->draft_attach(bg, d) != 0, "%s: second attach accepted", label);
	free(lg2);
	free(lc);
	free(lg);
	cpu->destroy(bc);
	cuda->destroy(bg);
	ember_draft_free(d);
	ember_model_free(m);
	unlink(tp);
	unlink(dp);
}

/* ---- spec == plain ---- */

static struct {
	const int32_t *plain;
	int n_prompt, V, calls;
} oracle;

/* The real CUDA proposals, then some replaced by the right token and some kept wrong. */
static int oracle_propose(struct ember_backend *be, int32_t last, int pos, int depth, int32_t *out, float *logits)
{
	int rc = ember_backend_cuda_ops.draft_propose(be, last, pos, depth, out, logits);
	if (rc)
		return rc;
	oracle.calls++;
	for (int j = 0; j < depth; j++) {
		const int32_t right = oracle.plain[pos - oracle.n_prompt + 1 + j];
		out[j] = (pos + j) % 5 == 0 ? (right + 1) % oracle.V : right;
	}
	return 0;
}

static void check_stats(const char *label, const char *what, const struct ember_spec_stats *st, int depth, int n_gen)
{
	printf("%-6s %-14s depth %2d: %d steps, %d drafted, %d accepted, tau %.3f; ms: prefill %.1f draft %.1f verify %.1f "
	       "commit %.1f total %.1f\n", label, what, depth, st->target_steps, st->drafted, st->accepted, st->accept_mean,
	       st->prefill_ms, st->draft_ms, st->verify_ms, st->commit_ms, st->total_ms);
	CHECK(st->target_steps >= 1 && st->accepted + st->target_steps == n_gen - 1 && st->accepted <= st->drafted &&
	      st->drafted <= depth * st->target_steps, "%s %s: stats inconsistent", label, what);
	CHECK(fabs(st->accept_mean * st->target_steps - (n_gen - 1)) < 1e-6, "%s %s: tau %.4f", label, what, st->accept_mean);
	CHECK(st->draft_ms > 0 && st->verify_ms > 0 && st->total_ms >= st->draft_ms + st->verify_ms, "%s %s: times", label, what);
}

static void test_spec_equal(const char *label, const char *target_path, const char *draft_path)
{
	const struct ember_backend_ops *cuda = ember_backend_find("cuda");
	struct ember_model *m = NULL;
	struct ember_draft *d = NULL;
	MUST(ember_model_load(&m, target_path));
	MUST(ember_draft_load(&d, draft_path, m));
	const int V = m->hp.n_vocab, B = d->block_size;
	struct ember_backend *be = make_be(cuda, m, d, PROMPT + N_GEN + 8);
	int32_t prompt[PROMPT], *plain = malloc(N_GEN * 4), *spec = malloc(N_GEN * 4);
	for (int i = 0; i < PROMPT; i++)
		prompt[i] = (int32_t)(urand() * V) % V;
	MUST(cuda->forward(be, prompt, PROMPT, 0, 0, NULL, &plain[0]));
	MUST(ember_backend_decode(cuda, be, plain[0], PROMPT, N_GEN - 1, plain + 1));
	const int depths[] = {B - 1, 3};
	for (int k = 0; k < 2; k++) {
		struct ember_spec_stats st;
		memset(spec, 0xFF, N_GEN * 4);
		MUST(ember_spec_generate(cuda, be, d, prompt, PROMPT, N_GEN, depths[k], spec, &st, NULL, NULL));
		int first = -1;
		for (int i = 0; i < N_GEN && first < 0; i++)
			if (spec[i] != plain[i])
				first = i;
		printf("%-6s untrained      depth %2d: spec tokens %s plain greedy over %d\n", label, depths[k],
		       first < 0 ? "==" : "!=", N_GEN);
		CHECK(first < 0, "%s depth %d: spec token %d is %d, plain %d", label, depths[k], first, spec[first], plain[first]);
		check_stats(label, "untrained", &st, depths[k], N_GEN);
	}
	/* the oracle: partial acceptance through the real verify window and multi-row commits */
	struct ember_backend_ops ops = ember_backend_cuda_ops;
	ops.draft_propose = oracle_propose;
	oracle.plain = plain;
	oracle.n_prompt = PROMPT;
	oracle.V = V;
	struct ember_spec_stats st;
	memset(spec, 0xFF, N_GEN * 4);
	MUST(ember_spec_generate(&ops, be, d, prompt, PROMPT, N_GEN, B - 1, spec, &st, NULL, NULL));
	CHECK(memcmp(spec, plain, N_GEN * 4) == 0, "%s oracle: spec tokens differ from plain", label);
	printf("%-6s oracle         depth %2d: spec tokens %s plain greedy over %d\n", label, B - 1,
	       memcmp(spec, plain, N_GEN * 4) ? "!=" : "==", N_GEN);
	check_stats(label, "oracle", &st, B - 1, N_GEN);
	CHECK(st.accept_mean > 2.0, "%s oracle: tau %.3f, expected well above 1", label, st.accept_mean);
	free(plain);
	free(spec);
	cuda->destroy(be);
	ember_draft_free(d);
	ember_model_free(m);
}

int main(int argc, char **argv)
{
	require_gpu_or_skip("test_cuda_spec");
	test_rng = 0x5EED0D4A5Full;
	snprintf(g_dir, sizeof(g_dir), "%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (argc == 3) {
		test_spec_equal("file", argv[1], argv[2]);
		return check_exit("test_cuda_spec");
	}
	/* the draft block's attention on its tensor-core kernel (the default) and on the window kernel */
	const char *attn[] = {"block", "window"};
	for (int i = 0; i < 2; i++) {
		test_propose("tiny", 2, 8, attn[i]);
		test_propose("qwen3-0.6b", 3, 16, attn[i]);
	}
	unsetenv("EMBER_DRAFT_ATTN");
	/* the f16 draft: cuBLAS fp16 GEMMs */
	setenv("EMBER_DRAFT_WEIGHTS", "f16", 1);
	test_propose("tiny", 2, 8, "block");
	test_propose("qwen3-0.6b", 3, 16, "block");
	unsetenv("EMBER_DRAFT_WEIGHTS");

	char tp[512], dp[512];
	snprintf(tp, sizeof(tp), "%s/spec-06b-q4km-%d.gguf", g_dir, (int)getpid());
	snprintf(dp, sizeof(dp), "%s/spec-06b-draft-%d.gguf", g_dir, (int)getpid());
	struct ember_gen_config gc = {"qwen3-0.6b", "q4_k_m", 1, 0, NULL, NULL};
	MUST(ember_gen_write(&gc, tp));
	struct ember_gen_draft_config dc = {.target_shape = "qwen3-0.6b", .n_layer = 5, .block_size = 16, .seed = 3};
	MUST(ember_gen_draft_write(&dc, dp));
	test_spec_equal("0.6b", tp, dp);
	/* a prompt longer than the prefill chunk (whose rows the capture keeps): the spec loop prefills
	 * and commits it chunk by chunk (capture_rows) */
	setenv("EMBER_PREFILL_CHUNK", "16", 1);
	test_spec_equal("0.6b/c16", tp, dp);
	unsetenv("EMBER_PREFILL_CHUNK");
	setenv("EMBER_DRAFT_WEIGHTS", "f16", 1);
	test_spec_equal("0.6b/f16", tp, dp);
	unsetenv("EMBER_DRAFT_WEIGHTS");
	unlink(tp);
	unlink(dp);
	return check_exit("test_cuda_spec");
}
