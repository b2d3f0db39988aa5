/*
 * test_sut_relay.c - HTTP SUTs in the sandbox (sut_relay.c + sut_http.c + abgate-relay): the mock
 * server (tests/http_mock.js) under bubblewrap with its own network namespace, reached through the
 * relay's unix socket; and the start-up and run-time faults of that path, classified as the direct
 * path's are: a socket dir that cannot be made, a missing relay, a server never ready, a server
 * that exits, the relay killed under a running server.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <libgen.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"
#include "sut.h"
#include "sut_http.h"

static struct ab_sandbox_config sbc;
static struct ab_sut_http_config hc;
static struct ab_sut_config cfg;
static struct ab_sut_fault fault;
static char mock_dir[1024];

/* Starts the mock in the sandbox with extra args a1 a2 (may be NULL); NULL on a start fault. */
static ab_sut *start(const char *relay, const char *socket_root, const char *a1, const char *a2)
{
	static const char *argv[12];
	int n = 0;
	argv[n++] = "node";
	argv[n++] = MOCK_HTTP_PATH;
	argv[n++] = "--port";
	argv[n++] = "{port}";
	if (a1) argv[n++] = a1;
	if (a2) argv[n++] = a2;
	argv[n] = NULL;
	hc = (struct ab_sut_http_config){ .api = AB_SUT_HTTP_LLAMA, .url = "http://127.0.0.1:{port}",
		.ready_path = "/health", .vocab_size = 0,
		.sandbox = { .config = &sbc, .relay = relay, .socket_root = socket_root, .ro = { mock_dir } } };
	cfg = (struct ab_sut_config){ .http = &hc, .argv = argv, .cwd = mock_dir, .ready_timeout_ms = 5000,
		.request_timeout_ms = 3000, .quit_grace_ms = 1000, .stderr_log = tu_path("sut.log") };
	ab_sut *sut = NULL;
	if (ab_sut_start(&sut, &fault, &cfg) < 0)
		return NULL;
	return sut;
}

static const int32_t prompt[8] = { 1, 2, 3, 4, 5, 6, 7, 9 };

static void expect(enum ab_sut_fault_kind kind, const char *want)
{
	if (fault.kind != kind || !strstr(fault.reason, want)) {
		fprintf(stderr, "fault: kind %s, reason \"%s\"; wanted %s, \"%s\"\n", ab_sut_fault_kind_name(fault.kind),
			fault.reason, ab_sut_fault_kind_name(kind), want);
		exit(1);
	}
}

/* The per-process socket dirs are gone once the SUT is. */
static void expect_no_socket_dirs(const char *root)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s' 2>/dev/null)\"", root);
	CHECK_EQ(system(cmd), 0);
}

/* llama through the relay: ids, timing, two requests on one connection, quit; the ready record
 * says which transport was used. */
static void test_ok(void)
{
	const char *root = tu_path("runs-ok");
	ab_sut *sut = start(RELAY_PATH, root, "--vocab", "500");
	CHECK(sut != NULL);
	CHECK_EQ(ab_sut_vocab_size(sut), 500);
	CHECK_STR(json_string_value(json_object_get(ab_sut_ready(sut), "transport")), "sandbox relay (unix socket)");
	struct ab_sut_gen gen = { 0 };
	for (int r = 0; r < 2; r++) {
		CHECK_EQ(ab_sut_generate(&gen, &fault, sut, prompt, 8, 6, 0), 0);
		CHECK_EQ(gen.n_tokens, 6);
		int prev = 9;
		for (int i = 0; i < 6; i++) {
			prev = (prev * 31 + 7) % 500;
			CHECK_EQ(gen.tokens[i], prev);
		}
		CHECK(gen.t_first_ns >= gen.t_write_ns && gen.t_done_ns >= gen.t_first_ns && gen.decode_tps > 0);
		ab_sut_gen_clear(&gen);
	}
	struct ab_proc_status st;
	CHECK_EQ(ab_sut_quit(&st, sut), 0);
	ab_sut_free(sut);
	expect_no_socket_dirs(root);
}

