/*
 * test_kernels.c - test_cuda_kernels: every CUDA op against a CPU reference on fresh random
 * inputs, outputs poisoned (0xFF = NaN) before each launch, with an explicit tolerance per check.
 * Reference weights come from engine/quant.h (quantize, then dequantize in ggml's formulas); the
 * references accumulate in double. The decode GEMV's checks (plain and streaming) are in
 * test_kernels_gemv.c. Exits 77 (CTest skip) when no CUDA device is present.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.cuh"
#include "attn_decode.cuh"
#include "attn_prefill.cuh"
#include "cuda_testutil.h"
#include "embed.cuh"
#include "gemm.cuh"
#include "gemv.cuh"
#include "layout.cuh"
#include "mat_testutil.h"
#include "quant.h"
#include "repack.cuh"
#include "rows.cuh"

int test_kernels_gemv(void); /* test_kernels_gemv.c: the GEMV checks, returns failures */

static void test_dequant_embed(int type, int rows, int cols)
{
	struct mat m = make_mat(type, rows, cols);
	const size_t rb = ember_type_bytes(type, cols);
	void *draw = dev_upload(m.raw, (size_t)rows * rb);
	uint16_t *dh = dev_poison((size_t)rows * cols * 2), *h = malloc((size_t)rows * cols * 2);
	MUST(ember_dequant_f16(dh, type, draw, rows, cols, 0));
	dev_download(h, dh, (size_t)rows * cols * 2);
	int bad = 0;
	for (size_t i = 0; i < (size_t)rows * cols; i++)
		bad += h[i] != ember_f32_to_fp16(m.deq[i]);
	CHECK(bad == 0, "dequant_f16 %s: %d of %zu values differ from fp16(CPU dequant)", ember_type_name((enum ember_type)type), bad,
	      (size_t)rows * cols);
	const int32_t toks[4] = {3, 0, rows - 1, -1};
	int32_t *dt = dev_upload(toks, sizeof(toks));
	float *de = dev_poison(4 * (size_t)cols * 4), *e = malloc(4 * (size_t)cols * 4);
	MUST(ember_embed_rows(de, type, draw, cols, rows, dt, 4, 0));
	dev_download(e, de, 4 * (size_t)cols * 4);
	int bad_e = 0;
	for (int t = 0; t < 4; t++)
		for (int k = 0; k < cols; k++) {
			const float want = toks[t] >= 0 ? m.deq[(size_t)toks[t] * cols + k] : 0.0f;
			bad_e += memcmp(&e[(size_t)t * cols + k], &want, 4) != 0;
		}
	printf("dequant_f16 / embed %-5s: %d / %d mismatches\n", ember_type_name((enum ember_type)type), bad, bad_e);
	CHECK(bad_e == 0, "embed %s: %d values not bit-identical to the CPU", ember_type_name((enum ember_type)type), bad_e);
	cudaFree(draw);
	cudaFree(dh);
	cudaFree(dt);
	cudaFree(de);
	free(h);
	free(e);
	free_mat(&m);
}

/* ---- attention ---- */

static void rope_tables(int n_ctx, int D, float **c, float **s)
{
	*c = malloc((size_t)n_ctx * D / 2 * 4);
	*s = malloc((size_t)n_ctx * D / 2 * 4);
	for (int p = 0; p < n_ctx; p++)
		for (int i = 0; i < D / 2; i++) {
			const double ang = (double)p * pow(1e6, -2.0 * i / D);
			(*c)[(size_t)p * D / 2 + i] = (float)cos(ang);
			(*s)[(size_t)p * D / 2 + i] = (float)sin(ang);
		}
}

static void norm_rope(const float *x, const float *w, int D, const float *cs, const float *sn, double *out)
{
	double ss = 0;
	for (int i = 0; i < D; i++)
		ss += (double)x[i] * x[i];
	const double sc = 1.0 / sqrt(ss / D + 1e-6);
	double t[256];
	for (int i = 0; i < D; i++)
		t[i] = x[i] * sc * w[i];
	for (int i = 0; i < D / 2; i++) {
		out[i] = t[i] * cs[i] - t[i + D / 2] * sn[i];
		out[i + D / 2] = t[i + D / 2] * cs[i] + t[i] * sn[i];
	}
}

