/*
 * svc_test.h - the service's C tests use the evaluator tests' helpers (tests/evaluator/testutil.h:
 * CHECK macros printing ab_error_last(), a temp directory removed at exit, named cases) under the
 * names they were written with, plus CHECK_STR; their case tables end with a { NULL } entry.
 */
#ifndef AB_SVC_TEST_H
#define AB_SVC_TEST_H

#include "testutil.h"

#define CHECK_STR(a, b) do { \
	const char *sa_ = (a), *sb_ = (b); \
	if (!sa_ || !sb_ || strcmp(sa_, sb_)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__, __LINE__, #a, #b, \
			sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)"); \
		exit(1); \
	} \
} while (0)

#define CHECK_HAS(hay, needle) CHECK_STR_HAS(hay, needle)
#define st_tmpdir tu_tmpdir
#define st_path tu_path
#define st_write tu_write_file
#define st_case tu_case

/* Runs the case named argv[1], or every case in order; `cases` ends with a { NULL } entry. */
static inline int st_main(int argc, char **argv, const struct tu_case *cases)
{
	size_t n = 0;
	while (cases[n].name)
		n++;
	return tu_main(argc, argv, cases, n);
}

#endif
