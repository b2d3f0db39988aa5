/*
 * testutil.h - the few helpers the evaluator and service tests share: CHECK macros that print the
 * failed expression with ab_error_last(), a per-test temp directory removed at exit, and a case
 * table run by name (`test_proc run_timeout`) or all in order when no name is given.
 */
#ifndef AB_TESTUTIL_H
#define AB_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fs.h"
#include "proc.h"

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

#define CHECK_STR_HAS(hay, needle) do { \
	const char *h_ = (hay); \
	if (!h_ || !strstr(h_, (needle))) { \
		fprintf(stderr, "%s:%d: CHECK failed: '%s' does not contain '%s'\n", __FILE__, __LINE__, \
			h_ ? h_ : "(null)", (needle)); \
		exit(1); \
	} \
} while (0)

static char tu_dir[256];
static char *tu_paths[1024];
static size_t tu_path_count;

static void tu_cleanup(void)
{
	if (tu_dir[0] && !getenv("AB_TEST_KEEP"))
		ab_fs_rmtree(tu_dir);
	for (size_t i = 0; i < tu_path_count; i++)
		free(tu_paths[i]);
}

/* A fresh temp directory for this test process, removed at exit (set AB_TEST_KEEP to keep it). */
static inline const char *tu_tmpdir(void)
{
	if (!tu_dir[0]) {
		snprintf(tu_dir, sizeof(tu_dir), "/tmp/abgate-test-XXXXXX");
		if (!mkdtemp(tu_dir)) {
			perror("mkdtemp");
			exit(1);
		}
		atexit(tu_cleanup);
	}
	return tu_dir;
}

/* tmpdir/name; the string stays valid until the process exits. */
static inline const char *tu_path(const char *name)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s/%s", tu_tmpdir(), name);
	if (tu_path_count == sizeof(tu_paths) / sizeof(tu_paths[0]) || !(tu_paths[tu_path_count] = strdup(buf))) {
		fprintf(stderr, "tu_path: out of slots\n");
		exit(1);
	}
	return tu_paths[tu_path_count++];
}

static inline void tu_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

struct tu_case {
	const char *name;
	void (*fn)(void);
};

static inline int tu_main(int argc, char **argv, const struct tu_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
			continue;
		fprintf(stderr, "-- %s\n", cases[i].name);
		cases[i].fn();
		if (argc > 1)
			return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "unknown case %s\n", argv[1]);
		return 2;
	}
	return 0;
}

#define TU_RUN(argc, argv, cases) tu_main((argc), (argv), (cases), sizeof(cases) / sizeof((cases)[0]))

#endif
