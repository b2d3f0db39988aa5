/*
 * sut_http.h - the HTTP side of a SUT (suite kind "openai"): starts the server command in its own
 * process group with {port} a free loopback port, polls ready_path until 200, then sends greedy
 * streamed requests over libcurl and times them on abgate's clock. With http.sandbox.config set the
 * command runs in the sandbox behind abgate-relay and libcurl talks to its unix socket (sut_relay.h). sut.c dispatches to it when
 * ab_sut_config.http is set, so the measurement loop sees one interface (sut.h) for both kinds.
 * Faults are classified as stdio faults are (sut.h); all but AB_SUT_SUT_ERROR kill the group.
 */
#ifndef AB_SUT_HTTP_H
#define AB_SUT_HTTP_H

#include "sut.h"

typedef struct ab_sut_http ab_sut_http;

/* Shared with sut.c, which defines them: the error code of a fault kind, and recording a fault into
 * *f (copied to *out when set): for any kind but AB_SUT_SUT_ERROR the process group is killed, its
 * stderr tail kept and *dead set. Returns the error code, with the last-error message set. */
int ab_sut_fault_code(enum ab_sut_fault_kind kind);
int ab_sut_fault_record(struct ab_sut_fault *f, struct ab_sut_fault *out, ab_proc *proc, int *dead,
	enum ab_sut_fault_kind kind, const char *reason);

/* Starts the server and waits for it; *out owned by the caller (ab_sut_http_free). As ab_sut_start. */
int ab_sut_http_start(ab_sut_http **out, struct ab_sut_fault *fault, const struct ab_sut_config *config);

/* A synthesized ready object for the environment record: {"kind":"openai","api":..,"port":..,
 * "token_ids":bool,"model":{"vocab_size":N},"vocab_from":..}. Borrowed until ab_sut_http_free. */
const json_t *ab_sut_http_ready(const ab_sut_http *h);
int ab_sut_http_vocab_size(const ab_sut_http *h);
/* With config draft set: /props "spec" where the server gives it (ember), else kind "draft" with
 * block_size 0; present = 0 without a draft. */
const struct ab_sut_spec_info *ab_sut_http_spec(const ab_sut_http *h);

/*
 * One greedy streamed request. Timing: t_write is when libcurl reported the request sent, t_first
 * the arrival of the first streamed token, t_done that of the last. n_tokens is the server's usage
 * count, which must equal the streamed token events and max_tokens. tokens is NULL for api
 * "completions" (it streams text only; asking for log-probs to get ids slows the server), so
 * greedy agreement is unavailable there. stats holds {"engine_timings": ..} (llama's timings) and,
 * where the server reports them (timings.draft_n / draft_n_accepted), Contract 1's speculative
 * stats (target_steps and accept_mean the server's, else derived: "derived": true). spec: 1 asks
 * for speculative decoding (api "llama" and a draft needed, else a SUT_ERROR); with a draft loaded,
 * a plain request sends "speculative.n_max": 0, and a plain answer that drafted anyway is a
 * PROTOCOL fault.
 */
int ab_sut_http_generate(struct ab_sut_gen *out, struct ab_sut_fault *fault, ab_sut_http *h,
	const int32_t *prompt, int prompt_len, int max_tokens, int spec);

/* Scoring, for both APIs: POST /v1/completions with echo + logprobs = top_k (sut_echo.h), the
 * answer checked and mapped onto Contract 1's positions (as ab_sut_score). A server that refuses
 * the request (4xx; a 5xx naming echo/logprobs) is a SUT_ERROR "scoring unavailable ...", which the
 * accuracy gates report as not measured; a 200 answer that is malformed is a PROTOCOL fault. */
int ab_sut_http_score(struct ab_sut_scores *out, struct ab_sut_fault *fault, ab_sut_http *h,
	const struct ab_sut_score_request *request);

/* SIGTERM to the group, quit_grace_ms, then SIGKILL. 0 when it ended by itself or by the SIGTERM. */
int ab_sut_http_quit(struct ab_proc_status *out, ab_sut_http *h);
void ab_sut_http_free(ab_sut_http *h);

/* A free TCP port on 127.0.0.1 (bound to port 0, read, closed). 0 with *out set, or negative. */
int ab_sut_http_free_port(int *out);

#endif
