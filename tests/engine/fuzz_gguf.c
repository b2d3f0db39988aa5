/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader: any byte string either parses or fails
 * with an error; on success every accessor is exercised over the whole parsed file.
 * Build: clang -fsanitize=fuzzer,address,undefined (tests/engine/CMakeLists.txt does it).
 */
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ember_gguf *g = NULL;
	if (ember_gguf_open_memory(&g, data, size) != 0)
		return 0;
	volatile uint64_t sink = 0;
	for (int64_t i = 0; i < ember_gguf_kv_count(g); i++) {
		const char *key = ember_gguf_kv_key(g, i), *s;
		enum ember_gguf_type et;
		uint64_t n, u, len;
		double f;
		int64_t v;
		ember_gguf_kv_number(g, i, &f);
		ember_gguf_get_uint(g, key, &u);
		ember_gguf_get_int(g, key, &v);
		ember_gguf_get_str(g, key, &s);
		if (ember_gguf_kv_array(g, i, &et, &n) == 0) {
			const uint8_t *raw = ember_gguf_kv_array_data(g, i);
			if (raw && n)
				sink += raw[0];
			for (uint64_t j = 0; et == EMBER_GGUF_STRING && j < n; j++)
				if (ember_gguf_kv_array_str(g, i, j, &s, &len) == 0 && len)
					sink += (uint8_t)s[len - 1];
		}
	}
	for (int64_t i = 0; i < ember_gguf_tensor_count(g); i++) {
		const struct ember_gguf_tensor *t = ember_gguf_tensor(g, i);
		if (t->nbytes)
			sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
		sink += ember_gguf_find_tensor(g, t->name) == t;
	}
	(void)sink;
	ember_gguf_close(g);
	return 0;
}
