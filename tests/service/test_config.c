/*
 * test_config.c - the service config: the committed sample loads, defaults apply, unknown keys and
 * wrong types are errors naming the key's path, secrets come from env > file > inline and are
 * never printed (nor is a password in a URL).
 */
#include "testutil.h"

#include <sys/stat.h>

#include "config.h"

static void sample_loads(void)
{
	struct ab_config *cfg = NULL;
	char *text = NULL;

	setenv("ABGATE_WEBHOOK_SECRET", "sample-secret-value", 1);
	CHECK(ab_config_load(&cfg, SAMPLE_CONFIG) == 0);
	CHECK_STR(cfg->listen, "127.0.0.1:8080");
	CHECK_EQ(cfg->repo_count, 1);
	CHECK_STR(cfg->repos[0].name, "octo-org/ember");
	CHECK(cfg->repos[0].suite == NULL);
	CHECK_EQ(cfg->github.app_id, 123456);
	CHECK_STR(cfg->webhook_secret_source, "env ABGATE_WEBHOOK_SECRET");
	CHECK(ab_config_check_serve(cfg) == 0);
	CHECK(ab_config_describe(&text, cfg) == 0);
	CHECK_STR_HAS(text, "webhook_secret = ********");
	CHECK(!strstr(text, "sample-secret-value"));
	CHECK_STR_HAS(text, "GitHub App");
	free(text);
	ab_config_free(cfg);
	unsetenv("ABGATE_WEBHOOK_SECRET");
}

static void defaults(void)
{
	struct ab_config *cfg = NULL;
	const char *path = tu_path("min.json");

	tu_write_file(path, "{\"webhook_secret\":\"s\",\"repos\":[{\"name\":\"a/b\"}]}");
	CHECK(ab_config_load(&cfg, path) == 0);
	CHECK_EQ(cfg->workers, 1);
	CHECK_EQ(cfg->poll_interval_s, 300);
	CHECK_EQ(cfg->webhook_max_body, 5 << 20);
	CHECK_STR(cfg->github.api_url, "https://api.github.com");
	CHECK_STR(cfg->repos[0].git_url, "https://github.com/a/b.git");
	CHECK_STR(cfg->repos[0].base, "main");
	CHECK_STR(cfg->github.output_dir, "./.abgate/github-out");
	CHECK(!ab_config_has_auth(cfg));
	CHECK(ab_config_repo(cfg, "A/B") != NULL);
	CHECK(ab_config_repo(cfg, "a/c") == NULL);
	ab_config_free(cfg);
}

static void expect_error(const char *json, const char *message)
{
	struct ab_config *cfg = NULL;
	const char *path = tu_path("bad.json");
	tu_write_file(path, json);
	int rc = ab_config_load(&cfg, path);
	CHECK(rc < 0);
	CHECK(cfg == NULL);
	CHECK_STR_HAS(ab_error_last(), message);
}

static void errors(void)
{
	expect_error("{\"lisen\":\"x:1\"}", "lisen: unknown key");
	expect_error("{\"github\":{\"tokn\":\"x\"}}", "github.tokn: unknown key");
	expect_error("{\"repos\":[{\"name\":\"a/b\"},{\"name\":\"c/d\",\"bse\":\"x\"}]}", "repos[1].bse: unknown key");
	expect_error("{\"workers\":\"2\"}", "workers: expected an integer");
	expect_error("{\"workers\":0}", "workers: 0 is outside");
	expect_error("{\"repos\":[{\"name\":\"nope\"}]}", "expected \"owner/repo\"");
	expect_error("{\"repos\":[{\"base\":\"main\"}]}", "repos[0].name: required");
	expect_error("{\"repos\":[{\"name\":\"a/b\"},{\"name\":\"A/B\"}]}", "listed twice");
	expect_error("{\"github\":{\"token\":\"t\",\"app_id\":1}}", "pick one");
	expect_error("{\"github\":{\"app_id\":1}}", "together");
	expect_error("{\"workers\":1,\"workers\":2}", "duplicate");
	expect_error("{\"listen\":\"8080\"}", "host:port");
	expect_error("[1]", "expected an object");
	expect_error("{", "bad.json");
}

