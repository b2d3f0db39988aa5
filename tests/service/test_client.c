/*
 * test_client.c - the GitHub client against the simulator (GITHUB_API_URL, started by
 * scenarios.mjs client_contract): every request the service makes passes GitHub's OpenAPI
 * validation (a 400 would fail here), replies parse, Link pagination is followed (a Link header too
 * long to read is an error), 5xx and network errors are retried, Retry-After (seconds or a date) and
 * x-ratelimit-reset are waited out, waits past max_wait_s are handed back (capped at an hour), and
 * App auth exchanges one JWT for a cached installation token.
 */
#include "testutil.h"

#include <time.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "github.h"

static const char *api;

/* POSTs a JSON control request to the simulator (/_sim/...). */
static void sim(const char *path, const char *json)
{
	char url[512];
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	long status = 0;
	snprintf(url, sizeof(url), "%s%s", api, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, json ? json : "{}");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fwrite);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, stderr);
	CHECK(curl_easy_perform(h) == CURLE_OK);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	CHECK_EQ(status, 200);
	fputc('\n', stderr);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
}

static ab_gh *client(ab_gh_auth *auth, const char *url, int max_wait_s)
{
	ab_gh *gh = NULL;
	struct ab_gh_options o = { .api_url = url, .user_agent = "abgate-test", .timeout_s = 10, .max_retries = 3,
				   .backoff_base_ms = 50, .backoff_max_ms = 400, .max_wait_s = max_wait_s };
	CHECK(ab_gh_new(&gh, &o, auth) == 0);
	return gh;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void contract(void)
{
	ab_gh_auth *auth = NULL;
	CHECK(ab_gh_auth_new_token(&auth, "ghp_test") == 0);
	ab_gh *gh = client(auth, api, 5);
	struct ab_gh_pr pr;
	char perm[32];
	json_t *reply = NULL, *list = NULL;

	sim("/_sim/reset", NULL);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	CHECK_EQ(pr.number, 7);
	CHECK_STR(pr.head_sha, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	CHECK(pr.open && !pr.draft);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 404) == AB_ENOTFOUND);
	CHECK(ab_gh_permission(gh, perm, sizeof(perm), "octo-org/demo", "alice") == 0);
	CHECK_STR(perm, "write");
	CHECK(ab_gh_permission_can_write(perm));
	CHECK(ab_gh_permission(gh, perm, sizeof(perm), "octo-org/demo", "mallory") == 0);
	CHECK(!ab_gh_permission_can_write(perm));

	json_t *body = json_pack("{s:s}", "body", "<!-- abgate:v1 head=x -->\nhello");
	CHECK(ab_gh_request(gh, &reply, NULL, "POST", "/repos/octo-org/demo/issues/7/comments", body, AB_GH_NO_RETRY) == 0);
	json_int_t id = json_integer_value(json_object_get(reply, "id"));
	CHECK(id > 0);
	json_decref(reply);
	json_decref(body);
	char path[256];
	snprintf(path, sizeof(path), "/repos/octo-org/demo/issues/comments/%lld", (long long)id);
	body = json_pack("{s:s}", "body", "updated");
	CHECK(ab_gh_request(gh, NULL, NULL, "PATCH", path, body, 0) == 0);
	json_decref(body);
	CHECK(ab_gh_get_all(gh, &list, "/repos/octo-org/demo/issues/7/comments?per_page=100", NULL, 100) == 0);
	CHECK_EQ(json_array_size(list), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "body")), "updated");
	json_decref(list);

	body = json_pack("{s:[ss]}", "labels", "eval:M", "perf: needs review");
	CHECK(ab_gh_request(gh, NULL, NULL, "POST", "/repos/octo-org/demo/issues/7/labels", body, 0) == 0);
	json_decref(body);
	char *esc = NULL;
	CHECK(ab_gh_escape(&esc, "perf: needs review") == 0);
	CHECK_STR(esc, "perf%3A%20needs%20review");
	snprintf(path, sizeof(path), "/repos/octo-org/demo/issues/7/labels/%s", esc);
	free(esc);
	CHECK(ab_gh_request(gh, NULL, NULL, "DELETE", path, NULL, 0) == 0);
	CHECK(ab_gh_request(gh, NULL, NULL, "DELETE", path, NULL, 0) == AB_ENOTFOUND);
	/* GitHub's spec rejects an empty label list: the simulator says so too. */
	body = json_pack("{s:[]}", "labels");
	CHECK(ab_gh_request(gh, NULL, NULL, "POST", "/repos/octo-org/demo/issues/7/labels", body, 0) == AB_EINVALID);
	json_decref(body);

	body = json_pack("{s:s, s:s, s:s, s:s}", "name", "abgate", "head_sha", pr.head_sha, "status", "in_progress",
			 "external_id", "abgate:test");
	CHECK(ab_gh_request(gh, &reply, NULL, "POST", "/repos/octo-org/demo/check-runs", body, AB_GH_NO_RETRY) == 0);
	json_decref(body);
	id = json_integer_value(json_object_get(reply, "id"));
	json_decref(reply);
	snprintf(path, sizeof(path), "/repos/octo-org/demo/check-runs/%lld", (long long)id);
	body = json_pack("{s:s, s:s, s:{s:s, s:s}}", "status", "completed", "conclusion", "success", "output", "title", "t",
			 "summary", "s");
	CHECK(ab_gh_request(gh, NULL, NULL, "PATCH", path, body, 0) == 0);
	json_decref(body);
	snprintf(path, sizeof(path), "/repos/octo-org/demo/commits/%s/check-runs?check_name=abgate&per_page=100", pr.head_sha);
	CHECK(ab_gh_get_all(gh, &list, path, "check_runs", 100) == 0);
	CHECK_EQ(json_array_size(list), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "conclusion")), "success");
	json_decref(list);
	body = json_pack("{s:s, s:s, s:s}", "state", "success", "context", "abgate", "description", "eval:M");
	snprintf(path, sizeof(path), "/repos/octo-org/demo/statuses/%s", pr.head_sha);
	CHECK(ab_gh_request(gh, NULL, NULL, "POST", path, body, 0) == 0);
	json_decref(body);
	body = json_pack("{s:s}", "state", "great");
	CHECK(ab_gh_request(gh, NULL, NULL, "POST", path, body, 0) == AB_EINVALID);  /* spec enum */
	json_decref(body);
	/* A Link pointing off api_url never gets our token. */
	CHECK(ab_gh_request(gh, NULL, NULL, "GET", "http://example.invalid/repos", NULL, 0) == AB_EINVALID);
	ab_gh_free(gh);
	ab_gh_auth_free(auth);
}

