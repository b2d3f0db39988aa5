/*
 * speed.h - speed decisions on A/B samples: per (model, metric, ctx) series the paired log-ratios
 * d = ln(head / base), a Hodges-Lehmann ratio with a 95% interval, an outcome against the margin,
 * and the gating claims (regression below regression_ratio, verified tier) read off simultaneous
 * signed-rank bounds that hold the family-wise error at alpha across every gating series, both
 * directions and every adaptive look. It also plans the measurement: how many pairs to measure
 * before the next look, and whether a confirmation batch must run before a regression may REJECT.
 *
 * The statistical design (what a label means):
 *   - A gating series is one whose metric rule says so (decode_tps and prefill_tps by default).
 *     m = number of gating series, K = policy.looks at n_1 < .. < n_K pairs. The family-wise alpha
 *     is spent across the looks (an error-spending plan): look k may spend
 *     alpha_k = A(n_k / n_K) - A(n_(k-1) / n_K), with A(t) = alpha t (linear spending,
 *     AB_SPENDING_LINEAR; AB_SPENDING_EQUAL gives alpha / K per look, the old Bonferroni over
 *     looks). A claim at look k is made at one-sided level tail_k = alpha_k / (2 m): a union bound
 *     over m series x 2 directions x K looks, so the chance that any posted claim (a regression
 *     label or a tier) is false is at most sum alpha_k = alpha, whatever the stopping look. ci_adj
 *     is the two-sided interval with tail_k on each side; a claim made at an earlier look stands.
 *   - Stopping: a series is decided when its claims are made or can no longer change: besides the
 *     claims themselves, its equivalence interval (two-sided, policy.equivalence_level, 0.90)
 *     inside (regression_ratio, 1 + next tier) stops it as neutral for both claims (and each bound
 *     alone settles its own claim). Stopping for equivalence makes no claim, so it spends no alpha
 *     (a non-binding futility rule): the guarantee above is unchanged, and a quiet A/A or a clear
 *     change ends at the first look.
 *   - Regression: ci_adj.hi < regression_ratio ("below 0.98x base with confidence").
 *   - Verified gain: ci_adj.lo >= 1 + tiers[t]; a series' tier is the highest such t, the verdict
 *     tier the highest over gating series (never summed across contexts). So `eval:M` means: with
 *     family-wise confidence 1 - alpha, at least one context is at least 6% faster.
 *   - For the verdict (any regression? the best tier?) Holm's step-down procedure would decide at
 *     its first step, which is this Bonferroni bound; intervals are used instead of Holm p-values so
 *     that every posted claim can be checked against a posted interval.
 *   - Confirmation (policy.confirm_pairs > 0): a regression flagged by the main batch (batch 0)
 *     REJECTs only if an independent batch (batch 1) also puts the series below regression_ratio at
 *     one-sided level alpha / (number of flagged series).
 *   - Feasibility: the exact signed-rank test cannot reach `tail` with fewer than n pairs where
 *     2^-n <= tail; the first look is never below that for its own tail_1 (ab_speed_pairs_needed).
 */
#ifndef AB_SPEED_H
#define AB_SPEED_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"
#include "stats.h"

#define AB_TIER_COUNT 5             /* XS, S, M, L, XL */
#define AB_SPEED_LABEL_MAX 64       /* label buffers, NUL included (GitHub allows 50 characters) */

enum ab_outcome {
	AB_OUTCOME_NEUTRAL = 0,         /* 95% CI inside [1 - margin, 1 + margin] */
	AB_OUTCOME_IMPROVED = 1,        /* 95% CI entirely above 1 + margin */
	AB_OUTCOME_REGRESSED = 2,       /* 95% CI entirely below 1 - margin */
	AB_OUTCOME_INCONCLUSIVE = 3     /* anything else, or no valid pair */
};

enum ab_speed_method {
	AB_SPEED_WILCOXON = 0,          /* displayed CI: Wilcoxon signed-rank (Tukey-Walsh) interval */
	AB_SPEED_BOOTSTRAP_PERCENTILE = 1, /* displayed CI: percentile bootstrap of the HL estimate */
	AB_SPEED_BOOTSTRAP_BCA = 2      /* displayed CI: BCa bootstrap of the HL estimate */
};

