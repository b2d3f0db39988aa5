/*
 * proc_spawn.c - ab_proc_spawn (proc.h). Model: fork + execve of a path resolved before the fork
 * (only async-signal-safe calls in the child, so it is safe from threaded callers), setsid so the
 * pid is the group, a CLOEXEC pipe that reports exec failure, and the parent's ends of the
 * requested pipes made non-blocking for proc.c's poll loop.
 */
#define _GNU_SOURCE
#include "proc_int.h"

#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Moves fd above stdio (so the child's dup2 onto 0..2 never clobbers a source) and sets CLOEXEC. */
static int fd_high(int fd)
{
	if (fd < 0 || fd >= 3)
		return fd;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return high;
}

static int make_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) != 0)
		return ab_error_errno("pipe");
	fds[0] = fd_high(fds[0]);
	fds[1] = fd_high(fds[1]);
	if (fds[0] < 0 || fds[1] < 0) {
		close_fd(&fds[0]);
		close_fd(&fds[1]);
		return ab_error_errno("pipe");
	}
	return 0;
}

static void set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags >= 0)
		fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static int env_key_matches(const char *entry, const char *add)
{
	const char *eq = strchr(add, '=');
	size_t klen = (size_t)(eq - add);
	return strncmp(entry, add, klen) == 0 && entry[klen] == '=';
}

/* environ minus overridden keys, plus additions. The array is malloc'd, strings are borrowed. */
static int build_env(char ***out, const char *const *add)
{
	size_t n_env = 0, n_add = 0, n = 0;
	while (environ && environ[n_env])
		n_env++;
	while (add && add[n_add]) {
		if (!strchr(add[n_add], '=') || add[n_add][0] == '=')
			return ab_error_setc(AB_EINVALID, "environment entry '%s' is not KEY=VALUE", add[n_add]);
		n_add++;
	}
	char **env = calloc(n_env + n_add + 1, sizeof(*env));
	if (!env)
		return ab_error_set("out of memory");
	for (size_t i = 0; i < n_env; i++) {
		int overridden = 0;
		for (size_t j = 0; j < n_add && !overridden; j++)
			overridden = env_key_matches(environ[i], add[j]);
		if (!overridden)
			env[n++] = environ[i];
	}
	for (size_t j = 0; j < n_add; j++)
		env[n++] = (char *)add[j];
	env[n] = NULL;
	*out = env;
	return 0;
}

/* PATH search done before fork (execvp may allocate, which a forked child of a threaded parent must not). */
static int find_program(char **out, const char *name, char *const *env)
{
	if (!name || !*name)
		return ab_error_setc(AB_EINVALID, "empty command");
	if (strchr(name, '/')) {
		*out = strdup(name);
		return *out ? 0 : ab_error_set("out of memory");
	}
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			path = env[i] + 5;
	const char *p = path;
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
		char cand[PATH_MAX];
		int w = dlen ? snprintf(cand, sizeof(cand), "%.*s/%s", (int)dlen, p, name)
			: snprintf(cand, sizeof(cand), "./%s", name);
		struct stat st;
		if (w > 0 && (size_t)w < sizeof(cand) && stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(cand, X_OK) == 0) {
			*out = strdup(cand);
			return *out ? 0 : ab_error_set("out of memory");
		}
		if (!colon)
			break;
		p = colon + 1;
	}
	return ab_error_setc(AB_ENOTFOUND, "command not found: %s", name);
}

static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return ab_error_errno("cannot open log %s", path);
	fd = fd_high(fd);
	if (fd < 0)
		return ab_error_errno("cannot open log %s", path);
	return fd;
}

struct exec_report {
	int stage;  /* 1 chdir, 2 execve, 3 setup */
	int err;
};