/* out[D] = softmax(q . K[0..n) / sqrt(D)) V, keys/values as fp16 bits [n][D]. */
static void attn_ref(const double *q, const uint16_t *K, const uint16_t *V, int n, int D, double *out)
{
	double *s = malloc((size_t)n * sizeof(double)), mx = -1e300, l = 0;
	for (int p = 0; p < n; p++) {
		double acc = 0;
		for (int d = 0; d < D; d++)
			acc += q[d] * ember_fp16_to_f32(K[(size_t)p * D + d]);
		s[p] = acc / sqrt((double)D);
		mx = s[p] > mx ? s[p] : mx;
	}
	for (int d = 0; d < D; d++)
		out[d] = 0;
	for (int p = 0; p < n; p++) {
		const double e = exp(s[p] - mx);
		l += e;
		for (int d = 0; d < D; d++)
			out[d] += e * ember_fp16_to_f32(V[(size_t)p * D + d]);
	}
	for (int d = 0; d < D; d++)
		out[d] /= l;
	free(s);
}

/* Decode attention (lean 0: the split-KV kernel, 1: EMBER_ATTN_LEAN) at position pos. The cache
 * rows from pos on are NaN, so the lean kernel's early loads of row pos must be replaced by the
 * appended row. Launched twice on the same counters: they must be zero after each launch and the
 * second output bit-identical. The lean kernel must leave the scratch of splits without keys (all
 * of it when one split holds every key) unwritten. */
