// kiln.Glu on CUDA (docs/fused-ops.md): x [rows, 2f] = [a | b] per row, y [rows, f] =
// act(a) · b with act silu (a·sigmoid(a)), gelu (erf form) or gelu_tanh; f32 / f16 / bf16
// I/O, fp32 math. One thread per output element.
// Limits: y must not overlap x.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

enum class GluAct { kSilu, kGelu, kGeluTanh };

struct GluArgs {
  ElemType dtype = ElemType::kF32;  // of x and y
  const void* x = nullptr;
  void* y = nullptr;
  int64_t rows = 0, f = 0;
  GluAct act = GluAct::kSilu;
};

cudaError_t Glu(const GluArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
