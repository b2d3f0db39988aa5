/*
 * gemv_ring.cuh - the streaming GEMV's round bookkeeping, shared by gemv_stream.cu (decode) and
 * gemv_window.cu (verify window): a cursor over a CTA's flat sequence of rounds (unit, pass,
 * round), the ring-depth-dependent cp.async wait, and the issue of one round into a ring slot.
 * Internal to kernels/: included only by .cu files, after gemv_core.cuh.
 */
#ifndef EMBER_KERNELS_GEMV_RING_CUH
#define EMBER_KERNELS_GEMV_RING_CUH

#include "gemv_core.cuh"

#define STREAM_MAX_RING 8

/* Ring-depth-dependent wait: all but the newest n committed groups complete. */
static __device__ __forceinline__ void cp_async_wait_dyn(int n)
{
	switch (n) {
	case 0: cp_async_wait<0>(); break;
	case 1: cp_async_wait<1>(); break;
	case 2: cp_async_wait<2>(); break;
	case 3: cp_async_wait<3>(); break;
	case 4: cp_async_wait<4>(); break;
	case 5: cp_async_wait<5>(); break;
	default: cp_async_wait<6>(); break;
	}
}

/* A position in the CTA's sequence of rounds: unit (row tile in grid-stride order), pass (SwiGLU:
 * 0 gate, 1 up), round within the pass, and what that round reads. Advanced one round at a time
 * with no division (the per-round bookkeeping runs in every thread, next to ~300 instructions of
 * tile math per warp). */
struct stream_cursor {
	int unit, pass, rr;      /* rr: round within the pass */
	int si, rt, type;        /* segment, its row tile, its weight type */
	const uint8_t *src;      /* first tile of this round in global memory */
	int tb;                  /* tile bytes of this segment */
};

template <int EPI, int W, bool Q8 = false>
static __device__ __forceinline__ void cursor_locate(const ember_gemv_args &a, stream_cursor &c, int kt_count)
{
	c.rt = locate_tile(a, c.unit, EPI == EMBER_GEMV_SWIGLU, &c.si);
	c.si += c.pass;
	const ember_gemv_seg &seg = a.seg[c.si];
	c.type = seg.type;
	c.tb = Q8 ? (int)EMBER_Q8R_TILE_BYTES : (int)ember_tile_bytes(seg.type);
	c.src = (Q8 ? static_cast<const uint8_t *>(seg.w) + (size_t)c.rt * kt_count * EMBER_Q8R_TILE_BYTES
	            : tile_base(seg, c.rt, kt_count * EMBER_TILE_K)) + (size_t)c.rr * W * c.tb;
}

template <int EPI, int W, bool Q8 = false>
static __device__ __forceinline__ void cursor_next(const ember_gemv_args &a, stream_cursor &c, int rpp, int kt_count)
{
	constexpr int P = EPI == EMBER_GEMV_SWIGLU ? 2 : 1;
	if (++c.rr < rpp) {
		c.src += (size_t)W * c.tb;
		return;
	}
	c.rr = 0;
	if (++c.pass == P) {
		c.pass = 0;
		c.unit += (int)gridDim.x;
	}
	cursor_locate<EPI, W, Q8>(a, c, kt_count);
}

/* Issues the round at cursor c (round number g) into ring slot `slot` when the CTA has it, and
 * commits a group either way (uniform group counts), then advances c. */
template <int EPI, int W, bool Q8 = false>
static __device__ __forceinline__ void stream_issue(const ember_gemv_args &a, stream_cursor &c, uint8_t *ring,
                                                    size_t slot_bytes, int slot, int g, int n_rounds, int rpp,
                                                    int kt_count)
{
	if (g < n_rounds) {
		const int t0 = c.rr * W;
		const int nt = kt_count - t0 < W ? kt_count - t0 : W;
		const int chunks = nt * c.tb / 16;
		uint8_t *dst = ring + (size_t)slot * slot_bytes;
		for (int i = threadIdx.x; i < chunks; i += W * 32)
			cp_async16(dst + (size_t)i * 16, c.src + (size_t)i * 16);
		cursor_next<EPI, W, Q8>(a, c, rpp, kt_count);
	}
	cp_async_commit();
}

#endif
