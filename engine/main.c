/*
 * main.c - the `ember` executable: parses the command line and hands over to the engine library
 * (serve.c, serve_http.c, gen.c, info.c, probe.c). Commands: serve, gen, info, logits, bench.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "draft.h"
#include "error.h"
#include "embed.h"
#include "gen.h"
#include "info.h"
#include "model.h"
#include "probe.h"
#include "serve.h"
#include "serve_http.h"
#include "spec.h"

static const char *usage_main =
	"usage: ember <command> [options]\n"
	"\n"
	"commands:\n"
	"  serve   answer the SUT protocol on stdin/stdout (DESIGN.md, Contract 1), or HTTP (--http)\n"
	"  gen     write a synthetic Qwen3 GGUF with seeded weights\n"
	"  info    print a GGUF file's metadata, tensors and model parameters\n"
	"  logits  print or save the logits of a token sequence (debugging, reference checks)\n"
	"  bench   time prefill and decode of a model on a backend\n"
	"\n"
	"`ember <command> --help` describes each command.\n";

static const char *usage_serve =
	"usage: ember serve --stdio --model FILE [--draft FILE] [--backend cpu|cuda] [--threads N] [--ctx N]\n"
	"                   [--batch N] [--max-line N] [--debug-token-delay-us N] [--debug-slowdown-prefill|decode PM]\n"
	"                   [@ARGS_FILE]\n"
	"       ember serve --http ADDR:PORT --model FILE [--draft FILE] [--backend cpu|cuda] [--threads N] [--ctx N]\n"
	"                   [--batch N] [--max-body N] [--debug-token-delay-us N] [@ARGS_FILE]\n"
	"\n"
	"--stdio loads FILE, prints the ready line, then answers one JSON request per line on stdin:\n"
	"  {\"op\":\"generate\",\"id\":1,\"prompt\":[ids],\"max_tokens\":N,\"spec\":false}\n"
	"  {\"op\":\"score\",\"id\":2,\"prompt\":[ids],\"top_k\":K,\"ids\":[[ids],...],\"first\":0}\n"
	"  {\"op\":\"quit\"}\n"
	"stdout carries only protocol lines; logs go to stderr.\n"
	"--http listens on ADDR:PORT (PORT 0: a free one, logged) until SIGTERM/SIGINT: GET /health, /props,\n"
	"/v1/models; POST /completion (llama-server) and /v1/completions (OpenAI) with token-id prompts,\n"
	"greedy, streamed per token with \"stream\": true; one generation at a time (others get 503).\n"
	"Needs an ember built with libmicrohttpd. docs/http-sut.md has the fields.\n"
	"\n"
	"  --draft FILE  a DFlash draft GGUF for \"spec\":true requests (EMBER_SPEC_DEPTH = proposals per\n"
	"                step, 1..block-1, default block-1); over --http every request\n"
	"                speculates unless it sends \"speculative.n_max\": 0 (N: N proposals per step)\n"
	"  --backend B   cpu or cuda (default: cuda when built and a GPU is present, else cpu)\n"
	"  --threads N   CPU worker threads (default: all cores)\n"
	"  --ctx N       KV cache positions (default: min(context_length, 4096))\n"
	"  --batch N     largest prefill chunk per forward pass (default: backend's)\n"
	"  --max-line N  longest request line in bytes (default 16 MiB); longer ones get an error\n"
	"  --max-body N  largest HTTP request body in bytes (default 1 MiB); larger ones get 413\n"
	"  --debug-token-delay-us N  sleep N microseconds after every decode step (fault injection for\n"
	"                tests of the harness: a slower engine on demand)\n"
	"  --debug-slowdown-prefill PM, --debug-slowdown-decode PM  make the prefill / the decode steps of\n"
	"                plain generation take (1000 + PM) / 1000 of their own time (a busy wait inside the\n"
	"                timed region, reported as debug_wait_ms): a slowdown of the same share at every\n"
	"                context, for experiments (defaults: EMBER_SLOW_PREFILL_PM, EMBER_SLOW_DECODE_PM in\n"
	"                engine/session.h, 0)\n"
	"  @ARGS_FILE    more options from a file, separated by white space, # to end of line a comment\n";

static const char *usage_gen =
	"usage: ember gen --shape NAME --quant TYPE --seed N -o FILE [--threads N]\n"
	"       ember gen --draft-for NAME --layers N --block B --seed N -o FILE [--target-layers K] [--quant TYPE]\n"
	"       ember gen --embed SMALL.gguf --shape NAME --quant TYPE [-o FILE] [--embed-draft DRAFT.gguf --draft-out F]\n"
	"\n"
	"  --shape   tiny, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b\n"
	"  --quant   f16, bf16, q8_0, q4_k_m (llama.cpp's mix), q6_k (f32 for tests)\n"
	"  --seed    weights are a function of (seed, tensor name, row, column) only\n"
	"  --threads generator threads (default: all cores)\n"
	"  --draft-for  an untrained DFlash draft (GGUF arch dflash) for a target of shape NAME: the target's\n"
	"               d/heads/ffn, N layers, block size B, K target layers spaced evenly (default K = N),\n"
	"               no token_embd/output (shared from the target); --quant defaults to f16\n"
	"  --embed   a small Qwen3 model written at shape NAME with the same function (zero padding, norms,\n"
	"            RoPE base and KV heads compensated; engine/embed.h): real-shape kernels, a trained\n"
	"            model's greedy output; --embed-draft also writes its DFlash draft to --draft-out\n"
	"            (without -o: the draft only, e.g. for a suite's models[].draft.generate)\n";

static const char *usage_info =
	"usage: ember info FILE [--probe N] [--threads N]\n"
	"\n"
	"Prints the GGUF header, metadata, tensor table (name, type, dims, offset, bytes) and, when the\n"
	"file is a Qwen3 model, its hyper-parameters, parameter count and bits per weight.\n"
	"  --probe N   also run N seeded random tokens through the CPU backend and print how peaked the\n"
	"              next-token distributions are (top-1 probability, entropy)\n"
	"Exit status: 0 ok, 1 invalid GGUF, 2 valid GGUF that ember cannot run.\n";

static const char *usage_logits =
	"usage: ember logits --model FILE (--tokens 1,2,3 | --random N [--seed S]) [--out FILE.npy]\n"
	"                    [--stepwise] [--stats] [--backend B] [--threads N] [--batch N] [--draft FILE]\n"
	"\n"
	"Runs the tokens from an empty cache and keeps the logits of every position.\n"
	"  --out F     save them as a float32 .npy array [n_tokens, n_vocab]\n"
	"  --stepwise  feed one token per forward call instead of one batched prefill\n"
	"  --stats     print top-1 probability, entropy and argmax diversity\n"
	"  --draft F   instead: the DFlash draft's logits [block - 1, n_vocab] for the block that opens\n"
	"              with the last token, the others being the target's context (checked against\n"
	"              tools/ember_ref.py draft-logits)\n"
	"Without --out or --stats, prints the argmax token of each position.\n";

static const char *usage_bench =
	"usage: ember bench --model FILE [--prompt N] [--gen N] [--reps N] [--backend B] [--threads N]\n"
	"                   [--spec --draft FILE]\n"
	"\n"
	"Times prefill of an N-token seeded prompt and N greedy decode steps, --reps times (default 3),\n"
	"and prints each run and the median. Defaults: --prompt 128 --gen 32.\n"
	"  --spec --draft F  also decode speculatively with the DFlash draft F (EMBER_SPEC_DEPTH): spec\n"
	"                    tok/s, tau, and the time per target step split into draft / verify / draft\n"
	"                    commit / other;\n"
	"                    checks that the spec tokens equal the plain ones\n";

static int parse_int(const char *s, const char *flag, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s ? s : "", &end, 10);
	if (!s || errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "ember: %s needs an integer in %lld..%lld (got '%s')\n", flag, lo, hi, s ? s : "");
		return -1;
	}
	*out = v;
	return 0;
}

/* Option helpers over argv: OPT("--x") matches and consumes the value. */
#define FLAG(name) (strcmp(argv[i], name) == 0)
#define VALUE() (i + 1 < argc ? argv[++i] : NULL)
#define INT_OPT(name, lo, hi, dst)                                   \
	if (FLAG(name)) {                                                \
		long long v_;                                                \
		if (parse_int(VALUE(), name, lo, hi, &v_))                   \
			return 2;                                                \
		dst = v_;                                                    \
		continue;                                                    \
	}

