/*
 * test_repo.c - repositories: a fixture built with the git CLI in a temp dir (two commits on two
 * branches, an annotated and a lightweight tag, a fake refs/pull/7/head, a commit with an identical
 * tree), every ref kind resolved, the changed-files list, checkout reuse and atomicity, reading
 * the suite from the base commit, and mirroring a local path given as a URL.
 */
#include "testutil.h"

#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "repo.h"

struct fixture {
	char dir[512];
	char c1[41], c2[41], c3[41];  /* main, feature, feature + empty commit (same tree as c2) */
};

static const char *git_env[] = {
	"GIT_AUTHOR_NAME=abgate test", "GIT_AUTHOR_EMAIL=test@abgate.invalid",
	"GIT_COMMITTER_NAME=abgate test", "GIT_COMMITTER_EMAIL=test@abgate.invalid",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", NULL,
};

/* Runs a shell snippet in `cwd` with a deterministic git identity; it must succeed. */
static void sh(const char *cwd, const char *script)
{
	const char *argv[] = {"sh", "-ec", script, NULL};
	struct ab_proc_status st;
	const char *log = tu_path("git.log");
	CHECK(ab_proc_run(&st, argv, git_env, cwd, log, 60000) == 0);
	if (!ab_proc_status_ok(&st)) {
		char *tail = NULL;
		ab_fs_tail(&tail, log, 4000, 0);
		fprintf(stderr, "fixture step failed: %s\n%s\n", script, tail ? tail : "");
		exit(1);
	}
}

static void read_line_file(char *out, size_t cap, const char *path)
{
	char *text = NULL;
	CHECK(ab_fs_tail(&text, path, 4096, 0) == 0);
	snprintf(out, cap, "%s", text);
	out[strcspn(out, "\n")] = '\0';
	free(text);
}

static void make_fixture(struct fixture *fx)
{
	static int made;
	char name[32];
	snprintf(name, sizeof(name), "origin%d", made++);
	snprintf(fx->dir, sizeof(fx->dir), "%s", tu_path(name));
	CHECK(ab_fs_mkdirs(fx->dir) == 0);
	sh(fx->dir,
		"git init -q -b main .\n"
		"mkdir -p guards src scripts\n"
		"echo '{\"v\":\"base\"}' > guards/default.json\n"
		"echo 'int a(void) { return 1; }' > src/a.c\n"
		"printf '#!/bin/sh\\necho run\\n' > scripts/run.sh && chmod +x scripts/run.sh\n"
		"echo 'hello' > README\n"
		"git add -A && git commit -q -m 'base: first commit'\n"
		"git tag -a v1 -m 'version 1'\n"
		"git tag light1\n"
		"git checkout -q -b feature\n"
		"echo 'int a(void) { return 2; }' > src/a.c\n"
		"echo 'int b(void) { return 3; }' > src/b.c\n"
		"echo '{\"v\":\"head\"}' > guards/default.json\n"
		"git rm -q README\n"
		"mkdir -p tools && git mv scripts/run.sh tools/run.sh\n"
		"git add -A && git commit -q -m 'head: change things'\n"
		"git update-ref refs/pull/7/head HEAD\n"
		"git commit -q --allow-empty -m 'same tree'\n"
		"git checkout -q main\n"
		"git rev-parse main > ../c1 && git rev-parse feature~1 > ../c2 && git rev-parse feature > ../c3\n");
	read_line_file(fx->c1, sizeof(fx->c1), tu_path("c1"));
	read_line_file(fx->c2, sizeof(fx->c2), tu_path("c2"));
	read_line_file(fx->c3, sizeof(fx->c3), tu_path("c3"));
	CHECK(strlen(fx->c1) == 40 && strlen(fx->c2) == 40 && strlen(fx->c3) == 40);
}

