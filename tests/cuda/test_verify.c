/*
 * test_verify.c - test_cuda_verify: the CUDA verify window of speculative decoding (an all-rows
 * forward of 2..16 tokens) against n single-token decode steps on generated tiny and qwen3-0.6b
 * models in q8_0 and q4_k_m: argmax and logits bit-identical for n = 2, 5, 8, 16 at positions 500
 * (across a split boundary at 512), 300, 120 (across the one at 128) and 0, on the plain first run and on the
 * graph replay, and after a rollback (a window at an earlier position); and the hidden-state
 * capture: window rows bit-identical to the decode steps' rows, close to the cuBLAS prefill's
 * (relative L2 <= 2e-2), and the last captured layer through output_norm + LM head on the CPU
 * agreeing with the CPU backend's logits (top-1 >= 0.95 of rows, mean KL <= 1e-2). Each model runs
 * four times: EMBER_WIN_SPLIT=1 (the default) and =2 (the window GEMV's chain split everywhere but the
 * head; with EMBER_WIN_PDL=1, as the last configuration), EMBER_WIN_ATTN=token (one attention CTA per window token, not 4 sharing K/V), and
 * EMBER_ATTN_SPLIT=2 (windows whose tokens straddle a change of split chunk size).
 * Exits 77 (CTest skip) without a CUDA device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cuda_backend.h"
#include "cuda_testutil.h"
#include "gen.h"
#include "model.h"
#include "quant.h"

#define N_CTX 1024
#define PROMPT 560

static const int win_sizes[] = {2, 5, 8, 16};
/* Descending: a window at pos leaves the cache pos + n long, and the next one must start inside it. */
static const int win_pos[] = {500, 300, 120, 0};

/* n decode steps of toks at pos: logits [n][V] and argmax [n]. */
static void stepwise(const struct ember_backend_ops *ops, struct ember_backend *be, const int32_t *toks, int n, int pos,
                     float *logits, int32_t *am, int V)
{
	for (int i = 0; i < n; i++)
		MUST(ops->forward(be, toks + i, 1, pos + i, 0, logits + (size_t)i * V, am + i));
}

/* One window vs n steps; returns the number of rows that differ in any bit. */
static int check_window(const struct ember_backend_ops *ops, struct ember_backend *be, const int32_t *toks, int n, int pos,
                        int V, const char *label, const char *what)
{
	float *lw = malloc((size_t)n * V * 4), *ls = malloc((size_t)n * V * 4);
	int32_t aw[16], as[16];
	memset(lw, 0xFF, (size_t)n * V * 4);
	MUST(ops->forward(be, toks, n, pos, 1, lw, aw));
	stepwise(ops, be, toks, n, pos, ls, as, V);
	int bad = 0, first = -1;
	double dmax = 0;
	for (int i = 0; i < n; i++) {
		const int d = aw[i] != as[i] || memcmp(lw + (size_t)i * V, ls + (size_t)i * V, (size_t)V * 4) != 0;
		if (d && first < 0)
			first = i;
		bad += d;
		for (int v = 0; v < V; v++) {
			const double e = fabs((double)lw[(size_t)i * V + v] - ls[(size_t)i * V + v]);
			dmax = e > dmax || e != e ? e : dmax;
		}
	}
	printf("%-8s %-14s n=%-2d pos=%-4d %s", label, what, n, pos, bad ? "DIFFERS" : "bit-identical");
	if (bad)
		printf(" (%d rows, first %d, argmax %d vs %d, max |dlogit| %.3g)", bad, first, aw[first], as[first], dmax);
	printf("\n");
	CHECK(bad == 0, "%s %s: window n=%d at %d: %d of %d rows differ from decode steps", label, what, n, pos, bad, n);
	free(lw);
	free(ls);
	return bad;
}

static double rel_l2(const float *a, const float *b, size_t n)
{
	double d = 0, s = 0;
	for (size_t i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		s += (double)b[i] * b[i];
	}
	return sqrt(d / (s > 0 ? s : 1));
}

/* CPU: RMSNorm(h) * output_norm, then the LM head rows (as the CPU backend computes it). */
static void cpu_head(const struct ember_model *m, const float *h, float *logits)
{
	const int E = m->hp.n_embd;
	float *xn = malloc((size_t)E * 4);
	double ss = 0;
	for (int i = 0; i < E; i++)
		ss += (double)h[i] * h[i];
	const float scale = (float)(1.0 / sqrt(ss / E + m->hp.rms_eps));
	const float *w = m->output_norm.data;
	for (int i = 0; i < E; i++)
		xn[i] = h[i] * scale * w[i];
	const size_t rb = ember_type_bytes((int)m->output.type, E);
	for (int v = 0; v < m->hp.n_vocab; v++)
		logits[v] = ember_dot_row(m->output.type, (const uint8_t *)m->output.data + (size_t)v * rb, xn, E);
	free(xn);
}

