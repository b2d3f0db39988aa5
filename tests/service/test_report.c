/*
 * test_report.c - what is posted (comment marker and table, GitHub's size caps, valid UTF-8 whatever
 * the note holds, labels limited to the managed sets, conclusions) and how webhook payloads become
 * queue intents (real payloads from @octokit/webhooks-examples when tests/ghsim is installed,
 * hand-made hostile ones always).
 */
#include "testutil.h"

#include <jansson.h>

#include "events.h"
#include "report.h"
#include "verdict.h"

#define SHA "0123456789abcdef0123456789abcdef01234567"

static json_t *result_with(int metrics, const char *label, json_t *labels)
{
	json_t *m = json_array();
	for (int i = 0; i < metrics; i++)
		json_array_append_new(m, json_pack("{s:s, s:s, s:i, s:{s:f, s:i}, s:{s:f, s:i}, s:f, s:[ff], s:s}", "name",
						   "decode_tps", "model", "tiny", "ctx", 128 << (i % 8), "base", "median",
						   100.0, "n", 6, "head", "median", 112.0, "n", 6, "ratio", 1.12, "ci", 1.10,
						   1.14, "outcome", "improved"));
	return json_pack("{s:s, s:{s:s}, s:{s:s, s:s, s:o}, s:o}", "schema", "abgate.result/1", "base", "sha",
			 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "verdict", "label", label, "reason",
			 "decode +12% at ctx 128", "labels", labels, "metrics", m);
}

static void comment_marker(void)
{
	json_t *res = result_with(2, "eval:L", json_pack("[s]", "eval:L"));
	struct ab_report_target t = { "o/r", 7, SHA, "main", "abgate:o/r#7@x/0" };
	struct ab_report rep = { "pass", res, NULL, 1, NULL };
	char *body = NULL, *summary = NULL, title[256];

	CHECK(ab_report_comment_body(&body, &t, &rep) == 0);
	CHECK(!strncmp(body, "<!-- abgate:v1 head=" SHA " -->\n", strlen("<!-- abgate:v1 head=" SHA " -->\n")));
	CHECK_STR_HAS(body, "`eval:L`");
	CHECK_STR_HAS(body, "| tiny | decode tok/s | 128 | 100.0 | 112.0 | +12.0% (+10.0% … +14.0%) |");
	CHECK(ab_report_summary(&summary, &t, &rep) == 0);
	CHECK(!strstr(summary, "<!--"));
	CHECK_STR_HAS(summary, "decode tok/s");
	ab_report_title(title, sizeof(title), &rep);
	CHECK_STR(title, "eval:L: decode +12% at ctx 128");
	free(body);
	free(summary);
	json_decref(res);

	/* No result (the worker died every time): still a clear comment, an infra label, no blame. */
	struct ab_report ex = { "exhausted", NULL, "The evaluation was started 3 times.", 1, NULL };
	CHECK(ab_report_comment_body(&body, &t, &ex) == 0);
	CHECK_STR_HAS(body, "eval:infra-error");
	CHECK_STR_HAS(body, "/eval rerun");
	free(body);
}

static void caps(void)
{
	json_t *res = result_with(3000, "eval:M", json_pack("[s]", "eval:M"));
	struct ab_report_target t = { "o/r", 7, SHA, "main", "x" };
	struct ab_report rep = { "pass", res, NULL, 1, NULL };
	char *body = NULL, *summary = NULL;

	CHECK(ab_report_comment_body(&body, &t, &rep) == 0);
	CHECK(strlen(body) <= AB_COMMENT_MAX);
	CHECK(strlen(body) > AB_COMMENT_MAX / 2);
	CHECK_STR_HAS(body, "cut");
	CHECK_STR_HAS(body, "<sub>");  /* the footer survives the cut */
	CHECK(ab_report_summary(&summary, &t, &rep) == 0);
	CHECK(strlen(summary) <= AB_SUMMARY_MAX);
	CHECK_STR_HAS(summary, "cut");
	free(body);
	free(summary);
	json_decref(res);
}

