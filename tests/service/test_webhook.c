/*
 * test_webhook.c - the HTTP front: signature verification (GitHub's published test vector, forged,
 * malformed and missing signatures), what reaches the event callback (only verified bodies, byte
 * for byte), 413 for bodies over the cap with and without Content-Length, and the other routes.
 */
#include "testutil.h"

#include <pthread.h>
#include <curl/curl.h>
#include <openssl/hmac.h>

#include "webhook.h"

#define SECRET "It's a Secret to Everybody"

static void verify_vector(void)
{
	/* docs.github.com "Validating webhook deliveries" test values. */
	const char *body = "Hello, World!";
	CHECK(ab_webhook_verify(SECRET, body, strlen(body),
				"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17") == 0);
	CHECK(ab_webhook_verify(SECRET, body, strlen(body),
				"sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17") == 0);
}

static void verify_errors(void)
{
	const char *body = "Hello, World!";
	CHECK(ab_webhook_verify(SECRET, body, strlen(body), NULL) == AB_EINVALID);
	CHECK(ab_webhook_verify(SECRET, body, strlen(body), "") == AB_EINVALID);
	CHECK(ab_webhook_verify(SECRET, body, strlen(body), "sha1=757107ea0eb2509fc211221cce984b8a37570b6d") == AB_EINVALID);
	CHECK(ab_webhook_verify(SECRET, body, strlen(body),
				"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18") == AB_EINVALID);
	CHECK(ab_webhook_verify(SECRET, body, strlen(body),
				"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1") == AB_EINVALID);
	CHECK(ab_webhook_verify(SECRET, body, strlen(body),
				"sha256=zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17") == AB_EINVALID);
	CHECK(ab_webhook_verify("another secret", body, strlen(body),
				"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17") == AB_EINVALID);
	CHECK(ab_webhook_verify(SECRET, "Hello, World?", 13,
				"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17") == AB_EINVALID);
}

/* ---- a live server ---- */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static int seen_count;
static char seen_event[64], seen_delivery[128];
static char *seen_body;
static size_t seen_len;
static int done_statuses[8], done_count;

static int on_event(void *payload, const char *event, const char *delivery, const char *body, size_t len, char *reply,
		    size_t size)
{
	pthread_mutex_lock(&seen_lock);
	seen_count++;
	snprintf(seen_event, sizeof(seen_event), "%s", event);
	snprintf(seen_delivery, sizeof(seen_delivery), "%s", delivery ? delivery : "");
	free(seen_body);
	seen_body = malloc(len + 1);
	memcpy(seen_body, body, len + 1);
	seen_len = len;
	pthread_mutex_unlock(&seen_lock);
	snprintf(reply, size, "{\"result\":\"enqueued\"}");
	return 202;
}

static char *metrics(void *payload) { return strdup("abgate_queue_depth 0\n"); }

static void on_done(void *payload, int status, double seconds)
{
	pthread_mutex_lock(&seen_lock);
	if (done_count < 8)
		done_statuses[done_count] = status;
	done_count++;
	pthread_mutex_unlock(&seen_lock);
}

static ab_webhook *start(size_t max_body)
{
	ab_webhook *w = NULL;
	struct ab_webhook_options o = { .listen = "127.0.0.1:0", .secret = SECRET, .max_body = max_body,
					.on_event = on_event, .metrics = metrics, .on_done = on_done };
	CHECK(ab_webhook_start(&w, &o) == 0);
	CHECK(ab_webhook_port(w) > 0);
	seen_count = 0;
	done_count = 0;
	return w;
}

static void sign(char *out, const char *secret, const void *body, size_t len)
{
	unsigned char md[32];
	unsigned int n = 0;
	HMAC(EVP_sha256(), secret, (int)strlen(secret), body, len, md, &n);
	strcpy(out, "sha256=");
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 7 + 2 * i, "%02x", md[i]);
}

struct reply {
	char body[4096];
	size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
	struct reply *r = user;
	size_t k = size * n;
	if (r->len + k < sizeof(r->body)) {
		memcpy(r->body + r->len, data, k);
		r->len += k;
		r->body[r->len] = '\0';
	}
	return k;
}

