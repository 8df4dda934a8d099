// Where the flash attention kernel (flash_attention.cu) puts and finds each element: the
// shared-memory row pitch and the per-lane offsets of its MMA fragments. Host and device
// functions, so the kernel uses exactly what tests/cuda/flash_attention_host_test.cc runs
// on the CPU against an emulation of the PTX instructions' fragment layouts.
// Conventions: g = lane / 4, t = lane % 4; a "32-bit register" holds two consecutive
// 16-bit elements, the lower column (or k) in the low half; offsets are in elements from
// the start of a row-major shared-memory tile whose rows are `pitch` elements apart.
#pragma once

#include <cuda_runtime_api.h>  // __host__ __device__

namespace kiln::cuda::flash {

inline constexpr int kPad = 8;  // elements of padding per row: conflict-free fragment loads

// The row pitch for head size d: d rounded up to the MMA's k of 16, plus the padding.
__host__ __device__ constexpr int RowPitch(int d) { return (d + 15) / 16 * 16 + kPad; }

// cp.async chunk c (8 elements = 16 bytes) of a tile with head size d: its row and first
// column (the same in global memory and in shared memory).
__host__ __device__ constexpr int ChunkRow(int d, int c) { return c / (d / 8); }
__host__ __device__ constexpr int ChunkCol(int d, int c) { return c % (d / 8) * 8; }

// A operand of mma.m16n8k16 (16×16, row-major) from a tile at (0, 0): register r (0..3)
// holds A[g + 8·(r & 1)][2t + 8·(r >> 1) + {0, 1}].
__host__ __device__ constexpr int AFragOffset(int lane, int r, int pitch) {
  return ((lane >> 2) + 8 * (r & 1)) * pitch + 2 * (lane & 3) + 8 * (r >> 1);
}

// B operand (16×8, k × n) when B[k][n] = M[n][k] for a row-major tile M (K rows, for
// S = Q·Kᵀ): register r (0..1) holds M[g][2t + 8r + {0, 1}].
__host__ __device__ constexpr int BFromRowsOffset(int lane, int r, int pitch) {
  return (lane >> 2) * pitch + 2 * (lane & 3) + 8 * r;
}

// C / D accumulator (16×8 fp32): element e (0..3) is C[CRow][CCol].
__host__ __device__ constexpr int CRow(int lane, int e) { return (lane >> 2) + 8 * (e >> 1); }
__host__ __device__ constexpr int CCol(int lane, int e) { return 2 * (lane & 3) + (e & 1); }

// The A fragment of a 16-key P tile from the C fragments of its two 8-key score tiles:
// register r packs elements 2·PPair(r) and 2·PPair(r) + 1 of score tile PTile(r).
__host__ __device__ constexpr int PTile(int r) { return r >> 1; }
__host__ __device__ constexpr int PPair(int r) { return r & 1; }

// ldmatrix.x4.trans over a row-major V tile (rows = keys): the row this lane addresses for
// the 16 keys × 16 columns at (0, 0) — matrices 0..3 = keys 0–7 / 8–15 of columns 0–7,
// then of columns 8–15, so registers 0, 1 are B's b0, b1 of output tile n and 2, 3 of n+1.
__host__ __device__ constexpr int VLdmatrixRowOffset(int lane, int pitch) {
  return (lane & 15) * pitch + (lane >> 4) * 8;
}

}  // namespace kiln::cuda::flash
