/*
 * test_relay.c - the HTTP SUT relay (relay.h) in front of an echo server over TCP (this binary
 * re-executed with --echo-server): bytes both ways, two sequential connections, a transfer far
 * larger than the relay's buffers, EOF passed on as a shutdown, the server's exit status and a
 * forwarded SIGTERM coming back as the relay's result, a server that never listens.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "relay.h"
#include "sut_http.h"

#define LARGE_BYTES (4 << 20)

static char self_exe[1024];

/* --echo-server PORT CONNECTIONS EXIT_CODE READY_FILE: echoes each connection until EOF, one at a
 * time; after CONNECTIONS of them (0: never) exits with EXIT_CODE. */
static int echo_server(char **argv)
{
	int port = atoi(argv[2]), conns = atoi(argv[3]), code = atoi(argv[4]), one = 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0)
		return 90;
	tu_write_file(argv[5], "ready\n");
	static char buf[100000];
	for (int served = 0; conns == 0 || served < conns; served++) {
		int c = accept(fd, NULL, NULL);
		if (c < 0)
			return 91;
		ssize_t n;
		while ((n = read(c, buf, sizeof(buf))) > 0)
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(c, buf + off, (size_t)(n - off));
				if (w <= 0)
					return 92;
				off += w;
			}
		close(c);
	}
	return code;
}

struct relay_run {
	pid_t pid;              /* the forked process running ab_relay_run */
	const char *sock;
};

/* Forks a process that relays the unix socket `sock` to an echo server on a free port. Its exit
 * code: the server's exit code, 200 + its signal, 150 when ab_relay_run failed. */
static struct relay_run relay_start(const char *name, int conns, int code, int listen_server)
{
	struct relay_run r = { .sock = tu_path(name) };
	char port_s[16], conns_s[16], code_s[16], ready_name[64];
	int port = 0;
	CHECK(ab_sut_http_free_port(&port) == 0);
	snprintf(port_s, sizeof(port_s), "%d", port);
	snprintf(conns_s, sizeof(conns_s), "%d", conns);
	snprintf(code_s, sizeof(code_s), "%d", code);
	snprintf(ready_name, sizeof(ready_name), "%s.ready", name);
	const char *ready = tu_path(ready_name);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", r.sock);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 8) == 0);
	r.pid = fork();
	CHECK(r.pid >= 0);
	if (r.pid == 0) {
		const char *echo[] = { self_exe, "--echo-server", port_s, conns_s, code_s, ready, NULL };
		const char *idle[] = { "/bin/sleep", "30", NULL };
		const struct ab_relay_config cfg = { .listen_fd = fd, .port = port,
			.argv = listen_server ? echo : idle };
		int st = 0;
		if (ab_relay_run(&st, &cfg) < 0) {
			fprintf(stderr, "relay: %s\n", ab_error_last());
			_exit(150);
		}
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st));
	}
	close(fd);
	for (int i = 0; listen_server && access(ready, F_OK) != 0; i++) {
		CHECK(i < 500);
		usleep(10000);
	}
	return r;
}

static int relay_wait(struct relay_run *r)
{
	int st = 0;
	for (int i = 0; waitpid(r->pid, &st, WNOHANG) == 0; i++) {
		CHECK(i < 1000);   /* 10 s */
		usleep(10000);
	}
	CHECK(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static int client_connect(const char *sock)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	return fd;
}

/* Sends len bytes of a pattern while reading the echo, shuts down writing, reads to EOF. Returns
 * the bytes received; each must match the pattern. */
static size_t echo_round(int fd, size_t len)
{
	char *out = malloc(len), *in = malloc(len + 1);
	size_t sent = 0, got = 0;
	CHECK(out && in);
	for (size_t i = 0; i < len; i++)
		out[i] = (char)('a' + (i * 7 + i / 251) % 26);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	int shut = 0;
	for (int spins = 0; spins < 100000; spins++) {
		if (sent == len && !shut) {
			CHECK(shutdown(fd, SHUT_WR) == 0);
			shut = 1;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN | (sent < len ? POLLOUT : 0) };
		CHECK(poll(&p, 1, 5000) == 1);
		if ((p.revents & POLLOUT) && sent < len) {
			ssize_t w = send(fd, out + sent, len - sent > 65536 ? 65536 : len - sent, MSG_NOSIGNAL);
			CHECK(w > 0 || errno == EAGAIN);
			if (w > 0)
				sent += (size_t)w;
		}
		if (p.revents & (POLLIN | POLLHUP)) {
			ssize_t n = read(fd, in + got, len + 1 - got);
			if (n == 0)
				break;
			CHECK(n > 0 || errno == EAGAIN);
			if (n > 0)
				got += (size_t)n;
		}
	}
	CHECK(got <= len && memcmp(in, out, got) == 0);
	free(out);
	free(in);
	return got;
}

/* Two sequential connections (a short one, then 4 MiB both ways); the server then exits 7. */
static void echo(void)
{
	struct relay_run r = relay_start("echo.sock", 2, 7, 1);
	int fd = client_connect(r.sock);
	CHECK_EQ(echo_round(fd, 5), 5);
	close(fd);
	fd = client_connect(r.sock);
	CHECK_EQ(echo_round(fd, LARGE_BYTES), LARGE_BYTES);
	close(fd);
	CHECK_EQ(relay_wait(&r), 7);
}

/* The relay forwards SIGTERM; the server's death by it is the relay's result. */
static void signal_forwarded(void)
{
	struct relay_run r = relay_start("sig.sock", 0, 0, 1);
	int fd = client_connect(r.sock);
	CHECK_EQ(echo_round(fd, 1000), 1000);
	close(fd);
	CHECK(kill(r.pid, SIGTERM) == 0);
	CHECK_EQ(relay_wait(&r), 200 + SIGTERM);
}

/* Nothing listens on the port: each client is closed without a byte; the relay keeps serving. */
static void refused(void)
{
	struct relay_run r = relay_start("refused.sock", 0, 0, 0);
	for (int i = 0; i < 2; i++) {
		int fd = client_connect(r.sock);
		char c;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		CHECK(poll(&p, 1, 5000) == 1);
		CHECK_EQ(read(fd, &c, 1), 0);
		close(fd);
	}
	CHECK(kill(r.pid, SIGTERM) == 0);
	CHECK_EQ(relay_wait(&r), 200 + SIGTERM);
}

/* A command that cannot be executed is the relay's own failure, not a server status. */
static void missing_command(void)
{
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", tu_path("missing.sock"));
	CHECK(bind(sock, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(sock, 1) == 0);
	const char *argv[] = { "/nonexistent/server", NULL };
	const struct ab_relay_config cfg = { .listen_fd = sock, .port = 9, .argv = argv };
	int st = -1;
	CHECK(ab_relay_run(&st, &cfg) == AB_ENOTFOUND);
	CHECK_STR_HAS(ab_error_last(), "cannot execute /nonexistent/server");
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "--echo-server"))
		return echo_server(argv);
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	CHECK(n > 0);
	self_exe[n] = '\0';
	static const struct tu_case cases[] = {
		{ "echo", echo }, { "signal_forwarded", signal_forwarded }, { "refused", refused },
		{ "missing_command", missing_command },
	};
	return TU_RUN(argc, argv, cases);
}
