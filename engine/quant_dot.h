/*
 * quant_dot.h - the f32 dot-product kernels behind the CPU backend's matrix products. Every
 * kernel accumulates element i of a dot into lane i % EMBER_DOT_LANES (two 8-wide vectors) and
 * reduces the lanes with ember_dot_reduce's tree, so a dot gives the same bits whichever kernel,
 * tile shape or thread computes it. Hot loops are compiled twice (AVX2+FMA and baseline) and
 * picked at load time on x86-64 with GCC.
 */
#ifndef EMBER_QUANT_DOT_H
#define EMBER_QUANT_DOT_H

#include <stdint.h>

/* Matrix panel product: out[t * ldo + r] = dot(w + r * ldw, x + t * ldx) over n elements, for
 * r < n_rows and t < n_tok (any sizes). w rows and x rows are f32; each weight row is read once
 * per pair of tokens, so keep the panel small enough for L2 (the CPU backend does). */
void ember_dot_panel(const float *w, int64_t ldw, int n_rows, const float *x, int64_t ldx, int n_tok,
                     int64_t n, float *out, int64_t ldo);

#endif
