/*
 * bench.c - ember-bench: decode and prefill throughput of one model on one backend, the figures
 * behind kernels/NOTES.md. Decode at context C: prefill C seeded tokens once, then time greedy
 * runs of --gen tokens from position C (each run rewrites the same positions). Prefill at length
 * L: time a forward of L tokens from position 0. Each figure is the median of --reps timed runs
 * after one discarded warm-up, printed with min, max and spread, and with its fraction of the
 * H200 limits: decode bytes per token / 4.3 TB/s, prefill FLOPs / 700 TFLOP/s.
 * --verify N times, at each --decode context, one all-rows forward of N tokens (the verify window of
 * speculative decoding, kernels/README.md) against one single-token forward, both as the server
 * calls them (host round trip included), and against the per-token time of a greedy run.
 * --spec DRAFT, at each --decode context, decodes --gen tokens speculatively with the DFlash draft
 * (EMBER_SPEC_DEPTH proposals per step) after the same prompt: spec tok/s against the plain greedy
 * run's, tau, the time per target step split into draft / verify / other (commit, host), the
 * break-even tau those give against a plain step, and whether the spec tokens equal the plain ones
 * (a mismatch fails the run).
 * --check-stepwise N compares the batched prefill's logits with N token-by-token steps on the same
 * backend (top-1 agreement and mean KL), the GPU-side consistency check of kernels/NOTES.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "draft.h"
#include "error.h"
#include "model.h"
#include "spec.h"

#define BW_LIMIT 4.3e12
#define FLOP_LIMIT 700e12
#define MAX_POINTS 16
#define MAX_REPS 100

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int parse_list(const char *s, int *out, int max)
{
	int n = 0;
	while (s && *s && n < max) {
		char *end = NULL;
		long v = strtol(s, &end, 10);
		if (end == s || v <= 0)
			return -1;
		if (*end == 'k' || *end == 'K') {
			v *= 1024;
			end++;
		}
		out[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: ember-bench --model FILE [--backend cuda|cpu] [--decode 128,4k,32k] [--prefill 512,4k,32k]\n"
	                "                   [--gen 128] [--reps 5] [--n-ctx N] [--seed S] [--check-stepwise N] [--verify N]\n"
	                "                   [--spec DRAFT]\n");
}

/* Matrix bytes read per decoded token (every layer weight plus the LM head), and the matrix
 * parameter count that a prefilled token multiplies through (same set, head excluded). */