static void labels(void)
{
	json_t *res = result_with(1, "eval:REJECT",
				  json_pack("[ssssss]", "eval:REJECT", "regression-512", "eval-tiny:REJECT", "bug", "ready",
					    "harness-touched"));
	struct ab_report rep = { "reject", res, NULL, 1, NULL };
	json_t *l = ab_report_labels(&rep);
	CHECK_EQ(json_array_size(l), 4);  /* a result can never make us add (or remove) a human's label */
	CHECK_STR(json_string_value(json_array_get(l, 0)), "eval:REJECT");
	CHECK_STR(json_string_value(json_array_get(l, 3)), "harness-touched");  /* the verdict's, posted */
	json_decref(l);
	json_decref(res);

	struct ab_report infra = { "infra", NULL, NULL, 1, NULL };
	l = ab_report_labels(&infra);
	CHECK_EQ(json_array_size(l), 1);
	CHECK_STR(json_string_value(json_array_get(l, 0)), "eval:infra-error");
	json_decref(l);
	struct ab_report cancel = { "superseded", NULL, NULL, 1, NULL };
	l = ab_report_labels(&cancel);
	CHECK_EQ(json_array_size(l), 0);
	json_decref(l);

	/* The poster removes stale labels of exactly the sets guards/verdict.h manages. */
	CHECK(ab_verdict_label_is_managed("eval:XL"));
	CHECK(ab_verdict_label_is_managed("eval-qwen3:REJECT"));
	CHECK(ab_verdict_label_is_managed("regression-4096-pp"));
	CHECK(ab_verdict_label_is_managed("accuracy-regression"));
	CHECK(ab_verdict_label_is_managed("harness-touched"));
	CHECK(!ab_verdict_label_is_managed("evaluation"));
	CHECK(!ab_verdict_label_is_managed("eval-needed"));
	CHECK(!ab_verdict_label_is_managed("bug"));
	CHECK(!ab_verdict_label_is_managed("perf: regression"));
}

/* Whatever the note or reason holds, what is posted is valid UTF-8 (jansson refuses anything else,
 * and a post that cannot be encoded would be retried forever), cut without splitting a character. */
static void utf8(void)
{
	struct ab_report_target t = { "o/r", 7, SHA, "main", "x" };
	char reason[400], description[141], title[256];
	size_t n = 0;

	/* "eval:M: " + 131 bytes, then "…" (3 bytes) over bytes 139-141: the status description's
	 * 140-byte cut falls inside it. */
	memset(reason, 'a', 131);
	n = 131;
	for (int i = 0; i < 20; i++)
		n += (size_t)sprintf(reason + n, "\xe2\x80\xa6");
	json_t *res = result_with(1, "eval:M", json_pack("[s]", "eval:M"));
	json_object_set_new(json_object_get(res, "verdict"), "reason", json_string(reason));
	struct ab_report rep = { "pass", res, NULL, 1, NULL };
	ab_report_title(description, sizeof(description), &rep);
	CHECK(strlen(description) <= 140);
	json_t *s = json_string(description);
	CHECK(s != NULL);
	json_decref(s);
	ab_report_title(title, sizeof(title), &rep);
	CHECK(!strncmp(title, "eval:M: aaa", 11));
	CHECK((s = json_string(title)) != NULL);
	json_decref(s);
	json_decref(res);

	/* A note (the evaluation's error) with invalid bytes, markdown and a mention: escaped, valid. */
	struct ab_report bad = { "infra", NULL, "build failed in /tmp/\xff\xfe\x80 for @alice <b>x</b>", 1, NULL };
	char *body = NULL, *summary = NULL;
	CHECK(ab_report_comment_body(&body, &t, &bad) == 0);
	CHECK(ab_report_summary(&summary, &t, &bad) == 0);
	json_t *post = json_pack("{s:s, s:s}", "body", body, "summary", summary);
	CHECK(post != NULL);
	json_decref(post);
	CHECK(!strstr(body, "@alice"));   /* no mention */
	CHECK(!strstr(body, "<b>"));      /* no HTML */
	CHECK_STR_HAS(body, "build failed in");
	ab_report_title(description, sizeof(description), &bad);
	CHECK((s = json_string(description)) != NULL);
	json_decref(s);
	CHECK_STR_HAS(description, "eval:infra-error: build failed");
	free(body);
	free(summary);
}

