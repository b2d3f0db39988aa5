/*
 * github_auth.h - credentials for the GitHub REST client: a plain token, or a GitHub App (a JWT
 * signed RS256 with the App's private key, exchanged for an installation token that is cached
 * until shortly before it expires). This module signs and caches; github.c does the HTTP exchange.
 * All functions are thread-safe.
 */
#ifndef AB_GITHUB_AUTH_H
#define AB_GITHUB_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct ab_gh_auth ab_gh_auth;

/* Seconds before expiry at which a cached installation token is refreshed. */
#define AB_GH_TOKEN_REFRESH_MARGIN_S 300

/* Token auth ("Authorization: Bearer <token>"). The token is copied. Caller frees with ab_gh_auth_free. */
int ab_gh_auth_new_token(ab_gh_auth **out, const char *token);

/* App auth: loads the PEM private key (RSA) from `private_key_file` now, so a bad key fails at start. */
int ab_gh_auth_new_app(ab_gh_auth **out, int64_t app_id, const char *private_key_file, int64_t installation_id);

/* Same with the PEM text in memory (tests). */
int ab_gh_auth_new_app_pem(ab_gh_auth **out, int64_t app_id, const char *pem, size_t pem_len, int64_t installation_id);

void ab_gh_auth_free(ab_gh_auth *auth);

/* Nonzero for App auth (check runs available), zero for token auth. */
int ab_gh_auth_is_app(const ab_gh_auth *auth);
int64_t ab_gh_auth_installation(const ab_gh_auth *auth);

/*
 * Writes the value of the Authorization header for an API request into buf ("Bearer ...").
 * Returns 0, or AB_ENOTFOUND when App auth has no installation token valid at `now` (call
 * ab_gh_auth_app_jwt, exchange it, then ab_gh_auth_set_installation_token).
 */
int ab_gh_auth_header(ab_gh_auth *auth, char *buf, size_t size, time_t now);

/*
 * The App JWT for `now`: header {"alg":"RS256","typ":"JWT"}, claims iat = now - 60 (clock skew),
 * exp = now + 540, iss = app id; base64url without padding. Caller frees *out with free().
 */
int ab_gh_auth_app_jwt(ab_gh_auth *auth, char **out, time_t now);

/* Caches an installation token until `expires_at` (minus the refresh margin). Copies the token. */
int ab_gh_auth_set_installation_token(ab_gh_auth *auth, const char *token, time_t expires_at);

/* Drops a cached installation token (after a 401), so the next request refreshes it. */
void ab_gh_auth_invalidate(ab_gh_auth *auth);

/* Serialises refreshes: lock before checking + exchanging, unlock after storing. */
void ab_gh_auth_refresh_lock(ab_gh_auth *auth);
void ab_gh_auth_refresh_unlock(ab_gh_auth *auth);

/* Parses GitHub's "2016-07-11T22:14:10Z" (UTC). Returns 0 and sets *out, or AB_EINVALID. */
int ab_gh_parse_time(time_t *out, const char *iso8601);

/* base64url (RFC 4648 §5) without padding into a new string. Caller frees. */
int ab_gh_base64url(char **out, const unsigned char *data, size_t len);

#endif