static int unknown_option(const char *cmd, const char *arg, const char *usage)
{
	fprintf(stderr, "ember %s: unknown option '%s'\n\n%s", cmd, arg, usage);
	return 2;
}

/* Options of `ember serve` with each @FILE replaced by the options it holds (whitespace-separated,
 * '#' to the end of a line a comment; no nesting; files up to 64 KiB, 256 options in all). On
 * success *out_argv (NULL-terminated) and *storage are the caller's to free. */
static int expand_args_files(int argc, char **argv, int *out_argc, char ***out_argv, char **storage)
{
	enum { FILE_MAX = 64 << 10, ARGS_MAX = 256 };
	char **args = calloc(ARGS_MAX + 1, sizeof(*args)), *text = NULL;
	size_t used = 0;
	int n = 0;
	if (!args || !(text = malloc(1))) {
		fprintf(stderr, "ember serve: out of memory\n");
		goto fail;
	}
	for (int i = 0; i < argc; i++) { /* first pass: every file's text into `text`, one after another */
		if (argv[i][0] != '@')
			continue;
		FILE *f = fopen(argv[i] + 1, "r");
		if (!f) {
			fprintf(stderr, "ember serve: cannot read %s: %s\n", argv[i] + 1, strerror(errno));
			goto fail;
		}
		char *grown = realloc(text, used + FILE_MAX + 2);
		if (!grown) {
			fclose(f);
			fprintf(stderr, "ember serve: out of memory\n");
			goto fail;
		}
		text = grown;
		size_t got = fread(text + used, 1, FILE_MAX + 1, f);
		fclose(f);
		if (got > FILE_MAX || memchr(text + used, '\0', got)) {
			fprintf(stderr, "ember serve: %s is over %d bytes or holds a NUL byte\n", argv[i] + 1, FILE_MAX);
			goto fail;
		}
		text[used + got] = '\0';
		used += got + 1;
	}
	char *p = text; /* second pass: the options, the files' split in place, in argv order */
	for (int i = 0; i < argc; i++) {
		if (argv[i][0] != '@') {
			if (n == ARGS_MAX)
				goto too_many;
			args[n++] = argv[i];
			continue;
		}
		char *end = p + strlen(p);
		while (p < end) {
			p += strspn(p, " \t\r\n");
			if (*p == '#') {
				p += strcspn(p, "\n");
				continue;
			}
			if (!*p)
				break;
			if (n == ARGS_MAX)
				goto too_many;
			args[n++] = p;
			p += strcspn(p, " \t\r\n");
			if (*p)
				*p++ = '\0';
		}
		p = end + 1;
	}
	*out_argc = n;
	*out_argv = args;
	*storage = text;
	return 0;
too_many:
	fprintf(stderr, "ember serve: more than %d options\n", ARGS_MAX);
fail:
	free(args);
	free(text);
	return -1;
}

