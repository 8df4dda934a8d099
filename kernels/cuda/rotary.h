// kiln.Rotary on CUDA: the rotate-half rotary position embedding (docs/fused-ops.md,
// kernels/cpu/rotary.h for the formula), f32 / f16 / bf16 with fp32 math.
// How: one thread per output element; its row's table rows come from the broadcast layout
// of x's, cos's and sin's leading dims (kernels/eltwise_common.h, in units of rows), the
// same layout the CPU kernel walks.
// Limits: y must not overlap x.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/eltwise_common.h"

namespace kiln::cuda {

struct RotaryArgs {
  ElemType dtype = ElemType::kF32;  // of x, cos, sin, y
  const void* x = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  void* y = nullptr;
  int64_t d = 0, r = 0;           // row width, rotated width (even, <= d)
  bool interleaved = false;       // pairs (2j, 2j + 1) instead of (j, j + r/2)
  kernels::BroadcastLayout rows;  // inputs x, cos, sin; n = rows of x
};

cudaError_t Rotary(const RotaryArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
