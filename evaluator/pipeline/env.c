/*
 * env.c - reads the machine's facts for the result record (see env.h): uname, gethostname and
 * sysconf for the host, /proc/cpuinfo for the CPU model, and one `nvidia-smi --query-gpu` run
 * as a proc.h child: a bounded read and a deadline after which its process group is killed. Every
 * probe is optional: what cannot be read is left out.
 */
#define _GNU_SOURCE
#include "env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "error.h"
#include "proc.h"

#define SMI_OUTPUT_MAX (64 * 1024)   /* a few lines per GPU; anything longer is cut */
#define CPUINFO_MAX (64 * 1024)      /* the first processor's block is all we read */

/* The GPU fields asked for, in order, with their JSON names and how to convert them. */
enum field_kind { FIELD_STRING, FIELD_INT, FIELD_REAL };
static const struct {
	const char *query;
	const char *json;
	enum field_kind kind;
} gpu_fields[] = {
	{ "index", "index", FIELD_INT },
	{ "name", "name", FIELD_STRING },
	{ "driver_version", "driver", FIELD_STRING },
	{ "memory.total", "memory_total_mib", FIELD_INT },
	{ "clocks.sm", "clocks_sm_mhz", FIELD_INT },
	{ "clocks.mem", "clocks_mem_mhz", FIELD_INT },
	{ "clocks.max.sm", "clocks_max_sm_mhz", FIELD_INT },
	{ "clocks.max.mem", "clocks_max_mem_mhz", FIELD_INT },
	{ "persistence_mode", "persistence_mode", FIELD_STRING },
	{ "power.limit", "power_limit_w", FIELD_REAL },
	{ "temperature.gpu", "temperature_c", FIELD_INT },
	{ "pci.bus_id", "pci_bus_id", FIELD_STRING },
	{ "uuid", "uuid", FIELD_STRING },
};
#define GPU_FIELD_COUNT (sizeof(gpu_fields) / sizeof(*gpu_fields))

