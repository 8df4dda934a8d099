// int4/int8 weight-only Linear (kiln.BlockQuantLinear, ONNX MatMulNBits) on CUDA cores:
// y[m, n] = act(Σ_k x[m, k] · w[n, k] + bias[n]) with w[n, k] = (code − zero point) · scale
// of k's block (block_size consecutive k; zero point 2^(bits−1) without zero_points),
// dequantized in registers, fp32 accumulation. 4-bit codes are u8 [n, ceil(k/2)], two per
// byte, low nibble first (or u4 [n, k], one per byte, in older plans); 8-bit codes u8 [n,
// k]; scales f32 [n, blocks]; zero points one code per byte [n, blocks], or f32 [n, blocks]
// (fractional, as HQQ writes them: w = (code − z) · scale in f32).
// How: a warp per output column n and group of up to 8 rows: its lanes stride over the
// column's code bytes (two weights each), each lane keeps the 8 rows' partial sums, a warp
// reduction finishes them. Decode (a few rows) reads each weight byte once, which is the
// whole cost; a long prompt re-reads the column per 8 rows (from L2 mostly) and computes
// on CUDA cores — correct, not tensor-core fast.
// x, bias and y are f32, f16 or bf16 (a 16-bit model's own activations: converted to f32
// as they are read, the f32 sum rounded once when written).
// Limits: n ≤ 2^31 − 1 columns.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

struct BlockQuantArgs {
  ElemType dtype = ElemType::kF32;           // x, bias and y: f32, f16 or bf16
  const void* x = nullptr;                   // [m, k]
  const uint8_t* codes = nullptr;            // [n, ceil(k/2)], or [n, k] (one per byte, 8 bits)
  const float* scales = nullptr;             // [n, blocks]
  const uint8_t* zero_points = nullptr;      // [n, blocks] or null (2^(bits−1))
  const float* float_zero_points = nullptr;  // [n, blocks] (instead of zero_points) or null
  const void* bias = nullptr;                // [n] (x's dtype) or null
  void* y = nullptr;                         // [m, n] (x's dtype)
  int64_t m = 0, k = 0, n = 0, block_size = 0;
  int bits = 4;                    // 4 or 8
  bool one_code_per_byte = false;  // 4 bits: u4 [n, k] (8 bits always are)
  LinearAct act = LinearAct::kNone;
};

cudaError_t BlockQuantLinear(const BlockQuantArgs& a, cudaStream_t stream);

// Rows of a block-quantized table (kiln.BlockQuantGather, a tied model's int4 embeddings):
// y[j, c] = (code[r, c] − zero[r, c / block_size]) · scale[r, c / block_size] in f32, r =
// indices[j] (negative from the end), codes and zero points laid out as BlockQuantArgs'. A
// block per index; an index outside [-rows, rows) writes a zero row and records the error.
struct BlockQuantGatherArgs {
  const uint8_t* codes = nullptr;            // [rows, ceil(k/2)], or [rows, k] one per byte
  const float* scales = nullptr;             // [rows, blocks]
  const uint8_t* zero_points = nullptr;      // [rows, blocks] or null (2^(bits−1))
  const float* float_zero_points = nullptr;  // [rows, blocks] or null
  const void* indices = nullptr;             // [num_indices], i32 or i64
  bool idx_i32 = false;
  float* y = nullptr;  // [num_indices, k]
  int64_t table_rows = 0, k = 0, block_size = 0, num_indices = 0;
  int bits = 4;
  bool one_code_per_byte = false;
  ErrorSink err;
};

cudaError_t BlockQuantGather(const BlockQuantGatherArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
