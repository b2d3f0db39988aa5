/*
 * test_proc.c - child processes: exit decoding, timeouts that kill whole process groups (including
 * grandchildren that ignore SIGTERM), bounded line reading, writes to children that do not read,
 * an fd passed down as the child's fd 3.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

/* Alive = exists and is not a zombie (a reparented zombie may linger until init reaps it). */
static int pid_alive(pid_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *close_paren = strrchr(buf, ')');
	return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z' && close_paren[2] != 'X';
}

static void wait_dead(pid_t pid)
{
	for (int i = 0; i < 200 && pid_alive(pid); i++)
		usleep(10000);
	CHECK(!pid_alive(pid));
}

static char *read_all(const char *path)
{
	char *text = NULL;
	CHECK(ab_fs_tail(&text, path, 1 << 20, 0) == 0);
	return text;
}

static void run_exit(void)
{
	const char *log = tu_path("exit.log");
	const char *argv[] = {"sh", "-c", "echo hello; echo oops >&2; exit 3", NULL};
	struct ab_proc_status st;
	char desc[64];

	CHECK(ab_proc_run(&st, argv, NULL, NULL, log, 10000) == 0);
	CHECK(st.exited);
	CHECK_EQ(st.exit_code, 3);
	CHECK(!st.signaled && !st.killed && !st.timed_out);
	CHECK(!ab_proc_status_ok(&st));
	CHECK_STR_HAS(ab_proc_status_describe(desc, sizeof(desc), &st), "exit code 3");
	char *text = read_all(log);
	CHECK_STR_HAS(text, "[abgate] $ sh -c echo hello");
	CHECK_STR_HAS(text, "hello\n");
	CHECK_STR_HAS(text, "oops\n");
	CHECK_STR_HAS(text, "exit code 3");
	free(text);

	const char *ok_argv[] = {"true", NULL};
	CHECK(ab_proc_run(&st, ok_argv, NULL, NULL, log, 10000) == 0);
	CHECK(ab_proc_status_ok(&st));
}

static void run_signal(void)
{
	const char *argv[] = {"sh", "-c", "kill -SEGV $$", NULL};
	struct ab_proc_status st;
	char desc[64];

	CHECK(ab_proc_run(&st, argv, NULL, NULL, tu_path("signal.log"), 10000) == 0);
	CHECK(st.signaled);
	CHECK_EQ(st.signal_number, SIGSEGV);
	CHECK(!st.killed);
	CHECK_STR_HAS(ab_proc_status_describe(desc, sizeof(desc), &st), "signal 11 (SIGSEGV)");
}

static void run_timeout(void)
{
	const char *argv[] = {"sh", "-c", "echo started; sleep 30", NULL};
	struct ab_proc_status st;
	char desc[64];
	int64_t t0 = ab_proc_now_ns();

	CHECK(ab_proc_run(&st, argv, NULL, NULL, tu_path("timeout.log"), 300) == 0);
	double secs = (double)(ab_proc_now_ns() - t0) / 1e9;
	fprintf(stderr, "timed-out run returned after %.2f s\n", secs);
	CHECK(secs < 10);
	CHECK(st.timed_out && st.killed);
	CHECK_STR_HAS(ab_proc_status_describe(desc, sizeof(desc), &st), "killed after timeout");
	char *text = read_all(tu_path("timeout.log"));
	CHECK_STR_HAS(text, "started");
	CHECK_STR_HAS(text, "killed after timeout");
	free(text);
}

static void run_missing(void)
{
	const char *argv[] = {"abgate-no-such-command", NULL};
	struct ab_proc_status st;
	const char *log = tu_path("missing.log");

	CHECK_EQ(ab_proc_run(&st, argv, NULL, NULL, log, 1000), AB_ENOTFOUND);
	CHECK_STR_HAS(ab_error_last(), "abgate-no-such-command");
	char *text = read_all(log);
	CHECK_STR_HAS(text, "command not found");
	free(text);

	/* a file that exists but is not executable: execve fails in the child and is reported */
	tu_write_file(tu_path("notexec"), "#!/bin/sh\necho hi\n");
	const char *argv2[] = {tu_path("notexec"), NULL};
	CHECK(ab_proc_run(&st, argv2, NULL, NULL, log, 1000) < 0);
	CHECK_STR_HAS(ab_error_last(), "cannot execute");

	/* a missing working directory */
	const char *argv3[] = {"true", NULL};
	CHECK(ab_proc_run(&st, argv3, NULL, tu_path("no-such-dir"), log, 1000) < 0);
	CHECK_STR_HAS(ab_error_last(), "no-such-dir");

	const char *bad_env[] = {"NOEQUALS", NULL};
	CHECK_EQ(ab_proc_run(&st, argv3, bad_env, NULL, log, 1000), AB_EINVALID);
}

