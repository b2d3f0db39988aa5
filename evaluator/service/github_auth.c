/*
 * github_auth.c - GitHub credentials: a fixed token, or a GitHub App whose RS256 JWT (OpenSSL
 * EVP_DigestSign over "header.claims") is exchanged by github.c for an installation token that is
 * cached here until AB_GH_TOKEN_REFRESH_MARGIN_S before it expires. A mutex guards the cache; a
 * second one serialises refreshes so concurrent workers do not all exchange at once.
 */
#define _GNU_SOURCE  /* strptime, timegm */
#include "github_auth.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "error.h"

#define PEM_MAX (64 << 10)

struct ab_gh_auth {
	pthread_mutex_t lock;          /* guards token / expires_at */
	pthread_mutex_t refresh_lock;  /* one refresh at a time */
	char *token;                   /* fixed token, or the cached installation token */
	time_t expires_at;             /* App: when the cached token stops being used; 0: none */
	int is_app;
	int64_t app_id;
	int64_t installation_id;
	EVP_PKEY *key;
};

static int openssl_error(const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();
	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return ab_error_set("%s: %s", what, e ? buf : "unknown OpenSSL error");
}

static int auth_alloc(ab_gh_auth **out)
{
	ab_gh_auth *a = calloc(1, sizeof(*a));
	if (!a)
		return ab_error_set("out of memory");
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->refresh_lock, NULL);
	*out = a;
	return 0;
}

int ab_gh_auth_new_token(ab_gh_auth **out, const char *token)
{
	ab_gh_auth *a = NULL;

	if (!token || !token[0])
		return ab_error_setc(AB_EINVALID, "github: empty token");
	if (strpbrk(token, "\r\n"))
		return ab_error_setc(AB_EINVALID, "github: the token contains a line break");
	if (auth_alloc(&a) < 0)
		return -1;
	if (!(a->token = strdup(token))) {
		ab_gh_auth_free(a);
		return ab_error_set("out of memory");
	}
	*out = a;
	return 0;
}

int ab_gh_auth_new_app_pem(ab_gh_auth **out, int64_t app_id, const char *pem, size_t pem_len, int64_t installation_id)
{
	ab_gh_auth *a = NULL;
	BIO *bio = NULL;
	int error = -1;

	if (app_id <= 0 || installation_id <= 0)
		return ab_error_setc(AB_EINVALID, "github: App auth needs a positive app_id and installation_id");
	if (auth_alloc(&a) < 0)
		return -1;
	a->is_app = 1;
	a->app_id = app_id;
	a->installation_id = installation_id;
	if (!(bio = BIO_new_mem_buf(pem, (int)pem_len))) {
		openssl_error("github: App private key");
		goto cleanup;
	}
	if (!(a->key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL))) {
		openssl_error("github: App private key is not a PEM private key");
		goto cleanup;
	}
	if (EVP_PKEY_get_base_id(a->key) != EVP_PKEY_RSA) {
		ab_error_setc(AB_EINVALID, "github: App private key must be RSA (RS256)");
		goto cleanup;
	}
	*out = a;
	a = NULL;
	error = 0;
cleanup:
	BIO_free(bio);
	ab_gh_auth_free(a);
	return error;
}

int ab_gh_auth_new_app(ab_gh_auth **out, int64_t app_id, const char *private_key_file, int64_t installation_id)
{
	FILE *f = NULL;
	char *pem = NULL;
	size_t n;
	int error = -1;

	if (!(f = fopen(private_key_file, "rb"))) {
		ab_error_errno("github: App private key %s", private_key_file);
		goto cleanup;
	}
	if (!(pem = malloc(PEM_MAX))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	n = fread(pem, 1, PEM_MAX, f);
	if (n == PEM_MAX) {
		ab_error_setc(AB_EINVALID, "github: App private key %s is larger than %d bytes", private_key_file, PEM_MAX);
		goto cleanup;
	}
	if (ab_gh_auth_new_app_pem(out, app_id, pem, n, installation_id) < 0) {
		ab_error_wrap(AB_EINVALID, "%s", private_key_file);
		goto cleanup;
	}
	error = 0;
cleanup:
	if (pem)
		memset(pem, 0, PEM_MAX);
	free(pem);
	if (f)
		fclose(f);
	return error;
}

void ab_gh_auth_free(ab_gh_auth *a)
{
	if (!a)
		return;
	if (a->token)
		memset(a->token, 0, strlen(a->token));
	free(a->token);
	EVP_PKEY_free(a->key);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->refresh_lock);
	free(a);
}

int ab_gh_auth_is_app(const ab_gh_auth *a) { return a && a->is_app; }
int64_t ab_gh_auth_installation(const ab_gh_auth *a) { return a ? a->installation_id : 0; }