static void conclusions(void)
{
	CHECK_STR(ab_report_conclusion("pass"), "success");
	CHECK_STR(ab_report_conclusion("reject"), "failure");
	CHECK_STR(ab_report_conclusion("timeout"), "timed_out");
	CHECK_STR(ab_report_conclusion("infra"), "cancelled");
	CHECK_STR(ab_report_conclusion("exhausted"), "cancelled");
	CHECK_STR(ab_report_conclusion("superseded"), "cancelled");
	CHECK_STR(ab_report_status_state("pass"), "success");
	CHECK_STR(ab_report_status_state("reject"), "failure");
	CHECK_STR(ab_report_status_state("timeout"), "error");
	CHECK_STR(ab_report_status_state("canceled"), "error");
}

static struct ab_config *config(void)
{
	struct ab_config *cfg = NULL;
	const char *path = tu_path("cfg.json");
	tu_write_file(path, "{\"webhook_secret\":\"s\",\"repos\":[{\"name\":\"Codertocat/Hello-World\",\"base\":\"develop\"}]}");
	CHECK(ab_config_load(&cfg, path) == 0);
	return cfg;
}

/* Real payloads: every pull_request and issue_comment example parses without error. */
static void events_real(struct ab_config *cfg)
{
	json_error_t jerr;
	json_t *all = json_load_file(GHSIM_DIR "/node_modules/@octokit/webhooks-examples/api.github.com/index.json", 0, &jerr);
	int enqueue = 0, close = 0, ignored = 0;
	size_t i, k;
	json_t *ev;

	if (!all) {
		fprintf(stderr, "   (webhooks-examples not installed: real payloads skipped)\n");
		return;
	}
	json_array_foreach(all, i, ev) {
		const char *name = json_string_value(json_object_get(ev, "name"));
		json_t *ex;
		if (strcmp(name, "pull_request") && strcmp(name, "issue_comment") && strcmp(name, "ping"))
			continue;
		json_array_foreach(json_object_get(ev, "examples"), k, ex) {
			char *text = json_dumps(ex, 0);
			struct ab_event e;
			CHECK(ab_events_parse(&e, cfg, name, text, strlen(text)) == 0);
			enqueue += e.intent.kind == AB_INTENT_ENQUEUE;
			close += e.intent.kind == AB_INTENT_CLOSE;
			ignored += e.intent.kind == AB_INTENT_NONE;
			if (e.intent.kind == AB_INTENT_ENQUEUE) {
				CHECK_EQ(strlen(e.intent.head_sha), 40);
				CHECK_STR(e.intent.base_ref, "develop");  /* the configured base, not the PR's */
			}
			free(text);
		}
	}
	fprintf(stderr, "   real payloads: %d enqueue, %d close, %d ignored\n", enqueue, close, ignored);
	CHECK(enqueue >= 6);   /* opened x4 (one draft?), reopened x2, synchronize, ready_for_review */
	CHECK_EQ(close, 2);
	json_decref(all);
}