static void expect_ref(ab_repo *r, const char *ref, const char *sha, const char *refname)
{
	struct ab_repo_commit c;
	if (ab_repo_resolve(&c, r, ref) != 0) {
		fprintf(stderr, "cannot resolve %s\n", ref);
		CHECK(0);
	}
	if (strcmp(c.sha, sha) != 0)
		fprintf(stderr, "%s resolved to %s, expected %s\n", ref, c.sha, sha);
	CHECK(strcmp(c.sha, sha) == 0);
	CHECK_EQ(strlen(c.tree), 40);
	if (refname)
		CHECK(strcmp(c.refname, refname) == 0);
}

static void check_refs(ab_repo *r, const struct fixture *fx)
{
	char abbrev[8];
	struct ab_repo_commit c2, c3;

	expect_ref(r, "main", fx->c1, "refs/heads/main");
	expect_ref(r, "feature", fx->c3, "refs/heads/feature");
	expect_ref(r, "refs/heads/feature", fx->c3, "refs/heads/feature");
	expect_ref(r, "v1", fx->c1, "refs/tags/v1");  /* annotated: peeled to its commit */
	expect_ref(r, "light1", fx->c1, "refs/tags/light1");
	expect_ref(r, "pull/7/head", fx->c2, "refs/pull/7/head");
	expect_ref(r, "refs/pull/7/head", fx->c2, "refs/pull/7/head");
	expect_ref(r, fx->c2, fx->c2, "");
	snprintf(abbrev, sizeof(abbrev), "%.7s", fx->c2);
	expect_ref(r, abbrev, fx->c2, "");

	CHECK(ab_repo_resolve(&c2, r, fx->c2) == 0 && ab_repo_resolve(&c3, r, fx->c3) == 0);
	CHECK(strcmp(c2.tree, c3.tree) == 0);  /* the empty commit keeps the tree */
	CHECK(strcmp(c2.summary, "head: change things") == 0);

	CHECK_EQ(ab_repo_resolve(&c2, r, "no-such-branch"), AB_ENOTFOUND);
	CHECK_STR_HAS(ab_error_last(), "no-such-branch");
	CHECK_EQ(ab_repo_resolve(&c2, r, "pull/8/head"), AB_ENOTFOUND);
	CHECK_EQ(ab_repo_resolve(&c2, r, "-rf"), AB_EINVALID);
	CHECK_EQ(ab_repo_resolve(&c2, r, "main\nx"), AB_EINVALID);
	CHECK_EQ(ab_repo_resolve(&c2, r, ""), AB_EINVALID);
	CHECK(ab_repo_resolve(&c2, r, "0000000000000000000000000000000000000000") < 0);
}

static void resolve(void)
{
	struct fixture fx;
	ab_repo *r = NULL;
	make_fixture(&fx);
	CHECK(ab_repo_open(&r, fx.dir) == 0);
	check_refs(r, &fx);
	CHECK(ab_repo_fetch(r) == 0);  /* no-op for a local repository */
	char base[41];
	CHECK(ab_repo_merge_base(base, r, fx.c1, fx.c3) == 0);
	CHECK(strcmp(base, fx.c1) == 0);
	ab_repo_free(r);

	CHECK_EQ(ab_repo_open(&r, tu_tmpdir()), AB_ENOTFOUND);
	CHECK(ab_repo_is_url("https://github.com/org/repo.git"));
	CHECK(ab_repo_is_url("file:///tmp/x"));
	CHECK(ab_repo_is_url("git@github.com:org/repo.git"));
	CHECK(!ab_repo_is_url("/tmp/repo"));
	CHECK(!ab_repo_is_url("./dir/with:colon"));
}

static const struct ab_repo_change *find_change(const struct ab_repo_change *ch, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ch[i].path, path) == 0)
			return &ch[i];
	return NULL;
}

