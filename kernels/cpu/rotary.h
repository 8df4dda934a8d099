// kiln.Rotary on the CPU: the rotate-half rotary position embedding over the first r
// elements of each row of x (docs/fused-ops.md), f32. With h = r/2, for j < h:
//   y[j]     = x[j]·cos[j]         + (−x[j + h])·sin[j]
//   y[j + h] = x[j + h]·cos[j + h] + x[j]·sin[j + h]
// and y[j] = x[j] for r ≤ j < d. Interleaved (GPT-J's rotate_every_two), for j < h:
//   y[2j]     = x[2j]·cos[2j]         + (−x[2j + 1])·sin[2j]
//   y[2j + 1] = x[2j + 1]·cos[2j + 1] + x[2j]·sin[2j + 1]. Row t of x (d elements) reads one row (r
//   elements) of cos
// and of sin: `rows` is the numpy broadcast of x's, cos's and sin's leading dims
// (kernels/eltwise_common.h) in units of rows. The same products and sums as the decomposed
// ONNX graph, so equal to it unless a build contracts them into FMAs (-march with FMA).
// Limits: y must not overlap x (each element reads its partner half).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/eltwise_common.h"

namespace kiln::cpu {

struct RotaryArgs {
  const float* x = nullptr;
  const float* cos = nullptr;
  const float* sin = nullptr;
  float* y = nullptr;
  int64_t d = 0, r = 0;           // row width, rotated width (even, ≤ d)
  bool interleaved = false;       // pairs (2j, 2j + 1) instead of (j, j + r/2)
  kernels::BroadcastLayout rows;  // inputs x, cos, sin; n = rows of x
};

absl::Status Rotary(const CpuContext& ctx, const RotaryArgs& a);

}  // namespace kiln::cpu
