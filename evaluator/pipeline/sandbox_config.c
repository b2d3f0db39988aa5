/*
 * sandbox_config.c - the `sandbox` object of the service config (sandbox.h's struct
 * ab_sandbox_config): parsed against one key table that also prints the effective values and the
 * rows of the config's markdown table. config.c hands the object over; nothing here reads secrets,
 * and no key can pass a denied environment variable in (sandbox.c drops those names).
 */
#define _GNU_SOURCE
#include "sandbox_config.h"

#include "error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum skind { K_BOOL, K_GPU, K_STR, K_LIST, K_INT, K_I64 };

struct skey {
	const char *key;
	enum skind kind;
	size_t offset;          /* into struct ab_sandbox_config */
	int64_t max;
	const char *dflt;       /* as shown in the table */
	const char *meaning;
};

#define F(f) offsetof(struct ab_sandbox_config, f)
#define LIM(sec, f) (offsetof(struct ab_sandbox_config, sec) + offsetof(struct ab_sandbox_limits, f))

static const struct skey keys[] = {
	{ "enabled", K_BOOL, F(enabled), 0, "true",
	  "run every build step, model generator and SUT under bubblewrap; false runs PR code with abgate's rights, and every report says so (CLI: --no-sandbox)" },
	{ "bwrap", K_STR, F(bwrap), 0, "bwrap", "the bubblewrap executable (Debian's `bubblewrap`; a carried .deb on a GPU box)" },
	{ "prlimit", K_STR, F(prlimit), 0, "/usr/bin/prlimit", "sets the limits inside the sandbox (util-linux)" },
	{ "network", K_LIST, F(network), 0, "[]",
	  "steps allowed the network (configure, build, generate): for builds that fetch dependencies; such a step still sees only its own tree and build dir, no secrets, no state dir, and its processes die with it. SUTs never get it" },
	{ "ro_paths", K_LIST, F(ro_paths), 0, "[]", "extra host paths visible read-only (a toolchain under /opt); /usr, /bin, /lib* and a few /etc files always are" },
	{ "env", K_LIST, F(env), 0, "CUDA_VISIBLE_DEVICES,NVIDIA_VISIBLE_DEVICES,CUDA_HOME,CUDACXX,LD_LIBRARY_PATH,SOURCE_DATE_EPOCH",
	  "host variables passed in (besides PATH, and HOME=TMPDIR=/tmp); names like ABGATE_*, GITHUB_*, *TOKEN*, *SECRET*, SSH_*, AWS_* never are" },
	{ "env_add", K_LIST, F(env_add), 0, "[]",
	  "more host variables passed in, on top of `env` (so a deployment adds PKG_CONFIG_PATH without restating the defaults); the same names are denied" },
	{ "gpu", K_GPU, F(gpu), 0, "\"auto\"", "bind /dev/nvidia* and /sys into SUT runs: true, false, or \"auto\" (when /dev/nvidiactl exists)" },
	{ "build.nproc", K_INT, LIM(build, nproc), 1 << 20, "4096", "build steps: processes and threads in the sandbox (RLIMIT_NPROC in its own user namespace; 0: none)" },
	{ "build.mem_mb", K_I64, LIM(build, mem_mb), 1 << 24, "16384", "build steps: address space per process in MiB (RLIMIT_AS; 0: none)" },
	{ "build.fsize_mb", K_I64, LIM(build, fsize_mb), 1 << 24, "8192", "build steps: largest file written, MiB (RLIMIT_FSIZE)" },
	{ "build.cpu_s", K_I64, LIM(build, cpu_s), 1 << 30, "3600", "build steps: CPU seconds per process (RLIMIT_CPU)" },
	{ "build.tmp_mb", K_I64, LIM(build, tmp_mb), 1 << 24, "8192", "build steps: size of the private /tmp (tmpfs, RAM-backed)" },
	{ "build.disk_mb", K_I64, LIM(build, disk_mb), 1 << 30, "65536", "build steps: the build dir's size after each step, MiB; over it the build fails (and is wiped)" },
	{ "build.mem_total_mb", K_I64, LIM(build, mem_total_mb), 1 << 24, "24576", "build steps: memory of all the step's processes together, MiB (a memory cgroup, as root where a memory controller is writable; the step is killed above it; 0: none). Keep it below the host's RAM" },
	{ "run.nproc", K_INT, LIM(run, nproc), 1 << 20, "1024", "SUT processes: processes and threads" },
	{ "run.mem_mb", K_I64, LIM(run, mem_mb), 1 << 24, "65536", "SUT processes: address space per process, MiB (not applied when the GPU is bound: CUDA reserves far more VA than it uses)" },
	{ "run.mem_total_mb", K_I64, LIM(run, mem_total_mb), 1 << 24, "98304", "SUT processes: memory of the SUT and everything it starts, MiB (a memory cgroup, as root; GPU memory is not counted)" },
	{ "run.fsize_mb", K_I64, LIM(run, fsize_mb), 1 << 24, "1024", "SUT processes: largest file written, MiB (they can write only /tmp)" },
	{ "run.cpu_s", K_I64, LIM(run, cpu_s), 1 << 30, "14400", "SUT processes: CPU seconds per process" },
	{ "run.tmp_mb", K_I64, LIM(run, tmp_mb), 1 << 24, "1024", "SUT processes: size of the private /tmp" },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static void *slot(struct ab_sandbox_config *cfg, const struct skey *k) { return (char *)cfg + k->offset; }

/* A list field is char ** followed by its size_t count. */
static int set_list(struct ab_sandbox_config *cfg, const struct skey *k, const char *const *items, size_t n)
{
	char ***list = slot(cfg, k);
	size_t *count = (size_t *)((char *)list + sizeof(char **));
	for (size_t i = 0; i < *count; i++)
		free((*list)[i]);
	free(*list);
	*list = NULL;
	*count = 0;
	if (!(*list = calloc(n + 1, sizeof(char *))))
		return ab_error_set("out of memory");
	for (size_t i = 0; i < n; i++) {
		if (!((*list)[i] = strdup(items[i])))
			return ab_error_set("out of memory");
		*count = i + 1;
	}
	return 0;
}

int ab_sandbox_config_init(struct ab_sandbox_config *cfg)
{
	ab_sandbox_config_defaults(cfg);
	const char *env[] = { "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME", "CUDACXX",
		"LD_LIBRARY_PATH", "SOURCE_DATE_EPOCH" };
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].key, "env"))
			return set_list(cfg, &keys[i], env, sizeof(env) / sizeof(env[0]));
	return 0;
}

