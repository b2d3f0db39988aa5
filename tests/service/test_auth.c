/*
 * test_auth.c - GitHub App auth: base64url, the RS256 JWT (verified with the public half of a key
 * made here, claims checked), refusal of keys that are not RSA private keys, GitHub timestamps,
 * and the installation token cache (refresh margin, invalidation).
 */
#include "testutil.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <jansson.h>

#include "github_auth.h"

static void base64url(void)
{
	static const struct { const char *in, *out; } v[] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" }, { "foob", "Zm9vYg" },
		{ "fooba", "Zm9vYmE" }, { "foobar", "Zm9vYmFy" }, { "\xfb\xff", "-_8" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *s = NULL;
		CHECK(ab_gh_base64url(&s, (const unsigned char *)v[i].in, strlen(v[i].in)) == 0);
		CHECK_STR(s, v[i].out);
		free(s);
	}
}

static unsigned char *b64url_decode(const char *s, size_t len, size_t *out_len)
{
	char *std = calloc(len + 4, 1);
	for (size_t i = 0; i < len; i++)
		std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (len % 4)
		std[len++] = '=';
	unsigned char *out = calloc(len, 1);
	int n = EVP_DecodeBlock(out, (unsigned char *)std, (int)len);
	CHECK(n >= 0);
	int pad = 0;
	for (size_t i = len; i > 0 && std[i - 1] == '='; i--)
		pad++;
	*out_len = (size_t)n - (size_t)pad;
	free(std);
	return out;
}

static EVP_PKEY *make_key(char **pem, int rsa)
{
	EVP_PKEY *key = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
	BIO *bio = BIO_new(BIO_s_mem());
	char *data;
	CHECK(key && bio);
	CHECK(PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1);
	long n = BIO_get_mem_data(bio, &data);
	*pem = strndup(data, (size_t)n);
	BIO_free(bio);
	return key;
}

static void jwt_rs256(void)
{
	char *pem = NULL, *jwt = NULL;
	EVP_PKEY *key = make_key(&pem, 1);
	ab_gh_auth *auth = NULL;
	time_t now = 1700000000;

	CHECK(ab_gh_auth_new_app_pem(&auth, 4242, pem, strlen(pem), 99) == 0);
	CHECK(ab_gh_auth_is_app(auth));
	CHECK_EQ(ab_gh_auth_installation(auth), 99);
	CHECK(ab_gh_auth_app_jwt(auth, &jwt, now) == 0);

	char *dot1 = strchr(jwt, '.'), *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	CHECK(dot1 && dot2 && !strchr(dot2 + 1, '.'));
	size_t hlen, clen, slen;
	unsigned char *header = b64url_decode(jwt, (size_t)(dot1 - jwt), &hlen);
	unsigned char *claims = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &clen);
	unsigned char *sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &slen);
	json_t *h = json_loadb((char *)header, hlen, 0, NULL), *c = json_loadb((char *)claims, clen, 0, NULL);
	CHECK(h && c);
	CHECK_STR(json_string_value(json_object_get(h, "alg")), "RS256");
	CHECK_STR(json_string_value(json_object_get(c, "iss")), "4242");
	CHECK_EQ(json_integer_value(json_object_get(c, "iat")), now - 60);
	CHECK(json_integer_value(json_object_get(c, "exp")) <= now + 600);   /* GitHub's 10-minute cap */
	CHECK(json_integer_value(json_object_get(c, "exp")) > now);

	/* The signature verifies over "header.claims" with the public key, and not over anything else. */
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	CHECK(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1);
	CHECK(EVP_DigestVerify(md, sig, slen, (unsigned char *)jwt, (size_t)(dot2 - jwt)) == 1);
	EVP_MD_CTX_free(md);
	md = EVP_MD_CTX_new();
	CHECK(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1);
	CHECK(EVP_DigestVerify(md, sig, slen, (unsigned char *)jwt, (size_t)(dot2 - jwt) - 1) != 1);
	EVP_MD_CTX_free(md);

	json_decref(h);
	json_decref(c);
	free(header);
	free(claims);
	free(sig);
	free(jwt);
	free(pem);
	EVP_PKEY_free(key);
	ab_gh_auth_free(auth);
}

