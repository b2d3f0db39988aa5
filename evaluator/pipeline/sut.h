/*
 * sut.h - the harness side of Contract 1 (DESIGN.md): start a System Under Test, wait for its ready
 * line, send generate/score requests and time them on abgate's own CLOCK_MONOTONIC clock, quit it.
 * Whatever the SUT does - never gets ready, crashes, hangs, prints garbage, runs out of memory -
 * ends as a classified fault (enum ab_sut_fault_kind + a short reason), never as a crash of
 * abgate. Any fault except AB_SUT_SUT_ERROR kills the process group; the handle then only answers
 * with the same fault.
 */
#ifndef AB_SUT_H
#define AB_SUT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "proc.h"

typedef struct ab_sut ab_sut;

/* How a SUT interaction ended. guards/ turns these into infra reasons ("infra: timeout"). */
enum ab_sut_fault_kind {
	AB_SUT_OK = 0,
	AB_SUT_TIMEOUT = 1,    /* no ready line / no reply within the configured time: killed */
	AB_SUT_CRASH = 2,      /* exited or died (signal, exit code) when it should be serving */
	AB_SUT_PROTOCOL = 3,   /* garbage, malformed, oversized or out-of-order line; bad ready line */
	AB_SUT_OOM = 4,        /* died with an out-of-memory hint in its stderr */
	AB_SUT_SUT_ERROR = 5,  /* the SUT answered {"event":"error"}: it keeps serving */
	AB_SUT_SANDBOX = 6     /* the sandbox around it could not start (bwrap's status fd: the command
	                        * never ran): the box's failure, no retry helps */
};

struct ab_sut_fault {
	enum ab_sut_fault_kind kind;
	char reason[256];        /* "timeout: no reply to generate #3 within 120 s", "crashed: signal 11 (SIGSEGV)" */
	char stderr_tail[4096];  /* the last lines of the SUT's stderr (CRASH/OOM/TIMEOUT/PROTOCOL), "" otherwise */
	struct ab_proc_status exit;  /* how the process ended, when it did (exited/signaled/killed) */
};

/* An HTTP SUT (suite kind "openai", see sut_http.h): the server the command starts, on loopback.
 * Scoring goes through POST /v1/completions with echo + logprobs for both (sut_echo.h). */
enum ab_sut_http_api {
	AB_SUT_HTTP_COMPLETIONS = 0,  /* OpenAI POST /v1/completions (text only: no token ids) */
	AB_SUT_HTTP_LLAMA = 1         /* llama-server POST /completion with return_tokens */
};

struct ab_sandbox_config;

/* An HTTP SUT under the sandbox (sut_relay.h): the command runs under bubblewrap with no network
 * but its own loopback, as the child of abgate-relay, which abgate reaches over a unix socket. */
struct ab_sut_sandbox {
	const struct ab_sandbox_config *config;  /* NULL: no sandbox, the server is reached over TCP */
	const char *relay;        /* the abgate-relay executable (absolute; abgate's own, never the PR's) */
	const char *socket_root;  /* per-process socket dirs are made under it (the evaluation's run dir) */
	const char *ro[8];        /* NULL-terminated: host paths the server sees read-only (tree, build, model) */
};

struct ab_sut_http_config {
	enum ab_sut_http_api api;
	const char *url;              /* "http://127.0.0.1:{port}[/prefix]"; {port} in url, argv and env is
	                               * replaced by a free loopback port picked per process */
	const char *ready_path;       /* polled until it answers 200; NULL: "/health" */
	const char *model_name;       /* sent as "model"; NULL: not sent */
	int vocab_size;               /* > 0: given; 0: read from /props or /v1/models */
	int draft;                    /* 1: the server is started with a draft (the suite's model has one):
	                               * it speculates unless a request sends "speculative.n_max": 0 */
	struct ab_sut_sandbox sandbox;  /* config NULL: started as is and reached on 127.0.0.1 */
};

