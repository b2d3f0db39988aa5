/*
 * test_kernels_gemv.c - the decode GEMV part of test_cuda_kernels (kept apart for size): the plain
 * kernel against dequantize-then-dot for every weight type, tiled and raw, with its fused inputs
 * and epilogues; and the streaming kernel (several warp counts, ring depths and CTA caps) against
 * the plain kernel (bit-identical with 4 warps, repeatable), with many row tiles per CTA.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"
#include "gemv.cuh"
#include "layout.cuh"
#include "mat_testutil.h"
#include "quant.h"

int test_kernels_gemv(void);

/* ---- streaming GEMV (ember_gemv_args.streaming): warps, ring depth, CTAs per SM ---- */

struct stream_setting {
	int warps, ring, ctas;
};
static const struct stream_setting stream_settings[] = {{4, 2, 0}, {4, 3, 1}, {8, 4, 0}, {8, 8, 1}, {8, 2, 2}, {4, 6, 3}};
#define N_STREAM_SETTINGS ((int)(sizeof(stream_settings) / sizeof(stream_settings[0])))

/* Switches a to streaming setting i (i < 0: the plain kernel). */
static void stream_set(struct ember_gemv_args *a, int i)
{
	a->streaming = i >= 0;
	a->stream_warps = i >= 0 ? stream_settings[i].warps : 0;
	a->stream_ring = i >= 0 ? stream_settings[i].ring : 0;
	a->stream_ctas = i >= 0 ? stream_settings[i].ctas : 0;
}

static const char *stream_name(int i)
{
	static char buf[48];
	if (i < 0)
		return "off";
	snprintf(buf, sizeof(buf), "W%d R%d C%d", stream_settings[i].warps, stream_settings[i].ring, stream_settings[i].ctas);
	return buf;
}

/* A launch over k columns of x: fp16, or fp32 that the kernel RMS-normalizes with norm_w (eps 1e-6)
 * when norm_w is set; epilogue epi; streaming setting stream_i (-1: the plain kernel). The caller
 * adds the segments and the epilogue's outputs. */
static struct ember_gemv_args gemv_test_args(int stream_i, const void *x, const float *norm_w, int k, int epi)
{
	struct ember_gemv_args a;
	memset(&a, 0, sizeof(a));
	stream_set(&a, stream_i);
	a.k = k;
	a.x = x;
	a.in_mode = norm_w ? EMBER_GEMV_IN_RMS : EMBER_GEMV_IN_F16;
	a.norm_w = norm_w;
	a.eps = 1e-6f;
	a.epi = epi;
	return a;
}

