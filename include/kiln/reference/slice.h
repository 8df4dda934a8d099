// ONNX Slice's bounds arithmetic, shared by the reference Slice kernel and the CUDA
// lowering (which turns a constant Slice into a strided copy): negative starts/ends count
// from the end, both are clamped per the spec (differently for negative steps), and each
// sliced dim gets its first index, step and length.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

struct SliceBounds {
  std::vector<int64_t> first;  // per dim of the data: first index taken (0 when empty)
  std::vector<int64_t> step;   // per dim: the step (1 where at most one element is taken)
  std::vector<int64_t> dims;   // the result's dims
};

// `starts`, `ends`, `axes`, `steps` as Slice's inputs (axes may be negative; an empty `axes`
// means 0..n-1, an empty `steps` all 1). InvalidArgument for mismatched lengths, a repeated
// or out-of-range axis, or a zero step.
absl::StatusOr<SliceBounds> NormalizeSlice(const std::vector<int64_t>& data_dims,
                                           const std::vector<int64_t>& starts,
                                           const std::vector<int64_t>& ends,
                                           std::vector<int64_t> axes, std::vector<int64_t> steps);

}  // namespace kiln