static void test_attn_decode(int D, int G, int pos, int n_split, int lean)
{
	const int n_kv = 2, n_head = n_kv * G, n_ctx = 1200;
	const size_t cache_elems = (size_t)n_kv * n_ctx * D;
	uint16_t *K = malloc(cache_elems * 2), *V = malloc(cache_elems * 2);
	for (size_t i = 0; i < cache_elems; i++) {
		const size_t p = (i / D) % n_ctx;
		K[i] = p < (size_t)pos ? ember_f32_to_fp16(nrand()) : 0xFFFF; /* NaN beyond: must not be read */
		V[i] = p < (size_t)pos ? ember_f32_to_fp16(nrand()) : 0xFFFF;
	}
	float *q = malloc((size_t)n_head * D * 4), *k = malloc((size_t)n_kv * D * 4), *v = malloc((size_t)n_kv * D * 4);
	float qn[128], kn[128];
	for (int i = 0; i < n_head * D; i++)
		q[i] = nrand();
	for (int i = 0; i < n_kv * D; i++) {
		k[i] = nrand();
		v[i] = nrand();
	}
	for (int i = 0; i < D; i++) {
		qn[i] = 1.5f + 0.1f * nrand();
		kn[i] = 1.5f + 0.1f * nrand();
	}
	float *cs, *sn;
	rope_tables(n_ctx, D, &cs, &sn);
	struct ember_decode_state st = {0, pos, 0, 0, 0};
	struct ember_attn_args a;
	memset(&a, 0, sizeof(a));
	a.head_dim = D;
	a.n_head = n_head;
	a.n_kv = n_kv;
	a.n_ctx = n_ctx;
	a.k_cache = dev_upload(K, cache_elems * 2);
	a.v_cache = dev_upload(V, cache_elems * 2);
	a.out = dev_poison((size_t)n_head * D * 2);
	a.q = dev_upload(q, (size_t)n_head * D * 4);
	a.k = dev_upload(k, (size_t)n_kv * D * 4);
	a.v = dev_upload(v, (size_t)n_kv * D * 4);
	a.q_norm = dev_upload(qn, D * 4);
	a.k_norm = dev_upload(kn, D * 4);
	a.eps = 1e-6f;
	a.rope_cos = dev_upload(cs, (size_t)n_ctx * D / 2 * 4);
	a.rope_sin = dev_upload(sn, (size_t)n_ctx * D / 2 * 4);
	a.state = dev_upload(&st, sizeof(st));
	a.n_split = n_split;
	a.part_o = dev_poison((size_t)n_kv * n_split * G * D * 4);
	a.part_ml = dev_poison((size_t)n_kv * n_split * G * 2 * 4);
	a.counters = dev_poison(n_kv * 4);
	a.lean = lean;
	a.pdl = lean; /* the lean kernel's programmatic launch (no predecessor here: the wait returns at once) */
	MUST(cudaMemset(a.counters, 0, n_kv * 4));
	MUST(ember_attn_decode(&a, 0));
	const size_t out_bytes = (size_t)n_head * D * 2;
	const size_t po_floats = (size_t)n_kv * n_split * G * D, pml_floats = (size_t)n_kv * n_split * G * 2;
	uint16_t *out = malloc(out_bytes), *out2 = malloc(out_bytes), *K2 = malloc(cache_elems * 2), *V2 = malloc(cache_elems * 2);
	uint32_t *po = malloc(po_floats * 4), *pml = malloc(pml_floats * 4);
	uint32_t counters[2], counters2[2];
	dev_download(out, a.out, out_bytes);
	dev_download(K2, a.k_cache, cache_elems * 2);
	dev_download(V2, a.v_cache, cache_elems * 2);
	dev_download(counters, a.counters, sizeof(counters));
	dev_download(po, a.part_o, po_floats * 4);
	dev_download(pml, a.part_ml, pml_floats * 4);
	MUST(cudaMemset(a.out, 0xFF, out_bytes));
	MUST(ember_attn_decode(&a, 0));
	dev_download(out2, a.out, out_bytes);
	dev_download(counters2, a.counters, sizeof(counters2));
	/* Splits at or past n_active hold no key (the kernels' chunking); lean writes no scratch there. */
	const int n_keys = pos + 1;
	int chunk = (n_keys + n_split - 1) / n_split;
	chunk = (chunk + 127) / 128 * 128;
	const int n_active = (n_keys + chunk - 1) / chunk < n_split ? (n_keys + chunk - 1) / chunk : n_split;
	int scratch_written = 0;
	for (int h = 0; lean && h < n_kv; h++)
		for (int sp = n_active == 1 ? 0 : n_active; sp < n_split; sp++) {
			for (int i = 0; i < G * D; i++)
				scratch_written += po[((size_t)h * n_split + sp) * G * D + i] != 0xFFFFFFFFu;
			for (int i = 0; i < G * 2; i++)
				scratch_written += pml[((size_t)h * n_split + sp) * G * 2 + i] != 0xFFFFFFFFu;
		}
	/* Reference: append the new key/value, then attend over positions 0..pos. */
	double worst = 0, worst_kv = 0, ref[128], qr[128], kr[128];
	for (int h = 0; h < n_kv; h++) {
		norm_rope(k + (size_t)h * D, kn, D, cs + (size_t)pos * D / 2, sn + (size_t)pos * D / 2, kr);
		for (int d = 0; d < D; d++) {
			const size_t at = ((size_t)h * n_ctx + pos) * D + d;
			worst_kv = fmax(worst_kv, fabs(ember_fp16_to_f32(K2[at]) - kr[d]) / (fabs(kr[d]) + 1e-2));
			worst_kv = fmax(worst_kv, fabs(ember_fp16_to_f32(V2[at]) - v[(size_t)h * D + d]) / (fabs(v[(size_t)h * D + d]) + 1e-2));
			K[at] = ember_f32_to_fp16((float)kr[d]);
			V[at] = ember_f32_to_fp16(v[(size_t)h * D + d]);
		}
		for (int g = 0; g < G; g++) {
			const int hq = h * G + g;
			norm_rope(q + (size_t)hq * D, qn, D, cs + (size_t)pos * D / 2, sn + (size_t)pos * D / 2, qr);
			attn_ref(qr, K + (size_t)h * n_ctx * D, V + (size_t)h * n_ctx * D, pos + 1, D, ref);
			for (int d = 0; d < D; d++) {
				const double e = fabs(ember_fp16_to_f32(out[(size_t)hq * D + d]) - ref[d]);
				worst = isnan(e) ? INFINITY : fmax(worst, e);
			}
		}
	}
	printf("attn decode%s D=%d G=%d pos=%d splits=%d (%d active): max abs err %.2e, appended K/V rel err %.2e\n", lean ? " lean" : "",
	       D, G, pos, n_split, n_active, worst, worst_kv);
	CHECK(worst < 4e-3, "attn decode lean=%d D=%d G=%d pos=%d splits=%d: err %.3g", lean, D, G, pos, n_split, worst);
	CHECK(worst_kv < 2e-3, "attn decode lean=%d appended K/V wrong (rel %.3g)", lean, worst_kv);
	CHECK(counters[0] == 0 && counters[1] == 0, "lean=%d split counters not reset: %u %u", lean, counters[0], counters[1]);
	CHECK(counters2[0] == 0 && counters2[1] == 0, "lean=%d split counters not reset by a second launch: %u %u", lean, counters2[0],
	      counters2[1]);
	CHECK(memcmp(out, out2, out_bytes) == 0, "attn decode lean=%d D=%d G=%d pos=%d splits=%d: second launch differs", lean, D, G, pos,
	      n_split);
	CHECK(scratch_written == 0, "attn decode lean D=%d G=%d pos=%d splits=%d: %d scratch values written by inactive splits", D, G, pos,
	      n_split, scratch_written);
	void *bufs[] = {a.k_cache, a.v_cache, a.out, (void *)a.q, (void *)a.k, (void *)a.v, (void *)a.q_norm, (void *)a.k_norm,
	                (void *)a.rope_cos, (void *)a.rope_sin, (void *)a.state, a.part_o, a.part_ml, a.counters};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		cudaFree(bufs[i]);
	free(K);
	free(V);
	free(K2);
	free(V2);
	free(q);
	free(k);
	free(v);
	free(cs);
	free(sn);
	free(out);
	free(out2);
	free(po);
	free(pml);
}

