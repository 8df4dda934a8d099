// bf16 conversions for the bf16 plans' GEMMs (matmul.h): their weights are stored in bf16,
// and their fp32 inputs are rounded to bf16 (nearest even) before the product.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

// y[i] = bf16(x[i]), nearest even; NaN stays NaN. On CPUs with AVX-512 BF16 (for `isa`)
// through vcvtneps2bf16, which also flushes subnormal inputs to zero.
void ConvertToBf16(const float* x, int64_t n, uint16_t* y, Isa isa);
// y[i] = x[i] rounded to bf16 and widened back: what a bf16 GEMM reads, for the fp32
// fallback on CPUs without AVX-512 BF16. y may alias x.
void RoundToBf16(const float* x, int64_t n, float* y);
// y[i] = x[i] widened (exact).
void Bf16ToFloat(const uint16_t* x, int64_t n, float* y);

}  // namespace kiln::cpu
