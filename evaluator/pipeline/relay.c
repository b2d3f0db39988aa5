/*
 * relay.c - the HTTP SUT relay (see relay.h): one poll loop over a signalfd (the server's exit and
 * signals to forward), the listening unix socket and each client/server socket pair. Every pair
 * has one bounded buffer per direction: a side is read only when its buffer is empty, so a slow
 * reader stalls its writer instead of growing memory. Only libc: this runs inside the sandbox.
 */
#define _GNU_SOURCE
#include "relay.h"

#include "error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF_CAP (64 << 10)
#define CONNECTIONS_DEFAULT 16
#define CONNECTIONS_LIMIT 256
#define CONNECT_TIMEOUT_DEFAULT_MS 2000
#define DRAIN_MS 1000           /* after the server exits: time for its last bytes to reach clients */

struct dir_buf {
	char *data;                 /* BUF_CAP bytes */
	size_t off, len;            /* unsent bytes: data[off .. off + len) */
	int eof;                    /* the source side has ended */
	int shut;                   /* the destination was shut down for writing */
};

/* fd[0] the client (unix), fd[1] the server (TCP); buf[i] holds bytes read from fd[i]. */
struct pair {
	int fd[2];
	struct dir_buf buf[2];
	int connecting;             /* fd[1]'s non-blocking connect is in progress */
	int64_t connect_deadline_ms;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
		p->fd[i] = -1;
		free(p->buf[i].data);
		p->buf[i].data = NULL;
	}
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

/* Accepts one client and starts connecting to the server. A failure closes the client only. */
static void pair_open(struct pair *p, int listen_fd, int port, int timeout_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;
	memset(p, 0, sizeof(*p));
	p->fd[0] = p->fd[1] = -1;
	if ((p->fd[0] = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
		return;
	p->buf[0].data = malloc(BUF_CAP);
	p->buf[1].data = malloc(BUF_CAP);
	p->fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!p->buf[0].data || !p->buf[1].data || p->fd[1] < 0) {
		pair_close(p);
		return;
	}
	setsockopt(p->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(p->fd[1], (struct sockaddr *)&a, sizeof(a)) == 0)
		return;
	if (errno != EINPROGRESS) {
		pair_close(p);      /* refused: the server is not listening (yet); the client retries */
		return;
	}
	p->connecting = 1;
	p->connect_deadline_ms = now_ms() + timeout_ms;
}

/* Moves bytes for direction i (fd[i] -> fd[1 - i]) as far as the sockets allow. -1: close the pair. */
static int pair_pump(struct pair *p, int i)
{
	struct dir_buf *b = &p->buf[i];
	int src = p->fd[i], dst = p->fd[1 - i];
	for (;;) {
		if (b->len == 0 && !b->eof) {
			ssize_t n = read(src, b->data, BUF_CAP);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n < 0)
				return -1;
			if (n == 0)
				b->eof = 1;
			b->off = 0;
			b->len = (size_t)n;
		}
		if (b->len == 0)
			break;
		ssize_t w = send(dst, b->data + b->off, b->len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w < 0)
			return -1;
		b->off += (size_t)w;
		b->len -= (size_t)w;
	}
	if (b->eof && b->len == 0 && !b->shut) {
		shutdown(dst, SHUT_WR);
		b->shut = 1;
	}
	return p->buf[0].shut && p->buf[1].shut ? -1 : 0;
}

/* The connect of fd[1] finished (or failed). -1: close the pair. */
static int pair_connected(struct pair *p)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(p->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
		return -1;
	p->connecting = 0;
	return 0;
}

static short pair_events(const struct pair *p, int i)
{
	if (p->connecting)
		return i == 1 ? POLLOUT : 0;
	short ev = 0;
	if (p->buf[i].len == 0 && !p->buf[i].eof)
		ev |= POLLIN;
	if (p->buf[1 - i].len > 0)
		ev |= POLLOUT;
	return ev;
}

/* In the forked child: restore the caller's signals, die with the relay, lead a process group of
 * its own (signals sent to the sandbox's group then reach the server once, forwarded by the relay;
 * the pid namespace still kills everything left when the relay ends), exec the server. */
static void __attribute__((noreturn)) server_exec(const struct ab_relay_config *cfg, const sigset_t *mask,
	pid_t relay, int report_fd)
{
	static const int sigs[] = { SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &dfl, NULL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != relay)
		_exit(127);
	setpgid(0, 0);
	execvp(cfg->argv[0], (char *const *)cfg->argv);
	int err = errno;
	while (write(report_fd, &err, sizeof(err)) < 0 && errno == EINTR)
		;
	_exit(127);
}

/* fork + exec with a CLOEXEC pipe that reports an exec failure. */
static int server_start(pid_t *out, const struct ab_relay_config *cfg, const sigset_t *old_mask)
{
	int report[2], err = 0;
	if (pipe2(report, O_CLOEXEC) < 0)
		return ab_error_errno("relay: pipe");
	pid_t relay = getpid(), pid = fork();
	if (pid < 0) {
		close(report[0]);
		close(report[1]);
		return ab_error_errno("relay: fork");
	}
	if (pid == 0)
		server_exec(cfg, old_mask, relay, report[1]);
	close(report[1]);
	ssize_t got;
	do
		got = read(report[0], &err, sizeof(err));
	while (got < 0 && errno == EINTR);
	close(report[0]);
	if (got == (ssize_t)sizeof(err)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return ab_error_setc(err == ENOENT ? AB_ENOTFOUND : AB_ERROR, "relay: cannot execute %s: %s",
			cfg->argv[0], strerror(err));
	}
	*out = pid;
	return 0;
}