/* The socket dir cannot be made (its root is under a file): a start-up CRASH saying so. */
static void test_socket_dir(void)
{
	const char *file = tu_path("not-a-dir");
	tu_write_file(file, "x\n");
	char root[1100];
	snprintf(root, sizeof(root), "%s/runs", file);
	CHECK(start(RELAY_PATH, root, NULL, NULL) == NULL);
	expect(AB_SUT_CRASH, "could not start: relay: socket dir");
}

/* No relay executable: a start-up CRASH naming it. */
static void test_relay_missing(void)
{
	CHECK(start("/nonexistent/abgate-relay", tu_path("runs-missing"), NULL, NULL) == NULL);
	expect(AB_SUT_CRASH, "/nonexistent/abgate-relay");
}

/* The ready poll goes through the relay: a server that never answers 200 is a TIMEOUT. */
static void test_never_ready(void)
{
	const char *root = tu_path("runs-never");
	CHECK(start(RELAY_PATH, root, "--fault", "never-ready") == NULL);
	expect(AB_SUT_TIMEOUT, "/health did not answer 200");
	expect_no_socket_dirs(root);
}

/* A command that does not exist in the sandbox: the relay cannot start it, a start-up CRASH. */
static void test_server_missing(void)
{
	static const char *argv[] = { "/nonexistent/server", "{port}", NULL };
	hc = (struct ab_sut_http_config){ .api = AB_SUT_HTTP_LLAMA, .url = "http://127.0.0.1:{port}",
		.sandbox = { .config = &sbc, .relay = RELAY_PATH, .socket_root = tu_path("runs-nosrv"), .ro = { mock_dir } } };
	cfg = (struct ab_sut_config){ .http = &hc, .argv = argv, .ready_timeout_ms = 5000,
		.stderr_log = tu_path("nosrv.log") };
	ab_sut *sut = NULL;
	CHECK(ab_sut_start(&sut, &fault, &cfg) < 0);
	expect(AB_SUT_CRASH, "during start-up: exit code 125");
	CHECK_STR_HAS(fault.stderr_tail, "cannot execute /nonexistent/server");
}

/* The server exits mid-stream (exit 3): a CRASH with the server's own status through the relay. */
static void test_server_crash(void)
{
	ab_sut *sut = start(RELAY_PATH, tu_path("runs-crash"), "--fault", "crash");
	CHECK(sut != NULL);
	struct ab_sut_gen gen = { 0 };
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 6, 0) < 0);
	expect(AB_SUT_CRASH, "exit code 3");
	ab_sut_free(sut);
}

/* The relay is killed under a serving server: the server dies with it, the next request is a CRASH. */
static void test_relay_killed(void)
{
	ab_sut *sut = start(RELAY_PATH, tu_path("runs-kill"), NULL, NULL);
	CHECK(sut != NULL);
	json_int_t port = json_integer_value(json_object_get(ab_sut_ready(sut), "port"));
	char cmd[1200];
	long pid = 0;
	snprintf(cmd, sizeof(cmd), "pgrep -f '^%s --port %lld '", RELAY_PATH, (long long)port);
	FILE *p = popen(cmd, "r");
	CHECK(p && fscanf(p, "%ld", &pid) == 1 && pid > 1);
	pclose(p);
	CHECK_EQ(kill((pid_t)pid, SIGKILL), 0);
	struct ab_sut_gen gen = { 0 };
	CHECK(ab_sut_generate(&gen, &fault, sut, prompt, 8, 6, 0) < 0);
	expect(AB_SUT_CRASH, "exit code 137");   /* bwrap reports its child's SIGKILL as 128 + 9 */
	ab_sut_free(sut);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "ok", test_ok }, { "socket_dir", test_socket_dir }, { "relay_missing", test_relay_missing },
		{ "never_ready", test_never_ready }, { "server_missing", test_server_missing },
		{ "server_crash", test_server_crash }, { "relay_killed", test_relay_killed },
	};
	ab_sandbox_config_defaults(&sbc);
	sbc.gpu = 0;
	if (ab_sandbox_probe(&sbc, NULL, 0) < 0) {
		fprintf(stderr, "SKIP: %s\n", ab_error_last());
		return 77;
	}
	snprintf(mock_dir, sizeof(mock_dir), "%s", MOCK_HTTP_PATH);
	dirname(mock_dir);
	return TU_RUN(argc, argv, cases);
}