enum ab_failure_kind {
	AB_FAILURE_CRASH = 0,           /* crashed, killed by a signal, exited early */
	AB_FAILURE_TIMEOUT = 1,
	AB_FAILURE_OOM = 2,
	AB_FAILURE_PROTOCOL = 3,        /* garbage or malformed protocol output */
	AB_FAILURE_OTHER = 4,
	AB_FAILURE_KIND_COUNT = 5
};

/* The metrics the measurement loop produces (sample.h's `metric`). */
#define AB_METRIC_DECODE "decode_tps"
#define AB_METRIC_PREFILL "prefill_tps"
#define AB_METRIC_SPEC "spec_decode_tps"      /* speculative decode tok/s, harness clock */
#define AB_METRIC_TAU "tau"                   /* mean accept length, (n - 1) / target_steps */
#define AB_METRIC_SPEC_SPEEDUP "spec_speedup" /* spec / plain decode tok/s of one process */
#define AB_METRIC_FIRST_PREFILL "first_prefill_tps" /* prefill tok/s of a length's first request */

/*
 * Per-metric settings. A metric without a rule uses policy.margin and does not gate. The default
 * rules (policy.rules NULL): decode_tps and prefill_tps gate with the policy's floor and tiers;
 * spec_decode_tps gates with them too and forms the spec family (its tier is reported apart, as
 * eval-dflash); tau gates only downwards, against 0.95 x base, labelled tau-regression, and never
 * earns a tier; spec_speedup is reported, not gated.
 */
struct ab_speed_metric_rule {
	const char *metric;             /* "decode_tps" */
	double margin;                  /* < 0: policy.margin */
	int gating;                     /* 1: REJECT and tier claims come from this metric */
	double regression_ratio;        /* <= 0: policy.regression_ratio */
	int no_tier;                    /* 1: a regression floor only, never a tier claim */
	const double *tiers;            /* AB_TIER_COUNT thresholds; NULL: policy.tiers */
	const char *label;              /* regression label for every context; NULL: by metric and ctx */
	int spec;                       /* 1: belongs to the speculative-decoding family */
};

enum ab_speed_spending {
	AB_SPENDING_LINEAR = 0,         /* alpha spent in proportion to the pairs: A(t) = alpha t */
	AB_SPENDING_EQUAL = 1           /* alpha / K at every look (Bonferroni over the looks) */
};

#define AB_SPEED_LOOKS_MAX 64

struct ab_speed_policy {
	double margin;                  /* neutral band for the outcome: ratio within 1 +- margin (0.01) */
	const struct ab_speed_metric_rule *rules; /* NULL: decode_tps and prefill_tps, both gating */
	size_t n_rules;
	double regression_ratio;        /* head/base below this with confidence is a regression (0.98) */
	double alpha;                   /* family-wise error over all claims (0.05) */
	double ci_level;                /* displayed per-series interval (0.95) */
	double tiers[AB_TIER_COUNT];    /* minimum verified gains: 0.02 0.035 0.06 0.10 0.18 */
	enum ab_speed_method method;    /* displayed CI; claims always use signed-rank bounds */
	int bootstrap_resamples;        /* 2000 */
	uint64_t seed;                  /* the evaluation's seed (bootstrap only) */
	double max_failed_fraction;     /* a gating series with more failed pairs is an infra error (0.25) */
	int pairs_min;                  /* first look (raised to the feasibility minimum) (6) */
	int pairs_max;                  /* last look (16) */
	int looks;                      /* looks budgeted between pairs_min and pairs_max (3) */
	int confirm_pairs;              /* confirmation batch size, 0: none (6) */
	enum ab_speed_spending spending; /* how alpha is spread over the looks (linear) */
	double equivalence_level;       /* equivalence (futility) interval level; 0: no equivalence stop (0.90) */
	const char *const *models;      /* suite model order, primary first; NULL: order of appearance */
	size_t n_models;
};

/* One side of a series: ok samples in the analysed batch. */
struct ab_speed_side {
	double median;                  /* of the ok values; NAN when n == 0 */
	int n;                          /* ok samples */
	int failed;                     /* failed samples (ok == 0 or a bad value) */
};

/* The confirmation batch's view of a flagged series. */
struct ab_speed_confirm {
	int tested;                     /* 1 when the confirmation batch was evaluated for this series */
	int n_pairs;                    /* valid pairs in batch 1 */
	double ratio;                   /* exp(HL) over batch 1 */
	double hi;                      /* one-sided upper bound at alpha / flagged series (ratio) */
	int confirmed;                  /* hi < regression_ratio */
};