static int cmd_serve(int argc, char **argv)
{
	struct ember_serve_config c = {0};
	struct ember_serve_http_config hc = {0};
	struct ember_session_config *sc = &c.session;
	const char *http = NULL;
	int stdio = 0, status = 2;
	char **args = NULL, *storage = NULL;
	if (expand_args_files(argc, argv, &argc, &args, &storage))
		return 2;
	argv = args;
#undef INT_OPT
#define INT_OPT(name, lo, hi, dst)                                   \
	if (FLAG(name)) {                                                \
		long long v_;                                                \
		if (parse_int(VALUE(), name, lo, hi, &v_))                   \
			goto cleanup;                                            \
		dst = v_;                                                    \
		continue;                                                    \
	}
	for (int i = 1; i < argc; i++) {
		if (FLAG("--help") || FLAG("-h")) {
			fputs(usage_serve, stdout);
			status = 0;
			goto cleanup;
		}
		if (FLAG("--stdio")) { stdio = 1; continue; }
		if (FLAG("--http")) { http = VALUE(); continue; }
		if (FLAG("--model")) { sc->model_path = VALUE(); continue; }
		if (FLAG("--draft")) { sc->draft_path = VALUE(); continue; }
		if (FLAG("--backend")) { sc->backend = VALUE(); continue; }
		INT_OPT("--threads", 1, 4096, sc->n_threads)
		INT_OPT("--ctx", 1, 1 << 24, sc->n_ctx)
		INT_OPT("--batch", 1, 1 << 20, sc->max_batch)
		INT_OPT("--max-line", 2, 1LL << 30, c.max_line)
		INT_OPT("--max-body", 1, 1LL << 30, hc.max_body)
		INT_OPT("--debug-token-delay-us", 0, 10000000, sc->token_delay_us)
		INT_OPT("--debug-slowdown-prefill", 0, 100000, sc->slow_prefill_pm)
		INT_OPT("--debug-slowdown-decode", 0, 100000, sc->slow_decode_pm)
		status = unknown_option("serve", argv[i], usage_serve);
		goto cleanup;
	}
	if (stdio == !!http || !sc->model_path) {
		fprintf(stderr, "ember serve: --model and one of --stdio / --http ADDR:PORT are required\n\n%s", usage_serve);
		goto cleanup;
	}
	if (stdio) {
		status = ember_serve_run(&c, stdin, stdout, stderr) ? 1 : 0;
		goto cleanup;
	}
	if (!ember_serve_http_available()) {
		fprintf(stderr, "ember serve: %s\n", "this ember was built without libmicrohttpd: --http is unavailable "
		        "(install libmicrohttpd's development package and reconfigure; --stdio works)");
		status = 1;
		goto cleanup;
	}
	hc.session = *sc;
	hc.listen = http;
	status = ember_serve_http_run(&hc, stderr) ? 1 : 0;
	if (status)
		fprintf(stderr, "ember serve: %s\n", ember_error_last());
cleanup:
	free(args);
	free(storage);
	return status;
}
#undef INT_OPT
#define INT_OPT(name, lo, hi, dst)                                   \
	if (FLAG(name)) {                                                \
		long long v_;                                                \
		if (parse_int(VALUE(), name, lo, hi, &v_))                   \
			return 2;                                                \
		dst = v_;                                                    \
		continue;                                                    \
	}

