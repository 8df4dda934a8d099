// ONNX CumSum along one axis of x viewed [outer, len, inner] (exclusive, reverse), for
// f32, f64, i32, i64, u32, u64: floats accumulate in their own type, sequentially along
// the axis (bit for bit the reference executor's result), integers wrap. Lines of `len`
// elements in parallel when there are enough of them.
// Limits: dense row-major; y must not overlap x unless it is x.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/ir/tensor.h"

namespace kiln::cpu {

struct CumSumArgs {
  const void* x = nullptr;
  void* y = nullptr;
  DType dtype = DType::kF32;
  int64_t outer = 0, len = 0, inner = 0;
  bool exclusive = false, reverse = false;
};

absl::Status CumSum(const CpuContext& ctx, const CumSumArgs& a);

}  // namespace kiln::cpu
