/*
 * mock_sut.c - a System Under Test for abgate's tests: speaks Contract 1 (DESIGN.md) on
 * stdin/stdout with configurable speed, noise, drift and failure modes. Self-contained (libc +
 * libm), so fixture repositories can commit this file and build it with `cc -O2 -o mock_sut
 * mock_sut.c -lm`. Tokens and scores are deterministic functions of the prompt; only timing is noisy.
 *
 * Settings, lowest precedence first: the config file, then MOCK_SUT_<KEY> environment variables
 * (upper case, e.g. MOCK_SUT_DECODE_TPS=500), then flags (--key=value or --key value). The config file
 * is --config FILE, else $MOCK_SUT_CONFIG, else mock_sut.conf next to the executable if present.
 * Its lines are "key = value"; '#' starts a comment. Two commits of a fixture repo can therefore
 * differ only in their mock_sut.conf (e.g. head: speed = 0.8 for a 20% slower SUT).
 *
 *   vocab N            vocabulary size in the ready line (32000)
 *   decode_tps X       decode speed in tokens/s; 0 = no decode delay (0)
 *   prefill_tps X      prefill speed in prompt tokens/s; 0 = no prefill delay (0)
 *   speed F            multiplies both speeds: 0.8 is 20% slower, 1.2 is 20% faster (1)
 *   decode_speed F     multiplies the decode speed only (1)
 *   prefill_speed F    multiplies the prefill speed only (1)
 *   noise S            per-request log-normal noise: duration *= exp(S * z) (0)
 *   noise_dist D       z is "normal", "t" (Student-t, heavy-tailed) or "outlier" (normal, plus
 *                      outlier_p of requests slowed by outlier_factor) (normal)
 *   noise_df N         degrees of freedom of the t distribution (3)
 *   outlier_p P        outlier probability (0.05);  outlier_factor F  their slowdown (3)
 *   process_noise S    one log-normal factor per process, like real process-level variance (0)
 *   seed N             noise seed; 0 = from time and pid (0)
 *   drift D            durations grow by D per request served (1 + D*count) (0)
 *   drift_file PATH    keeps that request count across processes (locked counter file)
 *   drift_per_s D      durations grow by D per second since drift_epoch (0)
 *   drift_epoch T      unix time the wall-clock drift starts from (process start)
 *   ready_delay_ms N   "loading" time before the ready line (0)
 *   ready_json TEXT    print TEXT as the ready line instead of the real one (malformed-ready tests)
 *   stderr_lines N     log lines written to stderr at start-up (1)
 *   never_ready 0|1    load forever: no ready line (0)
 *   exit_immediately C exit with code C before the ready line; -1 = off (-1)
 *   crash_after N      crash on request N+1 (requests are generate/score, 1-based); -1 = off
 *   crash_signal S     segv | abort | kill (segv)
 *   hang_after N       stop answering from request N+1 (sleeps forever); -1 = off
 *   ignore_term 0|1    ignore SIGTERM (only SIGKILL ends it) (0)
 *   garbage_after N    answer request N+1 and later with a non-JSON line; -1 = off
 *   huge_after N       answer request N+1 with one line of huge_bytes bytes; -1 = off
 *   huge_bytes N       (67108864)
 *   error_after N      answer requests after N with an error event, keep serving; -1 = off
 *   oom_after N        on request N+1: "CUDA_ERROR_OUT_OF_MEMORY" on stderr, then SIGKILL itself
 *   wrong_id_after N   answer requests after N with the wrong id; -1 = off
 *   short_after N      return one token too few after N requests; -1 = off
 *   diverge_at N       generated tokens from index N on differ from the default ones (a numerical
 *                      change that flips greedy decoding); -1 = off
 *   score_noise S      deterministic perturbation of the score logits (0)
 *   score_ascending 0|1 list each position's "top" entries least likely first (the protocol does
 *                      not order them) (0)
 *   quit_exit C        exit code on quit (0)
 *   first_use_ms X     the first request of each prompt length in a process pays X ms more prefill
 *                      (inside prefill_ms too), like a lazily set-up shape (0)
 *   clock_lie F        the stats' prefill_ms and decode_ms are divided by F: the engine claims to be
 *                      F times faster than it is (1)
 *   early_done 0|1     send "done" right after "first" and do the decode work afterwards, before
 *                      reading the next request (an engine that answers before the work is done) (0)
 *
 * Speculative decoding (Contract 1's "spec"), greedy and so token-exact unless told otherwise:
 *   draft PATH         started with a draft (any non-empty value, e.g. --draft {draft}): the ready line
 *                      says "spec":{"kind":"dflash","block_size":B}; without one, "spec":true requests
 *                      get an error event ("")
 *   block_size B       draft block (16)
 *   accept_len T       mean accept length tau over prompts, bonus token included (4)
 *   accept_spread S    per-prompt tau = accept_len * (1 + S * u), u uniform in [-1, 1) from the prompt
 *                      hash, so tau is deterministic per prompt, as greedy tau is per prompt and build;
 *                      clipped to [1, B] (0.3)
 *   verify_cost F      one verify window costs F plain decode steps (1)
 *   draft_cost F       one draft pass costs F plain decode steps, divided by draft_speed (0.6)
 *   draft_speed F      1.25 is a 25% faster draft (1)
 *   spec_disabled 0|1  "spec":true decodes plainly: tau 1, no draft cost (a build that switched it off) (0)
 *   spec_diverge_at N  speculative tokens from index N on differ from the plain ones; -1 = off
 *   spec_diverge_file PATH  with spec_diverge_at: only the first spec_diverge_count speculative
 *                      answers long enough to diverge (more than spec_diverge_at tokens), counted in
 *                      this locked file across processes, diverge (1)
 *   spec_stats_lie F   multiplies the accept_mean the stats report (1)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define LINE_CAP ((size_t)128 << 20)
#define JSON_DEPTH_MAX 32
#define PEAKS 64

/* ---- settings ---- */

