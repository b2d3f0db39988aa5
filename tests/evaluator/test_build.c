/*
 * test_build.c - the build driver: placeholder substitution, success / failure / timeout with their
 * reasons and log tails, reuse of an identical tree, and no reuse after a failed build.
 */
#include "testutil.h"

#include <unistd.h>

#include "build.h"

static const char *fake_tree = "0123456789abcdef0123456789abcdef01234567";

static void subst(void)
{
	const struct ab_subst vars[] = {{"src", "/s"}, {"build", "/b/x"}, {"jobs", "4"}, {"model", NULL}};
	char *out = NULL;
	struct {
		const char *in, *want;
	} cases[] = {
		{"{src}", "/s"},
		{"-DFOO={src}/x", "-DFOO=/s/x"},
		{"{build}/bin/ember --threads {jobs} {src}{src}", "/b/x/bin/ember --threads 4 /s/s"},
		{"no placeholders", "no placeholders"},
		{"${HOME} {unknown} {} { {src", "${HOME} {unknown} {} { {src"},
		{"{{src}}", "{/s}"},
		{"", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(ab_build_subst(&out, cases[i].in, vars, 4) == 0);
		if (strcmp(out, cases[i].want) != 0)
			fprintf(stderr, "'%s' -> '%s', expected '%s'\n", cases[i].in, out, cases[i].want);
		CHECK(strcmp(out, cases[i].want) == 0);
		free(out);
	}
	out = NULL;
	CHECK_EQ(ab_build_subst(&out, "--model={model}", vars, 4), AB_EINVALID);
	CHECK_STR_HAS(ab_error_last(), "{model} has no value");
	CHECK(!out);

	const char *argv[] = {"cmake", "-S", "{src}", "-B", "{build}", NULL};
	char **got = NULL;
	CHECK(ab_build_subst_argv(&got, argv, vars, 4) == 0);
	CHECK(strcmp(got[2], "/s") == 0 && strcmp(got[4], "/b/x") == 0 && got[5] == NULL);
	ab_build_argv_free(got);
	const char *bad[] = {"x", "{model}", NULL};
	got = NULL;
	CHECK_EQ(ab_build_subst_argv(&got, bad, vars, 4), AB_EINVALID);
	CHECK(!got);
}

static const char *make_src(void)
{
	const char *src = tu_path("src");
	CHECK(ab_fs_mkdirs(src) == 0);
	tu_write_file(tu_path("src/hello.txt"), "hello\n");
	return src;
}

static void run_ok(void)
{
	const char *configure[] = {"sh", "-c", "echo configured > {build}/conf.txt; echo in=$(pwd)", NULL};
	const char *build[] = {"sh", "-c", "cp {src}/hello.txt {build}/out.txt; echo jobs={jobs} flag=$AB_FLAG", NULL};
	const char *env[] = {"AB_FLAG=-I{src}/include", NULL};
	struct ab_build_request rq = {
		.state_dir = tu_path("state-run_ok"), .src_dir = make_src(), .tree_id = fake_tree, .side = "head",
		.configure = configure, .build = build, .env = env, .timeout_s = 60, .jobs = 3,
	};
	struct ab_build_result res;
	char path[1024];

	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK_EQ(res.state, AB_BUILD_STATE_OK);
	CHECK_EQ(res.reused, 0);
	CHECK(res.reason[0] == '\0');
	CHECK(res.duration_s > 0);
	CHECK(strncmp(res.key, fake_tree, 40) == 0 && strlen(res.key) == 57);
	CHECK(res.build_dir[0] == '/');
	CHECK_STR_HAS(res.build_dir, "/state-run_ok/builds/");
	CHECK_STR_HAS(res.log_path, "head.log");
	snprintf(path, sizeof(path), "%s/out.txt", res.build_dir);
	CHECK(access(path, F_OK) == 0);
	snprintf(path, sizeof(path), "%s/conf.txt", res.build_dir);
	CHECK(access(path, F_OK) == 0);
	CHECK_STR_HAS(res.log_tail, "jobs=3");
	CHECK_STR_HAS(res.log_tail, "flag=-I");
	CHECK_STR_HAS(res.log_tail, "/src/include");
	CHECK_STR_HAS(res.log_tail, res.build_dir);  /* steps run inside the build dir */
	ab_build_result_clear(&res);

	/* {model} without a model is a configuration error, not a build failure */
	const char *uses_model[] = {"echo", "{model}", NULL};
	rq.build = uses_model;
	rq.tree_id = "1111111111111111111111111111111111111111";
	CHECK_EQ(ab_build_run(&res, &rq), AB_EINVALID);
	rq.tree_id = "../../etc";
	CHECK_EQ(ab_build_run(&res, &rq), AB_EINVALID);
}

static void run_fail(void)
{
	const char *build[] = {"sh", "-c", "echo 'src/foo.c:3: error: expected ;' >&2; exit 2", NULL};
	struct ab_build_request rq = {
		.state_dir = tu_path("state-run_fail"), .src_dir = make_src(), .tree_id = fake_tree, .build = build,
		.timeout_s = 60,
	};
	struct ab_build_result res;

	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK_EQ(res.state, AB_BUILD_STATE_FAILED);
	CHECK(strcmp(res.reason, "build: exit code 2") == 0);
	CHECK(res.status.exited && res.status.exit_code == 2);
	CHECK_STR_HAS(res.log_tail, "src/foo.c:3: error: expected ;");
	ab_build_result_clear(&res);

	/* a configure step that cannot even start */
	const char *configure[] = {"abgate-no-such-cmake", "-S", "{src}", NULL};
	rq.configure = configure;
	rq.tree_id = "2222222222222222222222222222222222222222";
	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK_EQ(res.state, AB_BUILD_STATE_NOT_STARTED);
	CHECK(strcmp(ab_build_state_name(res.state), "not-started") == 0);
	CHECK_STR_HAS(res.reason, "configure: command not found: abgate-no-such-cmake");
	CHECK_STR_HAS(res.log_tail, "command not found");
	ab_build_result_clear(&res);

	/* a compiler killed by a signal it did not get from us (the OOM killer): not "does not compile" */
	const char *killed[] = {"sh", "-c", "kill -KILL $$", NULL};
	rq.configure = NULL;
	rq.build = killed;
	rq.tree_id = "3333333333333333333333333333333333333333";
	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK_EQ(res.state, AB_BUILD_STATE_KILLED);
	CHECK(strcmp(res.reason, "build: signal 9 (SIGKILL)") == 0);
	ab_build_result_clear(&res);
}

static void run_timeout(void)
{
	const char *build[] = {"sh", "-c", "echo compiling; sleep 30", NULL};
	struct ab_build_request rq = {
		.state_dir = tu_path("state-run_timeout"), .src_dir = make_src(), .tree_id = fake_tree, .build = build,
		.timeout_s = 1,
	};
	struct ab_build_result res;
	int64_t t0 = ab_proc_now_ns();

	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK((ab_proc_now_ns() - t0) / 1000000 < 10000);
	CHECK_EQ(res.state, AB_BUILD_STATE_TIMEOUT);
	CHECK(strcmp(res.reason, "build: killed after timeout (1 s)") == 0);
	CHECK(res.status.timed_out);
	CHECK_STR_HAS(res.log_tail, "compiling");
	ab_build_result_clear(&res);
}

static int count_lines(const char *path)
{
	char *text = NULL;
	int n = 0;
	if (ab_fs_tail(&text, path, 1 << 16, 0) != 0)
		return 0;
	for (char *p = text; *p; p++)
		n += *p == '\n';
	free(text);
	return n;
}

static void reuse(void)
{
	const char *build[] = {"sh", "-c", "echo built >> {state}/count; touch {build}/out", NULL};
	struct ab_build_request rq = {
		.state_dir = tu_path("state-reuse"), .src_dir = make_src(), .tree_id = fake_tree, .side = "base",
		.build = build, .timeout_s = 60,
	};
	struct ab_build_result a, b, c;

	CHECK(ab_build_run(&a, &rq) == 0);
	CHECK(a.state == AB_BUILD_STATE_OK && !a.reused);
	rq.side = "head";  /* A/A: the other side has the same tree */
	CHECK(ab_build_run(&b, &rq) == 0);
	CHECK(b.state == AB_BUILD_STATE_OK && b.reused);
	CHECK(strcmp(a.build_dir, b.build_dir) == 0);
	CHECK(b.duration_s == 0);
	CHECK_EQ(count_lines(tu_path("state-reuse/count")), 1);

	/* another build section (salt) or another tree: a new key, built again */
	rq.key_salt = "cc 13";
	CHECK(ab_build_run(&c, &rq) == 0);
	CHECK(c.state == AB_BUILD_STATE_OK && !c.reused);
	CHECK(strcmp(c.key, a.key) != 0);
	CHECK_EQ(count_lines(tu_path("state-reuse/count")), 2);
	char key_again[64];
	CHECK(ab_build_key(key_again, &rq) == 0);
	CHECK(strcmp(key_again, c.key) == 0);
	ab_build_result_clear(&a);
	ab_build_result_clear(&b);
	ab_build_result_clear(&c);
}

static void retry_after_fail(void)
{
	const char *build[] = {"sh", "-c", "echo attempt >> {state}/count; touch {build}/junk-$$; "
		"test -f {state}/allow && touch {build}/out", NULL};
	struct ab_build_request rq = {
		.state_dir = tu_path("state-retry_after_fail"), .src_dir = make_src(), .tree_id = fake_tree, .build = build,
		.timeout_s = 60,
	};
	struct ab_build_result res;

	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK_EQ(res.state, AB_BUILD_STATE_FAILED);
	ab_build_result_clear(&res);
	CHECK(ab_build_run(&res, &rq) == 0);  /* still failing: retried, not reused */
	CHECK_EQ(res.state, AB_BUILD_STATE_FAILED);
	CHECK_EQ(res.reused, 0);
	ab_build_result_clear(&res);
	CHECK_EQ(count_lines(tu_path("state-retry_after_fail/count")), 2);

	tu_write_file(tu_path("state-retry_after_fail/allow"), "");
	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK_EQ(res.state, AB_BUILD_STATE_OK);
	CHECK_EQ(res.reused, 0);
	/* the failed attempts' leftovers were wiped: exactly one junk file, this attempt's */
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "test $(ls %s | grep -c junk-) -eq 1", res.build_dir);
	const char *argv[] = {"sh", "-c", cmd, NULL};
	struct ab_proc_status st;
	CHECK(ab_proc_run(&st, argv, NULL, NULL, NULL, 10000) == 0);
	CHECK(ab_proc_status_ok(&st));
	ab_build_result_clear(&res);
	CHECK(ab_build_run(&res, &rq) == 0);
	CHECK(res.state == AB_BUILD_STATE_OK && res.reused);
	CHECK_EQ(count_lines(tu_path("state-retry_after_fail/count")), 3);
	ab_build_result_clear(&res);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{"subst", subst}, {"run_ok", run_ok}, {"run_fail", run_fail}, {"run_timeout", run_timeout},
		{"reuse", reuse}, {"retry_after_fail", retry_after_fail},
	};
	return TU_RUN(argc, argv, cases);
}