static void pagination(void)
{
	ab_gh *gh = client(NULL, api, 5);
	json_t *items = NULL;
	struct ab_gh_pr *prs = NULL;
	size_t n = 0;

	sim("/_sim/reset", NULL);
	for (int i = 10; i < 15; i++) {
		char json[256];
		snprintf(json, sizeof(json), "{\"repo\":\"octo-org/demo\",\"number\":%d,\"head_sha\":\"%040d\"}", i, i);
		sim("/_sim/pulls", json);
	}
	sim("/_sim/pulls", "{\"repo\":\"octo-org/demo\",\"number\":15,\"state\":\"closed\"}");
	long before = ab_gh_request_count(gh);
	CHECK(ab_gh_get_all(gh, &items, "/repos/octo-org/demo/pulls?state=open&per_page=2", NULL, 1000) == 0);
	CHECK_EQ(json_array_size(items), 6);              /* #7 and #10..#14, not the closed one */
	CHECK_EQ(ab_gh_request_count(gh) - before, 3);    /* three pages of two */
	json_decref(items);
	CHECK(ab_gh_get_all(gh, &items, "/repos/octo-org/demo/pulls?state=open&per_page=2", NULL, 5) < 0);
	CHECK_STR_HAS(ab_error_last(), "more than 5 items");
	CHECK(ab_gh_pr_list_open(gh, &prs, &n, "octo-org/demo") == 0);
	CHECK_EQ(n, 6);
	free(prs);

	/* A Link header too long to keep: an error, not a silent "last page" (that would miss the
	 * sticky comment on page 2 and post a second one). */
	char *json = malloc(8192), pad[3001];
	memset(pad, 'p', 3000);
	pad[3000] = '\0';
	snprintf(json, 8192, "{\"method\":\"GET\",\"path\":\"^/repos/octo-org/demo/issues/7/comments$\",\"status\":200,"
		 "\"count\":1,\"body\":[],\"headers\":{\"Link\":\"<%s/repos/octo-org/demo/issues/7/comments?page=2&pad=%s>; "
		 "rel=\\\"next\\\"\"}}", api, pad);
	sim("/_sim/fail", json);
	free(json);
	CHECK(ab_gh_get_all(gh, &items, "/repos/octo-org/demo/issues/7/comments?per_page=100", NULL, 1000) < 0);
	CHECK_STR_HAS(ab_error_last(), "Link header longer than");
	ab_gh_free(gh);
}