/* Reads up to size-1 bytes of a small file as text; 0 on success. */
static int read_small_file(char *buf, size_t size, const char *path)
{
	size_t len = 0;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (len + 1 < size && (got = read(fd, buf + len, size - 1 - len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	buf[len] = '\0';
	return len ? 0 : -1;
}

static char *trim(char *s)
{
	char *end;
	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	return s;
}

static void add_cpu(json_t *env)
{
	/* x86 says "model name"; arm64 kernels say nothing of the sort, "Hardware"/"Model" at best */
	static const char *const model_keys[] = { "model name", "Model", "Hardware", "cpu model", NULL };
	json_t *cpu = json_object();
	char *text = malloc(CPUINFO_MAX), governor[64];
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int k;

	if (!cpu)
		goto cleanup;
	if (text && read_small_file(text, CPUINFO_MAX, "/proc/cpuinfo") == 0) {
		for (k = 0; model_keys[k] && !json_object_get(cpu, "model"); k++) {
			char *line, *save = NULL, *copy = strdup(text);
			for (line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
				char *colon = strchr(line, ':');
				if (colon && strncmp(line, model_keys[k], strlen(model_keys[k])) == 0 &&
				    (line[strlen(model_keys[k])] == ' ' || line[strlen(model_keys[k])] == '\t' ||
				     line[strlen(model_keys[k])] == ':') && *trim(colon + 1)) {
					json_object_set_new(cpu, "model", json_string(trim(colon + 1)));
					break;
				}
			}
			free(copy);
		}
	}
	if (cores > 0)
		json_object_set_new(cpu, "cores", json_integer(cores));
	if (read_small_file(governor, sizeof(governor), "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == 0 &&
	    *trim(governor))
		json_object_set_new(cpu, "governor", json_string(trim(governor)));
	json_object_set_new(env, "cpu", cpu);
	cpu = NULL;

cleanup:
	json_decref(cpu);
	free(text);
}

/*
 * Runs argv (proc.h: own process group, stdin /dev/null, stderr kept in memory) and collects its
 * stdout lines until it exits; past `timeout_ms` or SMI_OUTPUT_MAX bytes its group is killed. Returns 0 with *out (malloc'd text, lines joined by '\n') when it exited with
 * status 0; AB_ENOTFOUND when the program does not exist; otherwise an error saying what happened.
 */
static int run_captured(char **out, const char *const argv[], int timeout_ms)
{
	const struct ab_proc_spec spec = { .argv = argv, .stdout_pipe = 1, .line_max = SMI_OUTPUT_MAX };
	const int64_t deadline = ab_proc_now_ns() + (int64_t)timeout_ms * 1000000;
	struct ab_proc_status st;
	ab_proc *proc = NULL;
	char *buf = NULL, desc[128];
	size_t len = 0;
	int rc, error;

	if ((error = ab_proc_spawn(&proc, &spec)) < 0)
		return error;   /* AB_ENOTFOUND when argv[0] is not there */
	if (!(buf = malloc(SMI_OUTPUT_MAX + 1))) {
		error = ab_error_set("env: out of memory");
		goto cleanup;
	}
	for (;;) {   /* to EOF, the cap, or the deadline */
		const char *line;
		size_t n;
		if ((rc = ab_proc_read_line(&line, &n, NULL, proc, deadline)) == AB_PROC_EOF)
			break;
		if (rc == AB_ETIMEOUT) {
			ab_proc_kill(NULL, proc, 0, 1);
			error = ab_error_setc(AB_ETIMEOUT, "timed out after %d ms", timeout_ms);
			goto cleanup;
		}
		if (rc < 0 || len + n + 1 > SMI_OUTPUT_MAX) {   /* never buffered without bound */
			ab_proc_kill(NULL, proc, 0, 0);
			error = ab_error_set("printed more than %d bytes", SMI_OUTPUT_MAX);
			goto cleanup;
		}
		memcpy(buf + len, line, n);
		len += n;
		buf[len++] = '\n';
	}
	buf[len] = '\0';
	if (ab_proc_wait(&st, proc, deadline) == AB_ETIMEOUT) {
		ab_proc_kill(&st, proc, 0, 1);
		error = ab_error_setc(AB_ETIMEOUT, "timed out after %d ms", timeout_ms);
		goto cleanup;
	}
	if (!ab_proc_status_ok(&st)) {
		error = ab_error_set("%s", ab_proc_status_describe(desc, sizeof(desc), &st));
		goto cleanup;
	}
	*out = buf;
	buf = NULL;
	error = 0;
cleanup:
	ab_proc_free(proc);
	free(buf);
	return error;
}

/* One CSV line of nvidia-smi output into a GPU object; NULL when it does not have every field. */
static json_t *parse_gpu_line(char *line)
{
	json_t *gpu = json_object();
	char *fields[GPU_FIELD_COUNT], *p = line, *comma;
	size_t i, n = 0;

	if (!gpu)
		return NULL;
	while (n < GPU_FIELD_COUNT) {   /* the last field takes the rest of the line */
		fields[n++] = p;
		if (n == GPU_FIELD_COUNT || !(comma = strchr(p, ',')))
			break;
		*comma = '\0';
		p = comma + 1;
	}
	if (n != GPU_FIELD_COUNT) {
		json_decref(gpu);
		return NULL;
	}
	for (i = 0; i < GPU_FIELD_COUNT; i++) {
		char *v = trim(fields[i]), *end = NULL;
		if (!*v || *v == '[')   /* [N/A], [Not Supported], [Unknown Error] */
			continue;
		if (gpu_fields[i].kind == FIELD_STRING) {
			json_object_set_new(gpu, gpu_fields[i].json, json_string(v));
		} else if (gpu_fields[i].kind == FIELD_INT) {
			long long x = strtoll(v, &end, 10);
			if (end != v && !*end)
				json_object_set_new(gpu, gpu_fields[i].json, json_integer(x));
		} else {
			double x = strtod(v, &end);
			if (end != v && !*end)
				json_object_set_new(gpu, gpu_fields[i].json, json_real(x));
		}
	}
	return gpu;
}

static void add_gpus(json_t *env, const char *nvidia_smi, int timeout_ms)
{
	char query[512] = "--query-gpu=";
	const char *argv[] = { nvidia_smi, query, "--format=csv,noheader,nounits", NULL };
	char *output = NULL, *line, *save = NULL;
	json_t *gpus;
	size_t i;
	int rc;

	for (i = 0; i < GPU_FIELD_COUNT; i++) {
		strcat(query, gpu_fields[i].query);
		if (i + 1 < GPU_FIELD_COUNT)
			strcat(query, ",");
	}
	if ((rc = run_captured(&output, argv, timeout_ms)) == AB_ENOTFOUND)
		return;   /* no NVIDIA tooling: no GPU facts, and that is not an error */
	if (rc < 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "nvidia-smi %s", ab_error_last());
		json_object_set_new(env, "gpu_query_error", json_string(msg));
		return;
	}
	if ((gpus = json_array())) {
		for (line = strtok_r(output, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			json_t *gpu = parse_gpu_line(line);
			if (gpu && json_object_size(gpu))
				json_array_append(gpus, gpu);
			json_decref(gpu);
		}
		if (json_array_size(gpus))
			json_object_set(env, "gpus", gpus);
		json_decref(gpus);
	}
	free(output);
}

int ab_env_collect(json_t **out, const struct ab_env_options *opts)
{
	const char *nvidia_smi = opts && opts->nvidia_smi ? opts->nvidia_smi : "nvidia-smi";
	int timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 5000;
	json_t *env = json_object();
	struct utsname uts;
	char host[256];
	long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);

	if (!env)
		return ab_error_set("env: out of memory");
	if (gethostname(host, sizeof(host)) == 0) {
		host[sizeof(host) - 1] = '\0';
		json_object_set_new(env, "host", json_string(host));
	}
	if (uname(&uts) == 0) {
		char kernel[3 * sizeof(uts.release) + 4];
		snprintf(kernel, sizeof(kernel), "%s %s %s", uts.sysname, uts.release, uts.version);
		json_object_set_new(env, "kernel", json_string(kernel));
		json_object_set_new(env, "arch", json_string(uts.machine));
	}
	add_cpu(env);
	if (pages > 0 && page_size > 0)
		json_object_set_new(env, "memory_bytes", json_integer((json_int_t)pages * page_size));
	if (nvidia_smi[0])
		add_gpus(env, nvidia_smi, timeout_ms);
	*out = env;
	return 0;
}
