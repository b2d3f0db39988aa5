/*
 * test_splitk.c - test_cuda_splitk: the split-K decode GEMV (EMBER_GEMV_SPLITK, kernels/gemv_splitk.cu)
 * replayed on the CPU; no GPU needed. (1) The plan (layout.cuh) for every K of the Qwen3 shapes and
 * N in {1, 2, 3, 4, 7, 64, auto}: slices cover K with none empty, items map one-to-one onto (row
 * block, pass, slice), a grid keeps each CTA on one slice, the scratch fits the backend's bound;
 * auto's choices for the 8B, 4B and 0.6B shapes on 132 SMs are pinned. (2) Whole launches simulated
 * item by item in a random arrival order with the kernel's bookkeeping: slice staging (RMSNorm by
 * a power of two per slice), per-warp fp32 sums over the slice's tiles (tile_replay.h), partials and
 * sums of squares at layout.cuh's scratch indices, the row block's counter (the last arrival adds
 * slices 0, 1, 2, ... and resets it) and the epilogues (store over 3 segments, residual add, SwiGLU,
 * argmax). Each result is checked against dequantize-then-dot in double, against the plain kernel's
 * replay, and for bit-identity under a different arrival order.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_cpu.h"
#include "layout.cuh"
#include "quant.h"
#include "tile_replay.h"

#define N_SM 132 /* an H200 */

/* gemv.cuh's epilogues (that header needs the CUDA runtime headers; this test does not). */
enum { EPI_STORE = 0, EPI_RESID = 1, EPI_SWIGLU = 2, EPI_ARGMAX = 3 };

static float fp16r(float v) { return ember_fp16_to_f32(ember_f32_to_fp16(v)); }

static const int qwen_ks[] = {256, 512, 768, 1024, 2048, 2560, 3072, 4096, 6144, 9728, 12288};
#define N_KS ((int)(sizeof(qwen_ks) / sizeof(qwen_ks[0])))
static const int settings[] = {1, 2, 3, 4, 7, EMBER_SPLITK_AUTO};
#define N_SETTINGS ((int)(sizeof(settings) / sizeof(settings[0])))

static const char *setting_name(int s)
{
	static char buf[16];
	if (s == EMBER_SPLITK_AUTO)
		return "auto";
	snprintf(buf, sizeof(buf), "%d", s);
	return buf;
}

/* ---- (1) plans ---- */

static void check_plan(int setting, int kt, int groups, int passes, int n_sm)
{
	const struct ember_splitk_plan p = ember_splitk_make_plan(setting, kt, groups, passes, n_sm);
	int ok = p.slices >= 1 && p.slices <= ember_splitk_max_slices(setting, kt) && p.slice_tiles >= 1 &&
	         p.slice_tiles <= kt && (p.slices - 1) * p.slice_tiles < kt && p.slices * p.slice_tiles >= kt &&
	         p.passes == passes && p.groups == groups && p.items == groups * passes * p.slices;
	if (setting > 0)
		ok = ok && p.slices <= setting;
	if (setting == EMBER_SPLITK_AUTO)
		ok = ok && (p.slice_tiles % 4 == 0 || p.slice_tiles == kt); /* whole rounds of 4 tiles */
	CHECK(ok, "plan(%s, kt %d, groups %d, passes %d): %d slices of %d tiles, %d items", setting_name(setting), kt, groups,
	      passes, p.slices, p.slice_tiles, p.items);
	CHECK(ember_splitk_scratch_floats(&p) <= ember_splitk_scratch_bound(setting, kt, groups * passes),
	      "plan(%s, kt %d): scratch %zu floats exceeds the backend's bound", setting_name(setting), kt,
	      ember_splitk_scratch_floats(&p));
	CHECK(ember_splitk_part_index(&p, p.slices - 1, p.groups - 1, p.passes - 1, 15) + 1 == ember_splitk_ss_index(&p, 0, 0) &&
	          ember_splitk_ss_index(&p, p.slices - 1, p.groups - 1) + 1 == ember_splitk_scratch_floats(&p),
	      "scratch regions overlap or leave gaps");
	if (p.items > 20000)
		return;
	unsigned char *seen = calloc((size_t)p.items, 1);
	for (int item = 0; item < p.items; item++) {
		int g, ps, s;
		ember_splitk_item(&p, item, &g, &ps, &s);
		if (g >= 0 && g < groups && ps >= 0 && ps < passes && s >= 0 && s < p.slices)
			seen[(g * passes + ps) * p.slices + s]++;
	}
	int bad = 0;
	for (int i = 0; i < p.items; i++)
		bad += seen[i] != 1;
	CHECK(bad == 0, "item map is not one-to-one (%d misses) for kt %d groups %d", bad, kt, groups);
	free(seen);
	const int caps[] = {EMBER_SPLITK_GRID_PER_SM * n_sm, 100, 7};
	for (int c = 0; c < 3; c++) {
		const int grid = ember_splitk_grid(&p, caps[c]);
		int mixed = 0;
		for (int b = 0; b < grid; b++)
			for (int item = b; item < p.items; item += grid) {
				int g, ps, s;
				ember_splitk_item(&p, item, &g, &ps, &s);
				mixed += s != b % p.slices;
			}
		CHECK(grid >= 1 && grid % p.slices == 0 && (grid == p.items || grid <= caps[c] || grid == p.slices) && mixed == 0,
		      "grid %d for cap %d (%d slices, %d items): %d items off their CTA's slice", grid, caps[c], p.slices, p.items, mixed);
	}
}