static void test_gemv_store(int type, int tiled, int rows, int cols)
{
	struct mat m = make_mat(type, rows, cols);
	float *x = malloc((size_t)cols * 4), *xr = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4);
	for (int k = 0; k < cols; k++)
		x[k] = nrand();
	uint16_t *xh = to_half(x, cols, xr);
	void *dw = dev_mat(&m, tiled), *dx = dev_upload(xh, (size_t)cols * 2);
	float *dy = dev_poison((size_t)rows * 4);
	struct ember_gemv_args a = gemv_test_args(-1, dx, NULL, cols, EMBER_GEMV_STORE);
	a.seg[0] = (struct ember_gemv_seg){dw, type, tiled, rows, dy};
	a.n_seg = 1;
	MUST(ember_gemv(&a, 0));
	dev_download(y, dy, (size_t)rows * 4);
	double worst = 0;
	for (int r = 0; r < rows; r++) {
		double mag, ref = ref_dot(&m, r, xr, &mag);
		const double err = fabs(y[r] - ref) / (mag + 1e-12);
		if (!(err <= worst))
			worst = isnan(err) ? INFINITY : (err > worst ? err : worst);
	}
	printf("gemv %-5s %-6s %3dx%-4d store: max rel err %.2e\n", ember_type_name((enum ember_type)type),
	       tiled ? "tiled" : "raw", rows, cols, worst);
	CHECK(worst < 1e-4, "gemv %s %s: rel err %.3g >= 1e-4", ember_type_name((enum ember_type)type), tiled ? "tiled" : "raw", worst);

	float *ys = malloc((size_t)rows * 4), *ys2 = malloc((size_t)rows * 4);

	/* Streaming: with 4 warps the fp32 additions happen in the plain kernel's order (bit-identical);
	 * with 8 the warps' K tiles interleave differently. Raw weights fall back to the plain kernel. */
	double worst_stream = 0;
	int same4 = 1;
	for (int i = 0; i < N_STREAM_SETTINGS; i++) {
		stream_set(&a, i);
		MUST(cudaMemset(dy, 0xFF, (size_t)rows * 4));
		MUST(ember_gemv(&a, 0));
		dev_download(ys, dy, (size_t)rows * 4);
		MUST(cudaMemset(dy, 0xFF, (size_t)rows * 4));
		MUST(ember_gemv(&a, 0));
		dev_download(ys2, dy, (size_t)rows * 4);
		CHECK(memcmp(ys, ys2, (size_t)rows * 4) == 0, "gemv %s streaming %s: two runs differ",
		      ember_type_name((enum ember_type)type), stream_name(i));
		if (stream_settings[i].warps == 4 || !tiled)
			same4 &= memcmp(ys, y, (size_t)rows * 4) == 0;
		for (int r = 0; r < rows; r++) {
			double mag;
			(void)ref_dot(&m, r, xr, &mag);
			const double err = fabs((double)ys[r] - y[r]) / (mag + 1e-12);
			worst_stream = isnan(err) ? INFINITY : (err > worst_stream ? err : worst_stream);
		}
	}
	stream_set(&a, -1);
	printf("gemv %-5s %-6s %3dx%-4d streaming (%d settings): max rel diff to plain %.2e, repeatable, 4 warps %s\n",
	       ember_type_name((enum ember_type)type), tiled ? "tiled" : "raw", rows, cols, N_STREAM_SETTINGS, worst_stream,
	       same4 ? "bit-identical" : "DIFFER");
	CHECK(same4, "gemv %s %s streaming with 4 warps is not bit-identical to plain", ember_type_name((enum ember_type)type),
	      tiled ? "tiled" : "raw");
	CHECK(worst_stream < 2e-6, "gemv %s %s streaming: rel diff to plain %.3g >= 2e-6", ember_type_name((enum ember_type)type),
	      tiled ? "tiled" : "raw", worst_stream);
	free(ys);
	free(ys2);
	cudaFree(dw);
	cudaFree(dx);
	cudaFree(dy);
	free(x);
	free(xr);
	free(xh);
	free(y);
	free_mat(&m);
}

/* The decode step's fused launches; stream_i: streaming setting (-1 = the plain kernel); up_tiled:
 * the SwiGLU up matrix tiled (the streaming kernel needs all segments tiled) or raw. */