struct ab_sut_config {
	const struct ab_sut_http_config *http;  /* NULL: Contract 1 over stdio; else an HTTP server */
	const char *const *argv;  /* the SUT command, placeholders already substituted, NULL-terminated */
	const char *const *env;   /* "KEY=VALUE" additions, NULL-terminated; may be NULL */
	const char *cwd;          /* NULL: inherit */
	const char *stderr_log;   /* the SUT's stderr is appended here; NULL: kept in memory (64 KiB tail) */
	int ready_timeout_ms;     /* from spawn to the ready line; <= 0: 60 s */
	int request_timeout_ms;   /* from writing a request to its done event; <= 0: 120 s */
	int quit_grace_ms;        /* after quit, before the group is killed; <= 0: 5 s */
	size_t line_max;          /* longest reply line; 0: AB_PROC_LINE_MAX_DEFAULT (32 MiB) */
	int sandbox_status;       /* 1: argv is a bwrap wrapper with --json-status-fd 3 (sandbox.h, stdio
	                           * SUTs): an exit without bwrap's exit-code record is AB_SUT_SANDBOX */
};

/* One timed generate request. Times are CLOCK_MONOTONIC ns; rates in tokens/s. */
struct ab_sut_gen {
	int32_t *tokens;      /* the generated ids, n_tokens == max_tokens; owned, see ab_sut_gen_clear */
	int n_tokens;
	json_t *stats;        /* the SUT's own "stats" object (NULL if absent); owned */
	int prompt_len;
	int64_t t_write_ns;   /* just before the write() that delivered the request's last byte */
	int64_t t_first_ns;   /* the "first" event was read */
	int64_t t_done_ns;    /* the "done" event was read */
	double ttft_s;        /* t_first - t_write */
	double prefill_tps;   /* prompt_len / ttft_s */
	double decode_tps;    /* (n_tokens - 1) / (t_done - t_first); NAN when n_tokens < 2 */
};

/* What a SUT's ready line says about speculative decoding (its "spec" object, Contract 1). */
struct ab_sut_spec_info {
	int present;          /* 1: the SUT was started with a draft and decodes speculatively on request */
	char kind[32];        /* "dflash", ... ([A-Za-z0-9._-]) */
	int block_size;       /* proposal block the draft works in; 0 when the SUT does not say */
};

/* The engine's own figures of one speculative answer (the done event's stats). */
struct ab_sut_spec_stats {
	int target_steps;     /* target forward passes of the decode loop, verify windows included */
	long drafted;         /* proposed tokens */
	long accepted;        /* accepted proposals */
	double accept_mean;   /* the engine's tau: tokens per target step, bonus token included */
};

/* One scored position: the SUT's own top-k and the log-probs of the ids the harness asked about. */
struct ab_sut_position {
	int n_top;
	int32_t *top_ids;     /* n_top ids, as the SUT ordered them */
	double *top_logprobs; /* n_top log-probs */
	int n_ids;
	double *id_logprobs;  /* log-prob of each asked id, in the order asked */
};

struct ab_sut_scores {
	int n_positions;
	struct ab_sut_position *positions;  /* owned, see ab_sut_scores_clear */
	int n_ids_bounded;    /* asked ids the SUT did not list (HTTP echo, sut_echo.h): their log-probs are
	                       * upper bounds, not the SUT's values; always 0 over stdio */
};

/* A score request. Positions first .. prompt_len-1 are scored: position p is the distribution of
 * the token after prompt[0..p]. */
struct ab_sut_score_request {
	const int32_t *prompt;
	int prompt_len;
	int top_k;                  /* 1 .. 4096 */
	int first;                  /* first scored position; 0 scores all */
	const int32_t *const *ids;  /* per scored position, the ids to report log-probs for; may be NULL */
	const int *n_ids;           /* per scored position, how many ids (ids != NULL) */
};

/*
 * Starts the SUT and waits for its ready line. Returns 0 with *out owned by the caller
 * (ab_sut_free). On failure returns negative, fills *fault (may be NULL) and sets ab_error_last()
 * to "sut: <reason>"; the process is gone then. A missing executable is a CRASH fault.
 */
int ab_sut_start(ab_sut **out, struct ab_sut_fault *fault, const struct ab_sut_config *config);

/* The ready line as parsed (borrowed, valid until ab_sut_free): the environment record keeps it. */
const json_t *ab_sut_ready(const ab_sut *sut);
/* model.vocab_size from the ready line (> 0). */
int ab_sut_vocab_size(const ab_sut *sut);
/* The ready line's spec capability (borrowed, valid until ab_sut_free); present = 0 without one. */
const struct ab_sut_spec_info *ab_sut_spec(const ab_sut *sut);