/* Multi-token attention: the flash (mma) kernel and the per-token fallback against the CPU. */
static void test_attn_prefill(int D, int G, int T, int pos0, int use_fa)
{
	const int n_kv = 2, n_head = n_kv * G, n_ctx = 512, n_keys = pos0 + T;
	const size_t cache_elems = (size_t)n_kv * n_ctx * D;
	uint16_t *K = malloc(cache_elems * 2), *V = malloc(cache_elems * 2), *Q = malloc((size_t)T * n_head * D * 2);
	for (size_t i = 0; i < cache_elems; i++) {
		const int p = (int)((i / D) % n_ctx);
		K[i] = p < n_keys ? ember_f32_to_fp16(nrand()) : 0xFFFF;
		V[i] = p < n_keys ? ember_f32_to_fp16(nrand()) : 0xFFFF;
	}
	for (size_t i = 0; i < (size_t)T * n_head * D; i++)
		Q[i] = ember_f32_to_fp16(nrand());
	void *dK = dev_upload(K, cache_elems * 2), *dV = dev_upload(V, cache_elems * 2), *dQ = dev_upload(Q, (size_t)T * n_head * D * 2);
	void *dO = dev_poison((size_t)T * n_head * D * 2);
	if (use_fa) {
		struct ember_fa_args fa = {dQ, dK, dV, dO, T, pos0, n_head, n_kv, n_ctx, D};
		MUST(ember_attn_prefill(&fa, 0));
	} else {
		struct ember_attn_args a;
		memset(&a, 0, sizeof(a));
		a.head_dim = D;
		a.n_head = n_head;
		a.n_kv = n_kv;
		a.n_ctx = n_ctx;
		a.k_cache = dK;
		a.v_cache = dV;
		a.out = dO;
		a.q_prepped = dQ;
		a.n_tokens = T;
		a.pos0 = pos0;
		MUST(ember_attn_decode(&a, 0));
	}
	uint16_t *O = malloc((size_t)T * n_head * D * 2);
	dev_download(O, dO, (size_t)T * n_head * D * 2);
	double worst = 0, qd[128], ref[128];
	for (int t = 0; t < T; t++)
		for (int hq = 0; hq < n_head; hq++) {
			for (int d = 0; d < D; d++)
				qd[d] = ember_fp16_to_f32(Q[((size_t)t * n_head + hq) * D + d]);
			const int h = hq / G;
			attn_ref(qd, K + (size_t)h * n_ctx * D, V + (size_t)h * n_ctx * D, pos0 + t + 1, D, ref);
			for (int d = 0; d < D; d++) {
				const double e = fabs(ember_fp16_to_f32(O[((size_t)t * n_head + hq) * D + d]) - ref[d]);
				worst = isnan(e) ? INFINITY : fmax(worst, e);
			}
		}
	printf("attn %s D=%d G=%d T=%d pos0=%d: max abs err %.2e\n", use_fa ? "prefill(mma)" : "per-token", D, G, T, pos0, worst);
	CHECK(worst < (use_fa ? 8e-3 : 4e-3), "attn %s D=%d T=%d pos0=%d: err %.3g", use_fa ? "flash" : "per-token", D, T, pos0, worst);
	cudaFree(dK);
	cudaFree(dV);
	cudaFree(dQ);
	cudaFree(dO);
	free(K);
	free(V);
	free(Q);
	free(O);
}