static void model_costs(const struct ember_model *m, double *bytes, double *params)
{
	double b = (double)m->output.nbytes, p = 0;
	for (int l = 0; l < m->hp.n_layer; l++) {
		const struct ember_layer *L = &m->layers[l];
		const struct ember_tensor *ts[] = {&L->attn_q, &L->attn_k, &L->attn_v, &L->attn_output, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
		for (int i = 0; i < 7; i++) {
			b += (double)ts[i]->nbytes;
			p += (double)ts[i]->ne[0] * (double)ts[i]->ne[1];
		}
	}
	*bytes = b;
	*params = p;
}

/* Batched logits of n tokens vs n single-token steps: returns 0 when top-1 >= 0.99 and mean KL <= 1e-3. */
static int check_stepwise(const struct ember_backend_ops *ops, struct ember_backend *be, const int32_t *tokens, int n, int V)
{
	float *a = malloc((size_t)n * V * sizeof(float)), *b = malloc((size_t)V * sizeof(float));
	int agree = 0, rc = 1;
	double kl_sum = 0, kl_max = 0;
	if (!a || !b || ops->forward(be, tokens, n, 0, 1, a, NULL))
		goto done;
	for (int p = 0; p < n; p++) {
		if (ops->forward(be, tokens + p, 1, p, 0, b, NULL))
			goto done;
		const float *r = a + (size_t)p * V;
		double mr = -1e300, mc = -1e300, sr = 0, sc = 0, kl = 0;
		int ir = 0, ic = 0;
		for (int i = 0; i < V; i++) {
			if (r[i] > mr) { mr = r[i]; ir = i; }
			if (b[i] > mc) { mc = b[i]; ic = i; }
		}
		for (int i = 0; i < V; i++) {
			sr += exp(r[i] - mr);
			sc += exp(b[i] - mc);
		}
		for (int i = 0; i < V; i++) {
			const double lr = r[i] - mr - log(sr), lc = b[i] - mc - log(sc);
			kl += exp(lr) * (lr - lc);
		}
		agree += ir == ic;
		kl_sum += kl;
		kl_max = kl > kl_max ? kl : kl_max;
	}
	printf("stepwise n=%d: batched prefill vs token-by-token top-1 %.4f mean KL %.3e max KL %.3e -> %s\n", n,
	       (double)agree / n, kl_sum / n, kl_max, (agree >= 0.99 * n && kl_sum / n <= 1e-3) ? "PASS" : "FAIL");
	rc = (agree >= 0.99 * n && kl_sum / n <= 1e-3) ? 0 : 2;
done:
	if (rc == 1)
		fprintf(stderr, "ember-bench: stepwise check: %s\n", ember_error_last());
	free(a);
	free(b);
	return rc;
}

static void report(const char *what, int ctx, double *tps, int reps, double limit_frac_per_tps, const char *limit_name)
{
	qsort(tps, (size_t)reps, sizeof(double), cmp_double);
	const double med = reps % 2 ? tps[reps / 2] : 0.5 * (tps[reps / 2 - 1] + tps[reps / 2]);
	printf("%-8s ctx=%-6d tok/s median %10.1f  min %10.1f  max %10.1f  spread %5.1f%%  %s %5.1f%%  (n=%d)\n", what, ctx, med,
	       tps[0], tps[reps - 1], 100.0 * (tps[reps - 1] - tps[0]) / med, limit_name, 100.0 * med * limit_frac_per_tps, reps);
	fflush(stdout);
}

/* Median, min and max of reps times in ms (sorts t). */
static double ms_stats(double *t, int reps, double *lo, double *hi)
{
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	*lo = t[0] * 1e3;
	*hi = t[reps - 1] * 1e3;
	return (reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2])) * 1e3;
}

/* --verify: a window of n tokens at context C vs one decode step there (both rewrite positions C..). */
static int bench_verify(const struct ember_backend_ops *ops, struct ember_backend *be, const int32_t *tokens, int C, int n,
                        int reps, double greedy_ms)
{
	double tw[MAX_REPS], ts[MAX_REPS];
	int32_t am[16];
	for (int r = -2; r < reps; r++) {
		double t = now_s();
		if (ops->forward(be, tokens + C, n, C, 1, NULL, am))
			return 1;
		if (r >= 0)
			tw[r] = now_s() - t;
		t = now_s();
		if (ops->forward(be, tokens + C, 1, C, 0, NULL, am))
			return 1;
		if (r >= 0)
			ts[r] = now_s() - t;
	}
	double wl, wh, sl, sh;
	const double wm = ms_stats(tw, reps, &wl, &wh), sm = ms_stats(ts, reps, &sl, &sh);
	printf("verify   ctx=%-6d n=%-2d window ms median %8.3f  min %8.3f  max %8.3f  spread %5.1f%% | step ms median %8.3f  "
	       "min %8.3f  max %8.3f  spread %5.1f%% | window/step %.3f  window/greedy-token %.3f  (n=%d)\n",
	       C, n, wm, wl, wh, 100.0 * (wh - wl) / wm, sm, sl, sh, 100.0 * (sh - sl) / sm, wm / sm, wm / greedy_ms, reps);
	fflush(stdout);
	return 0;
}

/* --spec: gen tokens after the C-token prompt, speculatively (reps timed runs after one warm-up)
 * against `plain` (the greedy tokens: plain[0] from the prefill, then decode_greedy), whose decode
 * ran at plain_tps tokens/s. Returns 0, 1 on an engine error, 2 when the tokens differ. */