struct setting {
	const char *key;
	double num;
	char *str;
};

static struct setting settings[] = {
	{"vocab", 32000, NULL}, {"decode_tps", 0, NULL}, {"prefill_tps", 0, NULL}, {"speed", 1, NULL},
	{"decode_speed", 1, NULL}, {"prefill_speed", 1, NULL}, {"noise", 0, NULL}, {"noise_dist", 0, NULL},
	{"noise_df", 3, NULL}, {"outlier_p", 0.05, NULL}, {"outlier_factor", 3, NULL},
	{"process_noise", 0, NULL}, {"seed", 0, NULL}, {"drift", 0, NULL}, {"drift_file", 0, NULL},
	{"drift_per_s", 0, NULL}, {"drift_epoch", 0, NULL}, {"ready_delay_ms", 0, NULL},
	{"ready_json", 0, NULL}, {"stderr_lines", 1, NULL}, {"never_ready", 0, NULL},
	{"exit_immediately", -1, NULL}, {"crash_after", -1, NULL}, {"crash_signal", 0, NULL},
	{"hang_after", -1, NULL}, {"ignore_term", 0, NULL}, {"garbage_after", -1, NULL},
	{"huge_after", -1, NULL}, {"huge_bytes", 67108864, NULL}, {"error_after", -1, NULL},
	{"oom_after", -1, NULL}, {"wrong_id_after", -1, NULL}, {"short_after", -1, NULL},
	{"diverge_at", -1, NULL}, {"score_noise", 0, NULL}, {"score_ascending", 0, NULL},
	{"quit_exit", 0, NULL}, {"draft", 0, NULL}, {"block_size", 16, NULL}, {"accept_len", 4, NULL},
	{"accept_spread", 0.3, NULL}, {"verify_cost", 1, NULL}, {"draft_cost", 0.6, NULL}, {"draft_speed", 1, NULL},
	{"spec_disabled", 0, NULL}, {"spec_diverge_at", -1, NULL}, {"spec_diverge_file", 0, NULL},
	{"spec_diverge_count", 1, NULL}, {"spec_stats_lie", 1, NULL}, {"first_use_ms", 0, NULL},
	{"clock_lie", 1, NULL}, {"early_done", 0, NULL},
};

static struct setting *find_setting(const char *key, size_t len)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		if (strlen(settings[i].key) == len && strncmp(settings[i].key, key, len) == 0)
			return &settings[i];
	return NULL;
}

static double num(const char *key)
{
	return find_setting(key, strlen(key))->num;
}