static void test_rows(void)
{
	/* rmsnorm rows */
	const int R = 3, N = 300;
	float x[3 * 300], w[300], xn[300];
	for (int i = 0; i < R * N; i++)
		x[i] = nrand() * 2;
	for (int i = 0; i < N; i++)
		w[i] = 1 + 0.1f * nrand();
	float *dx = dev_upload(x, sizeof(x)), *dw = dev_upload(w, sizeof(w));
	uint16_t *dout = dev_poison(R * N * 2), out[3 * 300];
	MUST(ember_rmsnorm_rows(dout, dx, dw, R, N, 1e-6f, 0));
	dev_download(out, dout, sizeof(out));
	double worst = 0;
	for (int r = 0; r < R; r++) {
		rms_ref(x + r * N, w, N, 1e-6f, xn);
		for (int i = 0; i < N; i++)
			worst = fmax(worst, fabs(ember_fp16_to_f32(out[r * N + i]) - xn[i]) / (fabs(xn[i]) + 1e-3));
	}
	CHECK(worst < 2e-3, "rmsnorm rows: rel err %.3g", worst);

	/* swiglu rows */
	const int F = 100;
	float gu[2 * 2 * 100];
	for (int i = 0; i < 400; i++)
		gu[i] = nrand() * 3;
	float *dgu = dev_upload(gu, sizeof(gu));
	uint16_t *dh = dev_poison(2 * F * 2), h[200];
	MUST(ember_swiglu_rows(dh, dgu, 2, F, 0));
	dev_download(h, dh, sizeof(h));
	double w2 = 0;
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < F; i++) {
			const double g = gu[r * 2 * F + i], u = gu[r * 2 * F + F + i], ref = g / (1 + exp(-g)) * u;
			w2 = fmax(w2, fabs(ember_fp16_to_f32(h[r * F + i]) - ref) / (fabs(ref) + 1e-3));
		}
	CHECK(w2 < 2e-3, "swiglu rows: rel err %.3g", w2);

	printf("rows: rmsnorm rel err %.2e, swiglu rel err %.2e\n", worst, w2);

	/* q/k norm + rope rows with the cache append */
	const int D = 64, T = 5, pos0 = 3, nh = 4, nkv = 2, n_ctx = 16;
	const int width = (nh + 2 * nkv) * D;
	float *qkv = malloc((size_t)T * width * 4), qn[64], kn[64], *cs, *sn;
	for (int i = 0; i < T * width; i++)
		qkv[i] = nrand();
	for (int i = 0; i < D; i++) {
		qn[i] = 1.2f + 0.1f * nrand();
		kn[i] = 0.9f + 0.1f * nrand();
	}
	rope_tables(n_ctx, D, &cs, &sn);
	struct ember_qk_rope_args ra = {dev_upload(qkv, (size_t)T * width * 4), dev_upload(qn, sizeof(qn)), dev_upload(kn, sizeof(kn)),
	                                1e-6f, dev_upload(cs, (size_t)n_ctx * D / 2 * 4), dev_upload(sn, (size_t)n_ctx * D / 2 * 4),
	                                T, pos0, nh, nkv, D, n_ctx, dev_poison((size_t)T * nh * D * 2),
	                                dev_poison((size_t)nkv * n_ctx * D * 2), dev_poison((size_t)nkv * n_ctx * D * 2)};
	MUST(ember_qk_norm_rope_rows(&ra, 0));
	uint16_t *qo = malloc((size_t)T * nh * D * 2), *kc = malloc((size_t)nkv * n_ctx * D * 2), *vc = malloc((size_t)nkv * n_ctx * D * 2);
	dev_download(qo, ra.q_out, (size_t)T * nh * D * 2);
	dev_download(kc, ra.k_cache, (size_t)nkv * n_ctx * D * 2);
	dev_download(vc, ra.v_cache, (size_t)nkv * n_ctx * D * 2);
	double w3 = 0, ref[64];
	for (int t = 0; t < T; t++) {
		const int p = pos0 + t;
		for (int hh = 0; hh < nh + 2 * nkv; hh++) {
			const float *src = qkv + (size_t)t * width + hh * D;
			const uint16_t *got;
			if (hh < nh) {
				norm_rope(src, qn, D, cs + p * D / 2, sn + p * D / 2, ref);
				got = qo + ((size_t)t * nh + hh) * D;
			} else if (hh < nh + nkv) {
				norm_rope(src, kn, D, cs + p * D / 2, sn + p * D / 2, ref);
				got = kc + ((size_t)(hh - nh) * n_ctx + p) * D;
			} else {
				for (int d = 0; d < D; d++)
					ref[d] = src[d];
				got = vc + ((size_t)(hh - nh - nkv) * n_ctx + p) * D;
			}
			for (int d = 0; d < D; d++)
				w3 = fmax(w3, fabs(ember_fp16_to_f32(got[d]) - ref[d]) / (fabs(ref[d]) + 1e-2));
		}
	}
	printf("rows: q/k norm + rope + append rel err %.2e\n", w3);
	CHECK(w3 < 2e-3, "qk norm rope rows: rel err %.3g", w3);
	cudaFree(dx);
	cudaFree(dw);
	cudaFree(dout);
	cudaFree(dgu);
	cudaFree(dh);
	free(qkv);
	free(cs);
	free(sn);
	free(qo);
	free(kc);
	free(vc);
}