/* Sends one request; returns the HTTP status (0: no answer). `sig` NULL: no signature header. */
static long http(ab_webhook *w, const char *method, const char *path, const char *body, size_t len, const char *sig,
		 int chunked, struct reply *out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[128], sighdr[160];
	struct reply local = { { 0 }, 0 };
	long status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", ab_webhook_port(w), path);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "X-GitHub-Event: pull_request");
	hdrs = curl_slist_append(hdrs, "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958");
	if (chunked)
		hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
	if (sig) {
		snprintf(sighdr, sizeof(sighdr), "X-Hub-Signature-256: %s", sig);
		hdrs = curl_slist_append(hdrs, sighdr);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out ? out : &local);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		if (!chunked)
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	CURLcode rc = curl_easy_perform(h);
	if (rc == CURLE_OK || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return status;
}

static void http_accept(void)
{
	ab_webhook *w = start(1 << 20);
	const char *body = "{\"action\":\"opened\",\"number\":7}";
	char sig[80];
	struct reply r = { { 0 }, 0 };

	sign(sig, SECRET, body, strlen(body));
	CHECK_EQ(http(w, "POST", "/webhook", body, strlen(body), sig, 0, &r), 202);
	CHECK_STR_HAS(r.body, "enqueued");
	CHECK_EQ(seen_count, 1);
	CHECK_STR(seen_event, "pull_request");
	CHECK_STR(seen_delivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
	CHECK_EQ(seen_len, strlen(body));
	CHECK(!memcmp(seen_body, body, seen_len));
	ab_webhook_stop(w);
	CHECK_EQ(done_count, 1);
	CHECK_EQ(done_statuses[0], 202);
}

static void http_reject(void)
{
	ab_webhook *w = start(1 << 20);
	const char *body = "{\"action\":\"opened\",\"number\":7}";
	char sig[80];

	sign(sig, "wrong secret", body, strlen(body));
	CHECK_EQ(http(w, "POST", "/webhook", body, strlen(body), sig, 0, NULL), 401);
	CHECK_EQ(http(w, "POST", "/webhook", body, strlen(body), NULL, 0, NULL), 401);
	CHECK_EQ(http(w, "POST", "/webhook", body, strlen(body), "sha256=", 0, NULL), 401);
	/* Right signature of other bytes: the body was tampered with. */
	sign(sig, SECRET, body, strlen(body));
	CHECK_EQ(http(w, "POST", "/webhook", "{\"action\":\"closed\",\"number\":7}", strlen(body), sig, 0, NULL), 401);
	CHECK_EQ(seen_count, 0);  /* nothing unverified reached the callback */
	ab_webhook_stop(w);
}

static void http_oversize(void)
{
	size_t cap = 64 << 10, big = 6u << 20;
	ab_webhook *w = start(cap);
	char *body = malloc(big);
	char sig[80];

	memset(body, 'x', big);
	sign(sig, SECRET, body, big);
	CHECK_EQ(http(w, "POST", "/webhook", body, big, sig, 0, NULL), 413);
	CHECK_EQ(seen_count, 0);
	/* Exactly at the cap is fine (and then fails as unsigned garbage only if the signature is off). */
	sign(sig, SECRET, body, cap);
	CHECK_EQ(http(w, "POST", "/webhook", body, cap, sig, 0, NULL), 202);
	CHECK_EQ(seen_count, 1);
	free(body);
	ab_webhook_stop(w);
}

static void http_chunked_oversize(void)
{
	size_t cap = 64 << 10, big = 1u << 20;
	ab_webhook *w = start(cap);
	char *body = malloc(big + 1);
	char sig[80];

	memset(body, 'y', big);
	body[big] = '\0';
	sign(sig, SECRET, body, big);
	CHECK_EQ(http(w, "POST", "/webhook", body, big, sig, 1, NULL), 413);
	CHECK_EQ(seen_count, 0);
	body[1000] = '\0';
	sign(sig, SECRET, body, 1000);
	CHECK_EQ(http(w, "POST", "/webhook", body, 1000, sig, 1, NULL), 202);
	CHECK_EQ(seen_len, 1000);
	free(body);
	ab_webhook_stop(w);
}

static void http_routes(void)
{
	ab_webhook *w = start(1 << 20);
	struct reply r = { { 0 }, 0 };
	CHECK_EQ(http(w, "GET", "/healthz", NULL, 0, NULL, 0, &r), 200);
	CHECK_STR_HAS(r.body, "ok");
	memset(&r, 0, sizeof(r));
	CHECK_EQ(http(w, "GET", "/metrics", NULL, 0, NULL, 0, &r), 200);
	CHECK_STR_HAS(r.body, "abgate_queue_depth");
	CHECK_EQ(http(w, "GET", "/webhook", NULL, 0, NULL, 0, NULL), 405);
	CHECK_EQ(http(w, "GET", "/nope", NULL, 0, NULL, 0, NULL), 404);
	CHECK_EQ(http(w, "DELETE", "/healthz", NULL, 0, NULL, 0, NULL), 405);
	ab_webhook_stop(w);

	/* A second server on a port in use fails cleanly. */
	ab_webhook *a = start(1 << 20), *b = NULL;
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", ab_webhook_port(a));
	struct ab_webhook_options o = { .listen = listen, .secret = SECRET, .on_event = on_event };
	CHECK(ab_webhook_start(&b, &o) < 0);
	o.listen = "nonsense";
	CHECK(ab_webhook_start(&b, &o) < 0);
	o.listen = "127.0.0.1:0";
	o.secret = "";
	CHECK(ab_webhook_start(&b, &o) < 0);
	ab_webhook_stop(a);
}

static void form_payload(void)
{
	/* Webhooks configured as application/x-www-form-urlencoded: signed raw, decoded after. */
	ab_webhook *w = start(1 << 20);
	const char *raw = "payload=%7B%22zen%22%3A%22Keep+it+simple%22%7D";
	char sig[80];
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[128], sighdr[160];

	sign(sig, SECRET, raw, strlen(raw));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/webhook", ab_webhook_port(w));
	snprintf(sighdr, sizeof(sighdr), "X-Hub-Signature-256: %s", sig);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/x-www-form-urlencoded");
	hdrs = curl_slist_append(hdrs, "X-GitHub-Event: ping");
	hdrs = curl_slist_append(hdrs, sighdr);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, raw);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	struct reply r = { { 0 }, 0 };
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
	CHECK(curl_easy_perform(h) == CURLE_OK);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	CHECK_EQ(seen_count, 1);
	CHECK_STR(seen_body, "{\"zen\":\"Keep it simple\"}");
	CHECK_STR(seen_delivery, "");
	ab_webhook_stop(w);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "verify_vector", verify_vector }, { "verify_errors", verify_errors },
		{ "http_accept", http_accept },     { "http_reject", http_reject },
		{ "http_oversize", http_oversize }, { "http_chunked_oversize", http_chunked_oversize },
		{ "http_routes", http_routes },     { "form_payload", form_payload },
	};
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = TU_RUN(argc, argv, cases);
	free(seen_body);
	curl_global_cleanup();
	return rc;
}