static void check_plans(void)
{
	const int groups[] = {1, 3, 7, 64, 256, 384, 768, 1536, 9496};
	const int all_settings[] = {1, 2, 3, 4, 7, 64, 1000, EMBER_SPLITK_AUTO};
	for (int i = 0; i < N_KS; i++)
		for (int s = 0; s < 8; s++)
			for (int g = 0; g < 9; g++)
				for (int passes = 1; passes <= 2; passes++) {
					check_plan(all_settings[s], qwen_ks[i] / 256, groups[g], passes, N_SM);
					check_plan(all_settings[s], qwen_ks[i] / 256, groups[g], passes, 16);
				}
	/* Pinned choices (kernels/NOTES.md reasons about these). */
	const struct {
		const char *what;
		int setting, kt, groups, passes, slices, tiles;
	} pins[] = {
		{"8B QKV", EMBER_SPLITK_AUTO, 16, 384, 1, 4, 4},     {"8B O", EMBER_SPLITK_AUTO, 16, 256, 1, 4, 4},
		{"8B gate/up", EMBER_SPLITK_AUTO, 16, 768, 2, 2, 8}, {"8B down", EMBER_SPLITK_AUTO, 48, 256, 1, 6, 8},
		{"8B head", EMBER_SPLITK_AUTO, 16, 9496, 1, 1, 16},  {"4B QKV", EMBER_SPLITK_AUTO, 10, 384, 1, 3, 4},
		{"4B down", EMBER_SPLITK_AUTO, 38, 160, 1, 10, 4},   {"0.6B QKV", EMBER_SPLITK_AUTO, 4, 256, 1, 1, 4},
		{"0.6B O", EMBER_SPLITK_AUTO, 8, 64, 1, 2, 4},       {"0.6B gate/up", EMBER_SPLITK_AUTO, 4, 192, 2, 1, 4},
		{"0.6B down", EMBER_SPLITK_AUTO, 12, 64, 1, 3, 4},   {"N=3 K=4096", 3, 16, 256, 1, 3, 6},
		{"N=7 K=4096", 7, 16, 256, 1, 6, 3},                 {"N=4 K=256", 4, 1, 256, 1, 1, 1},
		{"N=64 K=12288", 64, 48, 256, 1, 48, 1},
	};
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		const struct ember_splitk_plan p = ember_splitk_make_plan(pins[i].setting, pins[i].kt, pins[i].groups, pins[i].passes, N_SM);
		const int grid = ember_splitk_grid(&p, EMBER_SPLITK_GRID_PER_SM * N_SM);
		if (pins[i].setting == EMBER_SPLITK_AUTO && p.slices * p.passes == 1)
			printf("plan %-13s %-4s: 1 slice: the plain kernel runs\n", pins[i].what, setting_name(pins[i].setting));
		else
			printf("plan %-13s %-4s: %2d slices x %2d tiles, %5d CTAs (%.1f waves of %d per SM)\n", pins[i].what,
			       setting_name(pins[i].setting), p.slices, p.slice_tiles, grid,
			       (double)grid / (EMBER_SPLITK_CTAS_PER_SM * N_SM), EMBER_SPLITK_CTAS_PER_SM);
		CHECK(p.slices == pins[i].slices && p.slice_tiles == pins[i].tiles, "%s: %d slices of %d tiles, expected %d of %d",
		      pins[i].what, p.slices, p.slice_tiles, pins[i].slices, pins[i].tiles);
	}
	CHECK(ember_splitk_exponent(0.0f, 16) == 0 && ember_splitk_exponent(NAN, 16) == 0 && ember_splitk_exponent(INFINITY, 16) == 0,
	      "exponent of a zero/NaN/inf slice must be 0");
	/* rms 4 = 0.5 * 2^3, rms 1e-3 = 0.512 * 2^-9: the staged slice gets rms in [0.5, 1). */
	CHECK(ember_splitk_exponent(16.0f * 16, 16) == 3 && ember_splitk_exponent(1e-6f * 4, 4) == -9,
	      "exponent: %d (want 3), %d (want -9)", ember_splitk_exponent(16.0f * 16, 16), ember_splitk_exponent(1e-6f * 4, 4));
}