static void bad_keys(void)
{
	ab_gh_auth *auth = NULL;
	char *pem = NULL;
	const char *path = tu_path("key.pem");

	CHECK(ab_gh_auth_new_app_pem(&auth, 1, "not a key", 9, 1) < 0);
	CHECK(auth == NULL);
	EVP_PKEY *ec = make_key(&pem, 0);
	CHECK(ab_gh_auth_new_app_pem(&auth, 1, pem, strlen(pem), 1) < 0);
	CHECK_STR_HAS(ab_error_last(), "RSA");
	EVP_PKEY_free(ec);
	free(pem);
	CHECK(ab_gh_auth_new_app(&auth, 1, tu_path("missing.pem"), 1) < 0);
	CHECK_STR_HAS(ab_error_last(), "missing.pem");
	EVP_PKEY *rsa = make_key(&pem, 1);
	tu_write_file(path, pem);
	CHECK(ab_gh_auth_new_app(&auth, 0, path, 1) < 0);
	CHECK(ab_gh_auth_new_app(&auth, 7, path, 8) == 0);
	ab_gh_auth_free(auth);
	EVP_PKEY_free(rsa);
	free(pem);
	CHECK(ab_gh_auth_new_token(&auth, "") < 0);
	CHECK(ab_gh_auth_new_token(&auth, "abc\r\nX-Evil: 1") < 0);
}

static void parse_time(void)
{
	time_t t;
	CHECK(ab_gh_parse_time(&t, "2016-07-11T22:14:10Z") == 0);
	CHECK_EQ(t, 1468275250);
	CHECK(ab_gh_parse_time(&t, "2030-07-11T22:14:10.123Z") == 0);
	CHECK(ab_gh_parse_time(&t, "yesterday") < 0);
	CHECK(ab_gh_parse_time(&t, "2016-07-11T22:14:10+02:00") < 0);
	CHECK(ab_gh_parse_time(&t, NULL) < 0);
}

static void token_cache(void)
{
	char *pem = NULL, buf[256];
	EVP_PKEY *key = make_key(&pem, 1);
	ab_gh_auth *auth = NULL;
	time_t now = 1700000000;

	CHECK(ab_gh_auth_new_app_pem(&auth, 1, pem, strlen(pem), 2) == 0);
	CHECK(ab_gh_auth_header(auth, buf, sizeof(buf), now) == AB_ENOTFOUND);
	CHECK(ab_gh_auth_set_installation_token(auth, "ghs_one", now + 3600) == 0);
	CHECK(ab_gh_auth_header(auth, buf, sizeof(buf), now) == 0);
	CHECK_STR(buf, "Bearer ghs_one");
	/* Refreshed a margin before it expires, not at the last second. */
	CHECK(ab_gh_auth_header(auth, buf, sizeof(buf), now + 3600 - AB_GH_TOKEN_REFRESH_MARGIN_S) == AB_ENOTFOUND);
	ab_gh_auth_invalidate(auth);
	CHECK(ab_gh_auth_header(auth, buf, sizeof(buf), now) == AB_ENOTFOUND);
	CHECK(ab_gh_auth_set_installation_token(auth, "", now + 3600) < 0);
	ab_gh_auth_free(auth);

	CHECK(ab_gh_auth_new_token(&auth, "ghp_plain") == 0);
	CHECK(!ab_gh_auth_is_app(auth));
	CHECK(ab_gh_auth_header(auth, buf, sizeof(buf), now + 999999999) == 0);
	CHECK_STR(buf, "Bearer ghp_plain");
	ab_gh_auth_invalidate(auth);  /* no effect on a fixed token */
	CHECK(ab_gh_auth_header(auth, buf, sizeof(buf), now) == 0);
	ab_gh_auth_free(auth);
	EVP_PKEY_free(key);
	free(pem);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "base64url", base64url }, { "jwt_rs256", jwt_rs256 },     { "bad_keys", bad_keys },
		{ "parse_time", parse_time }, { "token_cache", token_cache },
	};
	return TU_RUN(argc, argv, cases);
}