static void check_capture(const struct ember_model *m, const int32_t *prompt, const char *label)
{
	const struct ember_backend_ops *cpu = ember_backend_find("cpu"), *cuda = ember_backend_find("cuda");
	const int L = m->hp.n_layer, E = m->hp.n_embd, V = m->hp.n_vocab, n = 16, pos = 300, NC = 3;
	const int layers[3] = {0, L / 2, L - 1};
	struct ember_backend_config cfg = {N_CTX, 0, 0, 64, layers, NC};
	struct ember_backend *be = NULL;
	MUST(cuda->create(&be, m, &cfg));
	const size_t row = (size_t)NC * E;
	float *cw = malloc(n * row * 4), *cs = malloc(n * row * 4), *cp = malloc(n * row * 4);
	int rows = 0, p0 = -1;
	MUST(cuda->forward(be, prompt, pos, 0, 0, NULL, NULL));
	MUST(cuda->forward(be, prompt + pos, n, pos, 1, NULL, NULL)); /* window */
	MUST(ember_cuda_captured_read(be, cw, n, &rows, &p0));
	CHECK(rows == n && p0 == pos, "%s: window capture holds %d rows at %d (want %d at %d)", label, rows, p0, n, pos);
	for (int i = 0; i < n; i++) { /* decode steps */
		MUST(cuda->forward(be, prompt + pos + i, 1, pos + i, 0, NULL, NULL));
		MUST(ember_cuda_captured_read(be, cs + i * row, 1, &rows, &p0));
		CHECK(rows == 1 && p0 == pos + i, "%s: step capture holds %d rows at %d", label, rows, p0);
	}
	CHECK(memcmp(cw, cs, n * row * 4) == 0, "%s: window capture differs from the decode steps' capture", label);
	/* prefill (cuBLAS) rows: a batched forward of the window's tokens with all_rows = 0 */
	MUST(cuda->forward(be, prompt + pos, n, pos, 0, NULL, NULL));
	MUST(ember_cuda_captured_read(be, cp, n, &rows, &p0));
	CHECK(rows == n && p0 == pos, "%s: prefill capture holds %d rows at %d", label, rows, p0);
	double worst = 0;
	for (int i = 0; i < n; i++)
		for (int c = 0; c < NC; c++) {
			const double e = rel_l2(cw + i * row + (size_t)c * E, cp + i * row + (size_t)c * E, (size_t)E);
			worst = e > worst ? e : worst;
		}
	printf("%-8s capture: window == decode steps (%d rows x %d layers), vs prefill rel L2 max %.2e\n", label, n, NC, worst);
	CHECK(worst <= 2e-2, "%s: window capture vs prefill capture rel L2 %.3g", label, worst);
	cuda->destroy(be);

	/* last captured layer -> CPU head vs the CPU backend's logits of the same rows */
	struct ember_backend_config ccfg = {N_CTX, 0, 0, 0, NULL, 0};
	struct ember_backend *bc = NULL;
	MUST(cpu->create(&bc, m, &ccfg));
	float *ref = malloc((size_t)(pos + n) * V * 4), *lh = malloc((size_t)V * 4);
	MUST(cpu->forward(bc, prompt, pos + n, 0, 1, ref, NULL));
	cpu->destroy(bc);
	int agree = 0;
	double kl_sum = 0;
	for (int i = 0; i < n; i++) {
		cpu_head(m, cw + i * row + (size_t)(NC - 1) * E, lh);
		const float *r = ref + (size_t)(pos + i) * V;
		double mr = -1e300, mh = -1e300, sr = 0, sh = 0, kl = 0;
		int ir = 0, ih = 0;
		for (int v = 0; v < V; v++) {
			if (r[v] > mr) { mr = r[v]; ir = v; }
			if (lh[v] > mh) { mh = lh[v]; ih = v; }
		}
		for (int v = 0; v < V; v++) {
			sr += exp(r[v] - mr);
			sh += exp(lh[v] - mh);
		}
		for (int v = 0; v < V; v++) {
			const double a = r[v] - mr - log(sr), b = lh[v] - mh - log(sh);
			kl += exp(a) * (a - b);
		}
		agree += ir == ih;
		kl_sum += kl;
	}
	printf("%-8s capture: layer %d -> cpu head vs cpu backend: top-1 %d/%d, mean KL %.2e\n", label, L - 1, agree, n, kl_sum / n);
	CHECK(agree >= 0.95 * n && kl_sum / n <= 1e-2, "%s: captured hidden state vs cpu: top-1 %d/%d, KL %.3g", label, agree, n,
	      kl_sum / n);
	free(ref);
	free(lh);
	free(cw);
	free(cs);
	free(cp);
}

