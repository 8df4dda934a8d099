// LayerNorm, RMSNorm and their Skip forms over the last axis, fp32, rows in parallel, AVX-512 /
// AVX2 / scalar inner loops (isa_kernels.h). Two passes per row (mean, then centred variance) so
// large means do not cancel; statistics accumulate in fp32 vector lanes.
// Limits: dense rows of h floats; skip broadcasts only by repeating its rows (skip_rows
// divides rows: [S,H] or [1,S,H] against [B,S,H], or [H]); other broadcasts are expanded by
// the caller.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

// y[r] = (x[r] - mean) / sqrt(var + eps) · gamma + beta (beta may be null); y may equal x.
absl::Status LayerNorm(const CpuContext& ctx, const float* x, const float* gamma, const float* beta,
                       int64_t rows, int64_t h, float eps, float* y);

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · gamma; y may equal x.
absl::Status RmsNorm(const CpuContext& ctx, const float* x, const float* gamma, int64_t rows,
                     int64_t h, float eps, float* y);

struct SkipLayerNormArgs {
  const float* x = nullptr;     // [rows, h]
  const float* skip = nullptr;  // [skip_rows, h]; row r uses skip row r % skip_rows
  int64_t skip_rows = 0;
  const float* gamma = nullptr;  // [h]
  const float* beta = nullptr;   // [h] or null
  const float* bias = nullptr;   // [h] or null
  int64_t rows = 0, h = 0;
  float eps = 1e-5f;
  float* y = nullptr;    // [rows, h]; may equal x
  float* sum = nullptr;  // [rows, h] residual x + skip (+ bias), or null when unused
  bool rms = false;      // normalize the sum as RMSNorm (beta must be null)
};

// sum = x + skip (+ bias); y = LayerNorm(sum) · gamma + beta, or RMSNorm(sum) · gamma.
absl::Status SkipLayerNorm(const CpuContext& ctx, const SkipLayerNormArgs& a);

}  // namespace kiln::cpu
