// ONNX Gather on one axis, any element type: y[o, j, :] = data[o, idx[j], :] with data
// viewed [outer, axis_dim, inner] and y [outer, num_indices, inner]; negative indices count
// from the end. Every index is checked before anything is copied, so an out-of-range id
// fails the run with the index and its position, never reads outside `data` (a plan's
// token-embedding Gather over a mapped table touches only the rows it copies).
// Limits: dense row-major; elem_size in bytes (1..16).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

struct GatherArgs {
  const void* data = nullptr;
  const void* indices = nullptr;
  bool idx_i32 = false;  // indices int32, else int64
  int64_t elem_size = 4;
  int64_t outer = 0, axis_dim = 0, inner = 0, num_indices = 0;
  void* y = nullptr;
};

absl::Status Gather(const CpuContext& ctx, const GatherArgs& a);

}  // namespace kiln::cpu
