/*
 * github.c - GitHub REST transport: libcurl easy handles sharing one connection cache, GitHub's
 * headers, bounded reply buffers, and the retry policy of github.h. App auth is refreshed here
 * (JWT from github_auth.c → POST /app/installations/{id}/access_tokens) under a refresh lock, so
 * many workers share one installation token.
 */
#define _GNU_SOURCE  /* strcasestr */
#include "github.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <curl/curl.h>

#include "error.h"
#include "log.h"

#define REPLY_MAX (32u << 20)      /* a page of 100 PRs is ~2 MB; anything near this is wrong */
#define HEADER_VALUE_MAX 2048
#define AUTHZ_MAX 8192             /* an Authorization value: "Bearer " + a token or an App JWT */
#define WAIT_MAX_S 3600            /* a longer rate-limit wait is taken as an hour: then we ask again */

struct ab_gh {
	char *api_url;
	char *user_agent;
	int timeout_s, max_retries, backoff_base_ms, backoff_max_ms, max_wait_s;
	const atomic_int *stop;
	void (*on_response)(void *, const char *, const char *, long, double);
	void *payload;
	ab_gh_auth *auth;
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	atomic_long requests;
	pthread_mutex_t rng_lock;
	unsigned long long rng;
};

/* What one HTTP exchange brought back. */
struct exchange {
	long status;
	char *body;
	size_t len;
	int overflow;
	long retry_after;          /* seconds, at most WAIT_MAX_S; -1: absent or unreadable */
	long ratelimit_remaining;  /* -1: absent */
	long long ratelimit_reset; /* 0: absent */
	char link[HEADER_VALUE_MAX];
	int link_overflow;         /* the Link header did not fit: the next page is unknown */
};

static _Thread_local long last_wait_s;

