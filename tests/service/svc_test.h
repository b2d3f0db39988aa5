/*
 * svc_test.h - helpers shared by the service's C tests: CHECK macros that print the expression and
 * ab_error_last(), a temp directory removed at exit, and a table of named cases (`test_x case` runs
 * one, no argument runs all).
 */
#ifndef AB_SVC_TEST_H
#define AB_SVC_TEST_H

#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n  last error: %s\n", __FILE__, __LINE__, #cond, \
			ab_error_last()); \
		exit(1); \
	} \
} while (0)

#define CHECK_EQ(a, b) do { \
	long long va_ = (long long)(a), vb_ = (long long)(b); \
	if (va_ != vb_) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n  last error: %s\n", __FILE__, \
			__LINE__, #a, #b, va_, vb_, ab_error_last()); \
		exit(1); \
	} \
} while (0)

#define CHECK_STR(a, b) do { \
	const char *sa_ = (a), *sb_ = (b); \
	if (!sa_ || !sb_ || strcmp(sa_, sb_)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__, __LINE__, #a, #b, \
			sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)"); \
		exit(1); \
	} \
} while (0)

#define CHECK_HAS(hay, needle) do { \
	const char *h_ = (hay); \
	if (!h_ || !strstr(h_, (needle))) { \
		fprintf(stderr, "%s:%d: CHECK failed: \"%.300s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
			h_ ? h_ : "(null)", (needle)); \
		exit(1); \
	} \
} while (0)

static char st_dir[256];

static int st_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void st_cleanup(void)
{
	if (st_dir[0] && !getenv("AB_TEST_KEEP"))
		nftw(st_dir, st_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh temp directory for this process, removed at exit (AB_TEST_KEEP=1 keeps it). */
static inline const char *st_tmpdir(void)
{
	if (!st_dir[0]) {
		snprintf(st_dir, sizeof(st_dir), "/tmp/abgate-svc-XXXXXX");
		if (!mkdtemp(st_dir)) {
			perror("mkdtemp");
			exit(1);
		}
		atexit(st_cleanup);
	}
	return st_dir;
}

/* tmpdir/name in a rotating static buffer (8 live at a time). */
static inline const char *st_path(const char *name)
{
	static char bufs[8][512];
	static int next;
	char *b = bufs[next++ % 8];
	snprintf(b, 512, "%s/%s", st_tmpdir(), name);
	return b;
}

static inline void st_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

struct st_case {
	const char *name;
	void (*fn)(void);
};

/* Runs the case named argv[1], or every case in order. */
static inline int st_main(int argc, char **argv, const struct st_case *cases)
{
	int ran = 0;
	for (const struct st_case *c = cases; c->name; c++) {
		if (argc > 1 && strcmp(argv[1], c->name))
			continue;
		fprintf(stderr, "-- %s\n", c->name);
		c->fn();
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "no case named %s\n", argc > 1 ? argv[1] : "(none)");
		return 2;
	}
	return 0;
}

#endif