/* The prefill/draft order, stated plainly: largest value, first index on ties, NaN skipped. */
static int ref_argmax_rows(const float *row, int n)
{
	int bi = -1;
	for (int i = 0; i < n; i++)
		if (!isnan(row[i]) && (bi < 0 || row[i] > row[bi]))
			bi = i;
	return bi < 0 ? 0 : bi;
}

/* The decode LM head's order (gemv_core.cuh argmax_key): the float's bits made monotone, so +0
 * beats -0 and a NaN ranks by its sign and payload; the lowest index wins a tie. */
static int ref_argmax_keys(const float *row, int n)
{
	uint64_t best = 0;
	for (int i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &row[i], 4);
		u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
		const uint64_t k = ((uint64_t)u << 32) | (0xFFFFFFFFu - (uint32_t)i);
		best = k > best ? k : best;
	}
	return (int)(0xFFFFFFFFu - (uint32_t)(best & 0xFFFFFFFFu));
}

/* Both argmax orders against the references, over row lengths that leave the rows misaligned for
 * the vector loads and over a vocabulary-sized row, with planted ties, zeros of both signs, NaNs,
 * infinities and a row of NaNs. */
static void test_argmax(int C, int ld)
{
	const int R = 9;
	float *lg = malloc((size_t)R * ld * 4);
	for (size_t i = 0; i < (size_t)R * ld; i++)
		lg[i] = nrand();
	float *r = lg;
	r[C - 1] = 50; /* row 0: the last column */
	r = lg + (size_t)1 * ld;
	r[C / 3] = 60; /* row 1: a tie, the lower index wins */
	r[C / 2] = 60;
	r = lg + (size_t)2 * ld;
	for (int i = 0; i < C; i++)
		r[i] = -1.0f - fabsf(r[i]);
	r[C / 4] = -0.0f; /* row 2: -0 before +0: equal for rows, +0 for keys */
	r[C - 2 > C / 4 ? C - 2 : C / 4] = 0.0f;
	r = lg + (size_t)3 * ld;
	r[1] = NAN; /* row 3: a NaN next to the maximum */
	r[2] = 70;
	r = lg + (size_t)4 * ld;
	for (int i = 0; i < C; i++)
		r[i] = NAN; /* row 4: all NaN */
	r = lg + (size_t)5 * ld;
	for (int i = 0; i < C; i++)
		r[i] = -INFINITY; /* row 5: all -inf, the first index */
	r = lg + (size_t)6 * ld;
	r[C / 5] = INFINITY; /* row 6: +inf */
	r = lg + (size_t)7 * ld;
	r[0] = 40; /* row 7: the first column */
	/* row 8: the random values as drawn */
	float *dl = dev_upload(lg, (size_t)R * ld * 4);
	int32_t *da = dev_poison(R * 4), am[9];
	int bad = 0;
	if (ld == C) {
		MUST(ember_argmax_rows(da, dl, R, C, 0));
		dev_download(am, da, sizeof(am));
		for (int t = 0; t < R; t++)
			if (am[t] != ref_argmax_rows(lg + (size_t)t * ld, C)) {
				fprintf(stderr, "  argmax rows C=%d row %d: %d, reference %d\n", C, t, am[t], ref_argmax_rows(lg + (size_t)t * ld, C));
				bad++;
			}
	}
	MUST(ember_argmax_keys(da, dl, R, C, ld, 0));
	dev_download(am, da, sizeof(am));
	for (int t = 0; t < R; t++)
		if (am[t] != ref_argmax_keys(lg + (size_t)t * ld, C)) {
			fprintf(stderr, "  argmax keys C=%d ld=%d row %d: %d, reference %d\n", C, ld, t, am[t], ref_argmax_keys(lg + (size_t)t * ld, C));
			bad++;
		}
	CHECK(bad == 0, "argmax C=%d ld=%d: %d rows differ from the reference", C, ld, bad);
	printf("argmax C=%d ld=%d: %d rows equal the references\n", C, ld, R);
	cudaFree(dl);
	cudaFree(da);
	free(lg);
}