static void test_gemv_fused(int stream_i, int up_tiled)
{
	const int cols = 768, rows = 40;
	float *x = malloc(cols * 4), *nw = malloc(cols * 4), *xn = malloc(cols * 4);
	for (int k = 0; k < cols; k++) {
		x[k] = nrand() * 3.0f;
		nw[k] = 1.0f + 0.2f * nrand();
	}
	rms_ref(x, nw, cols, 1e-6f, xn);
	float *dx = dev_upload(x, cols * 4), *dnw = dev_upload(nw, cols * 4);

	/* Three segments of different types and sizes (the QKV launch), RMS input. */
	struct mat ms[3] = {make_mat(EMBER_T_Q4_K, 32, cols), make_mat(EMBER_T_Q4_K, 17, cols), make_mat(EMBER_T_Q6_K, 24, cols)};
	struct ember_gemv_args a = gemv_test_args(stream_i, dx, dnw, cols, EMBER_GEMV_STORE);
	void *dws[3];
	float *dys[3];
	for (int i = 0; i < 3; i++) {
		dws[i] = dev_mat(&ms[i], 1);
		dys[i] = dev_poison((size_t)ms[i].rows * 4);
		a.seg[i] = (struct ember_gemv_seg){dws[i], ms[i].type, 1, ms[i].rows, dys[i]};
	}
	a.n_seg = 3;
	MUST(ember_gemv(&a, 0));
	double worst = 0;
	for (int i = 0; i < 3; i++) {
		float y[32];
		dev_download(y, dys[i], (size_t)ms[i].rows * 4);
		for (int r = 0; r < ms[i].rows; r++) {
			double mag, ref = ref_dot(&ms[i], r, xn, &mag);
			double err = fabs(y[r] - ref) / (mag + 1e-12);
			worst = isnan(err) || err > worst ? (isnan(err) ? INFINITY : err) : worst;
		}
	}
	printf("gemv 3 segments (Q4_K, Q4_K, Q6_K) rms input, stream %s: max rel err %.2e\n", stream_name(stream_i), worst);
	CHECK(worst < 1e-3, "gemv multi-segment rms: rel err %.3g", worst);

	/* Residual epilogue: out += W x (fp16 input). */
	{
		float *res = malloc(rows * 4), *got = malloc(rows * 4);
		struct mat m = make_mat(EMBER_T_Q8_0, rows, cols);
		for (int r = 0; r < rows; r++)
			res[r] = nrand();
		float *xr = malloc(cols * 4);
		uint16_t *xh = to_half(x, cols, xr);
		void *dw = dev_mat(&m, 1), *dxh = dev_upload(xh, cols * 2);
		float *dres = dev_upload(res, rows * 4);
		a = gemv_test_args(stream_i, dxh, NULL, cols, EMBER_GEMV_RESID);
		a.seg[0] = (struct ember_gemv_seg){dw, m.type, 1, rows, dres};
		a.n_seg = 1;
		MUST(ember_gemv(&a, 0));
		dev_download(got, dres, rows * 4);
		double w2 = 0;
		for (int r = 0; r < rows; r++) {
			double mag, ref = res[r] + ref_dot(&m, r, xr, &mag);
			double err = fabs(got[r] - ref) / (mag + fabs(res[r]) + 1e-12);
			w2 = isnan(err) ? INFINITY : (err > w2 ? err : w2);
		}
		printf("gemv residual epilogue, stream %s: max rel err %.2e\n", stream_name(stream_i), w2);
		CHECK(w2 < 1e-4, "gemv residual: rel err %.3g", w2);
		cudaFree(dw);
		cudaFree(dxh);
		cudaFree(dres);
		free(res);
		free(got);
		free(xr);
		free(xh);
		free_mat(&m);
	}

	/* SwiGLU epilogue: gate (Q4_K tiled) and up (Q6_K raw) share the RMS input. */
	{
		struct mat gm = make_mat(EMBER_T_Q4_K, rows, cols), um = make_mat(EMBER_T_Q6_K, rows, cols);
		void *dg = dev_mat(&gm, 1), *du = dev_mat(&um, up_tiled);
		void *dh = dev_poison(rows * 2);
		a = gemv_test_args(stream_i, dx, dnw, cols, EMBER_GEMV_SWIGLU);
		a.seg[0] = (struct ember_gemv_seg){dg, gm.type, 1, rows, NULL};
		a.seg[1] = (struct ember_gemv_seg){du, um.type, up_tiled, rows, NULL};
		a.n_seg = 2;
		a.out_h = dh;
		MUST(ember_gemv(&a, 0));
		uint16_t h[64];
		dev_download(h, dh, rows * 2);
		double w3 = 0;
		for (int r = 0; r < rows; r++) {
			double mg, mu, g = ref_dot(&gm, r, xn, &mg), u = ref_dot(&um, r, xn, &mu);
			const double ref = g / (1 + exp(-g)) * u;
			const double err = fabs(ember_fp16_to_f32(h[r]) - ref) / (fabs(ref) + 1e-3 * (mg + mu) + 1e-6);
			w3 = isnan(err) ? INFINITY : (err > w3 ? err : w3);
		}
		printf("gemv swiglu epilogue (up %s), stream %s: max rel err %.2e\n", up_tiled ? "tiled" : "raw",
		       stream_name(stream_i), w3);
		CHECK(w3 < 3e-3, "gemv swiglu (up %s, stream %s): rel err %.3g", up_tiled ? "tiled" : "raw", stream_name(stream_i), w3);
		cudaFree(dg);
		cudaFree(du);
		cudaFree(dh);
		free_mat(&gm);
		free_mat(&um);
	}
	for (int i = 0; i < 3; i++) {
		cudaFree(dws[i]);
		cudaFree(dys[i]);
		free_mat(&ms[i]);
	}
	cudaFree(dx);
	cudaFree(dnw);
	free(x);
	free(nw);
	free(xn);
}

