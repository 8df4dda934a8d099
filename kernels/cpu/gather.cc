// Gather (gather.h): check every index, then copy rows of `inner` elements, in parallel
// when there is enough to copy.
#include "kernels/cpu/gather.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {

absl::Status Gather(const CpuContext& ctx, const GatherArgs& a) {
  if (a.outer < 0 || a.axis_dim < 0 || a.inner < 0 || a.num_indices < 0 || a.elem_size < 1 ||
      a.elem_size > 16)
    return absl::InvalidArgumentError(
        absl::StrCat("Gather got outer=", a.outer, " axis_dim=", a.axis_dim, " inner=", a.inner,
                     " num_indices=", a.num_indices, " elem_size=", a.elem_size));
  const int64_t rows = a.outer * a.num_indices;
  if (rows == 0 || a.inner == 0) return absl::OkStatus();
  if (a.data == nullptr || a.indices == nullptr || a.y == nullptr)
    return absl::InvalidArgumentError("Gather: null pointer");
  auto index = [&](int64_t j) -> int64_t {
    return a.idx_i32 ? static_cast<const int32_t*>(a.indices)[j]
                     : static_cast<const int64_t*>(a.indices)[j];
  };
  for (int64_t j = 0; j < a.num_indices; ++j) {
    const int64_t i = index(j);
    if (i < -a.axis_dim || i >= a.axis_dim)
      return absl::InvalidArgumentError(absl::StrCat("Gather index ", i, " at position ", j,
                                                     " is outside [", -a.axis_dim, ", ", a.axis_dim,
                                                     ")"));
  }
  const int64_t row_bytes = a.inner * a.elem_size;
  const auto* src = static_cast<const std::byte*>(a.data);
  auto* dst = static_cast<std::byte*>(a.y);
  // ≥ 256 KiB per thread before splitting: below that the fork costs more than the copy.
  ParallelFor(ctx, rows, std::max<int64_t>(1, (int64_t{256} << 10) / row_bytes),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  const int64_t o = r / a.num_indices, j = r % a.num_indices;
                  int64_t i = index(j);
                  if (i < 0) i += a.axis_dim;
                  std::memcpy(dst + r * row_bytes, src + (o * a.axis_dim + i) * row_bytes,
                              static_cast<size_t>(row_bytes));
                }
              });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
