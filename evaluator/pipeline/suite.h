/*
 * suite.h - the suite file (`abgate.suite/1`, DESIGN.md Contract 2): what to build, which SUT to run,
 * which models, which workloads and which gates. It is parsed strictly (unknown keys and wrong types
 * are errors naming the key's JSON path), validated, completed with the defaults below and handed
 * out as a plain read-only struct. Strings keep their {src} {build} {jobs} {state} {model}
 * placeholders; the build module substitutes them.
 *
 * Keys, types and defaults (optional keys may be omitted; `null` means "absent" where allowed):
 *
 *   schema                    "abgate.suite/1"                   required
 *   name                      [A-Za-z0-9._-]{1,63}               required
 *   build.configure           argv                               optional (no configure step)
 *   build.build               argv                               required
 *   build.timeout_s           int > 0                            1800 (per command)
 *   sut.command               argv                               required
 *   sut.env                   {NAME: string}                     {} (added to the inherited env)
 *   sut.ready_timeout_s       int > 0                            120
 *   sut.kind                  "stdio" | "openai"                 "stdio" (Contract 1 over stdin/stdout)
 *   sut.url                   openai: "http://127.0.0.1:{port}"  required for openai (loopback only:
 *                             | "http://localhost:..."          127.0.0.1, localhost or [::1])
 *   sut.ready_path            openai: "/..." polled until 200    "/health"
 *   sut.api                   openai: "completions" | "llama"    "completions" (POST /v1/completions;
 *                                                                "llama": llama-server's POST /completion)
 *   sut.model_name            openai: string or null             null (no "model" sent)
 *   sut.vocab_size            openai: int > 0 or null            null (read from /props or /v1/models)
 *                             The openai keys are refused for kind "stdio". {port} (command, env, url)
 *                             is a free loopback port abgate picks per SUT process.
 *   sut.request_timeout_s     int > 0                            300
 *   models[]                  1 to 16, names unique
 *     .name                   [A-Za-z0-9._-]{1,63}               required
 *     .path                   string                             required
 *     .generate               argv, run when path is missing     optional
 *     .sha256                 64 hex digits, verified if present optional / null
 *     .reference              a SUT object as `sut` above        optional / null (no accuracy)
 *     .references             {name: SUT object}, at most 4      optional (several references,
 *                             e.g. {"cpu": ..., "hf": ...}; not together with .reference)
 *     .draft                  object or null                     null (no draft: not spec-measured)
 *       .path                 string, {draft} in SUT commands    required
 *       .generate             argv, run when path is missing:    optional
 *                             it writes {draft}; {model} is the model's own file
 *       .sha256               64 hex digits or null              optional / null
 *   speed.decode.contexts     unique ints > 0                    [] (no decode metrics)
 *   speed.decode.gen_tokens   int >= 2                           128
 *   speed.prefill.contexts    unique ints > 0                    [] (no prefill metrics)
 *   speed.pairs_min           int >= 2, odd rounded up           6
 *   speed.pairs_max           int >= pairs_min, odd rounded up   16
 *   speed.confirm_pairs       int >= 0, odd rounded up           6 (0: no confirmation batch)
 *   speed.margin              [0, 0.5)                           0.01
 *   speed.regression_ratio    (0, 1]                             0.98
 *   speed.alpha               (0, 0.5)                           0.05
 *   speed.max_failed_fraction [0, 1)                             0.25
 *   speed.method              "wilcoxon" | "bootstrap"           "wilcoxon"
 *   speed.reps                int in [1, 9]                      3 (timed requests per context and
 *                             process; the sample is their median, every raw value is kept)
 *   speed.reps_ctx_max        int >= 0                           0 (contexts above it get one timed
 *                             request per process instead of reps: a long request's own length
 *                             already averages out the jitter; 0: every context gets reps)
 *   speed.gate_first_request  bool                               false (first_prefill_tps, each
 *                             length's first request in a process, is reported; true: it gates)
 *   speed.engine_clock_ratio  (1, 100]                           1.5 (the SUT's own stats claiming
 *                             this much faster than the harness clock: engine-clock-disagrees)
 *   speed.equivalence_level   (0.5, 1)                           0.90 (a series whose interval at
 *                             this level lies inside the claim thresholds stops as neutral)
 *   accuracy                  object or null                     absent: accuracy disabled
 *     .enabled                bool                               true
 *     .windows                int in [1, 4096]                   4
 *     .window_len             int in [2, 1048576]                256
 *     .score_from             int in [0, window_len)             window_len / 2
 *     .top_k                  int in [1, 1024]                   32
 *     .corpus                 path or null                       null (random token ids)
 *     .top1_min               [0, 1]                             0.90
 *     .kl_max                 >= 0                               0.20
 *     .top1_drop_max          [0, 1]                             0.01
 *     .kl_rise_max            >= 0                               0.02
 *     .kl_rise_rel            >= 0: the rise may also be this multiple 0
 *                             of the base's own mean KL
 *     .greedy_check           bool                               true
 *   spec                      object or null                     absent: spec not measured
 *     .contexts               unique ints > 0                    [] (no spec metrics)
 *     .gen_tokens             int >= 2                           128
 *     .prompts                path or null (a token corpus, the  null (seeded random ids)
 *                             format of accuracy.corpus)
 *     .regression_ratio       (0, 1]                             0.98 (spec tok/s floor)
 *     .tau_floor_ratio        (0, 1]                             0.95 (accept-length floor)
 *     .tiers                  {XS,S,M,L,XL} or null              null: the suite's tiers
 *   tiers.{XS,S,M,L,XL}       strictly increasing, in (0, 10)    0.02 0.035 0.06 0.10 0.18
 *   harness_paths             relative paths                     ["guards/","evaluator/","tools/","ci/"]
 *
 * The speed section is required and must name at least one context. Where accuracy is enabled, at
 * least one model must have a reference. Where spec names contexts, at least one model must have a
 * draft. `{draft}` (the model's draft file) may appear only in SUT commands and env (and only when
 * every model has a draft: a model without one could not be started), and in draft.generate.
 */
