/*
 * relay.h - the HTTP SUT relay (docs/http-sut.md): harness code that runs inside the sandbox as the
 * parent of an HTTP server. abgate hands it a listening unix socket; for every connection accepted
 * there it connects to 127.0.0.1:PORT in the sandbox's own network namespace and copies bytes both
 * ways, so abgate reaches a server that has no network beyond its private loopback. The server's
 * exit ends the relay with the server's status. The `abgate-relay` executable is a thin front.
 */
#ifndef AB_RELAY_H
#define AB_RELAY_H

#define AB_RELAY_LISTEN_FD 3      /* where abgate-relay finds its listening socket */
#define AB_RELAY_EXIT_FAILED 125  /* abgate-relay's own failure (bad arguments, socket errors) */

struct ab_relay_config {
	int listen_fd;             /* a listening AF_UNIX stream socket; the relay owns it from now on */
	int port;                  /* the server's port on 127.0.0.1, 1..65535 */
	const char *const *argv;   /* the server command, NULL-terminated; argv[0] searched in PATH */
	int connections_max;       /* concurrent client connections; <= 0: 16 (more wait in the backlog) */
	int connect_timeout_ms;    /* connecting to the server; <= 0: 2000 (then the client is closed) */
};

/*
 * Starts the server (its own child, leading its own process group, with the caller's signal mask
 * and dispositions reset, killed if the relay dies) and relays until it exits. SIGTERM, SIGINT,
 * SIGHUP and SIGQUIT sent to the relay are forwarded to the server's group, once. A connection the
 * server refuses is closed at once (the client sees an empty reply). EOF on one side is passed on
 * as a shutdown of the other once its buffer is written; a pair ends when both directions have,
 * or, once the server has exited, when its side has (within 1 s). Each direction holds at most one
 * 64 KiB buffer.
 * Returns 0 when the server ran and ended, *out_status its wait status (waitpid); negative when
 * the relay itself failed (message set; the server, if started, is killed and reaped first).
 * Blocks SIGCHLD and the forwarded signals in the calling process while it runs, and restores them.
 */
int ab_relay_run(int *out_status, const struct ab_relay_config *config);

#endif