static void retries(void)
{
	ab_gh *gh = client(NULL, api, 5);
	struct ab_gh_pr pr;
	long status = 0;

	sim("/_sim/reset", NULL);
	sim("/_sim/fail", "{\"method\":\"GET\",\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":502,\"count\":2}");
	long before = ab_gh_request_count(gh);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	CHECK_EQ(ab_gh_request_count(gh) - before, 3);

	/* Non-idempotent creates are not retried by the client: the caller looks before retrying. */
	sim("/_sim/fail", "{\"method\":\"POST\",\"path\":\"/comments$\",\"status\":503,\"count\":1}");
	json_t *body = json_pack("{s:s}", "body", "x");
	CHECK(ab_gh_request(gh, NULL, &status, "POST", "/repos/octo-org/demo/issues/7/comments", body, AB_GH_NO_RETRY) < 0);
	CHECK_EQ(status, 503);
	json_decref(body);

	/* Past the retry budget the 5xx comes back. */
	sim("/_sim/fail", "{\"method\":\"GET\",\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":500,\"count\":10}");
	before = ab_gh_request_count(gh);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == AB_ERROR);
	CHECK_EQ(ab_gh_request_count(gh) - before, 4);    /* 1 + max_retries */
	CHECK_STR_HAS(ab_error_last(), "GET /repos/octo-org/demo/pulls/7");
	CHECK_STR_HAS(ab_error_last(), "500");
	sim("/_sim/reset", NULL);

	/* A plain 403 (no rate-limit signs) is a permission answer: no retry. */
	sim("/_sim/fail", "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":403,\"count\":1,\"body\":{\"message\":\"Resource not accessible by integration\"}}");
	before = ab_gh_request_count(gh);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == AB_ERROR);
	CHECK_EQ(ab_gh_request_count(gh) - before, 1);
	CHECK_STR_HAS(ab_error_last(), "Resource not accessible");

	/* Network errors: nothing listens on port 9 of loopback. */
	ab_gh *dead = client(NULL, "http://127.0.0.1:9", 5);
	CHECK(ab_gh_pr_get(dead, &pr, "octo-org/demo", 7) < 0);
	CHECK_EQ(ab_gh_request_count(dead), 4);
	ab_gh_free(dead);
	ab_gh_free(gh);
}

