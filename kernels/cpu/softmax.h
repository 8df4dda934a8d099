// Softmax over the last axis, fp32, rows in parallel with AVX-512 / AVX2 / scalar inner
// loops. exp is a Cephes-style polynomial (relative error ~2e-7). A row that is entirely
// -inf becomes zeros (the attention "all masked" convention), not NaN.
// Limits: dense rows; NaN inputs are not guaranteed to propagate on the vector paths.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

// y[r] = softmax(x[r]) for rows of n floats; y may equal x.
absl::Status Softmax(const CpuContext& ctx, const float* x, int64_t rows, int64_t n, float* y);

}  // namespace kiln::cpu