static int bench_spec(const struct ember_backend_ops *ops, struct ember_backend *be, const struct ember_draft *d,
                      const int32_t *tokens, int C, int gen, int reps, const int32_t *plain, double plain_tps)
{
	int depth = 0, same = 1;
	double tps[MAX_REPS], draft[MAX_REPS], verify[MAX_REPS], other[MAX_REPS], tau = 0;
	struct ember_spec_stats st = {0};
	int32_t *got = malloc((size_t)gen * sizeof(int32_t));
	if (!got || ember_spec_depth_from_env(d->block_size, &depth)) {
		free(got);
		return 1;
	}
	for (int r = -1; r < reps; r++) {
		if (ember_spec_generate(ops, be, d, tokens, C, gen, depth, got, &st, NULL, NULL)) {
			free(got);
			return 1;
		}
		same &= memcmp(got, plain, (size_t)gen * sizeof(int32_t)) == 0;
		if (r < 0)
			continue;
		const double decode_ms = st.total_ms - st.prefill_ms, steps = st.target_steps ? st.target_steps : 1;
		tps[r] = (gen - 1) / (decode_ms * 1e-3);
		draft[r] = st.draft_ms / steps * 1e-3;
		verify[r] = st.verify_ms / steps * 1e-3;
		other[r] = (decode_ms - st.draft_ms - st.verify_ms) / steps * 1e-3;
		tau = st.accept_mean;
	}
	double lo, hi, dl, dh, vl, vh, ol, oh;
	qsort(tps, (size_t)reps, sizeof(double), cmp_double);
	const double med = reps % 2 ? tps[reps / 2] : 0.5 * (tps[reps / 2 - 1] + tps[reps / 2]);
	lo = tps[0];
	hi = tps[reps - 1];
	const double dm = ms_stats(draft, reps, &dl, &dh), vm = ms_stats(verify, reps, &vl, &vh), om = ms_stats(other, reps, &ol, &oh);
	const double step_ms = 1e3 / plain_tps;
	printf("spec     ctx=%-6d depth=%-2d spec tok/s median %8.1f  min %8.1f  max %8.1f  spread %5.1f%% | plain tok/s %8.1f "
	       "| speedup %.3f | tau %.3f (%d steps, %d drafted, %d accepted)\n",
	       C, depth, med, lo, hi, 100.0 * (hi - lo) / med, plain_tps, med / plain_tps, tau, st.target_steps, st.drafted,
	       st.accepted);
	printf("spec     ctx=%-6d per step ms: draft %.3f [%.3f..%.3f] verify %.3f [%.3f..%.3f] other %.3f [%.3f..%.3f] | "
	       "plain step %.3f | draft/step %.3f | break-even tau %.2f | spec tokens == plain tokens: %s (%d tokens)\n",
	       C, dm, dl, dh, vm, vl, vh, om, ol, oh, step_ms, dm / step_ms, (dm + vm + om) / step_ms, same ? "yes" : "NO", gen);
	fflush(stdout);
	free(got);
	return same ? 0 : 2;
}

