/*
 * proc_run.c - one-shot commands of proc.h (ab_proc_run, ab_proc_run_status): spawned with stdin
 * /dev/null and their output appended to a log after an "[abgate] $ argv" header, waited for with
 * a deadline, killed as a group when it passes, and the outcome appended as a last "[abgate]" line;
 * and how a child's end is described (status text, signal names).
 */
#define _GNU_SOURCE
#include "proc.h"

#include "error.h"
#include "fs.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

int ab_proc_run_status(struct ab_proc_status *out, char *status, size_t status_len,
	const char *const *argv, const char *const *env, const char *cwd, const char *log_path, int64_t timeout_ms)
{
	ab_proc *p = NULL;
	struct ab_proc_status st;
	char line[4096], what[128];
	int error = -1;

	if (!argv || !argv[0])
		return ab_error_setc(AB_EINVALID, "run: no command");
	if (log_path) {
		size_t w = (size_t)snprintf(line, sizeof(line), "[abgate] $");
		for (size_t i = 0; argv[i] && w < sizeof(line); i++)
			w += (size_t)snprintf(line + w, sizeof(line) - w, " %s", argv[i]);
		if (cwd && w < sizeof(line))
			w += (size_t)snprintf(line + w, sizeof(line) - w, "   (in %s)", cwd);
		if (w > sizeof(line) - 2)
			w = sizeof(line) - 2;
		line[w] = '\n';
		line[w + 1] = '\0';
		ab_fs_append(log_path, line);   /* best effort: spawn reports an unwritable log */
	}
	if (status && status_len)
		status[0] = '\0';
	struct ab_proc_spec spec = {.argv = argv, .env = env, .cwd = cwd, .log_path = log_path,
		.status_fd = status != NULL};
	if ((error = ab_proc_spawn(&p, &spec)) < 0) {
		if (log_path) {
			snprintf(line, sizeof(line), "[abgate] %s\n", ab_error_last());
			ab_fs_append(log_path, line);
		}
		goto cleanup;
	}
	int64_t deadline = timeout_ms > 0 ? ab_proc_deadline_ms(timeout_ms) : AB_PROC_NO_DEADLINE;
	if (ab_proc_wait(&st, p, deadline) == AB_ETIMEOUT)
		ab_proc_kill(&st, p, 2000, 1);
	if (log_path) {
		snprintf(line, sizeof(line), "[abgate] %s after %.1f s\n",
			ab_proc_status_ok(&st) ? "finished" : ab_proc_status_describe(what, sizeof(what), &st),
			(double)st.wall_ns / 1e9);
		ab_fs_append(log_path, line);
	}
	if (status && status_len)
		snprintf(status, status_len, "%s", ab_proc_status_text(p));
	*out = st;
	error = 0;
cleanup:
	ab_proc_free(p);
	return error;
}

int ab_proc_run(struct ab_proc_status *out, const char *const *argv, const char *const *env,
	const char *cwd, const char *log_path, int64_t timeout_ms)
{
	return ab_proc_run_status(out, NULL, 0, argv, env, cwd, log_path, timeout_ms);
}

const char *ab_proc_signal_name(int sig)
{
	static _Thread_local char name[16];
	const char *abbrev = sig > 0 && sig < NSIG ? sigabbrev_np(sig) : NULL;  /* "SEGV" */
	if (!abbrev)
		return "SIG?";
	snprintf(name, sizeof(name), "SIG%s", abbrev);
	return name;
}

const char *ab_proc_status_describe(char *buf, size_t len, const struct ab_proc_status *st)
{
	if (!len)
		return buf;
	if (st->timed_out)
		snprintf(buf, len, "killed after timeout");
	else if (st->killed)
		snprintf(buf, len, "killed by abgate");
	else if (st->signaled)
		snprintf(buf, len, "signal %d (%s)%s", st->signal_number, ab_proc_signal_name(st->signal_number),
			st->core_dumped ? ", core dumped" : "");
	else if (st->exited)
		snprintf(buf, len, "exit code %d", st->exit_code);
	else
		snprintf(buf, len, "still running");
	return buf;
}

int ab_proc_status_ok(const struct ab_proc_status *st)
{
	return st->exited && st->exit_code == 0 && !st->killed;
}