static void test_gemv_argmax(int stream_i, int cols)
{
	const int rows = 1000;
	struct mat m = make_mat(EMBER_T_Q8_0, rows, cols);
	float *x = malloc(cols * 4), *nw = malloc(cols * 4), *xn = malloc(cols * 4);
	for (int k = 0; k < cols; k++) {
		x[k] = nrand();
		nw[k] = 1.0f;
	}
	rms_ref(x, nw, cols, 1e-6f, xn);
	int best = 0;
	double bestv = -1e30, second = -1e30;
	for (int r = 0; r < rows; r++) {
		double mag, v = ref_dot(&m, r, xn, &mag);
		if (v > bestv) {
			second = bestv;
			bestv = v;
			best = r;
		} else if (v > second) {
			second = v;
		}
	}
	void *dw = dev_mat(&m, 1);
	float *dx = dev_upload(x, cols * 4), *dnw = dev_upload(nw, cols * 4), *dl = dev_poison(rows * 4);
	struct ember_decode_state st0 = {5, 7, 3, 0, 0}, st;
	struct ember_decode_state *dst = dev_upload(&st0, sizeof(st0));
	int32_t *dout = dev_poison(10 * 4), out[10];
	struct ember_gemv_args a = gemv_test_args(stream_i, dx, dnw, cols, EMBER_GEMV_ARGMAX);
	a.seg[0] = (struct ember_gemv_seg){dw, m.type, 1, rows, dl};
	a.n_seg = 1;
	a.state = dst;
	a.out_tokens = dout;
	a.out_tokens_cap = 10;
	MUST(ember_gemv(&a, 0));
	MUST(ember_gemv(&a, 0)); /* second run: the last CTA must have reset best/done */
	dev_download(&st, dst, sizeof(st));
	dev_download(out, dout, sizeof(out));
	printf("gemv argmax K=%d stream %s: token %d (ref %d, margin %.2e), pos %d step %d\n", cols, stream_name(stream_i), st.token,
	       best, bestv - second, st.pos, st.step);
	if (bestv - second > 1e-3)
		CHECK(st.token == best && out[3] == best && out[4] == best, "argmax %d/%d/%d, expected %d", st.token, out[3], out[4], best);
	CHECK(st.pos == 9 && st.step == 5 && st.done == 0 && st.best == 0, "decode state not advanced/reset: pos %d step %d done %u",
	      st.pos, st.step, st.done);
	cudaFree(dw);
	cudaFree(dx);
	cudaFree(dnw);
	cudaFree(dl);
	cudaFree(dst);
	cudaFree(dout);
	free(x);
	free(nw);
	free(xn);
	free_mat(&m);
}

