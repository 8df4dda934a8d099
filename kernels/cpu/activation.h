// Standalone elementwise activations, fp32, for GELUs that were not fused into a Linear
// (oneDNN post-ops cover those), and the gated activations of kiln.Glu (SwiGLU, GeGLU).
// AVX-512 / AVX2 / scalar, split across threads in chunks.
// erf form: Abramowitz–Stegun 7.1.26 erfc (absolute error ≤ 1.5e-7) arranged so the
// negative tail does not cancel; tanh form: x / (1 + exp(-2u)).
// Limits: fp32; x below about -13 gives 0 (true value < 1e-37).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

// y = gelu(x) for n floats (erf form, or the tanh approximation); y may equal x.
absl::Status Gelu(const CpuContext& ctx, const float* x, int64_t n, bool tanh_form, float* y);

enum class GluActivation { kSilu, kGelu, kGeluTanh };

// kiln.Glu: x [rows, 2f] = [a | b] per row -> y [rows, f] = act(a) · b. y must not overlap
// x (it is half as long).
absl::Status Glu(const CpuContext& ctx, const float* x, int64_t rows, int64_t f, GluActivation act,
                 float* y);

}  // namespace kiln::cpu
