// The CPU strided copy: one box (kernels/strided_copy.h, shared with the CUDA kernel) from
// a strided source into a strided destination — what the plan's transpose, slice, expand
// and concat steps run, their boxes built and bounds-checked by the shared rule
// (runtime/kernel_rules.h CheckStridedCopy). Rows whose inner dim is contiguous on both
// sides are memcpy'd; others move element by element (1, 2, 4 or 8 bytes; any other size
// byte-wise). Parallel over the box's rows once there is ≥ 64 KiB to move.
// Limits: src and dst must not overlap (the plan never places these steps in place).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/strided_copy.h"

namespace kiln::cpu {

absl::Status StridedCopy(const CpuContext& ctx, const kernels::CopyBox& box, int64_t elem_size,
                         const void* src, void* dst);

}  // namespace kiln::cpu