#ifndef AB_SUITE_H
#define AB_SUITE_H

#include <stddef.h>
#include <jansson.h>

#define AB_SUITE_SCHEMA "abgate.suite/1"
#define AB_SUITE_MAX_BYTES (1024 * 1024)    /* larger suite files are refused */
#define AB_SUITE_NAME_MAX 64                /* names are at most 63 characters */

/* An argument vector. argv[argc] is NULL, so it can go to execvp once substituted. */
struct ab_suite_argv {
	char **argv;    /* NULL when absent (argc 0) */
	int argc;
};

struct ab_suite_envvar {
	char *name;     /* [A-Za-z_][A-Za-z0-9_]* */
	char *value;    /* may hold placeholders */
};

enum ab_suite_sut_kind {
	AB_SUITE_SUT_STDIO = 0,         /* Contract 1 over stdin/stdout */
	AB_SUITE_SUT_OPENAI = 1         /* an HTTP server (OpenAI completions or llama-server native) */
};

enum ab_suite_sut_api {
	AB_SUITE_API_COMPLETIONS = 0,   /* POST /v1/completions */
	AB_SUITE_API_LLAMA = 1          /* POST /completion (llama-server native, return_tokens) */
};

/* How to run a System Under Test (the engine, or a reference). */
struct ab_suite_sut {
	enum ab_suite_sut_kind kind;
	char *url;                      /* openai: base URL with {port}; NULL for stdio */
	char *ready_path;               /* openai: "/health" by default; NULL for stdio */
	enum ab_suite_sut_api api;
	char *model_name;               /* openai: NULL = not sent */
	int vocab_size;                 /* openai: 0 = read from the server */
	struct ab_suite_argv command;
	struct ab_suite_envvar *env;    /* added to the inherited environment, in file order */
	int env_count;
	int ready_timeout_s;            /* from spawn to the ready line */
	int request_timeout_s;          /* per request, from write to its done event */
};

#define AB_SUITE_REFS_MAX 4
#define AB_SUITE_MODELS_MAX 16     /* an evaluation keeps per-model state in arrays of this size */
#define AB_SUITE_REPS_MAX 9       /* speed.reps upper bound (sample.h AB_SAMPLE_REPS_MAX) */
#define AB_SUITE_CONTEXTS_MAX 32   /* distinct contexts of decode and prefill together, and spec
                                    * contexts (one SUT process measures them all) */

/* A reference implementation for the accuracy gates: just another SUT, named. */
struct ab_suite_ref {
	char name[AB_SUITE_NAME_MAX];   /* "reference" for the single `reference` key, else the map key */
	struct ab_suite_sut sut;
};

/* A model's speculative-decoding draft (a DFlash draft file for ember). */
struct ab_suite_draft {
	char *path;                     /* may hold placeholders ({state}, {model} is not allowed) */
	struct ab_suite_argv generate;  /* argc 0: no generator; the file must exist */
	char sha256[65];                /* lower-case hex, "" when not given */
};

struct ab_suite_model {
	char name[AB_SUITE_NAME_MAX];
	char *path;                     /* may hold placeholders ({state}) */
	struct ab_suite_argv generate;  /* argc 0: no generator; the file must exist */
	char sha256[65];                /* lower-case hex, "" when not given */
	int has_reference;              /* ref_count > 0 */
	int ref_count;
	struct ab_suite_ref refs[AB_SUITE_REFS_MAX];  /* from `reference` or `references` */
	int has_draft;                  /* draft.path is set: the model is spec-measured */
	struct ab_suite_draft draft;
};

enum ab_suite_method {
	AB_SUITE_METHOD_WILCOXON = 0,   /* Wilcoxon signed-rank (Hodges-Lehmann estimate and interval) */
	AB_SUITE_METHOD_BOOTSTRAP = 1   /* percentile bootstrap of the median, seeded by the evaluation */
};