static void gen_progress(void *payload, uint64_t done, uint64_t total)
{
	double *last = payload;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double now = ts.tv_sec + ts.tv_nsec / 1e9;
	if (now - *last >= 2.0 || done == total) {
		*last = now;
		fprintf(stderr, "ember gen: %.1f / %.1f MiB (%.0f%%)\n", done / 1048576.0, total / 1048576.0,
		        total ? 100.0 * done / total : 100.0);
	}
}

/* ember gen --embed: the small model (and draft) at a real shape (embed.h). */
static int gen_embed(const struct ember_gen_config *c, const char *embed, const char *embed_draft, const char *draft_out,
                     const char *out, int other_options, double *last)
{
	if (!embed || !c->shape || !c->quant || (!out && !draft_out) || other_options ||
	    (embed_draft != NULL) != (draft_out != NULL)) {
		fprintf(stderr, "ember gen: --embed needs --shape, --quant and -o (no --seed, no --draft-for), and "
		        "--embed-draft goes with --draft-out (-o may then be left out: the draft only)\n\n%s", usage_gen);
		return 2;
	}
	struct ember_embed_config ec = {.source = embed, .source_draft = embed_draft, .shape = c->shape, .quant = c->quant,
	                                .n_threads = c->n_threads, .progress = gen_progress, .payload = last};
	if (ember_embed_write(&ec, out, draft_out)) {
		fprintf(stderr, "ember gen: %s\n", ember_error_last());
		return 1;
	}
	fprintf(stderr, "ember gen: wrote %s (%s embedded in %s, %s)%s%s\n", out ? out : "no target", embed, c->shape,
	        c->quant, draft_out ? " and the draft " : "", draft_out ? draft_out : "");
	return 0;
}