static void run_env_cwd(void)
{
	const char *argv[] = {"sh", "-c", "echo \"x=$AB_TEST_X home=$HOME\"; pwd", NULL};
	const char *env[] = {"AB_TEST_X=42", "HOME=/nowhere", NULL};
	struct ab_proc_status st;
	const char *log = tu_path("env.log");

	CHECK(ab_proc_run(&st, argv, env, tu_tmpdir(), log, 10000) == 0);
	CHECK(ab_proc_status_ok(&st));
	char *text = read_all(log);
	CHECK_STR_HAS(text, "x=42 home=/nowhere");
	CHECK_STR_HAS(text, tu_tmpdir());
	free(text);
}

/* pass_fd becomes the child's fd 3 (CLOEXEC or not); nothing else above stderr leaks. */
static void pass_fd(void)
{
	int fds[2], other[2];
	CHECK(pipe2(fds, O_CLOEXEC) == 0 && pipe(other) == 0);
	const char *argv[] = {"sh", "-c", "echo via-3 >&3; ls /proc/self/fd | sort -n | tr '\\n' ' ' >&3", NULL};
	const struct ab_proc_spec spec = {.argv = argv, .pass_fd = fds[1]};
	ab_proc *p = NULL;
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	close(fds[1]);
	struct ab_proc_status st;
	CHECK(ab_proc_wait(&st, p, ab_proc_deadline_ms(10000)) == 0 && ab_proc_status_ok(&st));
	char buf[256] = "";
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	CHECK(n > 0);
	buf[n] = '\0';
	/* fd 3 is the pipe; the shell's own `ls` adds one fd for /proc/self/fd itself. */
	CHECK_STR_HAS(buf, "via-3\n0 1 2 3 ");
	CHECK(!strstr(buf, " 5 ") && !strstr(buf, " 6 "));
	ab_proc_free(p);
	close(fds[0]);
	close(other[0]);
	close(other[1]);
}

/* pass_fd with status_fd: the passed fd is the child's fd 3 and the status pipe its fd 4
 * (ab_proc_status_text reads what the child wrote there); nothing else above stderr leaks. */
static void pass_fd_status(void)
{
	int fds[2];
	CHECK(pipe2(fds, O_CLOEXEC) == 0);
	const char *argv[] = {"sh", "-c", "echo on-3 >&3; echo '{\"exit-code\": 0}' >&4; ls /proc/self/fd | sort -n | tr '\\n' ' ' >&3",
		NULL};
	const struct ab_proc_spec spec = {.argv = argv, .pass_fd = fds[1], .status_fd = 1};
	ab_proc *p = NULL;
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	close(fds[1]);
	struct ab_proc_status st;
	CHECK(ab_proc_wait(&st, p, ab_proc_deadline_ms(10000)) == 0 && ab_proc_status_ok(&st));
	char buf[256] = "";
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	CHECK(n > 0);
	buf[n] = '\0';
	CHECK_STR_HAS(buf, "on-3\n0 1 2 3 4 ");
	CHECK(!strstr(buf, " 6 ") && !strstr(buf, " 7 "));
	CHECK_STR_HAS(ab_proc_status_text(p), "\"exit-code\": 0");
	ab_proc_free(p);
	close(fds[0]);
}

/* Reads the grandchild pid the test scripts print first. */
static pid_t read_pid_line(ab_proc *p)
{
	const char *line;
	size_t len;
	CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)) == 0);
	pid_t pid = (pid_t)atoi(line);
	CHECK(pid > 1);
	return pid;
}

static void group_kill(void)
{
	/* The grandchild ignores SIGTERM (inherited), so only the SIGKILL escalation ends it. */
	const char *argv[] = {"sh", "-c", "trap '' TERM; sleep 100 & echo $!; sleep 100", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdout_pipe = 1, .stdin_pipe = 1};
	struct ab_proc_status st;
	ab_proc *p = NULL;

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	pid_t leader = ab_proc_pid(p), grandchild = read_pid_line(p);
	CHECK(pid_alive(grandchild));
	CHECK(ab_proc_running(p));
	int64_t t0 = ab_proc_now_ns();
	CHECK(ab_proc_kill(&st, p, 200, 1) == 0);
	CHECK((ab_proc_now_ns() - t0) / 1000000 < 5000);
	CHECK(st.killed && st.timed_out);
	CHECK(st.signaled);
	CHECK(!ab_proc_running(p));
	wait_dead(grandchild);
	CHECK(!pid_alive(leader));
	/* kill on an ended process returns the same status */
	struct ab_proc_status again;
	CHECK(ab_proc_kill(&again, p, 200, 0) == 0);
	CHECK_EQ(again.signal_number, st.signal_number);
	ab_proc_free(p);

	/* ab_proc_free alone also takes the whole group down */
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	grandchild = read_pid_line(p);
	ab_proc_free(p);
	wait_dead(grandchild);
}