/*
 * One generate request: greedy, max_tokens new tokens, timed by the harness. Returns 0 with *out
 * filled (caller clears with ab_sut_gen_clear); negative with *fault filled otherwise (n_tokens
 * must equal max_tokens and every id must lie in [0, vocab_size), else PROTOCOL).
 */
int ab_sut_generate(struct ab_sut_gen *out, struct ab_sut_fault *fault, ab_sut *sut,
	const int32_t *prompt, int prompt_len, int max_tokens, int spec);
void ab_sut_gen_clear(struct ab_sut_gen *gen);

/*
 * One score request. The reply must have exactly prompt_len - first positions, each with 1..top_k
 * top entries and n_ids[p] id log-probs, all finite and <= 0 (small rounding allowed); its size is
 * checked against what was asked before it is parsed. Caller clears *out with ab_sut_scores_clear.
 */
int ab_sut_score(struct ab_sut_scores *out, struct ab_sut_fault *fault, ab_sut *sut,
	const struct ab_sut_score_request *request);
void ab_sut_scores_clear(struct ab_sut_scores *scores);

/* 1 and *out set when v is a finite JSON number <= 1e-3 (a log-prob; a little above 0 is
 * rounding), the one check of the stdio score op and the HTTP echo parser; 0 otherwise. */
int ab_sut_logprob_ok(const json_t *v, double *out);

/* A printable copy of untrusted bytes for messages: non-printables as '?', cut with "..." to fit cap. */
void ab_sut_snippet(char *dst, size_t cap, const char *src, size_t len);

/*
 * Sends quit, closes stdin and waits quit_grace_ms; then kills the group. Returns 0 when the SUT
 * ended on its own with exit code 0, negative otherwise (message set); *out (may be NULL) gets
 * the exit status either way. Safe after a fault (then only reports the recorded status).
 */
int ab_sut_quit(struct ab_proc_status *out, ab_sut *sut);

/* Kills the group if still running and frees. Accepts NULL. */
void ab_sut_free(ab_sut *sut);

/* "ok", "timeout", "crash", "protocol", "oom", "sut-error". */
const char *ab_sut_fault_kind_name(enum ab_sut_fault_kind kind);

/* Line parsers, exposed for tests and other runners (an HTTP adapter later). Both reject
 * non-objects, trailing bytes, NUL bytes and lines longer than max_len. */

/*
 * Parses and validates a ready line: {"ready":true,"protocol":1,"model":{"vocab_size":N>0,...},...}.
 * On success *out_ready (caller json_decref) and *out_vocab are set; AB_EINVALID with a message
 * naming the bad field otherwise.
 */
int ab_sut_parse_ready(json_t **out_ready, int *out_vocab, const char *line, size_t len, size_t max_len);

/*
 * Reads the optional "spec" object of a parsed ready line: {"kind": string, "block_size": int in
 * [2, 4096] (optional)}. Absent: *out zeroed, 0. Present but malformed: AB_EINVALID naming the field.
 */
int ab_sut_parse_spec(struct ab_sut_spec_info *out, const json_t *ready);

/*
 * Reads the spec figures of a speculative answer of n_tokens tokens from its stats object
 * (borrowed, may be NULL): target_steps an integer in [1, n_tokens - 1] (the first token comes
 * from prefill, each step yields at least one), drafted and accepted integers with
 * 0 <= accepted <= drafted, accept_mean a finite number >= 1. AB_EINVALID with the reason otherwise.
 */
int ab_sut_parse_spec_stats(struct ab_sut_spec_stats *out, const json_t *stats, int n_tokens);

/* One reply line addressed to request `expected_id`. */
enum ab_sut_event {
	AB_SUT_EVENT_FIRST = 1,
	AB_SUT_EVENT_DONE = 2,
	AB_SUT_EVENT_ERROR = 3
};

/*
 * Parses a reply line: checks it is an object whose "id" equals expected_id and whose "event" is
 * first/done/error. *out_event gets the event, *out_obj the object (caller json_decref). Returns
 * AB_EINVALID for garbage, a wrong id or an unknown event (message says which).
 */
int ab_sut_parse_reply(enum ab_sut_event *out_event, json_t **out_obj, const char *line, size_t len,
	size_t max_len, int64_t expected_id);

#endif