static void changed_files(void)
{
	struct fixture fx;
	ab_repo *r = NULL;
	struct ab_repo_change *ch = NULL;
	size_t n = 0;
	const struct ab_repo_change *c;

	make_fixture(&fx);
	CHECK(ab_repo_open(&r, fx.dir) == 0);
	CHECK(ab_repo_changed_files(&ch, &n, r, fx.c1, fx.c2) == 0);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %c %s (from %s)\n", ch[i].status, ch[i].path, ch[i].old_path);
	CHECK_EQ(n, 5);
	CHECK((c = find_change(ch, n, "README")) && c->status == 'D');
	CHECK((c = find_change(ch, n, "guards/default.json")) && c->status == 'M');
	CHECK((c = find_change(ch, n, "src/a.c")) && c->status == 'M');
	CHECK((c = find_change(ch, n, "src/b.c")) && c->status == 'A');
	CHECK((c = find_change(ch, n, "tools/run.sh")) && c->status == 'R');
	CHECK(strcmp(c->old_path, "scripts/run.sh") == 0);
	ab_repo_changes_free(ch, n);

	/* identical trees: nothing changed */
	CHECK(ab_repo_changed_files(&ch, &n, r, fx.c2, fx.c3) == 0);
	CHECK_EQ(n, 0);
	ab_repo_changes_free(ch, n);
	CHECK_EQ(ab_repo_changed_files(&ch, &n, r, "main", fx.c3), AB_EINVALID);  /* full ids only */
	ab_repo_free(r);
}

static void expect_file(const char *dir, const char *rel, const char *content)
{
	char path[1024], *text = NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	CHECK(ab_fs_tail(&text, path, 1 << 16, 0) == 0);
	if (strcmp(text, content) != 0)
		fprintf(stderr, "%s: got '%s', expected '%s'\n", path, text, content);
	CHECK(strcmp(text, content) == 0);
	free(text);
}

static int count_tmp_dirs(const char *src)
{
	DIR *d = opendir(src);
	struct dirent *e;
	int n = 0;
	CHECK(d);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, ".tmp-", 5) == 0;
	closedir(d);
	return n;
}

static void checkout(void)
{
	struct fixture fx;
	ab_repo *r = NULL;
	char *d1 = NULL, *d1b = NULL, *d2 = NULL, *d3 = NULL;
	int reused = -1;
	const char *state = tu_path("state");
	struct stat st;

	make_fixture(&fx);
	/* a dirty work tree in the user's repository must stay exactly as it is */
	sh(fx.dir, "echo dirty > src/a.c; cp .git/index ../index.before");
	CHECK(ab_repo_open(&r, fx.dir) == 0);
	CHECK(ab_repo_checkout(&d1, &reused, r, fx.c1, state) == 0);
	CHECK_EQ(reused, 0);
	CHECK(d1[0] == '/');
	expect_file(d1, "guards/default.json", "{\"v\":\"base\"}\n");
	expect_file(d1, "src/a.c", "int a(void) { return 1; }\n");
	expect_file(d1, "README", "hello\n");
	char script[1024];
	snprintf(script, sizeof(script), "%s/scripts/run.sh", d1);
	CHECK(stat(script, &st) == 0 && (st.st_mode & S_IXUSR));
	CHECK(access(tu_path("state/src"), F_OK) == 0);

	CHECK(ab_repo_checkout(&d1b, &reused, r, fx.c1, state) == 0);
	CHECK_EQ(reused, 1);
	CHECK(strcmp(d1, d1b) == 0);

	CHECK(ab_repo_checkout(&d2, &reused, r, fx.c2, state) == 0);
	CHECK_EQ(reused, 0);
	expect_file(d2, "src/b.c", "int b(void) { return 3; }\n");
	snprintf(script, sizeof(script), "%s/README", d2);
	CHECK(access(script, F_OK) != 0);
	CHECK(ab_repo_checkout(&d3, &reused, r, fx.c3, state) == 0);  /* same tree, other commit */
	CHECK_EQ(reused, 1);
	CHECK(strcmp(d2, d3) == 0);
	CHECK_EQ(count_tmp_dirs(tu_path("state/src")), 0);

	sh(fx.dir, "test \"$(cat src/a.c)\" = dirty; cmp .git/index ../index.before; "
		"test \"$(git rev-parse --abbrev-ref HEAD)\" = main");
	free(d1);
	free(d1b);
	free(d2);
	free(d3);
	ab_repo_free(r);
}