int ab_relay_run(int *out_status, const struct ab_relay_config *cfg)
{
	static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
	int connections_max = cfg->connections_max > 0 ? cfg->connections_max : CONNECTIONS_DEFAULT;
	int timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : CONNECT_TIMEOUT_DEFAULT_MS;
	struct pair *pairs = NULL;
	struct pollfd *pfd = NULL;
	int *owner = NULL;
	int listen_fd = cfg->listen_fd, sig_fd = -1, status = 0, error = -1, exited = 0;
	pid_t pid = -1;
	sigset_t mask, old_mask;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_pipe;
	int64_t drain_until = 0;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&mask, forwarded[i]);
	sigprocmask(SIG_BLOCK, &mask, &old_mask);
	sigaction(SIGPIPE, &ign, &old_pipe);
	if (connections_max > CONNECTIONS_LIMIT)
		connections_max = CONNECTIONS_LIMIT;
	if (!cfg->argv || !cfg->argv[0] || cfg->port < 1 || cfg->port > 65535 || listen_fd < 0) {
		ab_error_setc(AB_EINVALID, "relay: needs a listening socket, a port in 1..65535 and a command");
		goto cleanup;
	}
	int type = 0;
	socklen_t tlen = sizeof(type);
	if (getsockopt(listen_fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM ||
	    fcntl(listen_fd, F_SETFD, FD_CLOEXEC) < 0 || set_nonblock(listen_fd) < 0) {
		ab_error_setc(AB_EINVALID, "relay: fd %d is not a stream socket", listen_fd);
		goto cleanup;
	}
	if ((sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		ab_error_errno("relay: signalfd");
		goto cleanup;
	}
	pairs = calloc((size_t)connections_max, sizeof(*pairs));
	pfd = calloc((size_t)connections_max * 2 + 2, sizeof(*pfd));
	owner = calloc((size_t)connections_max * 2 + 2, sizeof(*owner));
	if (!pairs || !pfd || !owner) {
		ab_error_set("relay: out of memory");
		goto cleanup;
	}
	for (int k = 0; k < connections_max; k++)
		pairs[k].fd[0] = pairs[k].fd[1] = -1;
	if ((error = server_start(&pid, cfg, &old_mask)) < 0)
		goto cleanup;
	error = -1;

	for (;;) {
		int n = 0, open_pairs = 0, free_slot = -1;
		int64_t now = now_ms(), wake = -1;
		/* Once the server is gone, a pair whose server side has ended and been passed on has
		 * nothing more to carry, even if the client keeps its (kept-alive) end open. */
		for (int k = 0; exited && k < connections_max; k++)
			if (pairs[k].fd[0] >= 0 && (pairs[k].connecting || pairs[k].buf[1].shut))
				pair_close(&pairs[k]);
		pfd[n++] = (struct pollfd){ .fd = sig_fd, .events = POLLIN };
		for (int k = 0; k < connections_max; k++) {
			struct pair *p = &pairs[k];
			if (p->fd[0] < 0) {
				if (free_slot < 0)
					free_slot = k;
				continue;
			}
			open_pairs++;
			for (int i = 0; i < 2; i++) {
				owner[n] = k;
				pfd[n++] = (struct pollfd){ .fd = p->fd[i], .events = pair_events(p, i) };
			}
			if (p->connecting && (wake < 0 || p->connect_deadline_ms < wake))
				wake = p->connect_deadline_ms;
		}
		if (exited) {
			if (open_pairs == 0 || now >= drain_until)
				break;
			if (wake < 0 || drain_until < wake)
				wake = drain_until;
		}
		int listening = !exited && free_slot >= 0;
		if (listening)
			pfd[n++] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
		int wait_ms = wake < 0 ? -1 : wake > now ? (int)(wake - now) : 0;
		if (poll(pfd, (nfds_t)n, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			ab_error_errno("relay: poll");
			goto cleanup;
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;
			while (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo != SIGCHLD && !exited)
					kill(-pid, (int)si.ssi_signo);
			}
			if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
				exited = 1;
				drain_until = now_ms() + DRAIN_MS;
			}
		}
		now = now_ms();
		for (int j = 1; j < n - listening; j += 2) {
			struct pair *p = &pairs[owner[j]];
			if (p->fd[0] < 0)
				continue;
			if (p->connecting) {
				if (pfd[j + 1].revents ? pair_connected(p) < 0 : now >= p->connect_deadline_ms) {
					pair_close(p);
					continue;
				}
				if (p->connecting)
					continue;
			}
			if (pair_pump(p, 0) < 0 || pair_pump(p, 1) < 0)
				pair_close(p);
		}
		if (listening && (pfd[n - 1].revents & POLLIN))
			pair_open(&pairs[free_slot], listen_fd, cfg->port, timeout_ms);
	}
	*out_status = status;
	pid = -1;
	error = 0;
cleanup:
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (int k = 0; pairs && k < connections_max; k++)
		pair_close(&pairs[k]);
	free(pairs);
	free(pfd);
	free(owner);
	if (sig_fd >= 0)
		close(sig_fd);
	if (listen_fd >= 0)
		close(listen_fd);
	sigaction(SIGPIPE, &old_pipe, NULL);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	return error;
}
