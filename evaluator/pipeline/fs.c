/*
 * fs.c - directories and log files for child processes (see fs.h): mkdir -p, an rm -rf built on
 * nftw(FTW_PHYS) so it never leaves the tree through a symlink, appends that survive EINTR and
 * short writes, whole-file replacement through a temporary and rename(), and tails read with pread
 * from the end so a large log is never read whole.
 */
#define _GNU_SOURCE
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

int ab_fs_mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	struct stat st;
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(tmp))
		return ab_error_setc(AB_EINVALID, "mkdir: bad path '%s'", path);
	memcpy(tmp, path, len + 1);
	for (char *s = tmp + 1; ; s++) {
		if (*s == '/' || *s == '\0') {
			char saved = *s;
			*s = '\0';
			if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
				return ab_error_errno("mkdir %s", tmp);
			*s = saved;
			if (!saved)
				break;
		}
	}
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return ab_error_set("mkdir %s: exists and is not a directory", path);
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP ? rmdir(path) : unlink(path)) {
		if (errno == ENOENT)
			return 0;
		ab_error_errno("remove %s", path);
		return -1;
	}
	return 0;
}

int ab_fs_rmtree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : ab_error_errno("stat %s", path);
	if (!S_ISDIR(st.st_mode))
		return unlink(path) == 0 ? 0 : ab_error_errno("remove %s", path);
	return nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : AB_ERROR;
}

int ab_fs_tail(char **out, const char *path, size_t max_bytes, off_t start)
{
	struct stat st;
	char *data = NULL;
	int error = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_error_setc(errno == ENOENT ? AB_ENOTFOUND : AB_ERROR, "cannot open %s: %s", path,
			strerror(errno));
	if (fstat(fd, &st) != 0) {
		ab_error_errno("stat %s", path);
		goto cleanup;
	}
	size_t size = (size_t)st.st_size, first = start > 0 && start <= st.st_size ? (size_t)start : 0;
	size_t want = size - first > max_bytes ? max_bytes : size - first;
	off_t from = (off_t)(size - want);
	if (!(data = malloc(want + 1))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	size_t got = 0;
	while (got < want) {
		ssize_t n = pread(fd, data + got, want - got, from + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* Cut: start after the first line break in the window, unless it is the window's last byte. */
	size_t skip = 0;
	const char *nl = (size_t)from > first ? memchr(data, '\n', got) : NULL;
	if (nl && (size_t)(nl - data) + 1 < got)
		skip = (size_t)(nl - data) + 1;
	memmove(data, data + skip, got - skip);
	data[got - skip] = '\0';
	*out = data;
	data = NULL;
	error = 0;
cleanup:
	free(data);
	close(fd);
	return error;
}

static int write_text(const char *path, const char *text, int mode_flag)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | mode_flag, 0644);
	if (fd < 0)
		return ab_error_errno("cannot write %s", path);
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return ab_error_errno("cannot write %s", path);
		}
		off += (size_t)n;
	}
	if (close(fd) != 0)
		return ab_error_errno("cannot write %s", path);
	return 0;
}

int ab_fs_append(const char *path, const char *text)
{
	return write_text(path, text, O_APPEND);
}

int ab_fs_write(const char *path, const char *text)
{
	return write_text(path, text, O_TRUNC);
}

int ab_fs_write_atomic(const char *path, const char *text)
{
	static _Atomic unsigned seq;   /* threads of one process writing the same path */
	char tmp[PATH_MAX + 48];
	int error;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(), seq++) >= sizeof(tmp))
		return ab_error_setc(AB_EINVALID, "path too long: %s", path);
	if ((error = write_text(tmp, text, O_TRUNC)) < 0) {
		unlink(tmp);
		return error;
	}
	if (rename(tmp, path) != 0) {
		error = ab_error_errno("cannot write %s", path);
		unlink(tmp);
		return error;
	}
	return 0;
}