static const char *const steps[] = { "configure", "build", "generate", NULL };

static int set_one(struct ab_sandbox_config *cfg, const struct skey *k, json_t *v, const char *path)
{
	switch (k->kind) {
	case K_BOOL:
		if (!json_is_boolean(v))
			return ab_error_setc(AB_EINVALID, "config: %s: expected true or false", path);
		*(int *)slot(cfg, k) = json_is_true(v);
		return 0;
	case K_GPU:
		if (json_is_boolean(v))
			*(int *)slot(cfg, k) = json_is_true(v);
		else if (json_is_string(v) && !strcmp(json_string_value(v), "auto"))
			*(int *)slot(cfg, k) = -1;
		else
			return ab_error_setc(AB_EINVALID, "config: %s: expected true, false or \"auto\"", path);
		return 0;
	case K_STR: {
		if (!json_is_string(v) || !json_string_length(v))
			return ab_error_setc(AB_EINVALID, "config: %s: expected a non-empty string", path);
		char **s = slot(cfg, k);
		free(*s);
		return (*s = strdup(json_string_value(v))) ? 0 : ab_error_set("out of memory");
	}
	case K_LIST: {
		const char *items[64];
		size_t i, n = json_array_size(v);
		json_t *item;
		if (!json_is_array(v) || n > 64)
			return ab_error_setc(AB_EINVALID, "config: %s: expected an array of at most 64 strings", path);
		json_array_foreach(v, i, item) {
			const char *s = json_string_value(item);
			if (!s || !s[0])
				return ab_error_setc(AB_EINVALID, "config: %s[%zu]: expected a non-empty string", path, i);
			if (!strcmp(k->key, "network")) {
				int known = 0;
				for (int j = 0; steps[j]; j++)
					known |= !strcmp(s, steps[j]);
				if (!known)
					return ab_error_setc(AB_EINVALID, "config: %s[%zu]: '%s' is not configure, build or generate",
						path, i, s);
			}
			if (!strcmp(k->key, "ro_paths") && s[0] != '/')
				return ab_error_setc(AB_EINVALID, "config: %s[%zu]: '%s' is not an absolute path", path, i, s);
			if (!strcmp(k->key, "env") && ab_sandbox_env_denied(s))
				return ab_error_setc(AB_EINVALID, "config: %s[%zu]: %s may hold a credential and is never passed in",
					path, i, s);
			items[i] = s;
		}
		return set_list(cfg, k, items, n);
	}
	case K_INT:
	case K_I64: {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > k->max)
			return ab_error_setc(AB_EINVALID, "config: %s: expected an integer in [0, %lld]", path, (long long)k->max);
		if (k->kind == K_INT)
			*(int *)slot(cfg, k) = (int)json_integer_value(v);
		else
			*(int64_t *)slot(cfg, k) = json_integer_value(v);
		return 0;
	}
	}
	return 0;
}

