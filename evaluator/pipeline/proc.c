/*
 * proc.c - a spawned child's life (see proc.h; spawning is proc_spawn.c): non-blocking parent ends
 * serviced by poll() in slices of at most 100 ms so that the child's liveness is re-checked even
 * when a grandchild keeps a pipe open; stdout read into a growing line buffer with a per-line cap,
 * stderr kept in a ring when there is no log. Exit is detected with waitid(WNOWAIT) so that
 * leftovers in the group are killed while the pid is still reserved.
 */
#define _GNU_SOURCE
#include "proc_int.h"

#include "error.h"
#include "fs.h"
#include "log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_SLICE_MS 100
#define REAP_AFTER_KILL_MS 10000

int64_t ab_proc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t ab_proc_deadline_ms(int64_t ms)
{
	int64_t now = ab_proc_now_ns();
	if (ms < 0 || ms > (INT64_MAX - now) / 1000000)
		return AB_PROC_NO_DEADLINE;
	return now + ms * 1000000;
}

/* poll() timeout for a deadline, capped so that callers re-check the child regularly. */
static int slice_ms(int64_t deadline_ns, int cap_ms)
{
	if (deadline_ns == AB_PROC_NO_DEADLINE)
		return cap_ms;
	int64_t rem = deadline_ns - ab_proc_now_ns();
	if (rem <= 0)
		return 0;
	int64_t ms = (rem + 999999) / 1000000;
	return ms < cap_ms ? (int)ms : cap_ms;
}

pid_t ab_proc_pid(const ab_proc *proc)
{
	return proc->pid;
}

