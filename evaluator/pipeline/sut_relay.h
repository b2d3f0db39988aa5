/*
 * sut_relay.h - abgate's side of the relay (relay.h) for an HTTP SUT under the sandbox: per server
 * process a fresh directory under the evaluation's run dir holding a listening unix socket, which
 * is passed to abgate-relay as fd 3 (the directory itself is never bound into any sandbox), and the
 * bubblewrap argv that runs the relay with the server command as its child. sut_http.c then talks
 * HTTP to that socket (CURLOPT_UNIX_SOCKET_PATH).
 */
#ifndef AB_SUT_RELAY_H
#define AB_SUT_RELAY_H

#include <stddef.h>

#include "sut.h"

typedef struct ab_sut_relay ab_sut_relay;

/*
 * Makes <sb->socket_root>/relay-XXXXXX (mode 0700) with the listening socket "s", and *out_argv:
 * `bwrap ... -- prlimit ... -- RELAY --port PORT -- argv...` with sb->ro and the relay executable
 * bound read-only, env set inside, cwd as the working directory. The child must get
 * ab_sut_relay_fd as its fd 3 (ab_proc_spec.pass_fd). *out: ab_sut_relay_free; *out_argv:
 * ab_build_argv_free (build.h). AB_EINVALID for a missing relay or a socket path over 107 bytes.
 */
int ab_sut_relay_open(ab_sut_relay **out, char ***out_argv, const struct ab_sut_sandbox *sb,
	const char *const *argv, const char *const *env, const char *cwd, int port);

/* The listening socket, valid until ab_sut_relay_started or _free. */
int ab_sut_relay_fd(const ab_sut_relay *relay);

/* Closes abgate's copy of the listening socket once the child holds it, so that a connect after
 * the relay died is refused at once rather than left waiting in the backlog. */
void ab_sut_relay_started(ab_sut_relay *relay);

/* The socket's path (borrowed, valid until ab_sut_relay_free). */
const char *ab_sut_relay_socket(const ab_sut_relay *relay);

/* Closes the socket, removes it and its directory. Accepts NULL. */
void ab_sut_relay_free(ab_sut_relay *relay);

/* The relay executable abgate uses by default: abgate-relay beside the running executable
 * (/proc/self/exe). 0 with out filled; AB_ENOTFOUND when it is not there (message says where). */
int ab_sut_relay_default(char *out, size_t len);

#endif