static void test_gemm(void)
{
	const int n_out = 96, n_tok = 33, k = 256;
	float *w = malloc(n_out * k * 4), *x = malloc(n_tok * k * 4), *y0 = malloc(n_tok * n_out * 4), *y = malloc(n_tok * n_out * 4);
	for (int i = 0; i < n_out * k; i++)
		w[i] = nrand() * 0.1f;
	for (int i = 0; i < n_tok * k; i++)
		x[i] = nrand();
	for (int i = 0; i < n_tok * n_out; i++)
		y0[i] = nrand();
	float *wr = malloc(n_out * k * 4), *xr = malloc(n_tok * k * 4);
	uint16_t *wh = to_half(w, n_out * k, wr), *xh = to_half(x, n_tok * k, xr);
	void *h = NULL;
	MUST(ember_gemm_create(&h, 0));
	void *dw = dev_upload(wh, n_out * k * 2), *dxh = dev_upload(xh, n_tok * k * 2);
	float *dy = dev_upload(y0, n_tok * n_out * 4);
	MUST(ember_gemm_f16(h, dw, dxh, dy, n_out, n_tok, k, n_out, 1.0f));
	dev_download(y, dy, n_tok * n_out * 4);
	double worst = 0;
	for (int t = 0; t < n_tok; t++)
		for (int r = 0; r < n_out; r++) {
			double acc = y0[t * n_out + r], mag = fabs(y0[t * n_out + r]);
			for (int i = 0; i < k; i++) {
				acc += (double)wr[r * k + i] * xr[t * k + i];
				mag += fabs((double)wr[r * k + i] * xr[t * k + i]);
			}
			worst = fmax(worst, fabs(y[t * n_out + r] - acc) / mag);
		}
	printf("gemm f16 (beta 1): max rel err %.2e\n", worst);
	CHECK(worst < 1e-4, "gemm: rel err %.3g", worst);
	ember_gemm_destroy(h);
	cudaFree(dw);
	cudaFree(dxh);
	cudaFree(dy);
	free(w);
	free(x);
	free(y0);
	free(y);
	free(wr);
	free(xr);
	free(wh);
	free(xh);
}

