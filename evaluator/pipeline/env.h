/*
 * env.h - the environment record of an evaluation (the result's "environment" object): which host,
 * kernel, CPU and memory measured it, and the GPUs with their driver and current clocks when
 * nvidia-smi is available. Facts that cannot be read are left out; collecting never fails because
 * of the machine (a missing /proc file, no GPU, a hung nvidia-smi).
 */
#ifndef AB_ENV_H
#define AB_ENV_H

#include <jansson.h>

struct ab_env_options {
	const char *nvidia_smi;   /* NULL: "nvidia-smi" from PATH; "": do not query GPUs */
	int timeout_ms;           /* for nvidia-smi; <= 0: 5000 */
};

/*
 * Collects the environment into a new object (caller owns it: json_decref):
 *
 *   host          string   host name
 *   kernel        string   "Linux 6.1.0-18-amd64 #1 SMP ..." (uname sysname, release, version)
 *   arch          string   "x86_64"
 *   cpu           object   {model, cores (online logical CPUs), governor (cpufreq, when exposed)}
 *   memory_bytes  integer  physical memory
 *   gpus          array    one object per GPU (only when nvidia-smi answered):
 *                          {index, name, driver, memory_total_mib, clocks_sm_mhz, clocks_mem_mhz,
 *                           clocks_max_sm_mhz, clocks_max_mem_mhz, persistence_mode, power_limit_w,
 *                           temperature_c, pci_bus_id, uuid}; fields nvidia-smi reports as
 *                          [N/A] or [Not Supported] are absent
 *   gpu_query_error string only when nvidia-smi exists but failed ("timed out after 5000 ms",
 *                          "exited with status 9"), which often means a broken GPU or driver
 *
 * `opts` may be NULL (defaults). Returns 0, or AB_ERROR only on allocation failure.
 */
int ab_env_collect(json_t **out, const struct ab_env_options *opts);

#endif