static void group_leftovers(void)
{
	/* The leader exits at once, leaving a background grandchild holding stdout open: the reader
	 * must see the end promptly, and the leftover must be killed. */
	const char *argv[] = {"sh", "-c", "sleep 100 & echo $!; exit 0", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdout_pipe = 1};
	ab_proc *p = NULL;
	const char *line;
	size_t len;

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	pid_t grandchild = read_pid_line(p);
	int64_t t0 = ab_proc_now_ns();
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(20000)), AB_PROC_EOF);
	CHECK((ab_proc_now_ns() - t0) / 1000000 < 10000);
	struct ab_proc_status st;
	CHECK(ab_proc_wait(&st, p, ab_proc_deadline_ms(1000)) == 0);
	CHECK(ab_proc_status_ok(&st));
	wait_dead(grandchild);
	ab_proc_free(p);

	/* the same through ab_proc_run (a build that leaves a daemon behind) */
	const char *log = tu_path("leftover.log");
	char script[600];
	snprintf(script, sizeof(script), "sleep 100 & echo $! > %s", tu_path("leftover.pid"));
	const char *argv2[] = {"sh", "-c", script, NULL};
	CHECK(ab_proc_run(&st, argv2, NULL, NULL, log, 10000) == 0);
	char *text = read_all(tu_path("leftover.pid"));
	pid_t leftover = (pid_t)atoi(text);
	free(text);
	CHECK(leftover > 1);
	wait_dead(leftover);
}

static void lines(void)
{
	const char *argv[] = {"printf", "a\\nbb\\n\\nccc\\n", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdout_pipe = 1};
	ab_proc *p = NULL;
	const char *line;
	size_t len;
	int64_t t = 0;
	const char *want[] = {"a", "bb", "", "ccc"};

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	for (int i = 0; i < 4; i++) {
		CHECK(ab_proc_read_line(&line, &len, &t, p, ab_proc_deadline_ms(5000)) == 0);
		CHECK_EQ(len, strlen(want[i]));
		CHECK(strcmp(line, want[i]) == 0);
		CHECK(t > 0 && t <= ab_proc_now_ns());
	}
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)), AB_PROC_EOF);
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)), AB_PROC_EOF);
	ab_proc_free(p);

	/* many lines larger than one read chunk, and an echo round trip */
	const char *argv2[] = {"sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; "
		"i=$((i+1)); done; read x; echo got-$x", NULL};
	struct ab_proc_spec spec2 = {.argv = argv2, .stdout_pipe = 1, .stdin_pipe = 1};
	CHECK(ab_proc_spawn(&p, &spec2) == 0);
	CHECK(ab_proc_write(NULL, p, "hello\n", 6, ab_proc_deadline_ms(5000)) == 0);
	for (int i = 0; i < 3000; i++) {
		char want_line[64];
		snprintf(want_line, sizeof(want_line), "line-%d-", i);
		CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(10000)) == 0);
		CHECK(strncmp(line, want_line, strlen(want_line)) == 0);
	}
	CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)) == 0);
	CHECK(strcmp(line, "got-hello") == 0);
	ab_proc_free(p);
}

static void oversize_line(void)
{
	/* 200 KB without a newline, then a good line: the first read fails, the next one recovers. */
	const char *argv[] = {"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo; echo ok; "
		"head -c 300000 /dev/zero | tr '\\0' y", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdout_pipe = 1, .line_max = 1000};
	ab_proc *p = NULL;
	const char *line;
	size_t len;

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)), AB_EINVALID);
	CHECK_STR_HAS(ab_error_last(), "1000-byte limit");
	CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)) == 0);
	CHECK(strcmp(line, "ok") == 0);
	/* an oversized final line without newline */
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)), AB_EINVALID);
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)), AB_PROC_EOF);
	ab_proc_free(p);

	/* a line exactly at the limit is accepted */
	const char *argv2[] = {"sh", "-c", "head -c 1000 /dev/zero | tr '\\0' z; echo", NULL};
	spec.argv = argv2;
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)) == 0);
	CHECK_EQ(len, 1000);
	ab_proc_free(p);
}

static void partial_last_line(void)
{
	const char *argv[] = {"printf", "one\\ntwo", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdout_pipe = 1};
	ab_proc *p = NULL;
	const char *line;
	size_t len;

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)) == 0);
	CHECK(strcmp(line, "one") == 0);
	CHECK(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)) == 0);
	CHECK(strcmp(line, "two") == 0);
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(5000)), AB_PROC_EOF);
	ab_proc_free(p);
}