static int cmd_gen(int argc, char **argv)
{
	struct ember_gen_config c = {0};
	struct ember_gen_draft_config dc = {0};
	const char *out = NULL, *embed = NULL, *embed_draft = NULL, *draft_out = NULL;
	int have_seed = 0;
	double last = 0;
	for (int i = 1; i < argc; i++) {
		if (FLAG("--help") || FLAG("-h")) {
			fputs(usage_gen, stdout);
			return 0;
		}
		if (FLAG("--shape")) { c.shape = VALUE(); continue; }
		if (FLAG("--draft-for")) { dc.target_shape = VALUE(); continue; }
		if (FLAG("--embed")) { embed = VALUE(); continue; }
		if (FLAG("--embed-draft")) { embed_draft = VALUE(); continue; }
		if (FLAG("--draft-out")) { draft_out = VALUE(); continue; }
		INT_OPT("--layers", 1, 64, dc.n_layer)
		INT_OPT("--block", 2, EMBER_GEN_MAX_BLOCK, dc.block_size)
		INT_OPT("--target-layers", 1, 64, dc.n_target_layers)
		if (FLAG("--quant")) { c.quant = VALUE(); continue; }
		if (FLAG("-o") || FLAG("--out")) { out = VALUE(); continue; }
		if (FLAG("--seed")) {
			long long v;
			if (parse_int(VALUE(), "--seed", 0, INT64_MAX, &v))
				return 2;
			c.seed = (uint64_t)v;
			have_seed = 1;
			continue;
		}
		INT_OPT("--threads", 1, 4096, c.n_threads)
		return unknown_option("gen", argv[i], usage_gen);
	}
	if (embed || embed_draft || draft_out)
		return gen_embed(&c, embed, embed_draft, draft_out, out, have_seed || dc.target_shape, &last);
	if (dc.target_shape) {
		if (c.shape || !dc.n_layer || !dc.block_size || !out || !have_seed) {
			fprintf(stderr, "ember gen: --draft-for needs --layers, --block, --seed and -o (and no --shape)\n\n%s",
			        usage_gen);
			return 2;
		}
		dc.quant = c.quant;
		dc.seed = c.seed;
		dc.n_threads = c.n_threads;
		if (ember_gen_draft_write(&dc, out)) {
			fprintf(stderr, "ember gen: %s\n", ember_error_last());
			return 1;
		}
		fprintf(stderr, "ember gen: wrote %s (dflash draft for %s, %d layers, block %d, seed %" PRIu64 ")\n", out,
		        dc.target_shape, dc.n_layer, dc.block_size, dc.seed);
		return 0;
	}
	if (!c.shape || !c.quant || !out || !have_seed) {
		fprintf(stderr, "ember gen: --shape, --quant, --seed and -o are required\n\n%s", usage_gen);
		return 2;
	}
	c.progress = gen_progress;
	c.payload = &last;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ember_gen_write(&c, out)) {
		fprintf(stderr, "ember gen: %s\n", ember_error_last());
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "ember gen: wrote %s (%s, %s, seed %" PRIu64 ") in %.2f s\n", out, c.shape, c.quant, c.seed,
	        (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

/* Loads a model and creates a backend; prints the error and returns nonzero on failure. */
/* Loads a model (and a DFlash draft when draft_path is set, attached to the backend) and creates
 * a backend; prints the error and returns nonzero on failure. */
static int open_model(struct ember_model **model, const struct ember_backend_ops **ops, struct ember_backend **be,
                      const char *path, const char *backend, int threads, int n_ctx, int batch, const char *draft_path,
                      struct ember_draft **draft)
{
	if (ember_model_load(model, path)) {
		fprintf(stderr, "ember: %s\n", ember_error_last());
		return 1;
	}
	if (ember_backend_select(ops, backend)) {
		fprintf(stderr, "ember: %s\n", ember_error_last());
		return 1;
	}
	struct ember_backend_config bc = {.n_ctx = n_ctx, .n_threads = threads, .max_batch = batch};
	if (draft_path) {
		if (!ember_spec_supported(*ops)) {
			fprintf(stderr, "ember: backend %s has no speculative decoding; --draft needs cpu or cuda\n", (*ops)->name);
			return 1;
		}
		if (ember_draft_load(draft, draft_path, *model)) {
			fprintf(stderr, "ember: %s\n", ember_error_last());
			return 1;
		}
		bc.capture_layers = (*draft)->target_layers;
		bc.n_capture = (*draft)->n_target_layers;
	}
	if ((*ops)->create(be, *model, &bc) || (draft_path && (*ops)->draft_attach(*be, *draft))) {
		fprintf(stderr, "ember: backend %s: %s\n", (*ops)->name, ember_error_last());
		return 1;
	}
	return 0;
}

/* The draft's logits for the block opening with tokens[n-1] after the context tokens[0, n-1). The
 * context goes in as a prefill of all but the last few tokens, then a window of those plus three
 * junk tokens whose rows are committed and then cut back again, so a rollback is exercised too. */
static int run_draft_logits(const struct ember_backend_ops *ops, struct ember_backend *be, const struct ember_draft *d,
                            const int32_t *tokens, int n, float *logits)
{
	int32_t window[8], proposals[EMBER_DRAFT_MAX_BLOCK];
	const int n_ctx_tokens = n - 1, w = n_ctx_tokens - 1 < 4 ? n_ctx_tokens - 1 : 4, m = n_ctx_tokens - w;
	for (int i = 0; i < w; i++)
		window[i] = tokens[m + i];
	for (int i = 0; i < 3; i++)
		window[w + i] = (tokens[i % n] * 31 + 7 * i + 1) % d->hp.n_vocab;
	if (ops->forward(be, tokens, m, 0, 0, NULL, NULL) || ops->draft_commit(be, 0, m) ||
	    ops->forward(be, window, w + 3, m, 0, NULL, NULL) || ops->draft_commit(be, m, w + 3) ||
	    ops->draft_commit(be, m, w))
		return EMBER_ERROR;
	return ops->draft_propose(be, tokens[n - 1], n_ctx_tokens, d->block_size - 1, proposals, logits);
}

static void print_stats(const struct ember_probe_stats *st)
{
	printf("positions %d: top-1 probability mean %.3f (min %.3f, max %.3f), entropy mean %.3f nats,\n"
	       "  logit std %.2f, argmax = input token at %.1f%% of positions, %d distinct argmax tokens\n",
	       st->n_pos, st->top1_mean, st->top1_min, st->top1_max, st->entropy_mean, st->logit_std_mean,
	       100.0 * st->repeat_frac, st->distinct_top1);
}

static int write_npy(const char *path, const float *data, int rows, int cols)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "ember: cannot create %s: %s\n", path, strerror(errno));
		return 1;
	}
	char header[128];
	int n = snprintf(header, sizeof(header), "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
	int total = 10 + n + 1, pad = (64 - total % 64) % 64;
	uint16_t hlen = (uint16_t)(n + pad + 1);
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fputc(hlen & 0xff, f);
	fputc(hlen >> 8, f);
	fwrite(header, 1, (size_t)n, f);
	for (int i = 0; i < pad; i++)
		fputc(' ', f);
	fputc('\n', f);
	fwrite(data, sizeof(float), (size_t)rows * cols, f);
	const int write_failed = ferror(f); /* a failed write need not make fclose fail */
	if (fclose(f) != 0 || write_failed) {
		fprintf(stderr, "ember: write to %s failed\n", path);
		return 1;
	}
	return 0;
}