/* policies: defaults, per-repo overrides key by key, the denylist file, and the errors. */
static void policies(void)
{
	struct ab_config *cfg = NULL;
	const char *path = tu_path("pol.json"), *deny = tu_path("deny.txt");
	char json[1024], *text = NULL;

	tu_write_file(deny, "# known sybils\nSybil-1\n\n  other_2  # a comment\n");
	snprintf(json, sizeof(json),
		 "{\"repos\":[{\"name\":\"a/b\",\"policies\":{\"stale_days\":0,\"copycat\":{\"warn\":0.5}}},{\"name\":\"c/d\"}],"
		 "\"policies\":{\"max_open_prs_per_author\":3,\"denylist_file\":\"%s\",\"exempt_labels\":[\"keep\"],"
		 "\"harness_changes\":\"skip\",\"merge_first\":true}}", deny);
	tu_write_file(path, json);
	CHECK(ab_config_load(&cfg, path) == 0);
	CHECK_EQ(cfg->policies.stale_days, 2);
	CHECK_EQ(cfg->policies.max_open_prs_per_author, 3);
	const struct ab_policy_config *a = &cfg->repos[0].policies, *c = &cfg->repos[1].policies;
	CHECK_EQ(a->stale_days, 0);                      /* the repo's own key */
	CHECK_EQ(a->max_open_prs_per_author, 3);         /* inherited */
	CHECK(a->copycat_warn == 0.5 && a->copycat_block == 0.85);
	CHECK_EQ(c->stale_days, 2);
	CHECK_EQ(c->draft_stale_days, 4);
	CHECK_EQ(c->max_unrewarded_evals, 2);
	CHECK_EQ(c->copycat_min_added_lines, 15);
	CHECK_STR(c->harness_changes, "skip");
	CHECK_EQ(c->exempt_label_count, 1);
	CHECK_STR(c->exempt_labels[0], "keep");
	CHECK(a->merge_first == 1 && c->merge_first == 1);
	CHECK_EQ(a->denylist_count, 2);
	CHECK_STR(a->denylist[0], "Sybil-1");
	CHECK_STR(a->denylist[1], "other_2");
	CHECK(ab_config_describe(&text, cfg) == 0);
	CHECK_STR_HAS(text, "repos[0].policies.stale_days = 0");
	CHECK_STR_HAS(text, "policies.exempt_labels = [\"keep\"]");
	CHECK_STR_HAS(text, "repos[1].policies.merge_first = true");
	free(text);
	ab_config_free(cfg);
	/* Defaults when nothing is said. */
	tu_write_file(path, "{\"repos\":[{\"name\":\"a/b\"}]}");
	CHECK(ab_config_load(&cfg, path) == 0);
	CHECK_EQ(cfg->repos[0].policies.exempt_label_count, 2);
	CHECK_STR(cfg->repos[0].policies.exempt_labels[1], "merge-first");
	CHECK_STR(cfg->repos[0].policies.harness_changes, "evaluate");
	CHECK(cfg->repos[0].policies.denylist_file == NULL);
	CHECK(cfg->repos[0].policies.merge_first == 0);
	ab_config_free(cfg);

	expect_error("{\"policies\":{\"stale\":1}}", "policies.stale: unknown key");
	expect_error("{\"repos\":[{\"name\":\"a/b\",\"policies\":{\"copycat\":{\"blok\":1}}}]}",
		     "repos[0].policies.copycat.blok: unknown key");
	expect_error("{\"policies\":{\"copycat\":{\"block\":1.5}}}", "policies.copycat.block: 1.5 is outside");
	expect_error("{\"policies\":{\"copycat\":{\"block\":0.7}}}", "warn (0.75) is above block (0.7)");
	expect_error("{\"policies\":{\"harness_changes\":\"ignore\"}}", "expected \"evaluate\" or \"skip\"");
	expect_error("{\"policies\":{\"stale_days\":-1}}", "policies.stale_days: -1 is outside");
	expect_error("{\"policies\":{\"merge_first\":1}}", "policies.merge_first: expected true or false");
	expect_error("{\"policies\":{\"exempt_labels\":\"hold\"}}", "policies.exempt_labels: expected an array");
	expect_error("{\"policies\":{\"denylist_file\":\"/nonexistent/deny\"}}", "denylist_file: cannot open");
	tu_write_file(deny, "good\nbad login\n");
	snprintf(json, sizeof(json), "{\"policies\":{\"denylist_file\":\"%s\"}}", deny);
	expect_error(json, ":2: \"bad login\" is not a GitHub login");
}