struct ab_speed_series {
	char model[64];
	char metric[32];
	int ctx;
	int gating;
	int spec;                       /* of the speculative-decoding family (rule.spec) */
	int no_tier;                    /* gates only downwards (rule.no_tier) */
	double margin;
	double regression_ratio;        /* the floor of this series (rule or policy) */
	double tiers[AB_TIER_COUNT];    /* the tier thresholds of this series (rule or policy) */
	struct ab_speed_side base, head;
	int pairs;                      /* pairs attempted in batch 0 */
	int n_pairs;                    /* valid pairs (both sides ok); pairs - n_pairs failed */
	double ratio;                   /* exp(Hodges-Lehmann of d); NAN without valid pairs */
	struct ab_interval ci;          /* displayed interval on the ratio (policy.ci_level) */
	struct ab_interval ci_adj;      /* simultaneous interval used for claims (tail each side) */
	struct ab_interval ci_eq;       /* equivalence interval (policy.equivalence_level) */
	int equivalent;                 /* stopped as neutral: ci_eq inside (floor, 1 + next tier) */
	int claim_look;                 /* the look (1-based) whose claim stands, 0: none */
	double p_regression;            /* one-sided signed-rank p of H0: ratio >= regression_ratio */
	double p_adj;                   /* min(1, p_regression * alpha / tail_k): <= alpha iff a regression
	                                 * claim at the current look */
	enum ab_outcome outcome;
	int regression;                 /* flagged by batch 0: ci_adj.hi < regression_ratio */
	int confirmed;                  /* regression that may REJECT (confirmed, or no confirmation) */
	struct ab_speed_confirm confirm;
	int tier;                       /* highest tier index verified by this series, -1: none */
	char label[AB_SPEED_LABEL_MAX]; /* its regression label ("regression-4k"), "" if not gating */
};

struct ab_failure_counts {
	int total;                      /* samples of this side in the analysed batches */
	int failed;
	int by_kind[AB_FAILURE_KIND_COUNT];
	char example[192];              /* the first failure's reason */
};

struct ab_speed_model {
	char name[64];
	int tier;                       /* best verified tier among its gating series, -1: none */
	int reject;                     /* a confirmed regression among its series */
	int infra;                      /* one of its gating series failed too often */
	int spec_tier;                  /* the same over its spec-family series only */
	int spec_reject;
	int spec_infra;
};

struct ab_speed_result {
	struct ab_speed_series *series; /* ordered by model, metric (decode, prefill, others), ctx */
	size_t n_series;
	struct ab_speed_model *models;  /* primary first */
	size_t n_models;
	size_t n_gating;                /* m */

	struct ab_failure_counts failures[2]; /* [AB_SIDE_BASE], [AB_SIDE_HEAD], all batches */
	int infra;                      /* a gating series failed more than max_failed_fraction */
	char infra_reason[320];         /* one sentence, e.g. "head: 10 of 24 samples failed (...)" */

	int tier;                       /* verdict tier index, -1: none (computed even with REJECT) */
	int regression;                 /* some series flagged by batch 0 */
	int reject;                     /* some series confirmed */
	size_t n_spec;                  /* series of the spec family (0: spec not measured) */
	int spec_tier;                  /* best tier verified by a spec-family series, -1: none */
	int spec_reject;                /* a confirmed regression among spec-family series */
	int spec_infra;                 /* a spec-family gating series failed too often */

	/* The plan. While open, measure until batch `next_batch` holds `next_pairs` pairs (distinct
	 * pair indices), then decide again. When !open every decision above is final. */
	int open;
	int next_batch;
	int next_pairs;
	char open_reason[160];          /* why more pairs are wanted (progress line) */

	int pairs;                      /* distinct pairs seen in batch 0 */
	int confirm_pairs_seen;         /* distinct pairs seen in batch 1 */
	int pairs_min;                  /* effective first look (feasibility applied) */
	int pairs_max;                  /* effective last look */
	int confirm_pairs;              /* effective confirmation size (0: none) */
	int looks;                      /* K */
	int look;                       /* looks reached so far (0: before the first) */
	double claim_tail;              /* tail_k of the current look (of the first before it) */
	int n_points;                   /* looks in the schedule (<= looks) */
	int points[AB_SPEED_LOOKS_MAX]; /* pairs at each look */
	double tails[AB_SPEED_LOOKS_MAX]; /* tail_k of each look */
	double regression_ratio;        /* the policy's, for reasons and reports */
	double tiers[AB_TIER_COUNT];    /* the policy's tier thresholds */
	double alpha;                   /* the policy's family-wise alpha */
	double equivalence_level;       /* the policy's (0: no equivalence stop) */
	char method[640];               /* one sentence for the report */
};