static void write_timeout(void)
{
	const char *argv[] = {"sleep", "100", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdin_pipe = 1, .stdout_pipe = 1};
	ab_proc *p = NULL;
	size_t big = 4 << 20;
	char *data = calloc(1, big);

	CHECK(data);
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	int64_t t0 = ab_proc_now_ns();
	CHECK_EQ(ab_proc_write(NULL, p, data, big, ab_proc_deadline_ms(300)), AB_ETIMEOUT);
	CHECK((ab_proc_now_ns() - t0) / 1000000 < 5000);
	ab_proc_free(p);

	/* writing to a child that has exited: an error, not a SIGPIPE for us */
	const char *argv2[] = {"true", NULL};
	spec.argv = argv2;
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	CHECK(ab_proc_wait(NULL, p, ab_proc_deadline_ms(5000)) == 0);
	CHECK(ab_proc_write(NULL, p, data, big, ab_proc_deadline_ms(1000)) == AB_ERROR);
	CHECK_STR_HAS(ab_error_last(), "closed its stdin");
	ab_proc_free(p);
	free(data);
}

static void read_timeout(void)
{
	const char *argv[] = {"sleep", "100", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdin_pipe = 1, .stdout_pipe = 1};
	ab_proc *p = NULL;
	const char *line;
	size_t len;
	struct ab_proc_status st;

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	int64_t t0 = ab_proc_now_ns();
	CHECK_EQ(ab_proc_read_line(&line, &len, NULL, p, ab_proc_deadline_ms(200)), AB_ETIMEOUT);
	int64_t ms = (ab_proc_now_ns() - t0) / 1000000;
	CHECK(ms >= 150 && ms < 5000);
	CHECK_EQ(ab_proc_wait(&st, p, ab_proc_deadline_ms(100)), AB_ETIMEOUT);
	CHECK(ab_proc_kill(&st, p, 1000, 0) == 0);
	CHECK(st.killed && !st.timed_out);
	CHECK(st.signaled && st.signal_number == SIGTERM);
	ab_proc_free(p);
}

static void stderr_tail(void)
{
	/* in-memory tail: 200 KB of noise then a last line; the tail is bounded and ends right */
	const char *argv[] = {"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' n >&2; echo >&2; "
		"echo 'the last line' >&2; exit 1", NULL};
	struct ab_proc_spec spec = {.argv = argv, .stdout_pipe = 1};
	ab_proc *p = NULL;
	char *tail = NULL;
	struct ab_proc_status st;

	CHECK(ab_proc_spawn(&p, &spec) == 0);
	CHECK(ab_proc_wait(&st, p, ab_proc_deadline_ms(10000)) == 0);
	CHECK_EQ(st.exit_code, 1);
	CHECK(ab_proc_stderr_tail(&tail, p, 100) == 0);
	CHECK(strlen(tail) <= 100);
	CHECK(strcmp(tail, "the last line\n") == 0);
	free(tail);
	ab_proc_free(p);

	/* file tail */
	spec.log_path = tu_path("stderr.log");
	CHECK(ab_proc_spawn(&p, &spec) == 0);
	CHECK(ab_proc_wait(&st, p, ab_proc_deadline_ms(10000)) == 0);
	CHECK(ab_proc_stderr_tail(&tail, p, 100) == 0);
	CHECK(strcmp(tail, "the last line\n") == 0);
	free(tail);
	ab_proc_free(p);
}

static void status_describe(void)
{
	char buf[96];
	struct ab_proc_status st = {.signaled = 1, .signal_number = SIGABRT, .core_dumped = 1};
	CHECK(strcmp(ab_proc_status_describe(buf, sizeof(buf), &st), "signal 6 (SIGABRT), core dumped") == 0);
	st = (struct ab_proc_status){.exited = 1, .exit_code = 0};
	CHECK(ab_proc_status_ok(&st));
	CHECK(strcmp(ab_proc_status_describe(buf, sizeof(buf), &st), "exit code 0") == 0);
	st.killed = 1;
	CHECK(!ab_proc_status_ok(&st));
	CHECK(strcmp(ab_proc_status_describe(buf, sizeof(buf), &st), "killed by abgate") == 0);
	CHECK(strcmp(ab_proc_signal_name(SIGKILL), "SIGKILL") == 0);
	CHECK(strcmp(ab_proc_signal_name(12345), "SIG?") == 0);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{"run_exit", run_exit}, {"run_signal", run_signal}, {"run_timeout", run_timeout},
		{"run_missing", run_missing}, {"run_env_cwd", run_env_cwd}, {"group_kill", group_kill},
		{"group_leftovers", group_leftovers}, {"lines", lines}, {"oversize_line", oversize_line},
		{"partial_last_line", partial_last_line}, {"write_timeout", write_timeout},
		{"read_timeout", read_timeout}, {"stderr_tail", stderr_tail},
		{"status_describe", status_describe}, {"pass_fd", pass_fd}, {"pass_fd_status", pass_fd_status},
	};
	return TU_RUN(argc, argv, cases);
}