static void secrets(void)
{
	struct ab_config *cfg = NULL;
	const char *secret_file = tu_path("secret"), *cfgpath = tu_path("s.json");
	char json[1024];

	tu_write_file(secret_file, "from-file\n");
	chmod(secret_file, 0600);
	snprintf(json, sizeof(json), "{\"webhook_secret\":\"inline\",\"webhook_secret_file\":\"%s\",\"github\":{\"token\":\"tok-inline\"}}",
		 secret_file);
	tu_write_file(cfgpath, json);
	unsetenv("ABGATE_WEBHOOK_SECRET");
	unsetenv("ABGATE_GITHUB_TOKEN");
	CHECK(ab_config_load(&cfg, cfgpath) == 0);
	CHECK_STR(cfg->webhook_secret, "from-file");            /* file beats inline */
	CHECK_STR(cfg->github.token, "tok-inline");
	CHECK(ab_config_check_serve(cfg) < 0);                    /* no repos */
	CHECK_STR_HAS(ab_error_last(), "at least one repository");
	ab_config_free(cfg);

	setenv("ABGATE_WEBHOOK_SECRET", "from-env", 1);
	setenv("ABGATE_GITHUB_TOKEN", "tok-env", 1);
	CHECK(ab_config_load(&cfg, cfgpath) == 0);
	CHECK_STR(cfg->webhook_secret, "from-env");               /* env beats everything */
	CHECK_STR(cfg->github.token, "tok-env");
	char *text = NULL;
	CHECK(ab_config_describe(&text, cfg) == 0);
	CHECK(!strstr(text, "from-env") && !strstr(text, "tok-env"));
	CHECK_STR_HAS(text, "env ABGATE_GITHUB_TOKEN");
	free(text);
	ab_config_free(cfg);
	unsetenv("ABGATE_WEBHOOK_SECRET");
	unsetenv("ABGATE_GITHUB_TOKEN");

	/* A credential in a URL's user info is a secret too: the printed config masks it. */
	tu_write_file(cfgpath, "{\"repos\":[{\"name\":\"a/b\",\"git_url\":\"https://x-access-token:ghs_urlsecret@github.com/a/b.git\"},"
			  "{\"name\":\"c/d\",\"git_url\":\"https://github.com/c/d.git?x=a:b@c\"}],"
			  "\"github\":{\"api_url\":\"https://bot:pw-in-url@ghe.example/api/v3\"}}");
	CHECK(ab_config_load(&cfg, cfgpath) == 0);
	CHECK_STR(cfg->repos[0].git_url, "https://x-access-token:ghs_urlsecret@github.com/a/b.git");  /* used as given */
	CHECK(ab_config_describe(&text, cfg) == 0);
	CHECK(!strstr(text, "ghs_urlsecret") && !strstr(text, "pw-in-url"));
	CHECK_STR_HAS(text, "\"https://x-access-token:********@github.com/a/b.git\"");
	CHECK_STR_HAS(text, "\"https://bot:********@ghe.example/api/v3\"");
	CHECK_STR_HAS(text, "\"https://github.com/c/d.git?x=a:b@c\"");  /* no user info: shown as is */
	free(text);
	ab_config_free(cfg);

	snprintf(json, sizeof(json), "{\"webhook_secret_file\":\"%s\"}", tu_path("missing"));
	tu_write_file(cfgpath, json);
	CHECK(ab_config_load(&cfg, cfgpath) < 0);
	CHECK_STR_HAS(ab_error_last(), "webhook_secret");

	/* No secret at all: loadable, but serve refuses to run unsigned. */
	tu_write_file(cfgpath, "{\"repos\":[{\"name\":\"a/b\"}]}");
	CHECK(ab_config_load(&cfg, cfgpath) == 0);
	CHECK(ab_config_check_serve(cfg) < 0);
	CHECK_STR_HAS(ab_error_last(), "no webhook secret");
	ab_config_free(cfg);
}

static void table(void)
{
	char *md = NULL;
	CHECK(ab_config_table_markdown(&md) == 0);
	CHECK_STR_HAS(md, "| key | type | default | meaning |");
	CHECK_STR_HAS(md, "`github.max_wait_s`");
	CHECK_STR_HAS(md, "`repos[].git_url`");
	free(md);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "sample_loads", sample_loads }, { "defaults", defaults }, { "errors", errors },
		{ "policies", policies },
		{ "secrets", secrets },           { "table", table },
	};
	return TU_RUN(argc, argv, cases);
}