static void rate_limits(void)
{
	ab_gh *gh = client(NULL, api, 5);
	struct ab_gh_pr pr;
	char json[512];

	sim("/_sim/reset", NULL);
	sim("/_sim/fail", "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":403,\"count\":1,"
			  "\"headers\":{\"Retry-After\":\"1\"},\"body\":{\"message\":\"secondary rate limit\"}}");
	double t0 = now_s();
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	double waited = now_s() - t0;
	fprintf(stderr, "   Retry-After: 1 -> answered after %.2f s\n", waited);
	CHECK(waited >= 0.95);  /* it did wait out the Retry-After (a lower bound, not a speed target) */

	snprintf(json, sizeof(json), "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":429,\"count\":1,"
				     "\"headers\":{\"x-ratelimit-remaining\":\"0\",\"x-ratelimit-reset\":\"%lld\"}}",
		 (long long)time(NULL) + 1);
	sim("/_sim/fail", json);
	t0 = now_s();
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	fprintf(stderr, "   x-ratelimit-reset: now+1 -> answered after %.2f s\n", now_s() - t0);
	CHECK(now_s() - t0 >= 0.95);

	/* Longer than max_wait_s: handed back at once with the wait, for the caller to defer. */
	sim("/_sim/fail", "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":403,\"count\":1,"
			  "\"headers\":{\"Retry-After\":\"3600\"}}");
	t0 = now_s();
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == AB_ERATELIMIT);
	CHECK_EQ(ab_gh_last_wait_s(), 3600);
	CHECK(now_s() - t0 < 5);

	/* Retry-After as an HTTP-date ten minutes ahead: a ten-minute wait, not "0" (a retry storm). */
	char date[64];
	time_t later = time(NULL) + 600;
	struct tm tm;
	gmtime_r(&later, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	snprintf(json, sizeof(json), "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":429,\"count\":1,"
				     "\"headers\":{\"Retry-After\":\"%s\"}}", date);
	sim("/_sim/fail", json);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == AB_ERATELIMIT);
	CHECK(ab_gh_last_wait_s() >= 590 && ab_gh_last_wait_s() <= 600);

	/* An absurd Retry-After is capped at an hour: the post is retried then, never lost to an overflow. */
	sim("/_sim/fail", "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":429,\"count\":1,"
			  "\"headers\":{\"Retry-After\":\"99999999999999999999999\"}}");
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == AB_ERATELIMIT);
	CHECK_EQ(ab_gh_last_wait_s(), 3600);
	ab_gh_free(gh);
}

static void app_auth(void)
{
	EVP_PKEY *key = EVP_RSA_gen(2048);
	BIO *bio = BIO_new(BIO_s_mem());
	char *pem = NULL;
	ab_gh_auth *auth = NULL;
	struct ab_gh_pr pr;

	CHECK(PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1);
	long n = BIO_get_mem_data(bio, &pem);
	CHECK(ab_gh_auth_new_app_pem(&auth, 4242, pem, (size_t)n, 31) == 0);
	ab_gh *gh = client(auth, api, 5);

	sim("/_sim/reset", NULL);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	long before = ab_gh_request_count(gh);
	/* A revoked token: one 401, one refresh, then the request goes through. */
	sim("/_sim/fail", "{\"path\":\"^/repos/octo-org/demo/pulls/7$\",\"status\":401,\"count\":1}");
	CHECK(ab_gh_pr_get(gh, &pr, "octo-org/demo", 7) == 0);
	CHECK_EQ(ab_gh_request_count(gh) - before, 3);   /* 401, token exchange, retry */
	ab_gh_free(gh);
	ab_gh_auth_free(auth);
	BIO_free(bio);
	EVP_PKEY_free(key);
	/* scenarios.mjs checks the simulator's log: 2 exchanges with a Bearer JWT, API calls with ghs_ tokens. */
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "contract", contract },       { "pagination", pagination }, { "retries", retries },
		{ "rate_limits", rate_limits }, { "app_auth", app_auth },
	};
	if (!(api = getenv("GITHUB_API_URL"))) {
		fprintf(stderr, "test_client: set GITHUB_API_URL (scenarios.mjs client_contract starts the simulator)\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = TU_RUN(argc, argv, cases);
	curl_global_cleanup();
	return rc;
}