/* ---- (2) launches ---- */

struct seg_data {
	int type, rows, row_tiles;
	uint8_t *tiles; /* [row tile][kt] tiles */
	float *deq;     /* [rows][k] */
	float *adds;    /* replay scratch: [row tile][kt][16 groups][16 rows] */
};

struct launch {
	int n_seg, k, k_pad, kt, rms, epi;
	struct seg_data seg[3];
	float *x;      /* F16 input: fp16-representable values; RMS: the fp32 residual */
	float *norm_w; /* RMS */
	float eps;
	float *resid0[3]; /* RESID: the output's value before the launch */
};

struct result {
	float *out[3];   /* rows of each segment (STORE, RESID, ARGMAX) */
	uint16_t *out_h; /* SWIGLU */
	int token;       /* ARGMAX */
};

static void make_seg(struct seg_data *sd, int type, int rows, int k)
{
	const size_t rb = ember_type_bytes(type, k);
	const int kt = (k + 255) / 256;
	uint8_t *raw = malloc((size_t)rows * rb);
	float *w = malloc((size_t)k * sizeof(float));
	sd->type = type;
	sd->rows = rows;
	sd->row_tiles = (rows + 15) / 16;
	sd->deq = malloc((size_t)rows * k * sizeof(float));
	for (int r = 0; r < rows; r++) {
		const float scale = 0.02f * (1.0f + 2.0f * (float)urand());
		for (int i = 0; i < k; i++)
			w[i] = nrand() * scale + (type == EMBER_T_Q4_K ? 0.01f : 0.0f);
		ember_quantize_row((enum ember_type)type, w, raw + (size_t)r * rb, k);
		ember_dequantize_row((enum ember_type)type, raw + (size_t)r * rb, sd->deq + (size_t)r * k, k);
	}
	const size_t tb = ember_tile_bytes(type);
	sd->tiles = malloc((size_t)sd->row_tiles * kt * tb);
	for (int rt = 0; rt < sd->row_tiles; rt++)
		for (int t = 0; t < kt; t++)
			ember_tile_repack(sd->tiles + ((size_t)rt * kt + t) * tb, type, raw, rows, k, rt, t);
	sd->adds = malloc((size_t)sd->row_tiles * kt * 256 * sizeof(float));
	free(raw);
	free(w);
}

/* The input as the kernel stages it: xs[k_pad] (fp16 values). Split (p != NULL, RMS): per slice the
 * sum of squares ss[s] and exponent e[s] of the staged x * w * 2^-e. Plain (p == NULL, RMS):
 * RMSNorm with the global scale, as gemv.cu stages it. */