static void run_model(const char *path, const char *label)
{
	const struct ember_backend_ops *cuda = ember_backend_find("cuda");
	struct ember_model *m = NULL;
	MUST(ember_model_load(&m, path));
	const int V = m->hp.n_vocab;
	int32_t prompt[PROMPT], other[16];
	for (int i = 0; i < PROMPT; i++)
		prompt[i] = (int32_t)(urand() * V) % V;
	for (int i = 0; i < 16; i++)
		other[i] = (int32_t)(urand() * V) % V;
	struct ember_backend_config cfg = {N_CTX, 0, 0, 64, NULL, 0};
	struct ember_backend *be = NULL;
	MUST(cuda->create(&be, m, &cfg));
	MUST(cuda->forward(be, prompt, PROMPT, 0, 0, NULL, NULL));
	for (size_t pi = 0; pi < sizeof(win_pos) / sizeof(win_pos[0]); pi++)
		for (size_t ni = 0; ni < sizeof(win_sizes) / sizeof(win_sizes[0]); ni++) {
			const int pos = win_pos[pi], n = win_sizes[ni];
			check_window(cuda, be, prompt + pos, n, pos, V, label, "first run");
			check_window(cuda, be, prompt + pos, n, pos, V, label, "graph replay");
		}
	/* rollback: a window at 300, then one of other tokens at 290 */
	MUST(cuda->forward(be, prompt, PROMPT, 0, 0, NULL, NULL));
	check_window(cuda, be, prompt + 300, 16, 300, V, label, "before rollback");
	check_window(cuda, be, other, 16, 290, V, label, "after rollback");
	check_window(cuda, be, other + 3, 7, 293, V, label, "after rollback");
	cuda->destroy(be);
	check_capture(m, prompt, label);
	ember_model_free(m);
}

int main(void)
{
	require_gpu_or_skip("test_cuda_verify");
	test_rng = 0x5EED5EED12345ull;
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *shapes[] = {"tiny", "tiny", "qwen3-0.6b", "qwen3-0.6b"}, *quants[] = {"q8_0", "q4_k_m", "q8_0", "q4_k_m"};
	/* Each model with the default window GEMV (one pass over the weights where the tokens fit,
	 * the chain split where they do not) and with the chain split for every GEMV but the head; with
	 * the shared-K/V window attention (the default) and one CTA per token; and with 2 key splits,
	 * where the windows at 500 straddle a change of chunk size (keys 501..516: chunks of 256 up to
	 * 512 keys, of 384 after), so CTAs of 4 tokens make two passes, and those at 120 a change of
	 * active split count (1 up to 128 keys, 2 after). */
	const struct {
		const char *win_split, *win_attn, *attn_split, *win_pdl;
	} cfgs[] = {{"1", "shared", NULL, "0"}, {"2", "shared", NULL, "1"}, {"1", "token", NULL, "0"}, {"1", "shared", "2", "1"}};
	for (int i = 0; i < 4; i++) {
		char path[256], label[96];
		snprintf(path, sizeof(path), "%s/verify-%s-%s-%d.gguf", dir, shapes[i], quants[i], (int)getpid());
		struct ember_gen_config gc = {shapes[i], quants[i], 7, 0, NULL, NULL};
		MUST(ember_gen_write(&gc, path));
		for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
			setenv("EMBER_WIN_SPLIT", cfgs[c].win_split, 1);
			setenv("EMBER_WIN_ATTN", cfgs[c].win_attn, 1);
			setenv("EMBER_WIN_PDL", cfgs[c].win_pdl, 1);
			if (cfgs[c].attn_split)
				setenv("EMBER_ATTN_SPLIT", cfgs[c].attn_split, 1);
			else
				unsetenv("EMBER_ATTN_SPLIT");
			snprintf(label, sizeof(label), "%s/%s/split%s/%s/kv-split%s/pdl%s", strcmp(shapes[i], "tiny") ? "0.6b" : "tiny",
			         quants[i], cfgs[c].win_split, cfgs[c].win_attn, cfgs[c].attn_split ? cfgs[c].attn_split : "auto",
			         cfgs[c].win_pdl);
			run_model(path, label);
		}
		unlink(path);
	}
	unsetenv("EMBER_WIN_SPLIT");
	unsetenv("EMBER_WIN_ATTN");
	unsetenv("EMBER_WIN_PDL");
	unsetenv("EMBER_ATTN_SPLIT");
	return check_exit("test_cuda_verify");
}
