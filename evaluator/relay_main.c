/*
 * relay_main.c - the `abgate-relay` executable (relay.h): abgate starts it inside the sandbox as the
 * parent of an HTTP SUT, with the listening unix socket on fd 3. It exits as the server did (its
 * exit code, or the same signal), or with 125 when the relay itself failed.
 *
 *   abgate-relay --port PORT -- COMMAND [ARGS...]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "error.h"
#include "relay.h"

int main(int argc, char **argv)
{
	long port = 0;
	int i = 1, status = 0;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		char *end = NULL;
		if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			port = strtol(argv[++i], &end, 10);
			if (!end || *end || port < 1 || port > 65535)
				port = 0;
		} else {
			port = 0;
			break;
		}
	}
	if (port == 0 || i + 1 >= argc) {
		fprintf(stderr, "usage: abgate-relay --port PORT -- COMMAND [ARGS...] (listening socket on fd %d)\n",
			AB_RELAY_LISTEN_FD);
		return AB_RELAY_EXIT_FAILED;
	}
	const struct ab_relay_config cfg = { .listen_fd = AB_RELAY_LISTEN_FD, .port = (int)port,
		.argv = (const char *const *)argv + i + 1 };
	if (ab_relay_run(&status, &cfg) < 0) {
		fprintf(stderr, "abgate-relay: %s\n", ab_error_last());
		return AB_RELAY_EXIT_FAILED;
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		signal(sig, SIG_DFL);
		raise(sig);
		return 128 + sig;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : AB_RELAY_EXIT_FAILED;
}
