/*
 * test_env.c - the environment record: host, kernel, CPU and memory facts are present on this
 * machine; GPU facts are parsed from a fake nvidia-smi (two GPUs, [N/A] fields, a garbage line);
 * a hung nvidia-smi is killed at the deadline, a failing one is reported, a missing one is silent.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "env.h"

static int write_script(const char *path, const char *body)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return 0;
	fprintf(f, "#!/bin/sh\n%s", body);
	fclose(f);
	return chmod(path, 0755) == 0;
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_env_host(void)
{
	struct ab_env_options opts = { .nvidia_smi = "" };
	json_t *env = NULL, *cpu;
	char *text;

	CHECK(ab_env_collect(&env, &opts) == 0 && env);
	if (!env)
		return;
	CHECK(json_is_string(json_object_get(env, "host")) && json_string_length(json_object_get(env, "host")) > 0);
	CHECK(strncmp(json_string_value(json_object_get(env, "kernel")), "Linux ", 6) == 0);
	CHECK(json_is_string(json_object_get(env, "arch")));
	CHECK(json_integer_value(json_object_get(env, "memory_bytes")) > (1 << 24));
	cpu = json_object_get(env, "cpu");
	CHECK(json_integer_value(json_object_get(cpu, "cores")) >= 1);
	CHECK(json_is_string(json_object_get(cpu, "model")));
	CHECK(json_object_get(env, "gpus") == NULL && json_object_get(env, "gpu_query_error") == NULL);
	text = json_dumps(env, JSON_COMPACT);
	printf("environment here: %s\n", text);
	free(text);
	json_decref(env);

	/* the default (nvidia-smi from PATH) works whether or not this machine has one */
	CHECK(ab_env_collect(&env, NULL) == 0 && env && json_object_get(env, "host"));
	json_decref(env);
}

static void test_env_gpus(void)
{
	const char *dir = tu_tmpdir();
	char smi[512];
	struct ab_env_options opts = { .nvidia_smi = smi, .timeout_ms = 5000 };
	json_t *env = NULL, *gpus, *g0, *g1;
	double t0;

	snprintf(smi, sizeof(smi), "%s/nvidia-smi", dir);
	/* two GPUs, one with unsupported fields, and a line of garbage that must be skipped */
	CHECK(write_script(smi,
		"case \"$1\" in --query-gpu=index,name,driver_version,memory.total,clocks.sm,*) ;; *) exit 7 ;; esac\n"
		"echo '0, NVIDIA H200, 570.124.06, 143771, 1980, 2619, 1980, 3201, Enabled, 700.00, 34, 00000000:18:00.0, GPU-abc'\n"
		"echo 'garbage'\n"
		"echo '1, NVIDIA H200, 570.124.06, 143771, [N/A], [Not Supported], 1980, 3201, Disabled, [N/A], 36, 00000000:2A:00.0, GPU-def'\n"));
	CHECK(ab_env_collect(&env, &opts) == 0 && env);
	gpus = json_object_get(env, "gpus");
	CHECK(json_array_size(gpus) == 2);
	g0 = json_array_get(gpus, 0);
	g1 = json_array_get(gpus, 1);
	CHECK(json_integer_value(json_object_get(g0, "index")) == 0);
	CHECK(g0 && strcmp(json_string_value(json_object_get(g0, "name")), "NVIDIA H200") == 0);
	CHECK(g0 && strcmp(json_string_value(json_object_get(g0, "driver")), "570.124.06") == 0);
	CHECK(json_integer_value(json_object_get(g0, "memory_total_mib")) == 143771);
	CHECK(json_integer_value(json_object_get(g0, "clocks_sm_mhz")) == 1980);
	CHECK(json_integer_value(json_object_get(g0, "clocks_mem_mhz")) == 2619);
	CHECK(json_real_value(json_object_get(g0, "power_limit_w")) == 700.0);
	CHECK(g0 && strcmp(json_string_value(json_object_get(g0, "uuid")), "GPU-abc") == 0);
	CHECK(json_integer_value(json_object_get(g1, "index")) == 1);
	CHECK(g1 && !json_object_get(g1, "clocks_sm_mhz") && !json_object_get(g1, "clocks_mem_mhz"));
	CHECK(g1 && !json_object_get(g1, "power_limit_w") && json_integer_value(json_object_get(g1, "temperature_c")) == 36);
	json_decref(env);

	/* a failing nvidia-smi (driver gone) is reported, not fatal */
	CHECK(write_script(smi, "echo 'NVIDIA-SMI has failed' ; exit 9\n"));
	CHECK(ab_env_collect(&env, &opts) == 0 && env);
	CHECK(!json_object_get(env, "gpus"));
	CHECK(env && strstr(json_string_value(json_object_get(env, "gpu_query_error")), "exit code 9"));
	json_decref(env);

	/* a hung nvidia-smi is killed at the deadline (its whole process group) */
	CHECK(write_script(smi, "sleep 30\n"));
	opts.timeout_ms = 300;
	t0 = seconds();
	CHECK(ab_env_collect(&env, &opts) == 0 && env);
	CHECK(seconds() - t0 < 10);   /* generous: only a hang fails this */
	CHECK(env && strstr(json_string_value(json_object_get(env, "gpu_query_error")), "timed out after 300 ms"));
	json_decref(env);

	/* endless output is cut at the cap, never buffered without bound */
	CHECK(write_script(smi, "yes '0, x, y, 1, 2, 3, 4, 5, On, 1.0, 3, bus, id'\n"));
	opts.timeout_ms = 5000;
	CHECK(ab_env_collect(&env, &opts) == 0 && env);
	CHECK(env && strstr(json_string_value(json_object_get(env, "gpu_query_error")), "printed more than"));
	json_decref(env);

	/* no nvidia-smi at all: no GPU keys */
	snprintf(smi, sizeof(smi), "%s/does-not-exist/nvidia-smi", dir);
	CHECK(ab_env_collect(&env, &opts) == 0 && env);
	CHECK(env && !json_object_get(env, "gpus") && !json_object_get(env, "gpu_query_error"));
	json_decref(env);
	snprintf(smi, sizeof(smi), "%s/nvidia-smi", dir);
	unlink(smi);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = { { "host", test_env_host }, { "gpus", test_env_gpus } };
	return TU_RUN(argc, argv, cases);
}