static void read_file(void)
{
	struct fixture fx;
	ab_repo *r = NULL;
	char *text = NULL;
	size_t len = 0;

	make_fixture(&fx);
	CHECK(ab_repo_open(&r, fx.dir) == 0);
	/* the suite comes from the base commit: base and head differ here */
	CHECK(ab_repo_read_file(&text, &len, r, fx.c1, "guards/default.json", 1 << 20) == 0);
	CHECK(strcmp(text, "{\"v\":\"base\"}\n") == 0);
	CHECK_EQ(len, strlen(text));
	free(text);
	CHECK(ab_repo_read_file(&text, &len, r, fx.c2, "guards/default.json", 1 << 20) == 0);
	CHECK(strcmp(text, "{\"v\":\"head\"}\n") == 0);
	free(text);
	text = NULL;
	CHECK_EQ(ab_repo_read_file(&text, &len, r, fx.c2, "README", 1 << 20), AB_ENOTFOUND);
	CHECK_EQ(ab_repo_read_file(&text, &len, r, fx.c1, "src", 1 << 20), AB_ENOTFOUND);
	CHECK_EQ(ab_repo_read_file(&text, &len, r, fx.c1, "guards/default.json", 5), AB_EINVALID);
	CHECK_STR_HAS(ab_error_last(), "more than the 5 allowed");
	CHECK(!text);
	ab_repo_free(r);
}

static void mirror(void)
{
	struct fixture fx;
	ab_repo *m = NULL, *m2 = NULL;
	struct ab_repo_commit c;
	char url[600], *dir = NULL;
	const char *state = tu_path("mstate");

	make_fixture(&fx);
	snprintf(url, sizeof(url), "file://%s", fx.dir);
	CHECK(ab_repo_mirror(&m, url, state) == 0);
	CHECK_STR_HAS(ab_repo_path(m), "/mstate/mirrors/");
	check_refs(m, &fx);
	/* a bare mirror checks out like any repository */
	CHECK(ab_repo_checkout(&dir, NULL, m, fx.c2, state) == 0);
	expect_file(dir, "tools/run.sh", "#!/bin/sh\necho run\n");
	free(dir);

	/* the origin moves on: a new commit on main, a new pull ref */
	sh(fx.dir, "echo more >> README && git commit -q -am 'main moves' && "
		"git update-ref refs/pull/9/head feature && git rev-parse main > ../c4");
	char c4[41];
	read_line_file(c4, sizeof(c4), tu_path("c4"));
	expect_ref(m, "main", fx.c1, NULL);                 /* not fetched yet */
	expect_ref(m, "pull/9/head", fx.c3, "refs/pull/9/head");  /* fetched on demand */
	CHECK(ab_repo_fetch(m) == 0);
	expect_ref(m, "main", c4, NULL);
	CHECK_EQ(ab_repo_resolve(&c, m, "pull/10/head"), AB_ENOTFOUND);

	/* opening the existing mirror again fetches into the same directory */
	CHECK(ab_repo_mirror(&m2, url, state) == 0);
	CHECK(strcmp(ab_repo_path(m), ab_repo_path(m2)) == 0);
	expect_ref(m2, "main", c4, NULL);
	ab_repo_free(m2);
	ab_repo_free(m);

	/* a plain local path is accepted as a URL too */
	CHECK(ab_repo_mirror(&m, fx.dir, state) == 0);
	expect_ref(m, "v1", fx.c1, NULL);
	ab_repo_free(m);
	m = NULL;
	/* and an unreachable one fails cleanly, leaving no half mirror */
	CHECK(ab_repo_mirror(&m, "file:///nonexistent/abgate/repo", state) < 0);
	CHECK(!m);
	DIR *d = opendir(tu_path("mstate/mirrors"));
	struct dirent *e;
	CHECK(d);
	while ((e = readdir(d)))
		CHECK(!strstr(e->d_name, "nonexistent") || strstr(e->d_name, ".lock"));
	closedir(d);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{"resolve", resolve}, {"changed_files", changed_files}, {"checkout", checkout},
		{"read_file", read_file}, {"mirror", mirror},
	};
	return TU_RUN(argc, argv, cases);
}
