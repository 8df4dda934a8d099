// The int8 Linear of an int8 plan (kiln.QuantLinear) on CUDA: the cpu kernel's arithmetic
// (kernels/cpu/qgemm.h) in three launches on the step's stream —
//   1. QuantizeRows: each row of x̃ = x ⊙ x_mul (f32 products; x_mul optional) to s8 with
//      q = clamp(rne(x̃ · (127 / a)), ±127) and sx = a / 127, a = max |row| (or the static
//      x_absmax when it is > 0, values beyond it clamped); zeros when 127 / a overflows; a
//      row holding inf or NaN quantizes to zeros with sx = NaN (its outputs are NaN). All
//      f32 with IEEE division and round-to-nearest-even: the cpu's q and sx, bit for bit.
//   2. q · wᵀ as an s8 × s8 → s32 GEMM through cuBLASLt (gemm.h's int8 mode, the IMMA
//      tensor cores): exact integer sums, the cpu's.
//   3. QuantEpilogue: y = act(acc · (sx[m] · w_scale[n]) + bias[n]), rounded once to y's
//      dtype — equal to the cpu's output up to that f32 epilogue's rounding.
// x and y f32, f16 or bf16 (a cuda int8 plan's activations are fp16); w s8 [n, k] in
// [-127, 127]; w_scale, bias and x_mul f32. q, sx and the s32 sums live in the step's
// scratch (QuantScratch). cuBLASLt's int8 kernels take k and n multiples of 4 (the
// compiler keeps other Linears in 16 bits; the executor refuses such a step).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

// Where a [m, k] → [m, n] quant_linear keeps its intermediates in its scratch: q s8 [m, k]
// at 0, sx f32 [m] at `sx`, the s32 sums [m, n] at `acc`; `bytes` in all. Offsets are
// 256-byte aligned (cuBLASLt's preferred alignment). False when a size overflows int64.
struct QuantScratch {
  int64_t sx = 0, acc = 0, bytes = 0;
};
inline bool QuantScratchLayout(int64_t m, int64_t k, int64_t n, QuantScratch* s) {
  constexpr int64_t kMax = INT64_MAX / 8;
  if (m < 0 || k < 0 || n < 0 || (k > 0 && m > kMax / k) || (n > 0 && m > kMax / (4 * n)))
    return false;
  auto align = [](int64_t v) { return (v + 255) / 256 * 256; };
  s->sx = align(m * k);
  s->acc = s->sx + align(4 * m);
  s->bytes = s->acc + align(4 * m * n);
  return true;
}

struct QuantRowsArgs {
  ElemType dtype = ElemType::kF32;  // x: f32, f16 or bf16
  const void* x = nullptr;          // [m, k]
  const float* x_mul = nullptr;     // [k] or null (ones)
  int8_t* q = nullptr;              // [m, k]
  float* sx = nullptr;              // [m]
  int64_t m = 0, k = 0;
  float x_absmax = 0.f;  // > 0: static activations
};
cudaError_t QuantizeRows(const QuantRowsArgs& a, cudaStream_t stream);

struct QuantEpilogueArgs {
  ElemType dtype = ElemType::kF32;  // y: f32, f16 or bf16
  const int32_t* acc = nullptr;     // [m, n]
  const float* sx = nullptr;        // [m]
  const float* w_scale = nullptr;   // [n]
  const float* bias = nullptr;      // [n] or null
  void* y = nullptr;                // [m, n]
  int64_t m = 0, n = 0;
  LinearAct act = LinearAct::kNone;
};
cudaError_t QuantEpilogue(const QuantEpilogueArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