static void stage(const struct launch *L, const struct ember_splitk_plan *p, float *xs, float *ss, int *e)
{
	for (int i = 0; i < L->k_pad; i++)
		xs[i] = i < L->k && !L->rms ? L->x[i] : 0.0f;
	if (!L->rms)
		return;
	if (!p) {
		float ssg = 0.0f;
		for (int i = 0; i < L->k; i++)
			ssg += L->x[i] * L->x[i];
		const float scale = 1.0f / sqrtf(ssg / (float)L->k + L->eps);
		for (int i = 0; i < L->k; i++)
			xs[i] = fp16r(L->x[i] * scale * L->norm_w[i]);
		return;
	}
	for (int s = 0; s < p->slices; s++) {
		const int c0 = s * p->slice_tiles * 256, n_valid = L->k - c0 < p->slice_tiles * 256 ? L->k - c0 : p->slice_tiles * 256;
		float sum = 0.0f;
		for (int i = 0; i < n_valid; i++)
			sum += L->x[c0 + i] * L->x[c0 + i];
		ss[s] = sum;
		e[s] = ember_splitk_exponent(sum, n_valid);
		const float factor = ldexpf(1.0f, -e[s]);
		for (int i = 0; i < n_valid; i++)
			xs[c0 + i] = fp16r(L->x[c0 + i] * L->norm_w[c0 + i] * factor);
	}
}

static void replay_adds(struct launch *L, const float *xs)
{
	for (int si = 0; si < L->n_seg; si++) {
		struct seg_data *sd = &L->seg[si];
		const size_t tb = ember_tile_bytes(sd->type);
		for (int rt = 0; rt < sd->row_tiles; rt++)
			for (int t = 0; t < L->kt; t++)
				replay_tile_adds(sd->type, sd->tiles + ((size_t)rt * L->kt + t) * tb, xs + 256 * t,
				                 (float(*)[16])(sd->adds + ((size_t)rt * L->kt + t) * 256));
	}
}

/* The kernel's fp32 sums for row tile rt over tiles [kt0, kt0 + n): warp w adds the scale groups of
 * tiles kt0 + w, kt0 + w + 4, ... in order; then the 4 warps' sums are added in order. */
static void rows_sum(const struct launch *L, int si, int rt, int kt0, int n, float y[16])
{
	const struct seg_data *sd = &L->seg[si];
	const int groups = replay_groups(sd->type);
	float yw[4][16];
	memset(yw, 0, sizeof(yw));
	for (int w = 0; w < 4; w++)
		for (int t = kt0 + w; t < kt0 + n; t += 4) {
			const float *a = sd->adds + ((size_t)rt * L->kt + t) * 256;
			for (int g = 0; g < groups; g++)
				for (int r = 0; r < 16; r++)
					yw[w][r] += a[g * 16 + r];
		}
	for (int r = 0; r < 16; r++) {
		y[r] = 0.0f;
		for (int w = 0; w < 4; w++)
			y[r] += yw[w][r];
	}
}

static unsigned long long argmax_key(float v, int idx)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (uint32_t)idx);
}

static void epilogue(const struct launch *L, struct result *R, int si, int rt, const float *y, const float *up,
                     unsigned long long *best)
{
	for (int r = 0; r < 16; r++) {
		const int row = rt * 16 + r;
		if (row >= L->seg[si].rows)
			continue;
		if (L->epi == EPI_STORE || L->epi == EPI_ARGMAX)
			R->out[si][row] = y[r];
		else if (L->epi == EPI_RESID)
			R->out[si][row] = L->resid0[si][row] + y[r];
		else
			R->out_h[row] = ember_f32_to_fp16(y[r] / (1.0f + expf(-y[r])) * up[r]);
		if (L->epi == EPI_ARGMAX && argmax_key(y[r], row) > *best)
			*best = argmax_key(y[r], row);
	}
}

static int groups_of(const struct launch *L)
{
	if (L->epi == EPI_SWIGLU)
		return L->seg[0].row_tiles;
	int g = 0;
	for (int si = 0; si < L->n_seg; si++)
		g += L->seg[si].row_tiles;
	return g;
}

static int locate(const struct launch *L, int group, int pass, int *si)
{
	if (L->epi == EPI_SWIGLU) {
		*si = pass;
		return group;
	}
	*si = 0;
	while (*si < L->n_seg - 1 && group >= L->seg[*si].row_tiles)
		group -= L->seg[(*si)++].row_tiles;
	return group;
}