struct ab_suite_speed {
	int *decode_contexts;           /* in file order; NULL when none */
	int decode_count;
	int gen_tokens;                 /* new tokens per decode request */
	int *prefill_contexts;
	int prefill_count;
	int pairs_min;                  /* even */
	int pairs_max;                  /* even, >= pairs_min */
	int confirm_pairs;              /* even, 0 disables the confirmation batch */
	double margin;                  /* |log-ratio| CI inside +-margin is "neutral" */
	double regression_ratio;        /* head/base below this with confidence is a regression */
	double alpha;                   /* family-wise error rate (two-sided CIs at 1 - alpha) */
	double max_failed_fraction;     /* more failed samples than this is an infra error */
	enum ab_suite_method method;
	int reps;                       /* timed requests per context per process (median kept) */
	int reps_ctx_max;               /* contexts above it are timed once per process; 0: none */
	int gate_first_request;         /* 1: first_prefill_tps gates like prefill_tps */
	double engine_clock_ratio;      /* engine stats this much faster than the harness: a warning */
	double equivalence_level;       /* two-sided level of the futility (equivalence) interval */
};

struct ab_suite_accuracy {
	int enabled;                    /* 0 when the section is absent or says enabled:false */
	int windows;                    /* prompt windows per model */
	int window_len;                 /* tokens per window */
	int score_from;                 /* positions [score_from, window_len) are scored */
	int top_k;                      /* reference top-k asked for per position */
	char *corpus;                   /* token corpus file, NULL: random ids */
	double top1_min;                /* absolute gate: head top-1 agreement >= this */
	double kl_max;                  /* absolute gate: head mean KL <= this */
	double top1_drop_max;           /* differential gate: base - head top-1 <= this */
	double kl_rise_max;             /* differential gate: head - base mean KL <= this ... */
	double kl_rise_rel;             /* ... + kl_rise_rel * base mean KL (a same-GGUF base sits near
	                                 * its kernels' rounding floor, so a bug shows as a multiple) */
	int greedy_check;               /* report where head's greedy tokens first differ from base's */
};

struct ab_suite_tier {
	char name[4];                   /* "XS", "S", "M", "L", "XL" */
	double min_gain;                /* a verified gain >= this earns the tier (0.02 = 2%) */
};

#define AB_SUITE_TIER_COUNT 5

/* Speculative decoding: measured inside the same pairs, for models with a draft. */
struct ab_suite_spec {
	int *contexts;                  /* in file order; NULL when none (spec not measured) */
	int count;
	int gen_tokens;                 /* new tokens per request (plain and speculative alike) */
	char *prompts;                  /* token corpus the prompts are cut from; NULL: random ids */
	double regression_ratio;        /* spec tok/s head/base below this with confidence: REJECT */
	double tau_floor_ratio;         /* head accept length below this x base with confidence: REJECT */
	int own_tiers;                  /* 1: `tiers` was given; 0: a copy of the suite's */
	struct ab_suite_tier tiers[AB_SUITE_TIER_COUNT];
};

struct ab_suite {
	char name[AB_SUITE_NAME_MAX];
	struct ab_suite_argv configure;     /* argc 0: no configure step */
	struct ab_suite_argv build;
	int build_timeout_s;
	struct ab_suite_sut sut;
	struct ab_suite_model *models;
	int model_count;
	struct ab_suite_speed speed;
	struct ab_suite_accuracy accuracy;
	struct ab_suite_spec spec;
	struct ab_suite_tier tiers[AB_SUITE_TIER_COUNT];   /* ascending: XS first */
	char **harness_paths;
	int harness_path_count;
	char sha256[65];        /* of the suite text as read (hex), for the result record */
	char build_hash[65];    /* of the build commands (configure + build, not the timeout): build cache key */
};

/*
 * Parses and validates a suite held in memory (e.g. read from the base commit's tree). `origin`
 * names it in error messages ("guards/default.json@base"; NULL: none). On success *out is the suite,
 * which the caller frees with ab_suite_free. On failure returns AB_EINVALID (or AB_ERROR for
 * allocation failure) and ab_error_last() says why, e.g.
 * `suite: speed.decode.contexts[2]: expected a positive integer, got "4k"`.
 */
int ab_suite_load_buffer(struct ab_suite **out, const char *text, size_t len, const char *origin);

/* Reads `path` (at most AB_SUITE_MAX_BYTES) and parses it as ab_suite_load_buffer does, with the
 * path as origin. AB_ENOTFOUND when the file does not exist. */
int ab_suite_load_file(struct ab_suite **out, const char *path);

/* Frees a suite and everything it owns. NULL is fine. */
void ab_suite_free(struct ab_suite *suite);

/* Looks a model up by name. Borrowed pointer into `suite`, valid until ab_suite_free; NULL if absent. */
const struct ab_suite_model *ab_suite_model_find(const struct ab_suite *suite, const char *name);

/*
 * The effective suite (every default filled in) as a new abgate.suite/1 object: loading its dump
 * gives an equal suite. Used to print the effective configuration and to record it in the result.
 * Caller owns the reference (json_decref). NULL only on allocation failure.
 */
json_t *ab_suite_to_json(const struct ab_suite *suite);

/* The name of a method as written in the suite ("wilcoxon", "bootstrap"). Static string. */
const char *ab_suite_method_name(enum ab_suite_method method);

#endif