const char *ab_proc_status_text(ab_proc *proc)
{
	while (proc->st_fd >= 0) {
		char chunk[1024];
		ssize_t n = read(proc->st_fd, chunk, sizeof(chunk));
		if (n > 0) {
			size_t take = (size_t)n < sizeof(proc->st_buf) - 1 - proc->st_len ?
				(size_t)n : sizeof(proc->st_buf) - 1 - proc->st_len;
			memcpy(proc->st_buf + proc->st_len, chunk, take);
			proc->st_len += take;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else {
			close_fd(&proc->st_fd);
		}
	}
	proc->st_buf[proc->st_len] = '\0';
	return proc->st_buf;
}

static void ring_put(ab_proc *p, const char *data, size_t len)
{
	if (len >= ERR_RING_CAP) {
		data += len - ERR_RING_CAP;
		len = ERR_RING_CAP;
	}
	for (size_t i = 0; i < len; i++) {
		p->ring[p->ring_pos] = data[i];
		p->ring_pos = (p->ring_pos + 1) % ERR_RING_CAP;
	}
	p->ring_len = p->ring_len + len > ERR_RING_CAP ? ERR_RING_CAP : p->ring_len + len;
}

static void drain_stderr(ab_proc *p)
{
	char chunk[8192];
	while (p->err_fd >= 0) {
		ssize_t n = read(p->err_fd, chunk, sizeof(chunk));
		if (n > 0)
			ring_put(p, chunk, (size_t)n);
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		else
			close_fd(&p->err_fd);
	}
}

/* Room to read into buf[end], compacting and growing up to cap_max. Returns the room (0: full). */
static size_t stdout_room(ab_proc *p)
{
	if (p->start > 0 && p->cap - p->end < READ_CHUNK + 1) {
		memmove(p->buf, p->buf + p->start, p->end - p->start);
		p->end -= p->start;
		p->scan -= p->start;
		p->start = 0;
	}
	if (p->cap - p->end < READ_CHUNK + 1 && p->cap < p->cap_max) {
		size_t want = p->cap ? p->cap * 2 : 4 * READ_CHUNK;
		if (want < p->end + READ_CHUNK + 1)
			want = p->end + READ_CHUNK + 1;
		if (want > p->cap_max)
			want = p->cap_max;
		char *grown = realloc(p->buf, want);
		if (grown) {
			p->buf = grown;
			p->cap = want;
		}
	}
	return p->cap > p->end + 1 ? p->cap - p->end - 1 : 0;
}

/* Reads what stdout has now. discard: drop it (ab_proc_wait). Returns bytes read. */
static size_t fill_stdout(ab_proc *p, int discard)
{
	size_t total = 0;
	while (p->out_fd >= 0) {
		char scratch[8192];
		size_t room = discard ? sizeof(scratch) : stdout_room(p);
		if (room == 0)
			break;
		char *dst = discard ? scratch : p->buf + p->end;
		ssize_t n = read(p->out_fd, dst, room);
		if (n > 0) {
			total += (size_t)n;
			p->last_recv_ns = ab_proc_now_ns();
			if (!discard)
				p->end += (size_t)n;
			if ((size_t)n < room)
				break;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else {
			close_fd(&p->out_fd);
			p->out_eof = 1;
		}
	}
	return total;
}

/* Has the child exited? Detects it without reaping (WNOWAIT), kills what is left of its group while
 * the pid is still reserved, then reaps. block: wait for it. Returns 1 once reaped. */
static int try_reap(ab_proc *p, int block)
{
	siginfo_t info;
	if (p->reaped || p->pid <= 0)
		return 1;
	for (;;) {
		memset(&info, 0, sizeof(info));
		int r = waitid(P_PID, (id_t)p->pid, &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			/* ECHILD: someone else reaped it (SIGCHLD set to SIG_IGN by the application). */
			p->status.exited = 1;
			p->status.exit_code = -1;
			break;
		}
		if (info.si_pid == 0)
			return 0;
		kill(-p->pid, SIGKILL);  /* leftovers: the leader is gone, nobody else will end them */
		int ws = 0;
		while (waitpid(p->pid, &ws, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(ws)) {
			p->status.exited = 1;
			p->status.exit_code = WEXITSTATUS(ws);
		} else if (WIFSIGNALED(ws)) {
			p->status.signaled = 1;
			p->status.signal_number = WTERMSIG(ws);
#ifdef WCOREDUMP
			p->status.core_dumped = WCOREDUMP(ws) ? 1 : 0;
#endif
		}
		break;
	}
	p->reaped = 1;
	p->status.killed = p->killed;
	p->status.timed_out = p->timed_out;
	p->status.wall_ns = ab_proc_now_ns() - p->t_spawn_ns;
	return 1;
}

int ab_proc_running(ab_proc *proc)
{
	return !try_reap(proc, 0);
}

enum { WANT_OUT = 1, WANT_IN = 2, DISCARD_OUT = 4 };

/* One poll() slice servicing stderr and stdout. Returns 1 if stdin is writable (WANT_IN), 0 after
 * progress or a quiet slice, AB_ETIMEOUT once the deadline has passed. */
static int pump(ab_proc *p, int64_t deadline_ns, int want)
{
	struct pollfd fds[3];
	int n = 0, i_err = -1, i_out = -1, i_in = -1;

	if (p->err_fd >= 0) {
		i_err = n;
		fds[n++] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
	}
	if (p->out_fd >= 0 && ((want & (WANT_OUT | DISCARD_OUT)) || stdout_room(p) > 0)) {
		i_out = n;
		fds[n++] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
	}
	if ((want & WANT_IN) && p->in_fd >= 0) {
		i_in = n;
		fds[n++] = (struct pollfd){.fd = p->in_fd, .events = POLLOUT};
	}
	int timeout = slice_ms(deadline_ns, POLL_SLICE_MS);
	int r = poll(fds, (nfds_t)n, timeout);
	if (r < 0 && errno != EINTR)
		return ab_error_errno("poll");
	if (r > 0) {
		if (i_err >= 0 && fds[i_err].revents)
			drain_stderr(p);
		if (i_out >= 0 && fds[i_out].revents)
			fill_stdout(p, (want & DISCARD_OUT) != 0);
		if (i_in >= 0 && fds[i_in].revents)
			return 1;
		return 0;
	}
	if (deadline_ns != AB_PROC_NO_DEADLINE && ab_proc_now_ns() >= deadline_ns)
		return AB_ETIMEOUT;
	/* A quiet slice: if the leader is gone, stop waiting for a pipe a grandchild may hold open. */
	if ((want & WANT_OUT) && try_reap(p, 0)) {
		fill_stdout(p, 0);
		close_fd(&p->out_fd);
		p->out_eof = 1;
	}
	return 0;
}

int ab_proc_write(int64_t *out_complete_ns, ab_proc *proc, const void *buf, size_t len, int64_t deadline_ns)
{
	sigset_t pipe_set, old_mask, pending;
	int was_pending, error = 0;
	size_t off = 0;

	if (proc->in_fd < 0)
		return ab_error_set("write: the child's stdin is closed");
	/* EPIPE instead of SIGPIPE, without touching the process-wide disposition. */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
	while (off < len) {
		/* Stamped before the call: the reader may be scheduled and answer before write() returns. */
		int64_t t_call = ab_proc_now_ns();
		ssize_t n = write(proc->in_fd, (const char *)buf + off, len - off);
		if (n > 0) {
			off += (size_t)n;
			if (off == len && out_complete_ns)
				*out_complete_ns = t_call;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int r = pump(proc, deadline_ns, WANT_IN);
			if (r == AB_ETIMEOUT) {
				error = ab_error_setc(AB_ETIMEOUT, "write: the child did not read its stdin in time");
				break;
			}
			if (r < 0) {
				error = r;
				break;
			}
			continue;
		}
		if (n < 0 && errno == EPIPE) {
			sigpending(&pending);
			if (!was_pending && sigismember(&pending, SIGPIPE)) {
				struct timespec zero = {0, 0};
				sigtimedwait(&pipe_set, NULL, &zero);
			}
			error = ab_error_set("write: the child closed its stdin");
		} else {
			error = ab_error_errno("write to child");
		}
		break;
	}
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	return error;
}

void ab_proc_close_stdin(ab_proc *proc)
{
	close_fd(&proc->in_fd);
}

int ab_proc_read_line(const char **out_line, size_t *out_len, int64_t *out_recv_ns,
	ab_proc *p, int64_t deadline_ns)
{
	for (;;) {
		char *nl = p->end > p->scan ? memchr(p->buf + p->scan, '\n', p->end - p->scan) : NULL;
		if (nl) {
			size_t at = (size_t)(nl - p->buf), line_start = p->start, len = at - p->start;
			int was_skipping = p->skipping;
			p->start = p->scan = at + 1;
			p->skipping = 0;
			if (was_skipping)
				continue;
			if (len > p->line_max)
				return ab_error_setc(AB_EINVALID, "line of %zu bytes exceeds the %zu-byte limit",
					len, p->line_max);
			*nl = '\0';
			*out_line = p->buf + line_start;
			*out_len = len;
			if (out_recv_ns)
				*out_recv_ns = p->last_recv_ns;
			return 0;
		}
		p->scan = p->end;
		if (p->skipping) {
			p->start = p->scan = p->end = 0;
		} else if (p->end - p->start > p->line_max) {
			size_t had = p->end - p->start;
			p->skipping = 1;
			p->start = p->scan = p->end = 0;
			return ab_error_setc(AB_EINVALID, "line exceeds the %zu-byte limit (%zu bytes without a newline)",
				p->line_max, had);
		}
		if (p->out_eof) {
			if (!p->skipping && p->end > p->start && p->buf) {
				p->buf[p->end] = '\0';  /* stdout_room always keeps one spare byte */
				*out_line = p->buf + p->start;
				*out_len = p->end - p->start;
				if (out_recv_ns)
					*out_recv_ns = p->last_recv_ns;
				p->start = p->scan = p->end;
				return 0;
			}
			return AB_PROC_EOF;
		}
		int r = pump(p, deadline_ns, WANT_OUT);
		if (r == AB_ETIMEOUT)
			return ab_error_setc(AB_ETIMEOUT, "no complete line from the child before the deadline");
		if (r < 0)
			return r;
	}
}

int ab_proc_wait(struct ab_proc_status *out, ab_proc *p, int64_t deadline_ns)
{
	int sleep_ms = 1;
	while (!try_reap(p, 0)) {
		if (deadline_ns != AB_PROC_NO_DEADLINE && ab_proc_now_ns() >= deadline_ns)
			return ab_error_setc(AB_ETIMEOUT, "process %d still running at the deadline", (int)p->pid);
		if (p->err_fd >= 0 || p->out_fd >= 0) {
			int64_t slice_end = ab_proc_now_ns() + (int64_t)sleep_ms * 1000000;
			pump(p, deadline_ns < slice_end ? deadline_ns : slice_end, DISCARD_OUT);
		} else {
			int ms = slice_ms(deadline_ns, sleep_ms);
			if (ms > 0)
				poll(NULL, 0, ms);
		}
		if (sleep_ms < 50)
			sleep_ms *= 2;
	}
	drain_stderr(p);
	if (out)
		*out = p->status;
	return 0;
}

static void signal_group(ab_proc *p, int sig)
{
	if (kill(-p->pid, sig) < 0 && errno == ESRCH)
		kill(p->pid, sig);
}

int ab_proc_kill(struct ab_proc_status *out, ab_proc *p, int grace_ms, int timed_out)
{
	if (!try_reap(p, 0)) {
		p->killed = 1;
		p->timed_out = timed_out;
		if (grace_ms > 0) {
			signal_group(p, SIGTERM);
			signal_group(p, SIGCONT);  /* a stopped process only sees SIGTERM once continued */
			if (ab_proc_wait(NULL, p, ab_proc_deadline_ms(grace_ms)) == 0)
				goto done;
		}
		signal_group(p, SIGKILL);
		if (ab_proc_wait(NULL, p, ab_proc_deadline_ms(REAP_AFTER_KILL_MS)) != 0) {
			AB_WARN("process %d did not die within %d s of SIGKILL", (int)p->pid, REAP_AFTER_KILL_MS / 1000);
			return ab_error_set("process %d could not be reaped after SIGKILL", (int)p->pid);
		}
	}
done:
	if (out)
		*out = p->status;
	return 0;
}

void ab_proc_free(ab_proc *p)
{
	if (!p)
		return;
	if (p->pid > 0 && !p->reaped) {
		p->killed = 1;
		signal_group(p, SIGKILL);
		if (ab_proc_wait(NULL, p, ab_proc_deadline_ms(REAP_AFTER_KILL_MS)) != 0)
			try_reap(p, 1);
	}
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->st_fd);
	free(p->buf);
	free(p->ring);
	free(p->log_path);
	free(p);
}

int ab_proc_stderr_tail(char **out, ab_proc *p, size_t max_bytes)
{
	if (p->log_path)
		return ab_fs_tail(out, p->log_path, max_bytes, p->log_start);
	drain_stderr(p);
	size_t len = p->ring_len < max_bytes ? p->ring_len : max_bytes, skip = 0;
	size_t first = (p->ring_pos + ERR_RING_CAP - len) % ERR_RING_CAP;
	/* Cut (as ab_fs_tail): start after the first line break, unless it is the window's last byte. */
	for (size_t i = 0; len < p->ring_len && i + 1 < len; i++)
		if (p->ring[(first + i) % ERR_RING_CAP] == '\n') {
			skip = i + 1;
			break;
		}
	char *tail = malloc(len - skip + 1);
	if (!tail)
		return ab_error_set("out of memory");
	for (size_t i = skip; i < len; i++)
		tail[i - skip] = p->ring[(first + i) % ERR_RING_CAP];
	tail[len - skip] = '\0';
	*out = tail;
	return 0;
}