static void token_of(struct result *R, unsigned long long best) { R->token = (int)(0xFFFFFFFFu - (uint32_t)(best & 0xFFFFFFFFull)); }

/* gemv.cu: one CTA per row tile over all of K (SwiGLU: gate then up in the same CTA). */
static void sim_plain(struct launch *L, struct result *R)
{
	float *xs = malloc((size_t)L->k_pad * sizeof(float)), y[16], up[16];
	unsigned long long best = 0;
	stage(L, NULL, xs, NULL, NULL);
	replay_adds(L, xs);
	for (int g = 0; g < groups_of(L); g++) {
		int si;
		const int rt = locate(L, g, 0, &si);
		rows_sum(L, si, rt, 0, L->kt, y);
		if (L->epi == EPI_SWIGLU)
			rows_sum(L, 1, rt, 0, L->kt, up);
		epilogue(L, R, si, rt, y, up, &best);
	}
	token_of(R, best);
	free(xs);
}

/* gemv_splitk.cu: items in the arrival order `order`, the kernel's bookkeeping. Returns the plan. */
static struct ember_splitk_plan sim_split(struct launch *L, int setting, uint64_t order_seed, struct result *R)
{
	const struct ember_splitk_plan p = ember_splitk_make_plan(setting, L->kt, groups_of(L), L->epi == EPI_SWIGLU ? 2 : 1, N_SM);
	if (setting == EMBER_SPLITK_AUTO && p.slices * p.passes == 1) {
		sim_plain(L, R); /* ember_gemv runs the plain kernel then */
		return p;
	}
	float *xs = malloc((size_t)L->k_pad * sizeof(float)), *ss = malloc((size_t)p.slices * sizeof(float));
	int *e = malloc((size_t)p.slices * sizeof(int)), *order = malloc((size_t)p.items * sizeof(int));
	float *scratch = malloc(ember_splitk_scratch_floats(&p) * sizeof(float));
	uint32_t *counters = calloc((size_t)p.groups, sizeof(uint32_t));
	for (size_t i = 0; i < ember_splitk_scratch_floats(&p); i++)
		scratch[i] = NAN; /* an unwritten partial poisons the result */
	stage(L, &p, xs, ss, e);
	replay_adds(L, xs);
	const uint64_t saved = test_rng;
	test_rng = order_seed;
	for (int i = 0; i < p.items; i++)
		order[i] = i;
	for (int i = p.items - 1; i > 0; i--) {
		const int j = (int)(urand() * (i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	test_rng = saved;
	unsigned long long best = 0;
	const uint32_t expected = (uint32_t)(p.slices * p.passes);
	for (int i = 0; i < p.items; i++) {
		int group, pass, slice, si;
		ember_splitk_item(&p, order[i], &group, &pass, &slice);
		const int rt = locate(L, group, pass, &si), kt0 = slice * p.slice_tiles;
		float y[16], total[2][16], ss_total = L->rms ? ss[slice] : 0.0f;
		rows_sum(L, si, rt, kt0, L->kt - kt0 < p.slice_tiles ? L->kt - kt0 : p.slice_tiles, y);
		for (int r = 0; r < 16; r++)
			total[0][r] = y[r] = L->rms ? ldexpf(y[r], e[slice]) : y[r];
		if (expected > 1) {
			for (int r = 0; r < 16; r++)
				scratch[ember_splitk_part_index(&p, slice, group, pass, r)] = y[r];
			if (L->rms && pass == 0)
				scratch[ember_splitk_ss_index(&p, slice, group)] = ss[slice];
			if (counters[group]++ != expected - 1)
				continue;
			for (int pp = 0; pp < p.passes; pp++)
				for (int r = 0; r < 16; r++) {
					total[pp][r] = 0.0f;
					for (int s = 0; s < p.slices; s++)
						total[pp][r] += scratch[ember_splitk_part_index(&p, s, group, pp, r)];
				}
			ss_total = 0.0f;
			for (int s = 0; L->rms && s < p.slices; s++)
				ss_total += scratch[ember_splitk_ss_index(&p, s, group)];
			counters[group] = 0;
		}
		if (L->rms) {
			const float scale = 1.0f / sqrtf(ss_total / (float)L->k + L->eps);
			for (int pp = 0; pp < 2; pp++)
				for (int r = 0; r < 16; r++)
					total[pp][r] *= scale;
		}
		epilogue(L, R, L->epi == EPI_SWIGLU ? 0 : si, rt, total[0], total[1], &best);
	}
	token_of(R, best);
	int left = 0;
	for (int g = 0; g < p.groups; g++)
		left += counters[g] != 0;
	CHECK(left == 0, "%d row-block counters not back to zero", left);
	free(xs);
	free(ss);
	free(e);
	free(order);
	free(scratch);
	free(counters);
	return p;
}

static void alloc_result(const struct launch *L, struct result *R)
{
	memset(R, 0, sizeof(*R));
	for (int si = 0; si < L->n_seg; si++) {
		R->out[si] = malloc((size_t)L->seg[si].rows * sizeof(float));
		for (int r = 0; r < L->seg[si].rows; r++)
			R->out[si][r] = NAN;
	}
	R->out_h = malloc((size_t)L->seg[0].rows * 2);
	memset(R->out_h, 0xFF, (size_t)L->seg[0].rows * 2);
}

static void free_result(const struct launch *L, struct result *R)
{
	for (int si = 0; si < L->n_seg; si++)
		free(R->out[si]);
	free(R->out_h);
}

static int same_result(const struct launch *L, const struct result *a, const struct result *b)
{
	for (int si = 0; si < L->n_seg; si++)
		if (memcmp(a->out[si], b->out[si], (size_t)L->seg[si].rows * sizeof(float)) != 0)
			return 0;
	return memcmp(a->out_h, b->out_h, (size_t)L->seg[0].rows * 2) == 0 && a->token == b->token;
}

/* |got - want| relative to the row's sum |w x| (SwiGLU: to |want| plus the first-order error scale
 * of silu(g) u, reference()), worst row. */
static double worst_err(const struct launch *L, const struct result *got, const struct result *want, const double *mag)
{
	double worst = 0;
	for (int si = 0; si < (L->epi == EPI_SWIGLU ? 1 : L->n_seg); si++)
		for (int r = 0; r < L->seg[si].rows; r++) {
			const double m = mag[si * 4096 + r];
			double err;
			if (L->epi == EPI_SWIGLU) {
				const double a = ember_fp16_to_f32(got->out_h[r]), b = ember_fp16_to_f32(want->out_h[r]);
				err = fabs(a - b) / (fabs(b) + m + 1e-6);
			} else {
				err = fabs((double)got->out[si][r] - want->out[si][r]) / (m + 1e-30);
			}
			worst = isnan(err) || err > worst ? (isnan(err) ? INFINITY : err) : worst;
		}
	return worst;
}

/* Double reference from the exact dequantized weights and xn (the normalized input, unrounded). */
static void reference(const struct launch *L, struct result *R, double *mag, double *margin)
{
	double *xn = malloc((size_t)L->k * sizeof(double)), ms = 0, best = -INFINITY, second = -INFINITY;
	for (int i = 0; i < L->k; i++)
		ms += (double)L->x[i] * L->x[i];
	for (int i = 0; i < L->k; i++)
		xn[i] = L->rms ? L->x[i] * (double)L->norm_w[i] / sqrt(ms / L->k + L->eps) : L->x[i];
	double y[2][4096];
	for (int si = 0; si < L->n_seg; si++)
		for (int r = 0; r < L->seg[si].rows; r++) {
			double acc = 0, m = 0;
			for (int i = 0; i < L->k; i++) {
				acc += (double)L->seg[si].deq[(size_t)r * L->k + i] * xn[i];
				m += fabs((double)L->seg[si].deq[(size_t)r * L->k + i] * xn[i]);
			}
			mag[si * 4096 + r] = m;
			if (si < 2)
				y[si][r] = acc;
			R->out[si][r] = (float)(acc + (L->epi == EPI_RESID ? L->resid0[si][r] : 0.0));
			if (L->epi == EPI_ARGMAX && acc > best) {
				second = best;
				best = acc;
				R->token = r;
			} else if (L->epi == EPI_ARGMAX && acc > second) {
				second = acc;
			}
		}
	if (L->epi == EPI_SWIGLU) {
		for (int r = 0; r < L->seg[0].rows; r++) {
			const double silu = y[0][r] / (1 + exp(-y[0][r]));
			R->out_h[r] = ember_f32_to_fp16((float)(silu * y[1][r]));
			/* First-order error scale of silu(g) u: |u| sum|w_g x| + |silu(g)| sum|w_u x| (silu' <= 1.1). */
			mag[r] = fabs(y[1][r]) * mag[r] + fabs(silu) * mag[4096 + r];
		}
	}
	*margin = best - second;
	free(xn);
}

/* Runs the launch plainly and under every setting; checks each against the reference and the
 * plain replay, and one more arrival order for bit-identity. */
static void check_launch(struct launch *L, const char *what, double tol_ref, double tol_plain)
{
	struct result ref, plain, split, again;
	double *mag = calloc(3 * 4096, sizeof(double)), margin = 0;
	alloc_result(L, &ref);
	alloc_result(L, &plain);
	reference(L, &ref, mag, &margin);
	sim_plain(L, &plain);
	const double plain_err = worst_err(L, &plain, &ref, mag);
	CHECK(plain_err <= tol_ref, "%s: plain replay vs reference %.3g > %.3g", what, plain_err, tol_ref);
	double worst_ref = 0, worst_plain = 0;
	for (int i = 0; i < N_SETTINGS; i++) {
		alloc_result(L, &split);
		alloc_result(L, &again);
		const struct ember_splitk_plan p = sim_split(L, settings[i], 0x1111u + (uint64_t)i, &split);
		sim_split(L, settings[i], 0x2222u * (uint64_t)(i + 7), &again);
		const double er = worst_err(L, &split, &ref, mag), ep = worst_err(L, &split, &plain, mag);
		worst_ref = er > worst_ref ? er : worst_ref;
		worst_plain = ep > worst_plain ? ep : worst_plain;
		CHECK(er <= tol_ref, "%s N=%s (%d slices x %d tiles): vs reference %.3g > %.3g", what, setting_name(settings[i]),
		      p.slices, p.slice_tiles, er, tol_ref);
		CHECK(ep <= tol_plain, "%s N=%s (%d slices x %d tiles): vs plain %.3g > %.3g", what, setting_name(settings[i]),
		      p.slices, p.slice_tiles, ep, tol_plain);
		CHECK(same_result(L, &split, &again), "%s N=%s: result depends on the CTAs' arrival order", what,
		      setting_name(settings[i]));
		if (L->epi == EPI_ARGMAX) {
			float top = -INFINITY;
			int top_i = -1;
			for (int r = 0; r < L->seg[0].rows; r++)
				if (split.out[0][r] > top) {
					top = split.out[0][r];
					top_i = r;
				}
			CHECK(split.token == top_i, "%s N=%s: argmax token %d, logits say %d", what, setting_name(settings[i]),
			      split.token, top_i);
			CHECK(margin < 1e-2 || split.token == ref.token, "%s N=%s: argmax %d, reference %d (margin %.3g)", what,
			      setting_name(settings[i]), split.token, ref.token, margin);
		}
		free_result(L, &split);
		free_result(L, &again);
	}
	printf("splitk %-34s plain vs ref %.2e | split (N = 1 2 3 4 7 auto) worst vs ref %.2e, vs plain %.2e, order-independent\n",
	       what, plain_err, worst_ref, worst_plain);
	if (L->epi == EPI_ARGMAX)
		CHECK(margin < 1e-2 || plain.token == ref.token, "%s: plain argmax %d, reference %d", what, plain.token, ref.token);
	free_result(L, &ref);
	free_result(L, &plain);
	free(mag);
}

static void init_launch(struct launch *L, int k, int rms, int epi)
{
	memset(L, 0, sizeof(*L));
	L->k = k;
	L->kt = (k + 255) / 256;
	L->k_pad = L->kt * 256;
	L->rms = rms;
	L->epi = epi;
	L->eps = 1e-6f;
	L->x = malloc((size_t)k * sizeof(float));
	L->norm_w = malloc((size_t)k * sizeof(float));
	for (int i = 0; i < k; i++) {
		/* RMS: the first quarter 40x louder, so slices get different exponents. */
		L->x[i] = rms ? nrand() * (i < k / 4 ? 40.0f : 1.0f) : fp16r(nrand() * 2.0f);
		L->norm_w[i] = 1.0f + 0.3f * nrand();
	}
}

static void add_seg(struct launch *L, int type, int rows)
{
	make_seg(&L->seg[L->n_seg], type, rows, L->k);
	if (L->epi == EPI_RESID) {
		L->resid0[L->n_seg] = malloc((size_t)rows * sizeof(float));
		for (int r = 0; r < rows; r++)
			L->resid0[L->n_seg][r] = nrand();
	}
	L->n_seg++;
}

static void free_launch(struct launch *L)
{
	for (int si = 0; si < L->n_seg; si++) {
		free(L->seg[si].tiles);
		free(L->seg[si].deq);
		free(L->seg[si].adds);
		free(L->resid0[si]);
	}
	free(L->x);
	free(L->norm_w);
}

static void check_launches(void)
{
	const int types[] = {EMBER_T_Q8_0, EMBER_T_Q4_K, EMBER_T_Q6_K};
	char what[64];
	struct launch L;
	/* Every K of the Qwen3 shapes, every tiled type, fp16 input: staging is identical split or not,
	 * so split and plain differ only in the order of fp32 additions. */
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < N_KS; i++) {
			init_launch(&L, qwen_ks[i], 0, EPI_STORE);
			add_seg(&L, types[t], 40);
			snprintf(what, sizeof(what), "%s K=%d store", ember_type_name((enum ember_type)types[t]), qwen_ks[i]);
			check_launch(&L, what, 2e-5, 2e-7);
			free_launch(&L);
		}
	init_launch(&L, 320, 0, EPI_STORE); /* K that needs padding (Q8_0 only) */
	add_seg(&L, EMBER_T_Q8_0, 37);
	check_launch(&L, "Q8_0 K=320 store", 2e-5, 2e-7);
	free_launch(&L);
	/* RMSNorm input: the split stages x*w*2^-e per slice, the plain kernel x*w/rms(x); both round to
	 * fp16 (relative 2^-11 per element). */
	for (int i = 0; i < N_KS; i++) {
		init_launch(&L, qwen_ks[i], 1, EPI_STORE);
		add_seg(&L, EMBER_T_Q4_K, 40);
		snprintf(what, sizeof(what), "Q4_K K=%d rms store", qwen_ks[i]);
		check_launch(&L, what, 1e-3, 1e-3);
		free_launch(&L);
	}
	/* The decode step's launches. */
	init_launch(&L, 1024, 1, EPI_STORE);
	add_seg(&L, EMBER_T_Q4_K, 64);
	add_seg(&L, EMBER_T_Q4_K, 17);
	add_seg(&L, EMBER_T_Q6_K, 24);
	check_launch(&L, "QKV Q4_K+Q4_K+Q6_K K=1024 rms", 1e-3, 1e-3);
	free_launch(&L);
	init_launch(&L, 12288, 0, EPI_RESID);
	add_seg(&L, EMBER_T_Q6_K, 40);
	check_launch(&L, "down Q6_K K=12288 residual", 2e-5, 2e-7);
	free_launch(&L);
	init_launch(&L, 4096, 0, EPI_RESID);
	add_seg(&L, EMBER_T_Q8_0, 33);
	check_launch(&L, "O Q8_0 K=4096 residual", 2e-5, 2e-7);
	free_launch(&L);
	init_launch(&L, 2560, 1, EPI_SWIGLU);
	add_seg(&L, EMBER_T_Q4_K, 48);
	add_seg(&L, EMBER_T_Q6_K, 48);
	check_launch(&L, "gate/up Q4_K/Q6_K K=2560 swiglu", 2e-3, 2e-3);
	free_launch(&L);
	init_launch(&L, 1024, 1, EPI_ARGMAX);
	add_seg(&L, EMBER_T_Q6_K, 1000);
	check_launch(&L, "head Q6_K 1000 rows K=1024 argmax", 1e-3, 1e-3);
	free_launch(&L);
}

int main(void)
{
	test_rng = 0x5EED5EED12345678ull;
	check_plans();
	check_launches();
	return check_exit("test_cuda_splitk");
}