int ab_gh_auth_header(ab_gh_auth *a, char *buf, size_t size, time_t now)
{
	int error = 0;

	pthread_mutex_lock(&a->lock);
	if (!a->token || (a->is_app && now >= a->expires_at))
		error = AB_ENOTFOUND;
	else if ((size_t)snprintf(buf, size, "Bearer %s", a->token) >= size)
		error = ab_error_set("github: token too long");
	pthread_mutex_unlock(&a->lock);
	return error;
}

int ab_gh_base64url(char **out, const unsigned char *data, size_t len)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *s = malloc(len / 3 * 4 + 5);
	size_t i, o = 0;

	if (!s)
		return ab_error_set("out of memory");
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
		s[o++] = alphabet[v >> 18 & 63];
		s[o++] = alphabet[v >> 12 & 63];
		s[o++] = alphabet[v >> 6 & 63];
		s[o++] = alphabet[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)data[i] << 16;
		s[o++] = alphabet[v >> 18 & 63];
		s[o++] = alphabet[v >> 12 & 63];
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8;
		s[o++] = alphabet[v >> 18 & 63];
		s[o++] = alphabet[v >> 12 & 63];
		s[o++] = alphabet[v >> 6 & 63];
	}
	s[o] = '\0';
	*out = s;
	return 0;
}

int ab_gh_auth_app_jwt(ab_gh_auth *a, char **out, time_t now)
{
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	char claims[160];
	char *h64 = NULL, *c64 = NULL, *s64 = NULL, *jwt = NULL, *signing_input = NULL;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	EVP_MD_CTX *md = NULL;
	int error = -1;

	if (!a->is_app)
		return ab_error_set("github: not App auth");
	/* iat a minute in the past absorbs clock skew; exp 9 min ahead stays under GitHub's 10-min cap. */
	snprintf(claims, sizeof(claims), "{\"iat\":%lld,\"exp\":%lld,\"iss\":\"%" PRId64 "\"}", (long long)now - 60,
		 (long long)now + 540, a->app_id);
	if (ab_gh_base64url(&h64, (const unsigned char *)header, strlen(header)) < 0 ||
	    ab_gh_base64url(&c64, (const unsigned char *)claims, strlen(claims)) < 0)
		goto cleanup;
	if (!(signing_input = malloc(strlen(h64) + strlen(c64) + 2))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	sprintf(signing_input, "%s.%s", h64, c64);
	if (!(md = EVP_MD_CTX_new()) || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, a->key) != 1 ||
	    EVP_DigestSign(md, NULL, &sig_len, (const unsigned char *)signing_input, strlen(signing_input)) != 1) {
		openssl_error("github: JWT signing");
		goto cleanup;
	}
	if (!(sig = malloc(sig_len))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	if (EVP_DigestSign(md, sig, &sig_len, (const unsigned char *)signing_input, strlen(signing_input)) != 1) {
		openssl_error("github: JWT signing");
		goto cleanup;
	}
	if (ab_gh_base64url(&s64, sig, sig_len) < 0)
		goto cleanup;
	if (!(jwt = malloc(strlen(signing_input) + strlen(s64) + 2))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	sprintf(jwt, "%s.%s", signing_input, s64);
	*out = jwt;
	jwt = NULL;
	error = 0;
cleanup:
	EVP_MD_CTX_free(md);
	free(h64);
	free(c64);
	free(s64);
	free(sig);
	free(signing_input);
	free(jwt);
	return error;
}

int ab_gh_auth_set_installation_token(ab_gh_auth *a, const char *token, time_t expires_at)
{
	char *copy;

	if (!token || !token[0] || strpbrk(token, "\r\n"))
		return ab_error_setc(AB_EINVALID, "github: the installation token reply holds no usable token");
	if (!(copy = strdup(token)))
		return ab_error_set("out of memory");
	pthread_mutex_lock(&a->lock);
	if (a->token)
		memset(a->token, 0, strlen(a->token));
	free(a->token);
	a->token = copy;
	a->expires_at = expires_at - AB_GH_TOKEN_REFRESH_MARGIN_S;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

void ab_gh_auth_invalidate(ab_gh_auth *a)
{
	if (!a || !a->is_app)
		return;
	pthread_mutex_lock(&a->lock);
	a->expires_at = 0;
	pthread_mutex_unlock(&a->lock);
}

void ab_gh_auth_refresh_lock(ab_gh_auth *a) { pthread_mutex_lock(&a->refresh_lock); }
void ab_gh_auth_refresh_unlock(ab_gh_auth *a) { pthread_mutex_unlock(&a->refresh_lock); }

int ab_gh_parse_time(time_t *out, const char *s)
{
	struct tm tm;
	char *end;

	memset(&tm, 0, sizeof(tm));
	if (!s || !(end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		return ab_error_setc(AB_EINVALID, "github: bad timestamp \"%s\"", s ? s : "(null)");
	if (*end == '.')  /* fractional seconds */
		while (*++end >= '0' && *end <= '9')
			;
	if (*end != 'Z' && *end != '\0')
		return ab_error_setc(AB_EINVALID, "github: timestamp \"%s\" is not UTC", s);
	*out = timegm(&tm);
	return 0;
}
