/*
 * proc.h - child processes for abgate: a long-lived child spoken to over pipes (the SUT) and
 * one-shot commands with a timeout (build steps, model generators). Every child runs in its own
 * session/process group so that a timeout kills the whole tree (SIGTERM, a grace period, SIGKILL),
 * and every wait has a CLOCK_MONOTONIC deadline: a child that ignores its stdin or never exits
 * cannot block abgate. Children are always reaped; none outlives its ab_proc handle, and when a
 * child exits, whatever it left running in its process group (daemons, background jobs) is killed.
 * The directories children run in and the logs they leave are fs.h's.
 */
#ifndef AB_PROC_H
#define AB_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AB_PROC_LINE_MAX_DEFAULT ((size_t)32 << 20)  /* 32 MiB: longest stdout line accepted */
#define AB_PROC_NO_DEADLINE INT64_MAX                /* a deadline that never passes */
#define AB_PROC_EOF 1                                /* ab_proc_read_line: stdout has ended */

typedef struct ab_proc ab_proc;

struct ab_proc_spec {
	const char *const *argv;  /* NULL-terminated; argv[0] is searched in PATH unless it has a '/' */
	const char *const *env;   /* "KEY=VALUE" additions/overrides to the inherited environment, NULL-terminated; may be NULL */
	const char *cwd;          /* working directory of the child; NULL: inherit */
	int stdin_pipe;           /* 1: a pipe fed by ab_proc_write; 0: /dev/null */
	int stdout_pipe;          /* 1: a pipe read by ab_proc_read_line; 0: stdout goes where stderr goes */
	const char *log_path;     /* stderr is appended here (created 0644); NULL: kept in a bounded in-memory tail (64 KiB) */
	size_t line_max;          /* longest stdout line accepted; 0: AB_PROC_LINE_MAX_DEFAULT */
	int status_fd;            /* 1: the write end of a pipe abgate keeps is the child's fd 3, or its
	                           * fd 4 when pass_fd takes fd 3 (for bwrap's --json-status-fd);
	                           * ab_proc_status_text reads it */
	int pass_fd;              /* > 2: becomes the child's fd 3 (borrowed; the caller closes its copy);
	                           * 0: none. Every other fd above stderr is closed in the child */
};

/* How a child ended. */
struct ab_proc_status {
	int exited;          /* 1: it called exit(); exit_code is valid */
	int exit_code;
	int signaled;        /* 1: a signal ended it; signal_number is valid */
	int signal_number;
	int core_dumped;
	int killed;          /* 1: abgate killed it (timeout or clean-up) */
	int timed_out;       /* 1: it was killed because a deadline passed */
	int64_t wall_ns;     /* from spawn to reap */
};

/* CLOCK_MONOTONIC now, in nanoseconds. Deadlines in this API are absolute values of this clock. */
int64_t ab_proc_now_ns(void);
/* now + ms, saturating; ms < 0 gives AB_PROC_NO_DEADLINE. */
int64_t ab_proc_deadline_ms(int64_t ms);

/*
 * Starts a child as described by `spec` in a new session (setsid: its pid is its process group).
 * Fails (negative, message set) if argv[0] cannot be found or executed, or a pipe or the log file
 * cannot be opened; nothing is left running then. On success *out is owned by the caller: free it
 * with ab_proc_free, which kills the group if it is still running.
 */
int ab_proc_spawn(ab_proc **out, const struct ab_proc_spec *spec);

/* The child's pid (= its process group id). */
pid_t ab_proc_pid(const ab_proc *proc);
/*
 * What the child has written to its status fd so far (spec.status_fd), at most 4 KiB (the rest is read
 * and dropped), NUL-terminated; "" without such a pipe. Never blocks. Borrowed: valid until the
 * next call on `proc` or ab_proc_free.
 */
const char *ab_proc_status_text(ab_proc *proc);

/*
 * Writes all of buf to the child's stdin before `deadline_ns`. Returns 0; AB_ETIMEOUT when the
 * child did not take the bytes in time; AB_ERROR when it closed its stdin (EPIPE, never SIGPIPE).
 * While blocked it keeps draining the child's stderr (and buffering its stdout) so that neither
 * side can deadlock on a full pipe. *out_complete_ns (may be NULL) is stamped just before the
 * write() call that delivered the last byte: the child cannot have seen the whole buffer earlier,
 * while a stamp taken after write() returns can come after the child has already answered (the
 * scheduler may run the reader first), so timings measured from it are never flattering.
 */