static int parse_token_list(const char *s, int32_t **out, int *n_out)
{
	int cap = 64, n = 0;
	int32_t *t = malloc((size_t)cap * sizeof(*t));
	while (t && s && *s) {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (end == s || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
			fprintf(stderr, "ember: --tokens must be a comma-separated list of token ids\n");
			free(t);
			return 1;
		}
		if (n == cap) {
			int32_t *g = realloc(t, (size_t)(cap *= 2) * sizeof(*t));
			if (!g) {
				fprintf(stderr, "ember: out of memory reading --tokens\n");
				free(t);
				return 1;
			}
			t = g;
		}
		t[n++] = (int32_t)v;
		s = *end ? end + 1 : end;
	}
	if (!t || n == 0) {
		fprintf(stderr, t ? "ember: --tokens is empty\n" : "ember: out of memory reading --tokens\n");
		free(t);
		return 1;
	}
	*out = t;
	*n_out = n;
	return 0;
}

/* Logits of every position for `tokens` (batched prefill, or one token per call). */
static int run_logits(const struct ember_backend_ops *ops, struct ember_backend *be, const int32_t *tokens, int n,
                      int n_vocab, int stepwise, float *logits)
{
	if (!stepwise)
		return ops->forward(be, tokens, n, 0, 1, logits, NULL);
	for (int i = 0; i < n; i++)
		if (ops->forward(be, tokens + i, 1, i, 0, logits + (size_t)i * n_vocab, NULL))
			return EMBER_ERROR;
	return 0;
}