static const char *str(const char *key)
{
	return find_setting(key, strlen(key))->str;
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "mock_sut: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static void set_value(const char *key, size_t key_len, const char *value)
{
	struct setting *s = find_setting(key, key_len);
	char name[64];
	snprintf(name, sizeof(name), "%.*s", (int)(key_len < 60 ? key_len : 60), key);
	if (!s)
		die("unknown setting '%s'", name);
	free(s->str);
	s->str = strdup(value);
	char *end;
	double v = strtod(value, &end);
	s->num = (end != value && *end == '\0') ? v : 0;
}

static void load_config(const char *path, int required)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	if (!f) {
		if (required)
			die("cannot open config %s", path);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *eq = strchr(line, '=');
		char *k = line;
		while (*k == ' ' || *k == '\t')
			k++;
		if (!eq) {
			if (strspn(k, " \t\r\n") != strlen(k))
				die("config line without '=': %s", line);
			continue;
		}
		char *kend = eq;
		while (kend > k && (kend[-1] == ' ' || kend[-1] == '\t'))
			kend--;
		char *v = eq + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		size_t vlen = strlen(v);
		while (vlen && strchr(" \t\r\n", v[vlen - 1]))
			v[--vlen] = '\0';
		set_value(k, (size_t)(kend - k), v);
	}
	fclose(f);
}

static void configure(int argc, char **argv)
{
	const char *config = getenv("MOCK_SUT_CONFIG");
	int required = config != NULL;
	char exe_conf[4096];

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--config=", 9) == 0)
			config = argv[i] + 9, required = 1;
		else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			config = argv[++i], required = 1;
	}
	if (!config) {
		ssize_t n = readlink("/proc/self/exe", exe_conf, sizeof(exe_conf) - 32);
		if (n > 0) {
			exe_conf[n] = '\0';
			char *slash = strrchr(exe_conf, '/');
			if (slash) {
				strcpy(slash + 1, "mock_sut.conf");
				config = exe_conf;
			}
		}
	}
	if (config)
		load_config(config, required);
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		char env[80];
		size_t j = 0;
		j = (size_t)snprintf(env, sizeof(env), "MOCK_SUT_");
		for (const char *k = settings[i].key; *k && j + 1 < sizeof(env); k++)
			env[j++] = (char)(*k >= 'a' && *k <= 'z' ? *k - 32 : *k);
		env[j] = '\0';
		const char *v = getenv(env);
		if (v)
			set_value(settings[i].key, strlen(settings[i].key), v);
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) != 0)
			die("unexpected argument '%s'", a);
		a += 2;
		const char *eq = strchr(a, '=');
		if (strncmp(a, "config", 6) == 0 && (a[6] == '\0' || a[6] == '=')) {
			if (!eq)
				i++;
			continue;
		}
		if (eq)
			set_value(a, (size_t)(eq - a), eq + 1);
		else if (i + 1 < argc)
			set_value(a, strlen(a), argv[++i]);
		else
			die("flag --%s needs a value", a);
	}
	if (num("vocab") < 1 || num("vocab") > 100000000)
		die("vocab must be in [1, 1e8]%s", "");
}

/* ---- randomness (splitmix64) ---- */