/* In the forked child: async-signal-safe calls only. */
static void __attribute__((noreturn)) child_main(int report_fd, int in_fd, int out_fd, int err_fd,
	int fd3, int fd4, const char *cwd, const char *path, char *const *argv, char *const *envp, pid_t parent)
{
	struct exec_report rep = {3, 0};
	sigset_t none;
	struct sigaction dfl;
	static const int reset[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		sigaction(reset[i], &dfl, NULL);
	if (setsid() < 0)
		goto fail;
	/* If abgate dies, the child dies too (its grandchildren are killed with the group by us otherwise). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		goto fail;
	/* fd3 (a status pipe or a passed socket) becomes fd 3 and fd4 (a status pipe beside a passed
	 * socket) fd 4, inherited (dup2 clears CLOEXEC). Each source first moves above 9, so that none
	 * is overwritten before it is copied, and the report pipe moves out of their way too. */
	int keep = 3;
	if (fd3 >= 0) {
		if ((report_fd = fcntl(report_fd, F_DUPFD_CLOEXEC, 10)) < 0 || (fd3 = fcntl(fd3, F_DUPFD_CLOEXEC, 10)) < 0 ||
		    (fd4 >= 0 && (fd4 = fcntl(fd4, F_DUPFD_CLOEXEC, 10)) < 0))
			_exit(127);
		if (dup2(fd3, 3) < 0 || (fd4 >= 0 && dup2(fd4, 4) < 0))
			goto fail;
		keep = fd4 >= 0 ? 5 : 4;
	}
	/* Close everything else the parent had open (SQLite, sockets, other children's pipes). */
#ifdef SYS_close_range
	if (report_fd > keep)
		syscall(SYS_close_range, (unsigned)keep, (unsigned)report_fd - 1, 0u);
	syscall(SYS_close_range, (unsigned)report_fd + 1, ~0u, 0u);
#else
	for (int fd = keep; fd < 4096; fd++)
		if (fd != report_fd)
			close(fd);
#endif
	if (cwd && chdir(cwd) != 0) {
		rep.stage = 1;
		goto fail;
	}
	rep.stage = 2;
	execve(path, argv, envp);
fail:
	rep.err = errno;
	while (write(report_fd, &rep, sizeof(rep)) < 0 && errno == EINTR)
		;
	_exit(127);
}

int ab_proc_spawn(ab_proc **out, const struct ab_proc_spec *spec)
{
	ab_proc *p = NULL;
	char **envp = NULL, *path = NULL;
	int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, report[2] = {-1, -1};
	int status_pipe[2] = {-1, -1};
	int child_in = -1, child_out = -1, child_err = -1, log_fd = -1;
	int error = -1;

	if (!spec || !spec->argv || !spec->argv[0])
		return ab_error_setc(AB_EINVALID, "spawn: no command");
	if ((error = build_env(&envp, spec->env)) < 0)
		goto cleanup;
	if ((error = find_program(&path, spec->argv[0], envp)) < 0)
		goto cleanup;
	error = -1;
	if (!(p = calloc(1, sizeof(*p))))
		goto oom;
	p->in_fd = p->out_fd = p->err_fd = p->st_fd = -1;
	p->pid = -1;
	p->line_max = spec->line_max ? spec->line_max : AB_PROC_LINE_MAX_DEFAULT;
	p->cap_max = p->line_max > SIZE_MAX - READ_CHUNK - 2 ? SIZE_MAX : p->line_max + READ_CHUNK + 2;

	/* stdin */
	if (spec->stdin_pipe) {
		if (make_pipe(in_pipe) < 0)
			goto cleanup;
		child_in = in_pipe[0];
	} else if ((child_in = fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC))) < 0) {
		ab_error_errno("/dev/null");
		goto cleanup;
	}
	/* stderr: a log file or a pipe into the in-memory tail */
	if (spec->log_path) {
		struct stat log_st;
		if ((log_fd = open_log(spec->log_path)) < 0)
			goto cleanup;
		p->log_start = fstat(log_fd, &log_st) == 0 ? log_st.st_size : 0;
		child_err = log_fd;
		if (!(p->log_path = strdup(spec->log_path)))
			goto oom;
	} else {
		if (make_pipe(err_pipe) < 0)
			goto cleanup;
		child_err = err_pipe[1];
		if (!(p->ring = malloc(ERR_RING_CAP)))
			goto oom;
	}
	/* stdout */
	if (spec->stdout_pipe) {
		if (make_pipe(out_pipe) < 0)
			goto cleanup;
		child_out = out_pipe[1];
	} else {
		child_out = child_err;
		p->out_eof = 1;
	}
	if (make_pipe(report) < 0)
		goto cleanup;
	if (spec->status_fd && make_pipe(status_pipe) < 0)
		goto cleanup;

	pid_t parent = getpid();
	p->t_spawn_ns = ab_proc_now_ns();
	pid_t pid = fork();
	if (pid < 0) {
		ab_error_errno("fork");
		goto cleanup;
	}
	if (pid == 0)
		child_main(report[1], child_in, child_out, child_err,
			spec->pass_fd > 2 ? spec->pass_fd : spec->status_fd ? status_pipe[1] : -1,
			spec->pass_fd > 2 && spec->status_fd ? status_pipe[1] : -1, spec->cwd, path,
			(char *const *)spec->argv, envp, parent);
	p->pid = pid;
	close_fd(&report[1]);
	close_fd(&status_pipe[1]);

	struct exec_report rep;
	ssize_t got;
	do
		got = read(report[0], &rep, sizeof(rep));
	while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(rep)) {
		int ws;
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		p->pid = -1;
		error = ab_error_setc(rep.err == ENOENT ? AB_ENOTFOUND : AB_ERROR, "cannot %s %s: %s",
			rep.stage == 1 ? "enter directory for" : rep.stage == 2 ? "execute" : "set up",
			rep.stage == 1 && spec->cwd ? spec->cwd : spec->argv[0], strerror(rep.err));
		goto cleanup;
	}

	if (spec->stdin_pipe) {
		p->in_fd = in_pipe[1];
		in_pipe[1] = -1;
		set_nonblock(p->in_fd);
	}
	if (spec->stdout_pipe) {
		p->out_fd = out_pipe[0];
		out_pipe[0] = -1;
		set_nonblock(p->out_fd);
	}
	if (!spec->log_path) {
		p->err_fd = err_pipe[0];
		err_pipe[0] = -1;
		set_nonblock(p->err_fd);
	}
	if (spec->status_fd) {
		p->st_fd = status_pipe[0];
		status_pipe[0] = -1;
		set_nonblock(p->st_fd);
	}
	*out = p;
	p = NULL;
	error = 0;
	goto cleanup;
oom:
	ab_error_set("out of memory");
cleanup:
	if (!spec->stdin_pipe)
		close_fd(&child_in);
	close_fd(&in_pipe[0]);
	close_fd(&in_pipe[1]);
	close_fd(&out_pipe[0]);
	close_fd(&out_pipe[1]);
	close_fd(&err_pipe[0]);
	close_fd(&err_pipe[1]);
	close_fd(&report[0]);
	close_fd(&report[1]);
	close_fd(&status_pipe[0]);
	close_fd(&status_pipe[1]);
	close_fd(&log_fd);
	ab_proc_free(p);
	free(envp);
	free(path);
	return error;
}