static int parse_obj(struct ab_sandbox_config *cfg, json_t *obj, const char *prefix, const char *sub)
{
	const char *key;
	json_t *v;
	char path[256], name[96];

	if (!json_is_object(obj))
		return ab_error_setc(AB_EINVALID, "config: %s: expected an object", prefix);
	json_object_foreach(obj, key, v) {
		if (key[0] == '_')
			continue;
		snprintf(path, sizeof(path), "%s.%s", prefix, key);
		if (!sub[0] && (!strcmp(key, "build") || !strcmp(key, "run"))) {
			snprintf(name, sizeof(name), "%s.", key);
			if (parse_obj(cfg, v, path, name) < 0)
				return -1;
			continue;
		}
		snprintf(name, sizeof(name), "%s%s", sub, key);
		const struct skey *k = NULL;
		for (size_t i = 0; i < NKEYS && !k; i++)
			if (!strcmp(keys[i].key, name))
				k = &keys[i];
		if (!k)
			return ab_error_setc(AB_EINVALID, "config: %s: unknown key", path);
		if (set_one(cfg, k, v, path) < 0)
			return -1;
	}
	return 0;
}

int ab_sandbox_config_parse(struct ab_sandbox_config *cfg, json_t *obj)
{
	return parse_obj(cfg, obj, "sandbox", "");
}

int ab_sandbox_config_describe(struct ab_text *t, const struct ab_sandbox_config *cfg)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct skey *k = &keys[i];
		void *p = slot((struct ab_sandbox_config *)cfg, k);
		ab_text_printf(t, "  sandbox.%s = ", k->key);
		switch (k->kind) {
		case K_BOOL: ab_text_printf(t, "%s\n", *(int *)p ? "true" : "false"); break;
		case K_GPU: ab_text_printf(t, "%s\n", *(int *)p < 0 ? "auto" : *(int *)p ? "true" : "false"); break;
		case K_STR: ab_text_printf(t, "%s\n", *(char **)p ? *(char **)p : k->dflt); break;
		case K_INT: ab_text_printf(t, "%d\n", *(int *)p); break;
		case K_I64: ab_text_printf(t, "%lld\n", (long long)*(int64_t *)p); break;
		case K_LIST: {
			char **l = *(char ***)p;
			size_t n = *(size_t *)((char *)p + sizeof(char **));
			ab_text_printf(t, "[");
			for (size_t j = 0; j < n; j++)
				ab_text_printf(t, "%s\"%s\"", j ? ", " : "", l[j]);
			ab_text_printf(t, "]\n");
			break;
		}
		}
	}
	return 0;
}

int ab_sandbox_config_table(struct ab_text *t)
{
	static const char *const kind_names[] = { "boolean", "boolean or \"auto\"", "string", "array of strings",
		"integer", "integer" };
	for (size_t i = 0; i < NKEYS; i++)
		ab_text_printf(t, "| `sandbox.%s` | %s | `%s` | %s |\n", keys[i].key, kind_names[keys[i].kind],
			keys[i].dflt, keys[i].meaning);
	return 0;
}
