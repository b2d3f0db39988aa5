/*
 * backend.c - the backend registry: which compute backends this build contains, which one a run
 * gets by default (CUDA when it was built and a device is present, else the CPU reference) or by
 * name, and the plain greedy loop for a backend without its own decode_greedy. The CUDA ops table
 * is referenced only when CMake found nvcc and built kernels/ (EMBER_HAVE_CUDA).
 */
#include <string.h>

#include "backend.h"
#include "error.h"

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

int ember_backend_select(const struct ember_backend_ops **out, const char *name)
{
	if (!name) {
		*out = ember_backend_default();
		return 0;
	}
	const struct ember_backend_ops *ops = ember_backend_find(name);
	if (!ops)
		return ember_error_set(EMBER_EUNSUPPORTED, "backend '%s' is not built into this ember (cpu%s)", name,
		                       ember_backend_find("cuda") ? ", cuda" : "");
	char why[256] = "";
	if (!ops->available(why, sizeof(why)))
		return ember_error_set(EMBER_EUNSUPPORTED, "backend '%s' is not available here: %s", name, why);
	*out = ops;
	return 0;
}

int ember_backend_decode(const struct ember_backend_ops *ops, struct ember_backend *be, int32_t token, int pos,
                         int n_steps, int32_t *out_tokens)
{
	if (ops->decode_greedy)
		return ops->decode_greedy(be, token, pos, n_steps, out_tokens);
	for (int i = 0; i < n_steps; i++) {
		if (ops->forward(be, &token, 1, pos + i, 0, NULL, &out_tokens[i]))
			return EMBER_ERROR;
		token = out_tokens[i];
	}
	return 0;
}