static int cmd_logits(int argc, char **argv)
{
	const char *model_path = NULL, *out = NULL, *backend = NULL, *token_list = NULL, *draft_path = NULL;
	struct ember_draft *draft = NULL;
	int threads = 0, batch = 0, random_n = 0, stepwise = 0, stats = 0, status = 1;
	long long seed = 1;
	int32_t *tokens = NULL;
	float *logits = NULL;
	struct ember_model *m = NULL;
	const struct ember_backend_ops *ops = NULL;
	struct ember_backend *be = NULL;
	for (int i = 1; i < argc; i++) {
		if (FLAG("--help") || FLAG("-h")) {
			fputs(usage_logits, stdout);
			return 0;
		}
		if (FLAG("--model")) { model_path = VALUE(); continue; }
		if (FLAG("--tokens")) { token_list = VALUE(); continue; }
		if (FLAG("--out")) { out = VALUE(); continue; }
		if (FLAG("--backend")) { backend = VALUE(); continue; }
		if (FLAG("--draft")) { draft_path = VALUE(); continue; }
		if (FLAG("--stepwise")) { stepwise = 1; continue; }
		if (FLAG("--stats")) { stats = 1; continue; }
		INT_OPT("--random", 1, 1 << 20, random_n)
		INT_OPT("--seed", 0, INT64_MAX, seed)
		INT_OPT("--threads", 1, 4096, threads)
		INT_OPT("--batch", 1, 1 << 20, batch)
		return unknown_option("logits", argv[i], usage_logits);
	}
	if (!model_path || (!token_list == !random_n)) {
		fprintf(stderr, "ember logits: --model and one of --tokens / --random are required\n\n%s", usage_logits);
		return 2;
	}
	int n = random_n;
	if (token_list && parse_token_list(token_list, &tokens, &n))
		return 2;
	if (draft_path && n < 2) {
		fprintf(stderr, "ember logits: --draft needs at least 2 tokens (context and the block's first)\n");
		goto cleanup;
	}
	if (open_model(&m, &ops, &be, model_path, backend, threads, n + 4, batch, draft_path, &draft))
		goto cleanup;
	const int n_vocab = m->hp.n_vocab;
	if (!tokens) {
		if (!(tokens = malloc((size_t)n * sizeof(*tokens))))
			goto cleanup;
		ember_probe_random_tokens(tokens, n, n_vocab, (uint64_t)seed);
	}
	const int n_rows = draft ? draft->block_size - 1 : n; /* with a draft: its block slots 1..B-1 */
	if (!(logits = malloc((size_t)n_rows * n_vocab * sizeof(float)))) {
		fprintf(stderr, "ember logits: out of memory for %d x %d logits\n", n_rows, n_vocab);
		goto cleanup;
	}
	if (draft ? run_draft_logits(ops, be, draft, tokens, n, logits)
	          : run_logits(ops, be, tokens, n, n_vocab, stepwise, logits)) {
		fprintf(stderr, "ember logits: %s\n", ember_error_last());
		goto cleanup;
	}
	n = n_rows;
	if (out && write_npy(out, logits, n, n_vocab))
		goto cleanup;
	if (stats && !draft) {
		struct ember_probe_stats st;
		if (ember_probe_stats(&st, logits, n, n_vocab, tokens))
			goto cleanup;
		print_stats(&st);
	}
	if (!out && !stats)
		for (int i = 0; i < n; i++) {
			int best = 0;
			for (int v = 1; v < n_vocab; v++)
				if (logits[(size_t)i * n_vocab + v] > logits[(size_t)i * n_vocab + best])
					best = v;
			printf("%d%c", best, i + 1 < n ? ' ' : '\n');
		}
	status = 0;
cleanup:
	if (be)
		ops->destroy(be);
	ember_draft_free(draft);
	ember_model_free(m);
	free(tokens);
	free(logits);
	return status;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int cmd_bench(int argc, char **argv)
{
	const char *model_path = NULL, *backend = NULL, *draft_path = NULL;
	int threads = 0, n_prompt = 128, n_gen = 32, reps = 3, status = 1, spec = 0, depth = 0;
	struct ember_draft *draft = NULL;
	int32_t *plain_tokens = NULL, *spec_tokens = NULL;
	struct ember_model *m = NULL;
	const struct ember_backend_ops *ops = NULL;
	struct ember_backend *be = NULL;
	int32_t *prompt = NULL;
	for (int i = 1; i < argc; i++) {
		if (FLAG("--help") || FLAG("-h")) {
			fputs(usage_bench, stdout);
			return 0;
		}
		if (FLAG("--model")) { model_path = VALUE(); continue; }
		if (FLAG("--backend")) { backend = VALUE(); continue; }
		if (FLAG("--draft")) { draft_path = VALUE(); continue; }
		if (FLAG("--spec")) { spec = 1; continue; }
		INT_OPT("--threads", 1, 4096, threads)
		INT_OPT("--prompt", 1, 1 << 20, n_prompt)
		INT_OPT("--gen", 1, 1 << 20, n_gen)
		INT_OPT("--reps", 1, 1000, reps)
		return unknown_option("bench", argv[i], usage_bench);
	}
	if (!model_path || spec != !!draft_path) {
		fprintf(stderr, "ember bench: --model is required, and --spec goes with --draft\n\n%s", usage_bench);
		return 2;
	}
	if (open_model(&m, &ops, &be, model_path, backend, threads, n_prompt + n_gen, 0, draft_path, &draft))
		goto cleanup;
	if (draft && ember_spec_depth_from_env(draft->block_size, &depth)) {
		fprintf(stderr, "ember bench: %s\n", ember_error_last());
		goto cleanup;
	}
	double pf[1000], dc[1000];
	if (!(prompt = malloc((size_t)n_prompt * sizeof(*prompt))))
		goto cleanup;
	ember_probe_random_tokens(prompt, n_prompt, m->hp.n_vocab, 7);
	printf("%s (%s) on %s: prompt %d, gen %d\n", m->name, m->file_type, ops->device_name(be), n_prompt, n_gen);
	for (int r = 0; r < reps; r++) {
		struct ember_bench_result res;
		if (ember_probe_bench(&res, ops, be, prompt, n_prompt, n_gen)) {
			fprintf(stderr, "ember bench: %s\n", ember_error_last());
			goto cleanup;
		}
		pf[r] = res.prefill_tps;
		dc[r] = res.decode_tps;
		printf("  run %d: prefill %.1f tok/s (%.1f ms), decode %.2f tok/s (%.1f ms)\n", r + 1, res.prefill_tps,
		       res.prefill_ms, res.decode_tps, res.decode_ms);
	}
	qsort(pf, (size_t)reps, sizeof(double), cmp_double);
	qsort(dc, (size_t)reps, sizeof(double), cmp_double);
	printf("median: prefill %.1f tok/s (range %.1f..%.1f), decode %.2f tok/s (range %.2f..%.2f)\n", pf[reps / 2], pf[0],
	       pf[reps - 1], dc[reps / 2], dc[0], dc[reps - 1]);
	if (draft) {
		double sp[1000];
		if (!(plain_tokens = malloc((size_t)n_gen * sizeof(int32_t))) ||
		    !(spec_tokens = malloc((size_t)n_gen * sizeof(int32_t))))
			goto cleanup;
		if (ops->forward(be, prompt, n_prompt, 0, 0, NULL, &plain_tokens[0]) ||
		    ember_backend_decode(ops, be, plain_tokens[0], n_prompt, n_gen - 1, plain_tokens + 1)) {
			fprintf(stderr, "ember bench: %s\n", ember_error_last());
			goto cleanup;
		}
		printf("spec: draft %s (%d layers, block %d), depth %d\n", draft->name, draft->hp.n_layer, draft->block_size,
		       depth);
		for (int r = 0; r < reps; r++) {
			struct ember_spec_stats st;
			if (ember_spec_generate(ops, be, draft, prompt, n_prompt, n_gen, depth, spec_tokens, &st, NULL, NULL)) {
				fprintf(stderr, "ember bench: %s\n", ember_error_last());
				goto cleanup;
			}
			const double decode_ms = st.total_ms - st.prefill_ms, steps = st.target_steps ? st.target_steps : 1;
			sp[r] = n_gen > 1 ? (n_gen - 1) / (decode_ms / 1e3) : 0.0;
			printf("  run %d: spec decode %.2f tok/s, tau %.3f (%d accepted of %d drafted in %d steps), per step "
			       "draft %.3f ms, verify %.3f ms, draft commit %.3f ms, other %.3f ms; tokens %s plain\n", r + 1, sp[r],
			       st.accept_mean, st.accepted, st.drafted, st.target_steps, st.draft_ms / steps, st.verify_ms / steps,
			       st.commit_ms / steps, (decode_ms - st.draft_ms - st.verify_ms - st.commit_ms) / steps,
			       memcmp(spec_tokens, plain_tokens, (size_t)n_gen * sizeof(int32_t)) == 0 ? "equal" : "DIFFER from");
			if (memcmp(spec_tokens, plain_tokens, (size_t)n_gen * sizeof(int32_t)) != 0)
				goto cleanup;
		}
		qsort(sp, (size_t)reps, sizeof(double), cmp_double);
		printf("median: plain decode %.2f tok/s, spec decode %.2f tok/s (%.2fx)\n", dc[reps / 2], sp[reps / 2],
		       dc[reps / 2] > 0 ? sp[reps / 2] / dc[reps / 2] : 0.0);
	}
	status = 0;
cleanup:
	if (be)
		ops->destroy(be);
	ember_draft_free(draft);
	ember_model_free(m);
	free(prompt);
	free(plain_tokens);
	free(spec_tokens);
	return status;
}

static int cmd_info(int argc, char **argv)
{
	const char *path = NULL;
	int probe = 0, threads = 0;
	for (int i = 1; i < argc; i++) {
		if (FLAG("--help") || FLAG("-h")) {
			fputs(usage_info, stdout);
			return 0;
		}
		INT_OPT("--probe", 1, 1 << 16, probe)
		INT_OPT("--threads", 1, 4096, threads)
		if (argv[i][0] == '-' || path)
			return unknown_option("info", argv[i], usage_info);
		path = argv[i];
	}
	if (!path) {
		fprintf(stderr, "ember info: a FILE is required\n\n%s", usage_info);
		return 2;
	}
	int rc = ember_info_print(stdout, path);
	if (rc == 1)
		fprintf(stderr, "ember info: %s\n", ember_error_last());
	if (rc != 0 || !probe)
		return rc;
	char n_arg[16], t_arg[16];
	snprintf(n_arg, sizeof(n_arg), "%d", probe);
	snprintf(t_arg, sizeof(t_arg), "%d", threads);
	char *args[] = {"logits", "--model", (char *)path, "--random", n_arg, "--stats", "--backend", "cpu",
	                threads ? "--threads" : NULL, t_arg, NULL};
	printf("\nprobe (%d seeded random tokens, CPU backend):\n", probe);
	fflush(stdout);
	return cmd_logits(threads ? 10 : 8, args);
}

int main(int argc, char **argv)
{
	char *help_args[] = {argv[0], argc >= 3 ? argv[2] : NULL, "--help", NULL};
	if (argc >= 3 && strcmp(argv[1], "help") == 0) { /* `ember help gen` = `ember gen --help` */
		argc = 3;
		argv = help_args;
	}
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		fputs(usage_main, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *cmd = argv[1];
	argc--; /* the command's options start at argv[1] */
	argv++;
	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(argc, argv);
	if (strcmp(cmd, "gen") == 0)
		return cmd_gen(argc, argv);
	if (strcmp(cmd, "info") == 0)
		return cmd_info(argc, argv);
	if (strcmp(cmd, "logits") == 0)
		return cmd_logits(argc, argv);
	if (strcmp(cmd, "bench") == 0)
		return cmd_bench(argc, argv);
	fprintf(stderr, "ember: unknown command '%s'\n\n%s", cmd, usage_main);
	return 2;
}
