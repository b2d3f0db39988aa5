/*
 * backend.c - the backend registry: which compute backends this build contains and which one a
 * run gets by default (CUDA when it was built and a device is present, else the CPU reference).
 * The CUDA ops table is referenced only when CMake found nvcc and built kernels/ (EMBER_HAVE_CUDA).
 */
#include <string.h>

#include "backend.h"

static const struct ember_backend_ops *const backends[] = {
#ifdef EMBER_HAVE_CUDA
	&ember_backend_cuda_ops,
#endif
	&ember_backend_cpu_ops,
};

const struct ember_backend_ops *ember_backend_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

const struct ember_backend_ops *ember_backend_default(void)
{
	const struct ember_backend_ops *cuda = ember_backend_find("cuda");
	char why[256];
	if (cuda && cuda->available(why, sizeof(why)))
		return cuda;
	return &ember_backend_cpu_ops;
}