static uint64_t rng_state;

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static double uniform(uint64_t *state)
{
	*state = mix64(*state);
	return ((double)(*state >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(uint64_t *state)
{
	double u1 = uniform(state), u2 = uniform(state);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* One multiplicative noise factor for a duration. */
static double noise_factor(void)
{
	double sigma = num("noise");
	const char *dist = str("noise_dist") ? str("noise_dist") : "normal";
	double z = normal(&rng_state);
	if (strcmp(dist, "t") == 0) {
		int df = (int)num("noise_df") > 0 ? (int)num("noise_df") : 3;
		double chi2 = 0;
		for (int i = 0; i < df; i++) {
			double g = normal(&rng_state);
			chi2 += g * g;
		}
		z = z / sqrt(chi2 / df);
	}
	double f = exp(sigma * z);
	if (strcmp(dist, "outlier") == 0 && uniform(&rng_state) < num("outlier_p"))
		f *= num("outlier_factor");
	return f;
}

/* ---- clock ---- */

static double now_s(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts = {(time_t)t, (long)((t - floor(t)) * 1e9)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- a tiny JSON reader: enough for requests, bounded, never trusts its input ---- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype type;
	double num;
	const char *raw;      /* source text of the value (numbers: echoed back as the id) */
	size_t raw_len;
	size_t n;             /* array/object entries */
	struct jv *items;
	char **keys;          /* object keys (unescaped bytes not needed: compared raw) */
};

struct jparser {
	const char *s, *end;
	int depth;
};

static void jv_free(struct jv *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jv_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	memset(v, 0, sizeof(*v));
}

static void skip_ws(struct jparser *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
		p->s++;
}

static int parse_value(struct jparser *p, struct jv *out);

static int parse_string_raw(struct jparser *p, const char **start, size_t *len)
{
	if (p->s >= p->end || *p->s != '"')
		return -1;
	p->s++;
	*start = p->s;
	while (p->s < p->end && *p->s != '"') {
		if ((unsigned char)*p->s < 0x20)
			return -1;
		if (*p->s == '\\') {
			p->s++;
			if (p->s >= p->end)
				return -1;
		}
		p->s++;
	}
	if (p->s >= p->end)
		return -1;
	*len = (size_t)(p->s - *start);
	p->s++;
	return 0;
}

static int push(struct jv *v, size_t *cap, struct jv *item, char *key)
{
	if (v->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct jv *items = realloc(v->items, ncap * sizeof(*items));
		if (!items)
			return -1;
		v->items = items;
		if (v->type == J_OBJ) {
			char **keys = realloc(v->keys, ncap * sizeof(*keys));
			if (!keys)
				return -1;
			v->keys = keys;
		}
		*cap = ncap;
	}
	v->items[v->n] = *item;
	if (v->type == J_OBJ)
		v->keys[v->n] = key;
	v->n++;
	return 0;
}

static int parse_value(struct jparser *p, struct jv *out)
{
	memset(out, 0, sizeof(*out));
	skip_ws(p);
	if (p->s >= p->end)
		return -1;
	const char *start = p->s;
	char c = *p->s;
	if (c == '{' || c == '[') {
		size_t cap = 0;
		if (++p->depth > JSON_DEPTH_MAX)
			return -1;
		out->type = c == '{' ? J_OBJ : J_ARR;
		p->s++;
		skip_ws(p);
		char close = c == '{' ? '}' : ']';
		if (p->s < p->end && *p->s == close) {
			p->s++;
		} else {
			for (;;) {
				char *key = NULL;
				struct jv item;
				if (out->type == J_OBJ) {
					const char *k;
					size_t klen;
					skip_ws(p);
					if (parse_string_raw(p, &k, &klen) < 0 || !(key = strndup(k, klen)))
						goto fail;
					skip_ws(p);
					if (p->s >= p->end || *p->s != ':') {
						free(key);
						goto fail;
					}
					p->s++;
				}
				if (parse_value(p, &item) < 0 || push(out, &cap, &item, key) < 0) {
					jv_free(&item);
					free(key);
					goto fail;
				}
				skip_ws(p);
				if (p->s < p->end && *p->s == ',') {
					p->s++;
					continue;
				}
				if (p->s < p->end && *p->s == close) {
					p->s++;
					break;
				}
				goto fail;
			}
		}
		p->depth--;
	} else if (c == '"') {
		const char *s;
		size_t len;
		out->type = J_STR;
		if (parse_string_raw(p, &s, &len) < 0)
			return -1;
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		char buf[64], *end;
		size_t len = 0;
		while (p->s + len < p->end && len < sizeof(buf) - 1 && strchr("+-0123456789.eE", p->s[len]))
			len++;
		memcpy(buf, p->s, len);
		buf[len] = '\0';
		out->type = J_NUM;
		out->num = strtod(buf, &end);
		if (end != buf + len || len == 0)
			return -1;
		p->s += len;
	} else if (p->end - p->s >= 4 && strncmp(p->s, "true", 4) == 0) {
		out->type = J_BOOL, out->num = 1, p->s += 4;
	} else if (p->end - p->s >= 5 && strncmp(p->s, "false", 5) == 0) {
		out->type = J_BOOL, out->num = 0, p->s += 5;
	} else if (p->end - p->s >= 4 && strncmp(p->s, "null", 4) == 0) {
		out->type = J_NULL, p->s += 4;
	} else {
		return -1;
	}
	out->raw = start;
	out->raw_len = (size_t)(p->s - start);
	return 0;
fail:
	jv_free(out);
	return -1;
}

static const struct jv *get(const struct jv *obj, const char *key)
{
	if (!obj || obj->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return &obj->items[i];
	return NULL;
}

static int is_int(const struct jv *v)
{
	return v && v->type == J_NUM && v->num == floor(v->num) && fabs(v->num) < 2147483648.0;
}

/* ---- protocol ---- */

static int requests;            /* generate/score requests seen by this process */
static double t_process_start;
static double process_factor = 1;

static void out_line(const char *text, size_t len)
{
	fwrite(text, 1, len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
}

static void reply_error(const char *id, const char *message)
{
	printf("{\"id\":%s,\"event\":\"error\",\"message\":\"%s\"}\n", id, message);
	fflush(stdout);
}

static int active(const char *key)
{
	double n = num(key);
	return n >= 0 && requests > n;
}

/* A count kept in a locked file across processes: returns the value before this call's +1, or
 * `fallback` when the file cannot be used. */
static double counter_next(const char *file, double fallback)
{
	double count = fallback;
	int fd = open(file, O_RDWR | O_CREAT, 0644);
	if (fd >= 0) {
		char buf[32] = {0};
		flock(fd, LOCK_EX);
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		count = n > 0 ? atof(buf) : 0;
		int w = snprintf(buf, sizeof(buf), "%.0f\n", count + 1);
		if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)w, 0) < 0)
			count = fallback;
		flock(fd, LOCK_UN);
		close(fd);
	}
	return count;
}

static double drift_factor(void)
{
	double count = requests - 1;
	const char *file = str("drift_file");
	if (file && *file && num("drift") != 0)
		count = counter_next(file, count);
	double epoch = num("drift_epoch") > 0 ? num("drift_epoch") : t_process_start;
	return (1 + num("drift") * count) * (1 + num("drift_per_s") * (now_s(CLOCK_REALTIME) - epoch));
}

static uint64_t prompt_hash(const struct jv *prompt, size_t upto)
{
	uint64_t h = 0x243f6a8885a308d3ULL;
	for (size_t i = 0; i < upto; i++)
		h = mix64(h ^ (uint64_t)(int64_t)prompt->items[i].num);
	return h;
}

/* Failure modes that replace the answer to this request. Returns 1 if the request was consumed. */
static int misbehave(const char *id)
{
	if (active("crash_after")) {
		const char *sig = str("crash_signal") ? str("crash_signal") : "segv";
		fprintf(stderr, "mock_sut: crashing on request %d (%s)\n", requests, sig);
		fflush(stderr);
		int signo = strcmp(sig, "abort") == 0 ? SIGABRT : strcmp(sig, "kill") == 0 ? SIGKILL : SIGSEGV;
		signal(signo, SIG_DFL);
		kill(getpid(), signo);
		_exit(70);
	}
	if (active("oom_after")) {
		fprintf(stderr, "CUDA_ERROR_OUT_OF_MEMORY: out of memory allocating the KV cache\n");
		fflush(stderr);
		kill(getpid(), SIGKILL);
	}
	if (active("hang_after")) {
		fprintf(stderr, "mock_sut: hanging on request %d\n", requests);
		fflush(stderr);
		for (;;)
			pause();
	}
	if (active("garbage_after")) {
		static const char garbage[] = "Segmentation fault?? {{ not json";
		out_line(garbage, sizeof(garbage) - 1);
		return 1;
	}
	if (active("huge_after")) {
		static char chunk[65536];
		memset(chunk, 'x', sizeof(chunk));
		for (double left = num("huge_bytes"); left > 0; left -= sizeof(chunk))
			fwrite(chunk, 1, left < sizeof(chunk) ? (size_t)left : sizeof(chunk), stdout);
		fputc('\n', stdout);
		fflush(stdout);
		return 1;
	}
	if (active("error_after")) {
		reply_error(id, "mock_sut: injected error");
		return 1;
	}
	return 0;
}

static int has_draft(void)
{
	const char *d = str("draft");
	return d && *d;
}

/* How a speculative answer of n tokens goes: the first token from prefill, the other n - 1 in
 * `steps` target steps of a deterministic per-prompt tau; diverge_at >= 0 when this answer differs. */
struct spec_plan {
	int steps;
	double tau;         /* (n - 1) / steps, what an honest engine reports */
	int diverge_at;
};

static void spec_plan_make(struct spec_plan *sp, uint64_t h, int n)
{
	double block = num("block_size") >= 2 ? num("block_size") : 2;
	double u = (double)(mix64(h ^ 0x5bd1e9955bd1e995ULL) >> 11) / 9007199254740992.0 * 2 - 1;
	double tau = num("spec_disabled") ? 1 : num("accept_len") * (1 + num("accept_spread") * u);
	tau = tau < 1 ? 1 : tau > block ? block : tau;
	sp->steps = n > 1 ? (int)ceil((n - 1) / tau) : 1;
	if (sp->steps < 1)
		sp->steps = 1;
	sp->tau = n > 1 ? (double)(n - 1) / sp->steps : 1;
	sp->diverge_at = -1;
	if (num("spec_diverge_at") >= 0 && n > num("spec_diverge_at")) {
		const char *file = str("spec_diverge_file");
		if (!file || !*file || counter_next(file, 0) < num("spec_diverge_count"))
			sp->diverge_at = (int)num("spec_diverge_at");
	}
}

/* 1 the first time a prompt length is seen by this process (first_use_ms), 0 after. */
static int first_use(size_t len)
{
	static size_t seen[1024];
	static size_t n_seen;
	for (size_t i = 0; i < n_seen; i++)
		if (seen[i] == len)
			return 0;
	if (n_seen < sizeof(seen) / sizeof(seen[0]))
		seen[n_seen++] = len;
	return 1;
}

static void print_done(const char *id, uint64_t h, int n, int speculative, const struct spec_plan *sp_in,
	double prefill_ms, double decode_ms);

static void do_generate(const struct jv *req, const char *id)
{
	const struct jv *prompt = get(req, "prompt"), *max = get(req, "max_tokens"), *spec = get(req, "spec");
	int vocab = (int)num("vocab");
	if (!prompt || prompt->type != J_ARR || prompt->n == 0 || !is_int(max) || max->num < 1 || max->num > 1e6) {
		reply_error(id, "generate needs a non-empty prompt array and max_tokens >= 1");
		return;
	}
	for (size_t i = 0; i < prompt->n; i++)
		if (!is_int(&prompt->items[i]) || prompt->items[i].num < 0 || prompt->items[i].num >= vocab) {
			reply_error(id, "prompt ids must be integers in [0, vocab)");
			return;
		}
	int n = (int)max->num;
	int speculative = spec && spec->type == J_BOOL && spec->num;
	if (speculative && !has_draft()) {
		reply_error(id, "speculative decoding needs a draft (start with --draft FILE)");
		return;
	}
	double factor = process_factor * drift_factor();
	double prefill_rate = num("prefill_tps") * num("prefill_speed") * num("speed");
	double decode_rate = num("decode_tps") * num("decode_speed") * num("speed");
	double t0 = now_s(CLOCK_MONOTONIC);
	double prefill_s = prefill_rate > 0 ? prompt->n / prefill_rate * factor * noise_factor() : 0;
	double token_s = decode_rate > 0 ? factor * noise_factor() / decode_rate : 0;
	if (num("first_use_ms") > 0 && first_use(prompt->n))
		prefill_s += num("first_use_ms") / 1e3;
	if (prefill_s > 0)
		sleep_until(t0 + prefill_s);
	double t_first = now_s(CLOCK_MONOTONIC);
	printf("{\"id\":%s,\"event\":\"first\"}\n", id);
	fflush(stdout);
	uint64_t h = prompt_hash(prompt, prompt->n);
	struct spec_plan sp = { n - 1, 1.0, 0 };
	if (speculative)
		spec_plan_make(&sp, h, n);
	double lie = num("clock_lie") > 0 ? num("clock_lie") : 1;
	int early = num("early_done") != 0;
	double t_work = t_first;   /* early_done: the decode work starts after the done line */
	if (early) {
		print_done(id, h, n, speculative, &sp, (t_first - t0) * 1e3 / lie, 0.0);
		t_work = now_s(CLOCK_MONOTONIC);
	}
	if (token_s > 0) {
		if (speculative) {  /* a step of tau tokens costs a verify window and a draft pass */
			double step_s = token_s * (num("spec_disabled") ? 1.0 : num("verify_cost") +
				num("draft_cost") / (num("draft_speed") > 0 ? num("draft_speed") : 1));
			for (int k = 1; k <= sp.steps; k++)
				sleep_until(t_work + k * step_s);
		} else {
			for (int i = 1; i < n; i++)
				sleep_until(t_work + i * token_s);
		}
	}
	double t_done = now_s(CLOCK_MONOTONIC);
	if (!early)
		print_done(id, h, n, speculative, &sp, (t_first - t0) * 1e3 / lie, (t_done - t_first) * 1e3 / lie);
}

static void print_done(const char *id, uint64_t h, int n, int speculative, const struct spec_plan *sp_in,
	double prefill_ms, double decode_ms)
{
	struct spec_plan sp = *sp_in;
	int vocab = (int)num("vocab");
	int n_out = active("short_after") ? n - 1 : n;
	printf("{\"id\":%s,\"event\":\"done\",\"tokens\":[", active("wrong_id_after") ? "987654321" : id);
	int diverge_at = (int)num("diverge_at");
	if (speculative && sp.diverge_at >= 0 && (diverge_at < 0 || sp.diverge_at < diverge_at))
		diverge_at = sp.diverge_at;
	for (int i = 0; i < n_out; i++) {
		uint64_t t = mix64(h + (uint64_t)i) + (diverge_at >= 0 && i >= diverge_at);
		printf(i ? ",%d" : "%d", (int)(t % (uint64_t)vocab));
	}
	printf("],\"stats\":{\"prefill_ms\":%.3f,\"decode_ms\":%.3f", prefill_ms, decode_ms);
	if (speculative) {
		int block = (int)num("block_size");
		printf(",\"target_steps\":%d,\"drafted\":%ld,\"accepted\":%d,\"accept_mean\":%.6f", sp.steps,
			num("spec_disabled") ? 0L : (long)sp.steps * (block - 1), num("spec_disabled") ? 0 : n - 1 - sp.steps,
			sp.tau * num("spec_stats_lie"));
	}
	printf("}}\n");
	fflush(stdout);
}

/* The deterministic distribution at one position: PEAKS favoured ids over a flat tail. */
struct dist {
	int32_t ids[PEAKS];
	double logit[PEAKS];
	int n_peaks;
	double lse;
};

static void make_dist(struct dist *d, uint64_t h, int vocab)
{
	uint64_t st = h;
	d->n_peaks = vocab < PEAKS ? vocab : PEAKS;
	for (int j = 0; j < d->n_peaks; j++) {
		int32_t id;
		int dup;
		do {
			id = (int32_t)(vocab <= PEAKS ? j : (int)(mix64(st += 0x9e37) % (uint64_t)vocab));
			dup = 0;
			for (int k = 0; k < j; k++)
				dup |= d->ids[k] == id;
		} while (dup);
		d->ids[j] = id;
		d->logit[j] = 12.0 - 0.18 * j + num("score_noise") * normal(&st);
		if (d->logit[j] < 0.05)  /* peaks stay above the flat tail (logit 0), so top-k is exact */
			d->logit[j] = 0.05;
	}
	for (int j = 1; j < d->n_peaks; j++)  /* insertion sort, descending */
		for (int k = j; k > 0 && d->logit[k] > d->logit[k - 1]; k--) {
			double tl = d->logit[k];
			int32_t ti = d->ids[k];
			d->logit[k] = d->logit[k - 1], d->ids[k] = d->ids[k - 1];
			d->logit[k - 1] = tl, d->ids[k - 1] = ti;
		}
	double mx = d->logit[0], sum = 0;
	for (int j = 0; j < d->n_peaks; j++)
		sum += exp(d->logit[j] - mx);
	sum += (double)(vocab - d->n_peaks) * exp(-mx);
	d->lse = mx + log(sum);
}

static double dist_logprob(const struct dist *d, int32_t id)
{
	for (int j = 0; j < d->n_peaks; j++)
		if (d->ids[j] == id)
			return d->logit[j] - d->lse;
	return -d->lse;
}

static void do_score(const struct jv *req, const char *id)
{
	const struct jv *prompt = get(req, "prompt"), *top_k = get(req, "top_k"), *ids = get(req, "ids");
	const struct jv *first = get(req, "first");
	int vocab = (int)num("vocab");
	if (!prompt || prompt->type != J_ARR || prompt->n == 0 || !is_int(top_k) || top_k->num < 1) {
		reply_error(id, "score needs a non-empty prompt array and top_k >= 1");
		return;
	}
	size_t from = is_int(first) && first->num >= 0 ? (size_t)first->num : 0;
	if (from >= prompt->n || (ids && (ids->type != J_ARR || ids->n != prompt->n - from))) {
		reply_error(id, "score: first/ids do not match the prompt");
		return;
	}
	for (size_t i = 0; i < prompt->n; i++)
		if (!is_int(&prompt->items[i])) {
			reply_error(id, "prompt ids must be integers");
			return;
		}
	int k = top_k->num > vocab ? vocab : (int)top_k->num;
	int32_t *top_ids = malloc((size_t)k * sizeof(*top_ids));
	if (!top_ids) {
		reply_error(id, "mock_sut: out of memory");
		return;
	}
	printf("{\"id\":%s,\"event\":\"done\",\"positions\":[", id);
	for (size_t p = from; p < prompt->n; p++) {
		struct dist d;
		make_dist(&d, prompt_hash(prompt, p + 1), vocab);
		printf(p > from ? ",{\"top\":[" : "{\"top\":[");
		/* The k most likely ids, most likely first: the peaks, then flat-tail ids in id order. */
		int printed = 0;
		for (int j = 0; j < d.n_peaks && printed < k; j++)
			top_ids[printed++] = d.ids[j];
		for (int32_t t = 0; t < vocab && printed < k; t++) {
			int peak = 0;
			for (int j = 0; j < d.n_peaks; j++)
				peak |= d.ids[j] == t;
			if (!peak)
				top_ids[printed++] = t;
		}
		for (int i = 0; i < printed; i++) {
			int32_t t = top_ids[num("score_ascending") ? printed - 1 - i : i];
			printf(i ? ",[%d,%.6f]" : "[%d,%.6f]", t, dist_logprob(&d, t));
		}
		printf("],\"ids\":[");
		const struct jv *want = ids ? &ids->items[p - from] : NULL;
		for (size_t i = 0; want && want->type == J_ARR && i < want->n; i++)
			printf(i ? ",%.6f" : "%.6f", dist_logprob(&d, (int32_t)want->items[i].num));
		printf("]}");
	}
	printf("]}\n");
	fflush(stdout);
	free(top_ids);
}

static void handle_line(char *line, size_t len)
{
	struct jparser p = {line, line + len, 0};
	struct jv req;
	char id[80] = "null";

	if (parse_value(&p, &req) < 0) {
		reply_error("null", "malformed request line");
		return;
	}
	skip_ws(&p);
	if (p.s != p.end || req.type != J_OBJ) {
		jv_free(&req);
		reply_error("null", "a request must be one JSON object");
		return;
	}
	const struct jv *idv = get(&req, "id"), *op = get(&req, "op");
	if (idv && idv->type == J_NUM && idv->raw_len < sizeof(id))
		snprintf(id, sizeof(id), "%.*s", (int)idv->raw_len, idv->raw);
	const char *opname = op && op->type == J_STR ? op->raw : "";
	size_t oplen = op && op->type == J_STR ? op->raw_len : 0;
	if (oplen == 6 && strncmp(opname, "\"quit\"", 6) == 0) {
		jv_free(&req);
		exit((int)num("quit_exit"));
	}
	int is_gen = oplen == 10 && strncmp(opname, "\"generate\"", 10) == 0;
	int is_score = oplen == 7 && strncmp(opname, "\"score\"", 7) == 0;
	if (!is_gen && !is_score) {
		reply_error(id, "unknown op");
	} else {
		requests++;
		if (!misbehave(id)) {
			if (is_gen)
				do_generate(&req, id);
			else
				do_score(&req, id);
		}
	}
	jv_free(&req);
}

int main(int argc, char **argv)
{
	configure(argc, argv);
	t_process_start = now_s(CLOCK_REALTIME);
	rng_state = num("seed") != 0 ? (uint64_t)num("seed")
		: mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(now_s(CLOCK_MONOTONIC) * 1e9));
	if (num("process_noise") > 0)
		process_factor = exp(num("process_noise") * normal(&rng_state));
	if (num("ignore_term"))
		signal(SIGTERM, SIG_IGN);
	for (int i = 0; i < (int)num("stderr_lines"); i++)
		fprintf(stderr, "mock_sut: loading model (line %d)\n", i + 1);
	fflush(stderr);
	if (num("exit_immediately") >= 0) {
		fprintf(stderr, "mock_sut: exiting immediately with code %d\n", (int)num("exit_immediately"));
		exit((int)num("exit_immediately"));
	}
	if (num("never_ready")) {
		for (;;)
			pause();
	}
	if (num("ready_delay_ms") > 0)
		sleep_until(now_s(CLOCK_MONOTONIC) + num("ready_delay_ms") / 1e3);
	if (str("ready_json"))
		printf("%s\n", str("ready_json"));
	else
	{
		printf("{\"ready\":true,\"protocol\":1,\"engine\":\"mock_sut\",\"model\":{\"name\":\"mock\","
			"\"vocab_size\":%d},\"device\":\"cpu (mock)\"", (int)num("vocab"));
		if (has_draft())
			printf(",\"spec\":{\"kind\":\"dflash\",\"block_size\":%d}", (int)num("block_size"));
		printf("}\n");
	}
	fflush(stdout);

	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	int skipping = 0;
	if (!buf)
		return 1;
	for (;;) {
		int c = getchar_unlocked();
		if (c == EOF)
			break;
		if (c == '\n') {
			if (!skipping) {
				buf[len] = '\0';
				handle_line(buf, len);
			}
			len = 0;
			skipping = 0;
			continue;
		}
		if (skipping)
			continue;
		if (len + 2 > cap) {
			if (cap >= LINE_CAP) {
				reply_error("null", "request line too long");
				skipping = 1;
				len = 0;
				continue;
			}
			char *grown = realloc(buf, cap * 2);
			if (!grown)
				return 1;
			buf = grown;
			cap *= 2;
		}
		buf[len++] = (char)c;
	}
	free(buf);
	return 0;
}
