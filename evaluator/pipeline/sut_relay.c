/*
 * sut_relay.c - abgate's side of the HTTP SUT relay (see sut_relay.h). abgate binds the socket
 * itself and hands the listening fd down through bwrap, so nothing of the host's filesystem becomes
 * writable inside the sandbox and the server cannot replace the socket abgate connects to.
 */
#define _GNU_SOURCE
#include "sut_relay.h"

#include "error.h"
#include "fs.h"
#include "relay.h"
#include "sandbox.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define RELAY_ARGS 6   /* RELAY --port PORT -- ... NULL */

struct ab_sut_relay {
	int fd;                      /* the listening socket until started, else -1 */
	char dir[PATH_MAX];          /* <socket_root>/relay-XXXXXX; "" when not made */
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int bound;                   /* the socket file exists */
};

int ab_sut_relay_fd(const ab_sut_relay *r) { return r->fd; }
const char *ab_sut_relay_socket(const ab_sut_relay *r) { return r->socket; }

void ab_sut_relay_started(ab_sut_relay *r)
{
	if (r && r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
}

void ab_sut_relay_free(ab_sut_relay *r)
{
	if (!r)
		return;
	ab_sut_relay_started(r);
	if (r->bound)
		unlink(r->socket);
	if (r->dir[0])
		rmdir(r->dir);
	free(r);
}

static int make_socket(ab_sut_relay *r, const char *root)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (ab_fs_mkdirs(root) < 0)
		return ab_error_wrap(AB_ERROR, "relay: socket dir %s", root);
	if ((size_t)snprintf(r->dir, sizeof(r->dir), "%s/relay-XXXXXX", root) >= sizeof(r->dir)) {
		r->dir[0] = '\0';
		return ab_error_setc(AB_EINVALID, "relay: socket dir under %s: path too long", root);
	}
	if (!mkdtemp(r->dir)) {
		int err = errno;
		r->dir[0] = '\0';
		return ab_error_set("relay: cannot make a socket dir under %s: %s", root, strerror(err));
	}
	if ((size_t)snprintf(r->socket, sizeof(r->socket), "%s/s", r->dir) >= sizeof(r->socket))
		return ab_error_setc(AB_EINVALID, "relay: the socket path %s/s is over the %zu bytes a unix socket "
			"allows (use a shorter state dir)", r->dir, sizeof(r->socket) - 1);
	memcpy(a.sun_path, r->socket, strlen(r->socket) + 1);
	if ((r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return ab_error_errno("relay: socket");
	if (bind(r->fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return ab_error_errno("relay: bind %s", r->socket);
	r->bound = 1;
	if (listen(r->fd, 16) < 0)
		return ab_error_errno("relay: listen %s", r->socket);
	return 0;
}

int ab_sut_relay_open(ab_sut_relay **out, char ***out_argv, const struct ab_sut_sandbox *sb,
	const char *const *argv, const char *const *env, const char *cwd, int port)
{
	ab_sut_relay *r = calloc(1, sizeof(*r));
	const char **cmd = NULL, *ro[sizeof(sb->ro) / sizeof(sb->ro[0]) + 1];
	char port_s[16];
	size_t n_ro = 0, n_argv = 0;
	int error = -1;

	if (!r)
		return ab_error_set("out of memory");
	r->fd = -1;
	if (!sb->config || !sb->relay || sb->relay[0] != '/' || access(sb->relay, X_OK) != 0) {
		error = ab_error_setc(AB_EINVALID, "relay: the relay executable '%s' is missing (abgate-relay is built "
			"beside abgate)", sb->relay ? sb->relay : "");
		goto cleanup;
	}
	if (!sb->socket_root || (error = make_socket(r, sb->socket_root)) < 0)
		goto cleanup;
	while (n_ro + 1 < sizeof(sb->ro) / sizeof(sb->ro[0]) && sb->ro[n_ro]) {
		ro[n_ro] = sb->ro[n_ro];
		n_ro++;
	}
	ro[n_ro++] = sb->relay;
	ro[n_ro] = NULL;
	while (argv[n_argv])
		n_argv++;
	if (!(cmd = calloc(n_argv + RELAY_ARGS, sizeof(*cmd)))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	snprintf(port_s, sizeof(port_s), "%d", port);
	cmd[0] = sb->relay;
	cmd[1] = "--port";
	cmd[2] = port_s;
	cmd[3] = "--";
	memcpy(cmd + 4, argv, n_argv * sizeof(*cmd));
	/* fd 3 is the relay's socket: bwrap's status records go to fd 4 (sut_http.c spawns with both) */
	const struct ab_sandbox_step step = { .name = "sut", .cwd = cwd, .ro = ro, .env = env, .run = 1, .status_fd = 4 };
	if ((error = ab_sandbox_wrap(out_argv, sb->config, &step, cmd)) < 0)
		goto cleanup;
	*out = r;
	r = NULL;
	error = 0;
cleanup:
	free(cmd);
	ab_sut_relay_free(r);
	return error;
}

int ab_sut_relay_default(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return ab_error_errno("relay: /proc/self/exe");
	exe[n] = '\0';
	if ((size_t)snprintf(out, len, "%s/abgate-relay", dirname(exe)) >= len)
		return ab_error_set("relay: path too long");
	if (access(out, X_OK) != 0)
		return ab_error_setc(AB_ENOTFOUND, "relay: %s is missing (it is built beside abgate)", out);
	return 0;
}