int main(int argc, char **argv)
{
	const char *model_path = NULL, *backend_name = NULL, *draft_path = NULL;
	struct ember_draft *draft = NULL;
	int decode_ctx[MAX_POINTS], prefill_len[MAX_POINTS], n_decode = 0, n_prefill = 0;
	int gen = 128, reps = 5, n_ctx = 0, stepwise = 0, verify = 0;
	uint64_t seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--model") && v) model_path = argv[++i];
		else if (!strcmp(a, "--backend") && v) backend_name = argv[++i];
		else if (!strcmp(a, "--decode") && v) n_decode = parse_list(argv[++i], decode_ctx, MAX_POINTS);
		else if (!strcmp(a, "--prefill") && v) n_prefill = parse_list(argv[++i], prefill_len, MAX_POINTS);
		else if (!strcmp(a, "--gen") && v) gen = atoi(argv[++i]);
		else if (!strcmp(a, "--reps") && v) reps = atoi(argv[++i]);
		else if (!strcmp(a, "--n-ctx") && v) n_ctx = atoi(argv[++i]);
		else if (!strcmp(a, "--seed") && v) seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(a, "--check-stepwise") && v) stepwise = atoi(argv[++i]);
		else if (!strcmp(a, "--verify") && v) verify = atoi(argv[++i]);
		else if (!strcmp(a, "--spec") && v) draft_path = argv[++i];
		else {
			usage();
			return 2;
		}
	}
	if (!model_path || n_decode < 0 || n_prefill < 0 || gen < 1 || reps < 1 || reps > MAX_REPS || verify < 0 || verify == 1 ||
	    verify > 16) {
		usage();
		return 2;
	}
	const struct ember_backend_ops *ops = backend_name ? ember_backend_find(backend_name) : ember_backend_default();
	if (!ops) {
		fprintf(stderr, "ember-bench: backend '%s' is not built in\n", backend_name);
		return 1;
	}
	char why[256] = "";
	if (!ops->available(why, sizeof(why))) {
		fprintf(stderr, "ember-bench: backend %s unavailable: %s\n", ops->name, why);
		return 1;
	}
	struct ember_model *model = NULL;
	struct ember_backend *be = NULL;
	int32_t *tokens = NULL, *out = NULL;
	int rc = 1;
	if (ember_model_load(&model, model_path)) {
		fprintf(stderr, "ember-bench: %s\n", ember_error_last());
		return 1;
	}
	int need_ctx = 0;
	for (int i = 0; i < n_decode; i++)
		need_ctx = decode_ctx[i] + (gen > verify ? gen : verify) > need_ctx ? decode_ctx[i] + (gen > verify ? gen : verify) : need_ctx;
	for (int i = 0; i < n_prefill; i++)
		need_ctx = prefill_len[i] > need_ctx ? prefill_len[i] : need_ctx;
	need_ctx = stepwise > need_ctx ? stepwise : need_ctx;
	struct ember_backend_config cfg = {.n_ctx = n_ctx > 0 ? n_ctx : need_ctx};
	double t0 = now_s();
	if (draft_path) {
		if (!ember_spec_supported(ops)) {
			fprintf(stderr, "ember-bench: backend %s has no speculative decoding\n", ops->name);
			goto cleanup;
		}
		if (ember_draft_load(&draft, draft_path, model)) {
			fprintf(stderr, "ember-bench: %s\n", ember_error_last());
			goto cleanup;
		}
		cfg.capture_layers = draft->target_layers;
		cfg.n_capture = draft->n_target_layers;
	}
	if (ops->create(&be, model, &cfg) || (draft && ops->draft_attach(be, draft))) {
		fprintf(stderr, "ember-bench: %s backend: %s\n", ops->name, ember_error_last());
		goto cleanup;
	}
	if (draft)
		printf("draft %s (%s, %d layers, block %d, %d target layers)\n", draft->name, draft->file_type,
		       draft->hp.n_layer, draft->block_size, draft->n_target_layers);
	double bytes_tok, params;
	model_costs(model, &bytes_tok, &params);
	const struct ember_hparams *hp = &model->hp;
	printf("model %s (%s, %d layers, n_embd %d, vocab %d), %.2f GB of matrices; backend %s on %s, loaded in %.1f s\n",
	       model->name, model->file_type, hp->n_layer, hp->n_embd, hp->n_vocab, bytes_tok / 1e9, ops->name,
	       ops->device_name(be), now_s() - t0);
	const char *toggles[] = {"EMBER_GRAPHS", "EMBER_GEMV", "EMBER_ATTN_SPLIT", "EMBER_FA", "EMBER_PREFILL_CHUNK", "EMBER_PDL",
	                         "EMBER_GEMV_STREAM", "EMBER_GEMV_WARPS", "EMBER_GEMV_RING", "EMBER_GEMV_CTAS", "EMBER_ATTN_LEAN",
	                         "EMBER_ATTN_PDL", "EMBER_VERIFY", "EMBER_WIN_SPLIT", "EMBER_WIN_WARPS", "EMBER_WIN_ATTN",
	                         "EMBER_WIN_PDL", "EMBER_DRAFT_ATTN", "EMBER_DRAFT_WEIGHTS"};
	printf("toggles:");
	for (size_t i = 0; i < sizeof(toggles) / sizeof(toggles[0]); i++)
		printf(" %s=%s", toggles[i], getenv(toggles[i]) ? getenv(toggles[i]) : "(default)");
	printf("\n");
	fflush(stdout);

	tokens = malloc((size_t)(need_ctx + 1) * sizeof(int32_t));
	out = malloc((size_t)gen * sizeof(int32_t));
	if (!tokens || !out)
		goto cleanup;
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	for (int i = 0; i <= need_ctx; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		tokens[i] = (int32_t)(s % (uint64_t)hp->n_vocab);
	}
	if (stepwise > 0 && (rc = check_stepwise(ops, be, tokens, stepwise, hp->n_vocab)) != 0)
		goto cleanup;
	rc = 1;
	const double kv_bytes_per_pos = 2.0 * hp->n_layer * hp->n_head_kv * hp->head_dim * 2.0;
	double tps[MAX_REPS];

	for (int i = 0; i < n_prefill; i++) {
		const int L = prefill_len[i];
		int32_t am;
		for (int r = -1; r < reps; r++) {
			const double t = now_s();
			if (ops->forward(be, tokens, L, 0, 0, NULL, &am)) {
				fprintf(stderr, "ember-bench: prefill %d: %s\n", L, ember_error_last());
				goto cleanup;
			}
			if (r >= 0)
				tps[r] = L / (now_s() - t);
		}
		const double flops = 2.0 * params * L + 2.0 * hp->n_head * hp->head_dim * hp->n_layer * (double)L * (L + 1);
		report("prefill", L, tps, reps, flops / L / FLOP_LIMIT, "of 700 TFLOP/s");
	}
	for (int i = 0; i < n_decode; i++) {
		const int C = decode_ctx[i];
		int32_t am;
		if (ops->forward(be, tokens, C, 0, 0, NULL, &am)) {
			fprintf(stderr, "ember-bench: context %d: %s\n", C, ember_error_last());
			goto cleanup;
		}
		for (int r = -1; r < reps; r++) {
			const double t = now_s();
			if (ops->decode_greedy) {
				if (ops->decode_greedy(be, tokens[C], C, gen, out)) {
					fprintf(stderr, "ember-bench: decode at %d: %s\n", C, ember_error_last());
					goto cleanup;
				}
			} else {
				int32_t tok = tokens[C];
				for (int g = 0; g < gen; g++) {
					if (ops->forward(be, &tok, 1, C + g, 0, NULL, &tok)) {
						fprintf(stderr, "ember-bench: decode at %d: %s\n", C, ember_error_last());
						goto cleanup;
					}
				}
			}
			if (r >= 0)
				tps[r] = gen / (now_s() - t);
		}
		const double bytes = bytes_tok + kv_bytes_per_pos * (C + gen / 2.0);
		report("decode", C, tps, reps, bytes / BW_LIMIT, "of 4.3 TB/s");
		const double greedy_tps = tps[reps / 2];
		if (verify && bench_verify(ops, be, tokens, C, verify, reps, 1e3 / greedy_tps)) {
			fprintf(stderr, "ember-bench: verify at %d: %s\n", C, ember_error_last());
			goto cleanup;
		}
		if (draft) {
			/* the plain tokens of the spec run: the prefill's argmax, then gen - 1 greedy steps */
			if (ops->forward(be, tokens, C, 0, 0, NULL, &out[0]) ||
			    (gen > 1 && ember_backend_decode(ops, be, out[0], C, gen - 1, out + 1))) {
				fprintf(stderr, "ember-bench: plain tokens at %d: %s\n", C, ember_error_last());
				goto cleanup;
			}
			int src = bench_spec(ops, be, draft, tokens, C, gen, reps, out, greedy_tps);
			if (src) {
				if (src == 1)
					fprintf(stderr, "ember-bench: spec at %d: %s\n", C, ember_error_last());
				rc = src;
				goto cleanup;
			}
		}
	}
	rc = 0;
cleanup:
	if (be)
		ops->destroy(be);
	ember_draft_free(draft);
	ember_model_free(model);
	free(tokens);
	free(out);
	return rc;
}
