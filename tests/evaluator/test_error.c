/*
 * test_error.c - util/error.c's last-error message: ab_error_wrap puts a prefix before the message
 * already set, cuts an over-long result at the buffer's end (still terminated), and with nothing
 * set leaves just the prefix.
 */
#include <string.h>

#include "error.h"
#include "testutil.h"

static void wrap_prefix(void)
{
	ab_error_set("disk full");
	CHECK_EQ(ab_error_wrap(-7, "writing %s", "result.json"), -7);
	CHECK(strcmp(ab_error_last(), "writing result.json: disk full") == 0);
}

static void wrap_empty(void)
{
	ab_error_clear();
	ab_error_wrap(-1, "loading %d models", 2);
	CHECK(strcmp(ab_error_last(), "loading 2 models") == 0);
}

static void wrap_long(void)
{
	char big[4096];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ab_error_set("%s", big);
	const size_t before = strlen(ab_error_last());
	ab_error_wrap(-1, "outer");
	const char *msg = ab_error_last();
	CHECK(strncmp(msg, "outer: xxx", 10) == 0);
	CHECK_EQ(strlen(msg), before); /* cut to the same full buffer */
	ab_error_wrap(-1, "%s", big);  /* a prefix longer than the buffer */
	CHECK(strlen(ab_error_last()) == before && ab_error_last()[0] == 'x');
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{"wrap_prefix", wrap_prefix},
		{"wrap_empty", wrap_empty},
		{"wrap_long", wrap_long},
	};
	return TU_RUN(argc, argv, cases);
}
