/*
 * test_fs.c - directories and log files (evaluator/fs.h): mkdir -p over existing parts, rm -rf that
 * removes a symlink without following it, writes and appends, atomic replacement, and tails:
 * bounded, cut at a line break, never before the start offset, a missing file reported as such.
 */
#include "testutil.h"

#include <dirent.h>
#include <unistd.h>

static void mkdirs_rmtree(void)
{
	CHECK(ab_fs_mkdirs(tu_path("a/b/c")) == 0);
	CHECK(ab_fs_mkdirs(tu_path("a/b/c")) == 0);
	tu_write_file(tu_path("a/b/c/f"), "x");
	CHECK(ab_fs_mkdirs(tu_path("a/b/c/f")) < 0);            /* a file is in the way */
	CHECK_STR_HAS(ab_error_last(), "not a directory");
	CHECK(symlink("/", tu_path("a/link")) == 0);
	CHECK(ab_fs_rmtree(tu_path("a")) == 0);
	CHECK(access(tu_path("a"), F_OK) != 0);
	CHECK(access("/etc", F_OK) == 0);
	CHECK(ab_fs_rmtree(tu_path("a")) == 0);                 /* already gone */
	tu_write_file(tu_path("plain"), "x");
	CHECK(ab_fs_rmtree(tu_path("plain")) == 0 && access(tu_path("plain"), F_OK) != 0);
}

static void append_tail(void)
{
	const char *log = tu_path("run.log");
	char *tail = NULL;

	CHECK(ab_fs_append(log, "first run\nfirst run's last line\n") == 0);
	off_t second = 32;                                      /* where the second run's part begins */
	CHECK(ab_fs_append(log, "second run\nsecond run's last line\n") == 0);

	CHECK(ab_fs_tail(&tail, log, 1 << 20, 0) == 0);         /* whole file, nothing cut */
	CHECK(strcmp(tail, "first run\nfirst run's last line\nsecond run\nsecond run's last line\n") == 0);
	free(tail);
	CHECK(ab_fs_tail(&tail, log, 30, 0) == 0);              /* cut: starts after a line break */
	CHECK(strcmp(tail, "second run's last line\n") == 0);
	free(tail);
	CHECK(ab_fs_tail(&tail, log, 1 << 20, second) == 0);    /* never before `start` */
	CHECK(strcmp(tail, "second run\nsecond run's last line\n") == 0);
	free(tail);
	CHECK(ab_fs_tail(&tail, log, 5, 0) == 0);               /* only the last line break: kept */
	CHECK(strcmp(tail, "line\n") == 0);
	free(tail);
	CHECK(ab_fs_tail(&tail, log, 0, 0) == 0 && tail[0] == '\0');
	free(tail);
	CHECK_EQ(ab_fs_tail(&tail, tu_path("nope.log"), 10, 0), AB_ENOTFOUND);
	CHECK(ab_fs_append(tu_path("no-dir/x.log"), "x") < 0);

	CHECK(ab_fs_write(log, "replaced\n") == 0);             /* write replaces, append adds */
	CHECK(ab_fs_append(log, "added\n") == 0);
	CHECK(ab_fs_tail(&tail, log, 1 << 20, 0) == 0);
	CHECK(strcmp(tail, "replaced\nadded\n") == 0);
	free(tail);
}

/* A whole-file replacement is never seen half done, leaves no temporary behind, and fails cleanly. */
static void write_atomic(void)
{
	const char *path = tu_path("addr");
	char *text = NULL;
	CHECK(ab_fs_write_atomic(path, "127.0.0.1:4242\n") == 0);
	CHECK(ab_fs_tail(&text, path, 100, 0) == 0);
	CHECK_STR(text, "127.0.0.1:4242\n");
	free(text);
	CHECK(ab_fs_write_atomic(path, "new") == 0);
	CHECK(ab_fs_tail(&text, path, 100, 0) == 0);
	CHECK_STR(text, "new");
	free(text);
	DIR *d = opendir(tu_tmpdir());
	struct dirent *e;
	int tmp_left = 0;
	while (d && (e = readdir(d)))
		tmp_left += strstr(e->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	CHECK_EQ(tmp_left, 0);
	CHECK(ab_fs_write_atomic(tu_path("no-such-dir/addr"), "x") < 0);
	CHECK_STR_HAS(ab_error_last(), "no-such-dir/addr");
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "mkdirs_rmtree", mkdirs_rmtree }, { "append_tail", append_tail }, { "write_atomic", write_atomic },
	};
	return TU_RUN(argc, argv, cases);
}