int ab_proc_write(int64_t *out_complete_ns, ab_proc *proc, const void *buf, size_t len, int64_t deadline_ns);

/* Closes the child's stdin (it then reads EOF). Idempotent. */
void ab_proc_close_stdin(ab_proc *proc);

/*
 * Reads the next line of the child's stdout (without its '\n'; a final line without '\n' is
 * returned too). *out_line is borrowed, NUL-terminated, valid until the next call on `proc`;
 * *out_recv_ns (may be NULL) is the CLOCK_MONOTONIC time at which the line's last byte was read.
 * Returns 0; AB_PROC_EOF when stdout ended (or the child exited) with nothing left to read;
 * AB_ETIMEOUT when `deadline_ns` passed first (the child is left running); AB_EINVALID when the line
 * exceeds line_max (the rest of that line is skipped by the next call, memory stays bounded).
 */
int ab_proc_read_line(const char **out_line, size_t *out_len, int64_t *out_recv_ns,
	ab_proc *proc, int64_t deadline_ns);

/*
 * Waits for the child to exit until `deadline_ns`, draining its output meanwhile (unread stdout is
 * discarded). Returns 0 with *out filled (may be NULL); AB_ETIMEOUT if it is still running.
 * Once it has returned 0, later calls return the same status at once.
 */
int ab_proc_wait(struct ab_proc_status *out, ab_proc *proc, int64_t deadline_ns);

/* 1 while the child has not been reaped (it may be a zombie about to be). */
int ab_proc_running(ab_proc *proc);

/*
 * Ends the whole process group: SIGTERM, up to grace_ms for the child to exit, then SIGKILL to the
 * group, then reaps. `timed_out` is recorded in the status (it only changes the description).
 * Returns 0 with *out (may be NULL) filled; AB_ERROR only if the child could not be reaped within
 * 10 s of SIGKILL (uninterruptible sleep in a driver), in which case ab_proc_free retries.
 * If the child had already exited, its own status is returned and nothing is killed but leftovers.
 */
int ab_proc_kill(struct ab_proc_status *out, ab_proc *proc, int grace_ms, int timed_out);

/*
 * Kills (SIGKILL, no grace) and reaps the child if still running, SIGKILLs any process left in its
 * group, closes pipes and frees. Accepts NULL.
 */
void ab_proc_free(ab_proc *proc);

/*
 * The last bytes of the child's stderr: the tail of log_path (only what was appended since this
 * child started, so a log shared by many runs never blames one for another's output), or of the
 * in-memory tail. Starts at a line boundary when one falls in the window. *out is NUL-terminated,
 * caller frees with free().
 */
int ab_proc_stderr_tail(char **out, ab_proc *proc, size_t max_bytes);

/*
 * Describes a status for humans: "exit code 2", "signal 11 (SIGSEGV)", "signal 6 (SIGABRT), core
 * dumped", "killed after timeout", "killed by abgate". Writes into buf (always NUL-terminated) and
 * returns it.
 */
const char *ab_proc_status_describe(char *buf, size_t len, const struct ab_proc_status *status);
/* 1 for a clean exit: exited with code 0 and not killed. */
int ab_proc_status_ok(const struct ab_proc_status *status);
/* "SIGSEGV" for 11 etc.; "SIG?" for numbers it does not know. Thread-local buffer, valid until the
 * calling thread's next call. */
const char *ab_proc_signal_name(int signal_number);

/*
 * Runs a one-shot command to completion: stdin /dev/null, stdout and stderr appended to log_path
 * (after a "$ argv..." header line), the group killed after timeout_ms (<= 0: no limit; SIGTERM,
 * 2 s grace, SIGKILL). Returns 0 when the command ran, whatever its exit status (read *out);
 * negative when it could not be started (not found, not executable, log not writable: message set;
 * the log records it too). ab_fs_tail (fs.h) reads the log back.
 */
int ab_proc_run(struct ab_proc_status *out, const char *const *argv, const char *const *env,
	const char *cwd, const char *log_path, int64_t timeout_ms);

/*
 * ab_proc_run with the child's fd 3 a pipe (spec.status_fd): what the child wrote there (bwrap's
 * --json-status-fd records) is copied into status (status_len bytes at most, NUL-terminated).
 */
int ab_proc_run_status(struct ab_proc_status *out, char *status, size_t status_len,
	const char *const *argv, const char *const *env, const char *cwd, const char *log_path, int64_t timeout_ms);

#endif
