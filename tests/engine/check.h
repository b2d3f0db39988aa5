/*
 * check.h - minimal assertion helpers for ember's C tests: CHECK records a failure with its file,
 * line and message and keeps going; a test's main returns check_exit() (0 when nothing failed).
 */
#ifndef EMBER_TEST_CHECK_H
#define EMBER_TEST_CHECK_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                       \
		if (!(cond)) {                                                         \
			check_failures++;                                                  \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
		}                                                                      \
	} while (0)

/* A fatal check: stops the test when a precondition for the rest fails. */
#define REQUIRE(cond, ...)                                                     \
	do {                                                                       \
		if (!(cond)) { /* evaluated once: cond may have side effects */        \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			exit(1);                                                           \
		}                                                                      \
	} while (0)

static inline int check_exit(const char *name)
{
	if (check_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

/* A fresh temporary directory (mkdtemp under $TMPDIR or /tmp); caller frees the string. */
static inline char *check_tmpdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path = malloc(4096);
	snprintf(path, 4096, "%s/ember-%s-XXXXXX", base && *base ? base : "/tmp", tag);
	if (!mkdtemp(path)) {
		perror("mkdtemp");
		exit(1);
	}
	return path;
}

/* Removes the plain files in `dir` (no recursion) and the directory itself; frees the string. */
static inline void check_rmdir(char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	free(dir);
}

#endif