/* Fills a policy with the defaults documented above (matching the suite file's defaults). */
void ab_speed_policy_init(struct ab_speed_policy *policy);

/*
 * Decides on `samples` (borrowed, any order; samples of both batches). Groups them by
 * (model, metric, ctx), pairs base and head by `pair` within each batch (a pair with a failed or
 * missing side is excluded and counted as failed), computes every series and the plan.
 * *out is allocated; free with ab_speed_result_free. Errors: AB_EINVALID for inconsistent input
 * (two samples for one side of a pair, bad side or batch, invalid policy); message in
 * ab_error_last().
 *
 * The evaluator's loop:
 *     measure policy.pairs_min pairs (or ab_speed_pairs_needed's first look) in batch 0;
 *     for (;;) { ab_speed_decide(&r, ...); if (!r->open) break;
 *                measure until batch r->next_batch holds r->next_pairs pairs; ab_speed_result_free(r); }
 * Deciding between looks is allowed (progress); it changes nothing, the plan still names the look.
 */
int ab_speed_decide(struct ab_speed_result **out, const struct ab_sample *samples, size_t n_samples,
	const struct ab_speed_policy *policy);

void ab_speed_result_free(struct ab_speed_result *result);

/*
 * Feasibility: the first look for `n_gating` gating series under `policy`: the smallest even number
 * of pairs with which the exact signed-rank test can reach alpha / (2 m K) at all, or pairs_min if
 * larger. *out_last (may be NULL) receives the effective last look (never below the first).
 */
int ab_speed_pairs_needed(int *out_first, int *out_last, const struct ab_speed_policy *policy,
	size_t n_gating);

/* The rule a metric gets under `policy` (its own rules, else the defaults); NULL: none. Borrowed. */
const struct ab_speed_metric_rule *ab_speed_rule_find(const struct ab_speed_policy *policy, const char *metric);

/* "neutral", "improved", "regressed", "inconclusive". Static string. */
const char *ab_outcome_name(enum ab_outcome outcome);
/* "XS" .. "XL" for 0..4, "none" otherwise. Static string. */
const char *ab_tier_name(int tier);
/* Tier index for a name ("M" -> 2), -1 when unknown. */
int ab_tier_from_name(const char *name);
/* "crash", "timeout", "oom", "protocol", "other". Static string. */
const char *ab_failure_kind_name(enum ab_failure_kind kind);

/* Classifies a failure reason by keywords (case-insensitive): "out of memory"/"oom" -> OOM,
 * "timeout"/"timed out"/"hang" -> TIMEOUT, "protocol"/"malformed"/"garbage"/"parse"/"invalid" ->
 * PROTOCOL, "signal"/"crash"/"exit"/"abort"/"killed"/"segfault" -> CRASH, else OTHER. */
enum ab_failure_kind ab_failure_classify(const char *reason);

/* Context as labels print it: multiples of 1024 as "4k", "16k", others as digits ("128", "1000"). */
void ab_speed_ctx_name(char *buf, size_t size, int ctx);

/*
 * The regression label of a series: "regression-<ctx>" for decode_tps, "regression-<ctx>-pp" for
 * prefill_tps, "regression-spec-<ctx>" for spec_decode_tps, prefixed by the model
 * ("regression-<model>-<ctx>") unless the model is the primary one. The model name is reduced to [A-Za-z0-9._-] (others become '-') and cut so that the label
 * fits GitHub's 50 characters with its context and suffix whole. Other metrics get
 * "regression-<ctx>-<metric>".
 */
void ab_speed_regression_label(char *buf, size_t size, const char *model, int primary,
	const char *metric, int ctx);

/* A short human name of a metric: "decode", "prefill", "spec decode", "tau", "spec speedup", else the
 * metric itself. Static or `metric`. */
const char *ab_speed_metric_short(const char *metric);

#endif