static void test_gemv_errors(void)
{
	/* Arguments the kernels cannot serve are refused before anything is launched, streaming or not. */
	void *dw = dev_poison(1 << 16), *dx = dev_poison(4096);
	float *dy = dev_poison(4096);
	for (int streaming = 0; streaming < 2; streaming++) {
		struct ember_gemv_args a, good = gemv_test_args(-1, dx, NULL, 1024, EMBER_GEMV_STORE);
		good.seg[0] = (struct ember_gemv_seg){dw, EMBER_T_Q8_0, 1, 32, dy};
		good.n_seg = 1;
		good.streaming = streaming;
		a = good;
		a.n_seg = 4;
		CHECK(ember_gemv(&a, 0) != 0, "gemv (streaming %d) accepted 4 segments", streaming);
		a = good;
		a.epi = EMBER_GEMV_SWIGLU;
		a.out_h = dy;
		CHECK(ember_gemv(&a, 0) != 0, "gemv (streaming %d) accepted SwiGLU over one segment", streaming);
		a = good;
		a.epi = EMBER_GEMV_ARGMAX;
		CHECK(ember_gemv(&a, 0) != 0, "gemv (streaming %d) accepted argmax without a decode state", streaming);
		a = good;
		a.in_mode = EMBER_GEMV_IN_RMS;
		CHECK(ember_gemv(&a, 0) != 0, "gemv (streaming %d) accepted RMS input without norm weights", streaming);
		a = good;
		a.seg[0].type = EMBER_T_F16;
		CHECK(ember_gemv(&a, 0) != 0, "gemv (streaming %d) accepted tiled F16", streaming);
		a = good;
		a.k = 0;
		CHECK(ember_gemv(&a, 0) != 0, "gemv (streaming %d) accepted k = 0", streaming);
	}
	cudaFree(dw);
	cudaFree(dx);
	cudaFree(dy);
}

/* Streaming with many row tiles per CTA (EMBER_GEMV_CTAS=1: one CTA per SM, so 2200 rows are ~1-2
 * units per CTA on 132 SMs and many more on smaller GPUs): RMS input into SwiGLU over tiled gate
 * (Q4_K) and up (Q6_K) rows, then a residual launch of mixed segments, against the reference. */
static void test_gemv_stream_many(int stream_i)
{
	const int cols = 1024, rows = 2304;
	float *x = malloc(cols * 4), *nw = malloc(cols * 4), *xn = malloc(cols * 4), *res = malloc(rows * 4),
	      *got = malloc(rows * 4), *hx = malloc(rows * 4);
	for (int k = 0; k < cols; k++) {
		x[k] = nrand() * 2.0f;
		nw[k] = 1.0f + 0.2f * nrand();
	}
	rms_ref(x, nw, cols, 1e-6f, xn);
	struct mat gm = make_mat(EMBER_T_Q4_K, rows, cols), um = make_mat(EMBER_T_Q6_K, rows, cols);
	void *dg = dev_mat(&gm, 1), *du = dev_mat(&um, 1);
	float *dx = dev_upload(x, cols * 4), *dnw = dev_upload(nw, cols * 4);
	uint16_t *h = malloc(rows * 2);
	void *dh = dev_poison(rows * 2);
	struct ember_gemv_args a = gemv_test_args(stream_i, dx, dnw, cols, EMBER_GEMV_SWIGLU);
	a.stream_ctas = 1;
	a.seg[0] = (struct ember_gemv_seg){dg, gm.type, 1, rows, NULL};
	a.seg[1] = (struct ember_gemv_seg){du, um.type, 1, rows, NULL};
	a.n_seg = 2;
	a.out_h = dh;
	MUST(ember_gemv(&a, 0));
	dev_download(h, dh, rows * 2);
	double w1 = 0;
	for (int r = 0; r < rows; r++) {
		double mg, mu, g = ref_dot(&gm, r, xn, &mg), u = ref_dot(&um, r, xn, &mu);
		const double ref = g / (1 + exp(-g)) * u;
		hx[r] = ember_fp16_to_f32(h[r]);
		const double err = fabs(hx[r] - ref) / (fabs(ref) + 1e-3 * (mg + mu) + 1e-6);
		w1 = isnan(err) ? INFINITY : (err > w1 ? err : w1);
	}

	/* Residual over two segments (Q8_0 then Q4_K rows) with the SwiGLU output as fp16 input: the
	 * segments split the units unevenly across CTAs. */
	const int r0 = 700, r1 = rows - r0; /* k = rows: a multiple of 256 */
	struct mat m0 = make_mat(EMBER_T_Q8_0, r0, rows), m1 = make_mat(EMBER_T_Q4_K, r1, rows);
	void *d0 = dev_mat(&m0, 1), *d1 = dev_mat(&m1, 1);
	for (int r = 0; r < rows; r++)
		res[r] = nrand();
	float *dres = dev_upload(res, rows * 4);
	a = gemv_test_args(stream_i, dh, NULL, rows, EMBER_GEMV_RESID);
	a.stream_ctas = 1;
	a.seg[0] = (struct ember_gemv_seg){d0, m0.type, 1, r0, dres};
	a.seg[1] = (struct ember_gemv_seg){d1, m1.type, 1, r1, dres + r0};
	a.n_seg = 2;
	MUST(ember_gemv(&a, 0));
	dev_download(got, dres, rows * 4);
	double w2 = 0;
	for (int r = 0; r < rows; r++) {
		double mag, ref = res[r] + (r < r0 ? ref_dot(&m0, r, hx, &mag) : ref_dot(&m1, r - r0, hx, &mag));
		const double err = fabs(got[r] - ref) / (mag + fabs(res[r]) + 1e-12);
		w2 = isnan(err) ? INFINITY : (err > w2 ? err : w2);
	}
	printf("gemv streaming %s, one CTA per SM, %d rows: swiglu max rel err %.2e, 2-segment residual %.2e\n",
	       stream_name(stream_i), rows, w1, w2);
	CHECK(w1 < 3e-3, "gemv streaming %s swiglu (many units): rel err %.3g", stream_name(stream_i), w1);
	CHECK(w2 < 1e-4, "gemv streaming %s residual (many units): rel err %.3g", stream_name(stream_i), w2);
	cudaFree(dg);
	cudaFree(du);
	cudaFree(d0);
	cudaFree(d1);
	cudaFree(dx);
	cudaFree(dnw);
	cudaFree(dh);
	cudaFree(dres);
	free_mat(&gm);
	free_mat(&um);
	free_mat(&m0);
	free_mat(&m1);
	free(x);
	free(nw);
	free(xn);
	free(res);
	free(got);
	free(hx);
	free(h);
}