static void events(void)
{
	struct ab_config *cfg = config();
	struct ab_event e;
	const char *pr = "{\"action\":\"opened\",\"number\":3,\"repository\":{\"full_name\":\"codertocat/hello-world\"},"
			 "\"pull_request\":{\"number\":3,\"draft\":false,\"head\":{\"sha\":\"" SHA "\"}}}";
	CHECK(ab_events_parse(&e, cfg, "pull_request", pr, strlen(pr)) == 0);
	CHECK_EQ(e.intent.kind, AB_INTENT_ENQUEUE);
	CHECK_STR(e.intent.repo, "Codertocat/Hello-World");  /* the configured spelling */
	CHECK_EQ(e.intent.pr, 3);

	const char *draft = "{\"action\":\"opened\",\"number\":3,\"repository\":{\"full_name\":\"Codertocat/Hello-World\"},"
			    "\"pull_request\":{\"draft\":true,\"head\":{\"sha\":\"" SHA "\"}}}";
	CHECK(ab_events_parse(&e, cfg, "pull_request", draft, strlen(draft)) == 0);
	CHECK_EQ(e.intent.kind, AB_INTENT_NONE);
	CHECK_STR(e.ignored, "draft pull request");

	const char *other = "{\"action\":\"opened\",\"number\":3,\"repository\":{\"full_name\":\"evil/repo\"},"
			    "\"pull_request\":{\"head\":{\"sha\":\"" SHA "\"}}}";
	CHECK(ab_events_parse(&e, cfg, "pull_request", other, strlen(other)) == 0);
	CHECK_STR(e.ignored, "repository not configured");

	static const char *hostile[] = {
		"", "[]", "nul\0l", "{\"action\":5}",
		"{\"action\":\"opened\",\"number\":3,\"repository\":{\"full_name\":\"Codertocat/Hello-World\"},"
		"\"pull_request\":{\"head\":{\"sha\":\"$(rm -rf /)\"}}}",
		"{\"action\":\"opened\",\"number\":-1,\"repository\":{\"full_name\":\"Codertocat/Hello-World\"},"
		"\"pull_request\":{\"head\":{\"sha\":\"" SHA "\"}}}",
		"{\"action\":\"opened\",\"repository\":{\"full_name\":[1]},\"pull_request\":{}}",
	};
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
		CHECK(ab_events_parse(&e, cfg, "pull_request", hostile[i], strlen(hostile[i])) == AB_EINVALID);

	const char *cmt = "{\"action\":\"created\",\"repository\":{\"full_name\":\"Codertocat/Hello-World\"},"
			  "\"issue\":{\"number\":3,\"pull_request\":{\"url\":\"u\"}},"
			  "\"comment\":{\"id\":99,\"body\":\"/eval rerun\\r\\nplease\",\"user\":{\"login\":\"alice\",\"type\":\"User\"}}}";
	CHECK(ab_events_parse(&e, cfg, "issue_comment", cmt, strlen(cmt)) == 0);
	CHECK_EQ(e.intent.kind, AB_INTENT_COMMAND);
	CHECK_EQ(e.intent.rerun, 1);
	CHECK_STR(e.intent.user, "alice");
	CHECK_EQ(e.intent.comment_id, 99);
	const char *issue = "{\"action\":\"created\",\"repository\":{\"full_name\":\"Codertocat/Hello-World\"},"
			    "\"issue\":{\"number\":3},\"comment\":{\"body\":\"/eval\",\"user\":{\"login\":\"a\"}}}";
	CHECK(ab_events_parse(&e, cfg, "issue_comment", issue, strlen(issue)) == 0);
	CHECK_EQ(e.intent.kind, AB_INTENT_NONE);
	const char *ping = "{\"zen\":\"Design for failure.\",\"hook_id\":1}";
	CHECK(ab_events_parse(&e, cfg, "ping", ping, strlen(ping)) == 0);
	CHECK(e.is_ping);
	CHECK(ab_events_parse(&e, cfg, "push", ping, strlen(ping)) == 0);
	CHECK_STR(e.ignored, "event not handled");

	events_real(cfg);
	ab_config_free(cfg);
}

static void commands(void)
{
	CHECK_EQ(ab_events_command("/eval"), 1);
	CHECK_EQ(ab_events_command("  /eval  \n"), 1);
	CHECK_EQ(ab_events_command("/eval rerun"), 2);
	CHECK_EQ(ab_events_command("/eval   rerun\nthanks"), 2);
	CHECK_EQ(ab_events_command("/evaluate"), 0);
	CHECK_EQ(ab_events_command("/eval now"), 0);
	CHECK_EQ(ab_events_command("please /eval"), 0);
	CHECK_EQ(ab_events_command(""), 0);
	CHECK_EQ(ab_events_command(NULL), 0);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "comment_marker", comment_marker }, { "caps", caps },     { "labels", labels },
		{ "conclusions", conclusions },       { "events", events }, { "commands", commands },
		{ "utf8", utf8 },
	};
	return TU_RUN(argc, argv, cases);
}