long ab_gh_last_wait_s(void) { return last_wait_s; }

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init_once(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int ab_gh_global_init(void)
{
	pthread_once(&global_once, global_init_once);
	return global_rc == CURLE_OK ? 0 : ab_error_set("libcurl: %s", curl_easy_strerror(global_rc));
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
	ab_gh *gh = user;
	pthread_mutex_lock(&gh->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
	ab_gh *gh = user;
	pthread_mutex_unlock(&gh->share_locks[data]);
}

int ab_gh_new(ab_gh **out, const struct ab_gh_options *o, ab_gh_auth *auth)
{
	ab_gh *gh = NULL;

	if (ab_gh_global_init() < 0)
		return -1;
	if (!o->api_url || strncmp(o->api_url, "http", 4))
		return ab_error_setc(AB_EINVALID, "github: api_url must be an http(s) URL");
	if (!(gh = calloc(1, sizeof(*gh))))
		return ab_error_set("out of memory");
	gh->api_url = strdup(o->api_url);
	gh->user_agent = strdup(o->user_agent ? o->user_agent : "abgate");
	if (!gh->api_url || !gh->user_agent) {
		ab_gh_free(gh);
		return ab_error_set("out of memory");
	}
	size_t n = strlen(gh->api_url);
	while (n > 0 && gh->api_url[n - 1] == '/')
		gh->api_url[--n] = '\0';
	gh->timeout_s = o->timeout_s > 0 ? o->timeout_s : 30;
	gh->max_retries = o->max_retries >= 0 ? o->max_retries : 5;
	gh->backoff_base_ms = o->backoff_base_ms > 0 ? o->backoff_base_ms : 1000;
	gh->backoff_max_ms = o->backoff_max_ms > 0 ? o->backoff_max_ms : 32000;
	gh->max_wait_s = o->max_wait_s >= 0 ? o->max_wait_s : 120;
	gh->stop = o->stop;
	gh->on_response = o->on_response;
	gh->payload = o->payload;
	gh->auth = auth;
	gh->rng = (unsigned long long)time(NULL) * 6364136223846793005ULL + (unsigned long long)(uintptr_t)gh;
	pthread_mutex_init(&gh->rng_lock, NULL);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&gh->share_locks[i], NULL);
	if ((gh->share = curl_share_init())) {
		curl_share_setopt(gh->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(gh->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(gh->share, CURLSHOPT_USERDATA, gh);
		curl_share_setopt(gh->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
		curl_share_setopt(gh->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
		curl_share_setopt(gh->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	}
	*out = gh;
	return 0;
}

void ab_gh_free(ab_gh *gh)
{
	if (!gh)
		return;
	if (gh->share)
		curl_share_cleanup(gh->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&gh->share_locks[i]);
	pthread_mutex_destroy(&gh->rng_lock);
	free(gh->api_url);
	free(gh->user_agent);
	free(gh);
}

ab_gh_auth *ab_gh_get_auth(ab_gh *gh) { return gh->auth; }
long ab_gh_request_count(ab_gh *gh) { return atomic_load(&gh->requests); }

static int stopped(ab_gh *gh) { return gh->stop && atomic_load(gh->stop); }

/* Sleeps `ms`, waking every 50 ms to honour stop. */
static int sleep_ms(ab_gh *gh, long long ms)
{
	while (ms > 0) {
		if (stopped(gh))
			return ab_error_setc(AB_ECANCELED, "github: stopping");
		long long step = ms < 50 ? ms : 50;
		struct timespec ts = { step / 1000, (long)(step % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		ms -= step;
	}
	return stopped(gh) ? ab_error_setc(AB_ECANCELED, "github: stopping") : 0;
}

int ab_gh_backoff(ab_gh *gh, int attempt)
{
	long long d = gh->backoff_base_ms;
	for (int i = 0; i < attempt && d < gh->backoff_max_ms; i++)
		d *= 2;
	if (d > gh->backoff_max_ms)
		d = gh->backoff_max_ms;
	/* "Equal jitter": half fixed, half random, so retries of many workers spread out but never
	 * collapse to zero delay. */
	pthread_mutex_lock(&gh->rng_lock);
	gh->rng = gh->rng * 6364136223846793005ULL + 1442695040888963407ULL;
	unsigned long long r = gh->rng >> 33;
	pthread_mutex_unlock(&gh->rng_lock);
	return sleep_ms(gh, d / 2 + (long long)(r % (unsigned long long)(d / 2 + 1)));
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
	struct exchange *x = user;
	size_t n = size * nmemb;

	if (x->overflow || x->len + n > REPLY_MAX) {
		x->overflow = 1;
		return 0;  /* aborts the transfer: CURLE_WRITE_ERROR */
	}
	char *nb = realloc(x->body, x->len + n + 1);
	if (!nb)
		return 0;
	memcpy(nb + x->len, data, n);
	x->body = nb;
	x->len += n;
	x->body[x->len] = '\0';
	return n;
}

/* Retry-After (delta-seconds or an HTTP-date) as seconds from now, capped at WAIT_MAX_S; -1 when unreadable. */
static long retry_after_s(const char *value)
{
	long long seconds;

	if (isdigit((unsigned char)value[0])) {
		char *end;
		seconds = strtoll(value, &end, 10);  /* an overflow reads as LLONG_MAX: capped below */
		if (*end)
			return -1;
	} else {
		time_t when = curl_getdate(value, NULL), now = time(NULL);
		if (when == -1)
			return -1;
		seconds = when > now ? (long long)(when - now) : 0;
	}
	return seconds > WAIT_MAX_S ? WAIT_MAX_S : (long)seconds;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
	struct exchange *x = user;
	size_t n = size * nmemb;
	char line[HEADER_VALUE_MAX + 64];
	char *colon, *value;

	if (n >= sizeof(line)) {
		if (n >= 5 && !strncasecmp(data, "link:", 5))
			x->link_overflow = 1;
		return n;  /* not one we read; ignore */
	}
	memcpy(line, data, n);
	line[n] = '\0';
	if (!(colon = strchr(line, ':')))
		return n;
	*colon = '\0';
	value = colon + 1;
	while (*value == ' ' || *value == '\t')
		value++;
	size_t len = strcspn(value, "\r\n");
	while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
		len--;
	value[len] = '\0';
	if (!strcasecmp(line, "retry-after"))
		x->retry_after = retry_after_s(value);
	else if (!strcasecmp(line, "x-ratelimit-remaining"))
		x->ratelimit_remaining = strtol(value, NULL, 10);
	else if (!strcasecmp(line, "x-ratelimit-reset"))
		x->ratelimit_reset = strtoll(value, NULL, 10);
	else if (!strcasecmp(line, "link") && (size_t)snprintf(x->link, sizeof(x->link), "%s", value) >= sizeof(x->link))
		x->link_overflow = 1;
	return n;
}

/* One HTTP exchange. Returns the CURLcode; x is filled. */
static CURLcode perform(ab_gh *gh, struct exchange *x, const char *method, const char *url, const char *authz,
			const char *json_body)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char buf[AUTHZ_MAX + 32];
	CURLcode rc;

	memset(x, 0, sizeof(*x));
	x->retry_after = -1;
	x->ratelimit_remaining = -1;
	if (!h)
		return CURLE_OUT_OF_MEMORY;
	hdrs = curl_slist_append(hdrs, "Accept: application/vnd.github+json");
	hdrs = curl_slist_append(hdrs, "X-GitHub-Api-Version: 2022-11-28");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (authz) {
		snprintf(buf, sizeof(buf), "Authorization: %s", authz);
		hdrs = curl_slist_append(hdrs, buf);
	}
	if (json_body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_USERAGENT, gh->user_agent);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)gh->timeout_s);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)(gh->timeout_s < 10 ? gh->timeout_s : 10));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (gh->share)
		curl_easy_setopt(h, CURLOPT_SHARE, gh->share);
	if (json_body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(json_body));
	} else if (!strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	}
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->status);
	atomic_fetch_add(&gh->requests, 1);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return rc;
}

/* GitHub's error message from a reply body, for the log ("" when none). */
static void reply_message(char *buf, size_t size, const struct exchange *x)
{
	json_t *j = x->body ? json_loadb(x->body, x->len, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (m)
		snprintf(buf, size, ": %s", m);
	else if (x->body && x->len)
		snprintf(buf, size, ": %.200s", x->body);
	else
		buf[0] = '\0';
	json_decref(j);
}

static int refresh_installation_token(ab_gh *gh);

/* The Authorization value for an API request, refreshing the App token when needed. */
static int authorization(ab_gh *gh, char *buf, size_t size)
{
	if (!gh->auth)
		return 1;  /* anonymous */
	if (ab_gh_auth_header(gh->auth, buf, size, time(NULL)) == 0)
		return 0;
	if (refresh_installation_token(gh) < 0)
		return -1;
	return ab_gh_auth_header(gh->auth, buf, size, time(NULL)) == 0 ? 0
									 : ab_error_set("github: no installation token after refresh");
}

static int url_for(ab_gh *gh, char *url, size_t size, const char *path)
{
	if (path[0] == '/')
		return (size_t)snprintf(url, size, "%s%s", gh->api_url, path) < size ? 0 : ab_error_set("github: path too long");
	/* A full URL (from Link) must stay under api_url: the token is never sent elsewhere. */
	size_t n = strlen(gh->api_url);
	if (strncmp(path, gh->api_url, n) || (path[n] != '/' && path[n] != '?'))
		return ab_error_setc(AB_EINVALID, "github: refusing URL outside %s: %.200s", gh->api_url, path);
	return (size_t)snprintf(url, size, "%s", path) < size ? 0 : ab_error_set("github: URL too long");
}

/* The path part of a URL, for logs and metrics. */
static const char *log_path(ab_gh *gh, const char *path)
{
	size_t n = strlen(gh->api_url);
	return strncmp(path, gh->api_url, n) ? path : path + n;
}

/* The retry loop behind ab_gh_request. `explicit_authz` replaces the client's auth (the App JWT);
 * `link_out` (may be NULL) receives the Link header of the successful exchange. */
static int request(ab_gh *gh, json_t **out_body, long *out_status, const char *method, const char *path,
		   json_t *body, unsigned flags, const char *explicit_authz, char *link_out)
{
	char url[4096], authz[AUTHZ_MAX], msg[320];
	char *json_body = NULL;
	struct exchange x = { 0 };
	int refreshed = 0, attempt = 0, error = -1;
	const char *lp = log_path(gh, path);

	last_wait_s = 0;
	if (out_status)
		*out_status = 0;
	if ((error = url_for(gh, url, sizeof(url), path)) < 0)
		return error;
	if (body && !(json_body = json_dumps(body, JSON_COMPACT)))
		return ab_error_set("github: cannot serialise the request body");
	for (;;) {
		const char *az = explicit_authz;
		if (!az) {
			int a = authorization(gh, authz, sizeof(authz));
			if (a < 0) {
				ab_error_wrap(AB_ERROR, "github: %s %s: auth", method, lp);
				goto cleanup;
			}
			az = a == 0 ? authz : NULL;
		}
		free(x.body);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CURLcode rc = perform(gh, &x, method, url, az, json_body);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (gh->on_response)
			gh->on_response(gh->payload, method, lp, rc == CURLE_OK ? x.status : 0,
					(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		if (out_status)
			*out_status = rc == CURLE_OK ? x.status : 0;
		int can_retry = attempt < gh->max_retries;

		if (rc != CURLE_OK) {
			if (x.overflow) {
				error = ab_error_set("github: %s %s: reply larger than %u bytes", method, lp, REPLY_MAX);
				goto cleanup;
			}
			AB_WARN("github: %s %s: %s (attempt %d of %d)", method, lp, curl_easy_strerror(rc), attempt + 1,
				gh->max_retries + 1);
			if (!can_retry || (flags & AB_GH_NO_RETRY)) {
				error = ab_error_setc(rc == CURLE_OPERATION_TIMEDOUT ? AB_ETIMEOUT : AB_ERROR,
						      "github: %s %s: %s", method, lp, curl_easy_strerror(rc));
				goto cleanup;
			}
			if ((error = ab_gh_backoff(gh, attempt++)) < 0)
				goto cleanup;
			continue;
		}
		if (x.status >= 200 && x.status < 300) {
			if (out_body) {
				*out_body = NULL;
				if (x.len > 0) {
					json_error_t jerr;
					if (!(*out_body = json_loadb(x.body, x.len, 0, &jerr))) {
						error = ab_error_set("github: %s %s: reply is not JSON: %s", method, lp, jerr.text);
						goto cleanup;
					}
				}
			}
			if (link_out && x.link_overflow) {
				/* Taking it for the last page would silently drop the rest (comments, labels). */
				error = ab_error_set("github: %s %s: Link header longer than %d bytes", method, lp,
						     HEADER_VALUE_MAX - 1);
				goto cleanup;
			}
			if (link_out)
				memcpy(link_out, x.link, sizeof(x.link));
			error = 0;
			goto cleanup;
		}
		reply_message(msg, sizeof(msg), &x);
		if (x.status == 401 && gh->auth && ab_gh_auth_is_app(gh->auth) && !refreshed && !explicit_authz) {
			/* The installation token was revoked or expired early: refresh once. */
			AB_WARN("github: %s %s → 401%s; refreshing the installation token", method, lp, msg);
			ab_gh_auth_invalidate(gh->auth);
			refreshed = 1;
			continue;
		}
		long wait_s = -1;
		int rate_limited = 0;
		if (x.status == 403 || x.status == 429) {
			time_t now = time(NULL);
			if (x.retry_after >= 0)
				wait_s = x.retry_after, rate_limited = 1;
			else if (x.ratelimit_remaining == 0 && x.ratelimit_reset > 0) {
				long long until = x.ratelimit_reset - (long long)now;
				wait_s = (long)(until < 0 ? 0 : until > WAIT_MAX_S ? WAIT_MAX_S : until) + 1;
				rate_limited = 1;
			}
			else if (x.status == 429 || strcasestr(msg, "rate limit"))
				wait_s = 60, rate_limited = 1;  /* secondary limit without a hint: GitHub asks for >= 60 s */
		}
		if (rate_limited) {
			AB_WARN("github: %s %s → %ld%s; rate limited, wait %ld s (attempt %d of %d)", method, lp, x.status, msg,
				wait_s, attempt + 1, gh->max_retries + 1);
			if (wait_s > gh->max_wait_s || !can_retry) {
				last_wait_s = wait_s;
				error = ab_error_setc(AB_ERATELIMIT, "github: %s %s → %ld: rate limited for %ld s", method, lp,
						      x.status, wait_s);
				goto cleanup;
			}
			attempt++;
			if ((error = sleep_ms(gh, (long long)wait_s * 1000)) < 0)
				goto cleanup;
			continue;
		}
		if (x.status >= 500) {
			AB_WARN("github: %s %s → %ld%s (attempt %d of %d)", method, lp, x.status, msg, attempt + 1,
				gh->max_retries + 1);
			if (!can_retry || (flags & AB_GH_NO_RETRY)) {
				error = ab_error_set("github: %s %s → %ld%s", method, lp, x.status, msg);
				goto cleanup;
			}
			if ((error = ab_gh_backoff(gh, attempt++)) < 0)
				goto cleanup;
			continue;
		}
		/* Other 4xx: the request itself is wrong or not allowed; retrying will not help. 404 is
		 * often expected by the caller (a deleted comment), so it is logged at debug level. */
		if (x.status == 404)
			AB_DEBUG("github: %s %s → 404%s", method, lp, msg);
		else
			AB_WARN("github: %s %s → %ld%s", method, lp, x.status, msg);
		error = ab_error_setc(x.status == 404 ? AB_ENOTFOUND : (x.status == 422 || x.status == 400) ? AB_EINVALID
												 : AB_ERROR,
				      "github: %s %s → %ld%s", method, lp, x.status, msg);
		goto cleanup;
	}
cleanup:
	free(x.body);
	free(json_body);
	return error;
}

int ab_gh_request(ab_gh *gh, json_t **out_body, long *out_status, const char *method, const char *path, json_t *body,
		  unsigned flags)
{
	return request(gh, out_body, out_status, method, path, body, flags, NULL, NULL);
}

static int refresh_installation_token(ab_gh *gh)
{
	char path[96], authz[AUTHZ_MAX];
	char *jwt = NULL;
	json_t *reply = NULL;
	time_t expires_at;
	int error = -1;

	ab_gh_auth_refresh_lock(gh->auth);
	/* Another thread may have refreshed while we waited for the lock. */
	if (ab_gh_auth_header(gh->auth, authz, sizeof(authz), time(NULL)) == 0) {
		error = 0;
		goto cleanup;
	}
	if (ab_gh_auth_app_jwt(gh->auth, &jwt, time(NULL)) < 0)
		goto cleanup;
	snprintf(path, sizeof(path), "/app/installations/%lld/access_tokens",
		 (long long)ab_gh_auth_installation(gh->auth));
	snprintf(authz, sizeof(authz), "Bearer %s", jwt);
	if (request(gh, &reply, NULL, "POST", path, NULL, 0, authz, NULL) < 0)
		goto cleanup;
	const char *token = json_string_value(json_object_get(reply, "token"));
	const char *exp = json_string_value(json_object_get(reply, "expires_at"));
	if (!exp || ab_gh_parse_time(&expires_at, exp) < 0)
		expires_at = time(NULL) + 3600;  /* GitHub documents one hour */
	if (ab_gh_auth_set_installation_token(gh->auth, token, expires_at) < 0)
		goto cleanup;
	AB_INFO("github: installation token refreshed (expires %s)", exp ? exp : "in 1 h");
	error = 0;
cleanup:
	ab_gh_auth_refresh_unlock(gh->auth);
	json_decref(reply);
	free(jwt);
	return error;
}

/* The URL of rel="next" in a Link header, into buf; 0 when there is none. */
static int link_next(char *buf, size_t size, const char *link)
{
	const char *p = link;
	while ((p = strchr(p, '<'))) {
		const char *end = strchr(p, '>');
		if (!end)
			return 0;
		const char *params = end + 1;
		const char *comma = strchr(params, ',');
		size_t plen = comma ? (size_t)(comma - params) : strlen(params);
		char rel[128];
		snprintf(rel, sizeof(rel), "%.*s", (int)(plen < 127 ? plen : 127), params);
		if (strstr(rel, "rel=\"next\"") && (size_t)(end - p - 1) < size) {
			memcpy(buf, p + 1, (size_t)(end - p - 1));
			buf[end - p - 1] = '\0';
			return 1;
		}
		p = end + 1;
	}
	return 0;
}

/* One page: the parsed reply and the URL of the next page ("" when last). */
static int get_page(ab_gh *gh, json_t **out, char *next, size_t next_size, const char *path)
{
	char link[HEADER_VALUE_MAX] = "";

	if (request(gh, out, NULL, "GET", path, NULL, 0, NULL, link) < 0)
		return -1;
	next[0] = '\0';
	link_next(next, next_size, link);
	return 0;
}

int ab_gh_get_all(ab_gh *gh, json_t **out, const char *path, const char *items_key, size_t max_items)
{
	json_t *all = json_array(), *page = NULL;
	char *next = malloc(4096);
	int pages = 0, error = -1;

	if (!all || !next) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	snprintf(next, 4096, "%s", path);
	while (next[0]) {
		char current[4096];
		snprintf(current, sizeof(current), "%s", next);
		if (get_page(gh, &page, next, 4096, current) < 0)
			goto cleanup;
		json_t *items = items_key ? json_object_get(page, items_key) : page;
		if (!json_is_array(items)) {
			ab_error_set("github: GET %s: expected %s%s", log_path(gh, current), items_key ? "member " : "an array",
				     items_key ? items_key : "");
			goto cleanup;
		}
		if (json_array_size(all) + json_array_size(items) > max_items) {
			ab_error_set("github: GET %s: more than %zu items", log_path(gh, path), max_items);
			goto cleanup;
		}
		json_array_extend(all, items);
		json_decref(page);
		page = NULL;
		if (++pages > 1000) {
			ab_error_set("github: GET %s: more than 1000 pages", log_path(gh, path));
			goto cleanup;
		}
	}
	*out = all;
	all = NULL;
	error = 0;
cleanup:
	json_decref(page);
	json_decref(all);
	free(next);
	return error;
}

int ab_gh_escape(char **out, const char *segment)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(segment);
	char *s = malloc(n * 3 + 1), *o = s;

	if (!s)
		return ab_error_set("out of memory");
	for (const unsigned char *p = (const unsigned char *)segment; *p; p++) {
		if (isalnum(*p) || strchr("-._~", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	*out = s;
	return 0;
}

/* Fills a struct ab_gh_pr from a pulls/get or pulls/list item; AB_EINVALID when fields are missing. */
static int pr_from_json(struct ab_gh_pr *out, json_t *j)
{
	json_t *head = json_object_get(j, "head"), *base = json_object_get(j, "base");
	const char *sha = json_string_value(json_object_get(head, "sha"));
	const char *ref = json_string_value(json_object_get(base, "ref"));
	const char *state = json_string_value(json_object_get(j, "state"));
	json_int_t number = json_integer_value(json_object_get(j, "number"));

	if (!sha || strlen(sha) != 40 || !state || number <= 0 || number > 1000000000)
		return ab_error_setc(AB_EINVALID, "github: pull request reply lacks number, state or head.sha");
	memset(out, 0, sizeof(*out));
	out->number = (int)number;
	memcpy(out->head_sha, sha, 41);
	snprintf(out->base_ref, sizeof(out->base_ref), "%s", ref ? ref : "");
	out->open = !strcmp(state, "open");
	out->draft = json_is_true(json_object_get(j, "draft"));
	return 0;
}

int ab_gh_pr_get(ab_gh *gh, struct ab_gh_pr *out, const char *repo, int number)
{
	char path[512];
	json_t *reply = NULL;
	int error;

	snprintf(path, sizeof(path), "/repos/%s/pulls/%d", repo, number);
	if ((error = ab_gh_request(gh, &reply, NULL, "GET", path, NULL, 0)) < 0)
		return error;
	error = pr_from_json(out, reply);
	json_decref(reply);
	return error;
}

int ab_gh_pr_list_open(ab_gh *gh, struct ab_gh_pr **out, size_t *out_count, const char *repo)
{
	char path[512];
	json_t *items = NULL;
	struct ab_gh_pr *prs = NULL;
	size_t i, n;
	int error = -1;

	snprintf(path, sizeof(path), "/repos/%s/pulls?state=open&per_page=100", repo);
	if (ab_gh_get_all(gh, &items, path, NULL, 10000) < 0)
		return -1;
	n = json_array_size(items);
	if (!(prs = calloc(n ? n : 1, sizeof(*prs)))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	for (i = 0; i < n; i++)
		if (pr_from_json(&prs[i], json_array_get(items, i)) < 0)
			goto cleanup;
	*out = prs;
	*out_count = n;
	prs = NULL;
	error = 0;
cleanup:
	free(prs);
	json_decref(items);
	return error;
}

int ab_gh_permission(ab_gh *gh, char *buf, size_t size, const char *repo, const char *user)
{
	char path[512];
	char *user_esc = NULL;
	json_t *reply = NULL;
	int error;

	if (ab_gh_escape(&user_esc, user) < 0)
		return -1;
	snprintf(path, sizeof(path), "/repos/%s/collaborators/%s/permission", repo, user_esc);
	free(user_esc);
	error = ab_gh_request(gh, &reply, NULL, "GET", path, NULL, 0);
	if (error == AB_ENOTFOUND) {
		snprintf(buf, size, "none");
		return 0;
	}
	if (error < 0)
		return error;
	/* role_name distinguishes maintain/triage, which `permission` folds into write/read. */
	const char *role = json_string_value(json_object_get(reply, "role_name"));
	const char *perm = json_string_value(json_object_get(reply, "permission"));
	snprintf(buf, size, "%s", perm ? perm : "none");
	if (role && (!strcmp(role, "maintain") || !strcmp(role, "admin")))
		snprintf(buf, size, "%s", role);
	json_decref(reply);
	return 0;
}

int ab_gh_permission_can_write(const char *p)
{
	return p && (!strcmp(p, "admin") || !strcmp(p, "maintain") || !strcmp(p, "write"));
}