static void test_errors(void)
{
	/* Launchers reject bad shapes with an error, not a crash. */
	struct ember_gemv_args a;
	memset(&a, 0, sizeof(a));
	CHECK(ember_gemv(&a, 0) != 0 && strstr(ember_error_last(), "precondition"), "gemv accepted an empty launch");
	struct ember_fa_args fa = {0};
	fa.head_dim = 96;
	CHECK(ember_attn_prefill(&fa, 0) != 0, "flash attention accepted NULL buffers");
}

int main(void)
{
	require_gpu_or_skip("test_cuda_kernels");
	const int types[] = {EMBER_T_Q8_0, EMBER_T_Q4_K, EMBER_T_Q6_K};
	for (int i = 0; i < 3; i++)
		test_dequant_embed(types[i], 20, types[i] == EMBER_T_Q8_0 ? 320 : 512);
	test_dequant_embed(EMBER_T_F16, 20, 200);
	test_dequant_embed(EMBER_T_BF16, 20, 200);
	check_failures += test_kernels_gemv(); /* test_kernels_gemv.c: its own count */
	for (int lean = 0; lean <= 1; lean++) {
		test_attn_decode(128, 4, 0, 33, lean);    /* one active split of 33 */
		test_attn_decode(128, 4, 100, 33, lean);  /* one active split, several warps */
		test_attn_decode(128, 4, 127, 33, lean);  /* last key of the first chunk: still one split */
		test_attn_decode(128, 4, 128, 33, lean);  /* first key of the second chunk: two splits, one key in the second */
		test_attn_decode(128, 4, 1100, 33, lean); /* 9 active splits of 33 */
		test_attn_decode(128, 8, 700, 33, lean);
		test_attn_decode(128, 1, 300, 2, lean);
		test_attn_decode(128, 2, 99, 1, lean);
		test_attn_decode(64, 2, 517, 5, lean);
		test_attn_decode(64, 8, 1199, 3, lean);   /* several batches per warp, last cache row */
		test_attn_decode(64, 1, 31, 4, lean);
	}
	test_attn_prefill(128, 4, 150, 70, 1);
	test_attn_prefill(64, 2, 64, 0, 1);
	test_attn_prefill(128, 2, 33, 200, 1);
	test_attn_prefill(128, 4, 40, 10, 0);
	test_rows();
	test_argmax(5000, 5000);
	test_argmax(5001, 5001);
	test_argmax(7, 7);
	test_argmax(151936, 151936);
	test_argmax(5001, 5003);
	test_gemm();
	test_errors();
	return check_exit("test_cuda_kernels");
}
