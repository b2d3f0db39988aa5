/*
 * suite_sut.c - the HTTP side of a suite's SUT objects (see suite_sut.h). An openai SUT names a
 * loopback URL only (127.0.0.1, localhost, [::1]): abgate talks to a server it started itself on
 * this host, never to something elsewhere. ready_path is a plain absolute path.
 */
#include "suite_sut.h"

#include "suite_values.h"

#include "error.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 256

static const char *const http_keys[] = { "url", "ready_path", "api", "model_name", "vocab_size", NULL };

const char *ab_suite_sut_kind_name(enum ab_suite_sut_kind kind)
{
	return kind == AB_SUITE_SUT_OPENAI ? "openai" : "stdio";
}

const char *ab_suite_sut_api_name(enum ab_suite_sut_api api)
{
	return api == AB_SUITE_API_LLAMA ? "llama" : "completions";
}

static int mentions(const struct ab_suite_argv *a, const char *needle)
{
	for (int i = 0; i < a->argc; i++)
		if (strstr(a->argv[i], needle))
			return 1;
	return 0;
}

/* "http://HOST:PORT[/prefix]" with a loopback HOST; PORT digits or {port}. */
static int url_ok(const char *url)
{
	static const char *const hosts[] = { "http://127.0.0.1:", "http://localhost:", "http://[::1]:" };
	const char *rest = NULL;
	for (size_t i = 0; i < sizeof(hosts) / sizeof(*hosts) && !rest; i++)
		if (strncmp(url, hosts[i], strlen(hosts[i])) == 0)
			rest = url + strlen(hosts[i]);
	if (!rest)
		return 0;
	if (strncmp(rest, "{port}", 6) == 0)
		rest += 6;
	else {
		size_t n = strspn(rest, "0123456789");
		long port = n > 0 && n <= 5 ? strtol(rest, NULL, 10) : 0;
		if (port < 1 || port > 65535)
			return 0;
		rest += n;
	}
	if (*rest && *rest != '/')
		return 0;
	for (; *rest; rest++)
		if (*rest <= ' ' || *rest >= 127 || *rest == '?' || *rest == '#')
			return 0;
	return 1;
}

static int path_ok(const char *path)
{
	size_t len = strlen(path);
	if (len == 0 || len > PATH_MAX_LEN || path[0] != '/')
		return 0;
	for (size_t i = 0; i < len; i++)
		if (path[i] <= ' ' || path[i] >= 127 || path[i] == '#')
			return 0;
	return 1;
}

static int get_enum(int *out, struct ab_jread *p, const json_t *v, const char *key, const char *a,
	const char *b, int def)
{
	json_t *x = ab_jread_optional(v, key);
	if (!x) {
		*out = def;
		return 0;
	}
	size_t old = ab_jread_push_key(p, key);
	if (!json_is_string(x))
		return ab_jread_fail_type(p, "a string", x);
	if (strcmp(json_string_value(x), a) == 0)
		*out = 0;
	else if (strcmp(json_string_value(x), b) == 0)
		*out = 1;
	else
		return ab_jread_fail(p, "expected \"%s\" or \"%s\", got \"%.64s\"", a, b, json_string_value(x));
	ab_jread_pop(p, old);
	return 0;
}

int ab_suite_parse_sut_http(struct ab_suite_sut *sut, struct ab_jread *p, const json_t *v)
{
	int kind = 0, api = 0;
	if (get_enum(&kind, p, v, "kind", "stdio", "openai", 0) < 0)
		return AB_EINVALID;
	sut->kind = kind ? AB_SUITE_SUT_OPENAI : AB_SUITE_SUT_STDIO;
	if (sut->kind == AB_SUITE_SUT_STDIO) {
		for (int i = 0; http_keys[i]; i++)
			if (json_object_get(v, http_keys[i])) {
				size_t old = ab_jread_push_key(p, http_keys[i]);
				int error = ab_jread_fail(p, "only for \"kind\": \"openai\"");
				ab_jread_pop(p, old);
				return error;
			}
		if (mentions(&sut->command, "{port}"))
			return ab_jread_fail(p, "command: {port} is only substituted for \"kind\": \"openai\"");
		for (int i = 0; i < sut->env_count; i++)
			if (strstr(sut->env[i].value, "{port}"))
				return ab_jread_fail(p, "env.%s: {port} is only substituted for \"kind\": \"openai\"",
					sut->env[i].name);
		return 0;
	}
	if (ab_suite_get_string(&sut->url, p, v, "url", 1) < 0 ||
	    ab_suite_get_string(&sut->ready_path, p, v, "ready_path", 0) < 0 ||
	    get_enum(&api, p, v, "api", "completions", "llama", 0) < 0 ||
	    ab_suite_get_string(&sut->model_name, p, v, "model_name", 0) < 0 ||
	    ab_jread_int(&sut->vocab_size, p, v, "vocab_size", 0, 1, INT_MAX) < 0)
		return AB_EINVALID;
	sut->api = api ? AB_SUITE_API_LLAMA : AB_SUITE_API_COMPLETIONS;
	size_t old = ab_jread_push_key(p, "url");
	if (!url_ok(sut->url))
		return ab_jread_fail(p, "expected http://127.0.0.1:PORT, http://localhost:PORT or http://[::1]:PORT "
			"(PORT a number or {port}, then an optional /path), got \"%.80s\"", sut->url);
	ab_jread_pop(p, old);
	if (!sut->ready_path && !(sut->ready_path = strdup("/health")))
		return ab_jread_oom(p);
	old = ab_jread_push_key(p, "ready_path");
	if (!path_ok(sut->ready_path))
		return ab_jread_fail(p, "expected an absolute path like \"/health\" (printable, no spaces)");
	ab_jread_pop(p, old);
	if (sut->model_name && strlen(sut->model_name) > PATH_MAX_LEN) {
		old = ab_jread_push_key(p, "model_name");
		return ab_jread_fail(p, "longer than %d bytes", PATH_MAX_LEN);
	}
	return 0;
}

int ab_suite_check_port_placeholders(const struct ab_suite *suite, struct ab_jread *p)
{
	static const char port[] = "{port}";
	if (mentions(&suite->configure, port) || mentions(&suite->build, port))
		return ab_jread_fail(p, "build: {port} is only substituted in openai SUT objects");
	for (int i = 0; i < suite->model_count; i++) {
		const struct ab_suite_model *m = &suite->models[i];
		if (mentions(&m->generate, port) || strstr(m->path, port) ||
		    (m->draft.path && strstr(m->draft.path, port)) || mentions(&m->draft.generate, port))
			return ab_jread_fail(p, "models[%d] (%s): {port} is only substituted in openai SUT objects", i,
				m->name);
	}
	return 0;
}

int ab_suite_sut_http_json(json_t *obj, const struct ab_suite_sut *sut)
{
	if (sut->kind != AB_SUITE_SUT_OPENAI)
		return 0;
	json_t *vocab = sut->vocab_size > 0 ? json_integer(sut->vocab_size) : json_null();
	json_t *name = sut->model_name ? json_string(sut->model_name) : json_null();
	if (json_object_set_new(obj, "kind", json_string("openai")) < 0 ||
	    json_object_set_new(obj, "url", json_string(sut->url)) < 0 ||
	    json_object_set_new(obj, "ready_path", json_string(sut->ready_path)) < 0 ||
	    json_object_set_new(obj, "api", json_string(ab_suite_sut_api_name(sut->api))) < 0 ||
	    json_object_set_new(obj, "model_name", name) < 0 || json_object_set_new(obj, "vocab_size", vocab) < 0)
		return -1;
	return 0;
}
