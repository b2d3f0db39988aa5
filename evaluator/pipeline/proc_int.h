/*
 * proc_int.h - what proc.c (a running child's pipes, waits and kills) and proc_spawn.c (fork and
 * exec) share: the handle behind proc.h's ab_proc and its buffer sizes. Internal to
 * evaluator/pipeline: everything a caller needs is in proc.h.
 */
#ifndef AB_PROC_INT_H
#define AB_PROC_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "proc.h"

#define READ_CHUNK ((size_t)64 << 10)    /* one read of stdout; the line buffer holds line_max + this */
#define ERR_RING_CAP ((size_t)64 << 10)  /* the in-memory stderr tail (no log file) */

struct ab_proc {
	pid_t pid;
	int reaped;
	int killed;              /* we signalled it before it exited */
	int timed_out;
	struct ab_proc_status status;
	int64_t t_spawn_ns;
	int in_fd, out_fd, err_fd;  /* parent ends, -1 once closed */
	char *log_path;
	off_t log_start;         /* size of the log when this child started: its stderr begins there */
	char *buf;               /* stdout: unread bytes are buf[start, end) */
	size_t start, end, scan, cap, cap_max, line_max;
	int skipping;            /* inside an oversized line: drop bytes up to the next '\n' */
	int out_eof;
	int64_t last_recv_ns;
	char *ring;              /* in-memory stderr tail when there is no log file */
	size_t ring_len, ring_pos;
	int st_fd;               /* read end of the child's fd 3 (spec.status_fd), -1 without */
	char st_buf[4096];       /* what arrived there, NUL-terminated; the rest is dropped */
	size_t st_len;
};

/* Closes *fd if open and sets it to -1. */
static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

#endif