/* Runs the GEMV checks; returns the number of failed checks. */
int test_kernels_gemv(void)
{
	const int types[] = {EMBER_T_Q8_0, EMBER_T_Q4_K, EMBER_T_Q6_K};
	for (int i = 0; i < 3; i++) {
		const int cols = types[i] == EMBER_T_Q8_0 ? 320 : 512;
		test_gemv_store(types[i], 1, 50, cols);
		test_gemv_store(types[i], 0, 50, cols);
	}
	test_gemv_store(EMBER_T_Q4_K, 1, 300, 4096); /* several k-tiles per warp (prefetch path) */
	test_gemv_store(EMBER_T_F16, 0, 40, 200);
	test_gemv_store(EMBER_T_BF16, 0, 40, 200);
	test_gemv_store(EMBER_T_F32, 0, 40, 200);
	/* Longer rows (several rounds per row tile; k % 16 != 0 for raw F16). */
	test_gemv_store(EMBER_T_Q8_0, 1, 50, 4096);
	test_gemv_store(EMBER_T_Q6_K, 1, 40, 12288);
	test_gemv_store(EMBER_T_Q4_K, 0, 40, 2048);
	test_gemv_store(EMBER_T_F16, 0, 40, 1000);
	test_gemv_store(EMBER_T_BF16, 0, 24, 1000);
	test_gemv_store(EMBER_T_Q4_K, 1, 4100, 1024); /* streaming: > 1 unit per CTA with 1 CTA per SM */
	test_gemv_fused(-1, 0);
	test_gemv_fused(-1, 1);
	for (int i = 0; i < N_STREAM_SETTINGS; i++) {
		test_gemv_fused(i, 1);
		test_gemv_fused(i, 0); /* a raw segment: the streaming request runs the plain kernel */
		test_gemv_stream_many(i);
	}
	test_gemv_argmax(-1, 256);
	test_gemv_argmax(-1, 2048);
	test_gemv_argmax(2, 4096);
	test_gemv_argmax(1, 1024);
	test_gemv_argmax(4, 2048);
	test_gemv_errors();
	return check_failures;
}
