/*
 * check.h - the few assertion macros the guards tests share: a failed CHECK prints the expression
 * with file and line and makes the test exit non-zero at the end (all checks still run).
 */
#ifndef AB_TEST_CHECK_H
#define AB_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond) do { if (!(cond)) { check_failures++; \
	fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); if (!(fabs(a_ - b_) <= (tol))) { \
	check_failures++; fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.10g, %s = %.10g (tol %g)\n", \
	__FILE__, __LINE__, #a, a_, #b, b_, (double)(tol)); } } while (0)
#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); if (strcmp(a_, b_) != 0) { \
	check_failures++; fprintf(stderr, "%s:%d: CHECK_STR failed: %s = \"%s\", expected \"%s\"\n", \
	__FILE__, __LINE__, #a, a_, b_); } } while (0)

/* Runs the case named by argv[1] from a table of {name, fn}; returns the process exit status. */
struct test_case {
	const char *name;
	void (*fn)(void);
};

static int run_cases(const struct test_case *cases, size_t n, int argc, char **argv)
{
	int ran = 0;
	for (size_t i = 0; i < n; i++)
		if (argc < 2 || strcmp(argv[1], cases[i].name) == 0) {
			cases[i].fn();
			ran++;
		}
	if (ran == 0) {
		fprintf(stderr, "no test case named %s\n", argc > 1 ? argv[1] : "?");
		return 2;
	}
	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	return check_failures ? 1 : 0;
}

#endif
