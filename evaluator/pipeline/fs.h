/*
 * fs.h - the filesystem work around abgate's child processes: the directories they run in (state
 * dir, checkouts, build trees) and the log files they leave (appended to, read back from the end).
 * Paths are the caller's; nothing here follows a symlink it was not asked to.
 */
#ifndef AB_FS_H
#define AB_FS_H

#include <stddef.h>
#include <sys/types.h>

/* mkdir -p with mode 0755. Returns 0 if the directory exists afterwards; negative with the message
 * set otherwise (a path component that is a file, no permission). */
int ab_fs_mkdirs(const char *path);

/* rm -rf that never follows symlinks (a link is removed, not what it points to). A missing path is
 * not an error. Returns 0, or negative with the message naming the entry that could not go. */
int ab_fs_rmtree(const char *path);

/*
 * The last max_bytes of the file at `path`, never reaching before byte offset `start` (0: the whole
 * file; a log shared by many runs passes where one run's part begins, so it is never blamed for
 * another's output). When the window cuts the file, it begins after the first line break in it, if
 * any. *out is NUL-terminated, caller frees with free(). A missing file gives AB_ENOTFOUND.
 */
int ab_fs_tail(char **out, const char *path, size_t max_bytes, off_t start);

/* Appends `text` to the file at `path` (created 0644). Returns 0, or negative with the message set. */
int ab_fs_append(const char *path, const char *text);
/* Replaces the content of the file at `path` (created 0644) with `text`. Returns as ab_fs_append. */
int ab_fs_write(const char *path, const char *text);
/* Replaces the file at `path` with `text` atomically: written beside it and renamed into place, so a
 * reader sees the old content or the new, never a part (the temporary is removed on failure).
 * Returns as ab_fs_append. */
int ab_fs_write_atomic(const char *path, const char *text);

#endif
