/*
 * acc.h - accuracy decisions: how close a SUT's next-token distributions are to a reference's
 * on the same held-out prompts, and whether the head is worse than the base. Per scored position:
 * top-1 agreement (the SUT's argmax equals the reference's) and KL(reference || SUT) computed exactly
 * on the reference's top-k support plus one tail bucket (the probability mass outside it). Per side:
 * top-1 rate with its Wilson interval, mean KL with a seeded bootstrap interval, KL p99 and max.
 *
 * Gates (all thresholds from the suite):
 *   absolute      head top-1 >= top1_min and head mean KL <= kl_max (point estimates, as the
 *                 anchor bot gates; the intervals are reported next to them);
 *   differential  the head is worse than the base beyond a margin WITH confidence: the lower
 *                 bound of the paired top-1 drop exceeds top1_drop_max, or the lower bound of the
 *                 paired KL rise exceeds kl_rise_max + kl_rise_rel x base mean KL (a base run of the
 *                 same GGUF sits at its kernels' rounding floor, so a numerical bug shows as a
 *                 multiple of it long before it nears an absolute threshold; one-sided bootstrap bounds over positions,
 *                 Bonferroni across the differential gates of all models at level alpha).
 *   greedy        advisory (reported, never changes the verdict): whether head's greedy decode
 *                 tokens equal base's on the same prompts, and where they first differ.
 * A failed gate makes the verdict eval:REJECT + accuracy-regression; a gate that could not be
 * measured (the SUT crashed, timed out) is an infra error, never a REJECT.
 */
#ifndef AB_ACC_H
#define AB_ACC_H

#include <stddef.h>
#include <stdint.h>

#include "stats.h"
#include "verdict.h"

/*
 * KL(reference || SUT) at one position. ref_lp[i] is the reference's log-prob of its i-th top id,
 * sut_lp[i] the SUT's log-prob of that same id (k of each). The mass outside the k ids forms one
 * tail bucket on each side. Returns the KL (>= 0; rounding below 0 is clamped), NAN on bad input.
 */
double ab_acc_kl(const double *ref_lp, const double *sut_lp, int k);

struct ab_acc_stats {
	int n;                         /* scored positions */
	int agree;                     /* positions where the argmax agrees */
	double top1;                   /* agree / n */
	struct ab_interval top1_ci;    /* Wilson, ci_level */
	double kl_mean;
	struct ab_interval kl_ci;      /* bootstrap (percentile) of the mean, ci_level */
	double kl_p99;
	double kl_max;
};

/* Per-side summary of n positions (agree[i] in {0,1}, kl[i] >= 0). */
int ab_acc_stats(struct ab_acc_stats *out, const int *agree, const double *kl, size_t n,
	double ci_level, uint64_t seed);

struct ab_acc_policy {
	double top1_min;               /* 0.90 */
	double kl_max;                 /* 0.20 */
	double top1_drop_max;          /* 0.01: head top-1 may not drop more than this below base */
	double kl_rise_max;            /* 0.02: head mean KL may not rise more than this above base ... */
	double kl_rise_rel;            /* 0: ... plus this multiple of the base's own mean KL */
	double alpha;                  /* 0.05: for the differential bounds (split by n_differential) */
	int n_differential;            /* differential gates in the whole family (>= 1) */
	int bootstrap_resamples;       /* 2000 */
	uint64_t seed;
};

/* Defaults as documented above. */
void ab_acc_policy_init(struct ab_acc_policy *policy);

/* The paired differences between base and head for one model, over the same positions. */
struct ab_acc_diff {
	int n;
	double top1_drop;              /* top1(base) - top1(head) */
	double top1_drop_lo;           /* one-sided lower bound at alpha / n_differential */
	double kl_rise;                /* mean(kl_head - kl_base) */
	double kl_rise_lo;             /* one-sided lower bound */
};

int ab_acc_diff(struct ab_acc_diff *out, const int *agree_base, const int *agree_head,
	const double *kl_base, const double *kl_head, size_t n, const struct ab_acc_policy *policy);

/*
 * The four gates of one model, written to out[0..3]: "top1" and "kl_mean" (absolute, on the head)
 * and "top1_drop" and "kl_rise" (differential). `model` names them; details carry the intervals
 * and position counts. Returns the number written (4).
 */
size_t ab_acc_gates(struct ab_gate_result out[4], const char *model, const struct ab_acc_stats *base,
	const struct ab_acc_stats *head, const struct ab_acc_diff *diff, const struct ab_acc_policy *policy);

/* A gate that could not be measured (infra): error = 1, with the reason as detail. */
void ab_acc_gate_error(struct ab_gate_result *out, const char *name, const char *model, const char *reason);

/*
 * The greedy-agreement gate of one model, advisory (reported, never changes the verdict): of
 * `compared` decode requests that base and head both answered in the same pair, `identical` gave
 * the same greedy tokens. first_diff is the earliest generated-token index at which any request
 * differed (-1 when none did), seen at context `ctx` of pair `pair`. Passes only when every
 * compared request is identical; value is identical / compared (NAN when nothing was compared).
 */
void ab_acc_greedy_gate(struct ab_gate_result *out, const char *model, int compared, int identical,
	int first_diff, int ctx, int pair);

#endif
