// StridedCopy (strided_copy.h): the box as rows of its last dim; each thread walks its
// contiguous range of rows with an odometer over the outer dims.
#include "kernels/cpu/strided_copy.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {
namespace {

template <typename T>
void CopyRow(const std::byte* s, std::byte* d, int64_t n, int64_t ss, int64_t ds) {
  const T* src = reinterpret_cast<const T*>(s);
  T* dst = reinterpret_cast<T*>(d);
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds, src + i * ss, sizeof(T));
}

void CopyRowAny(const std::byte* s, std::byte* d, int64_t n, int64_t ss, int64_t ds, int64_t es) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds * es, s + i * ss * es, es);
}

}  // namespace

absl::Status StridedCopy(const CpuContext& ctx, const kernels::CopyBox& box, int64_t elem_size,
                         const void* src, void* dst) {
  if (box.rank < 0 || box.rank > kernels::kMaxCopyRank || elem_size < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("StridedCopy got rank ", box.rank, ", elem_size ", elem_size));
  int64_t total = 1;
  for (int j = 0; j < box.rank; ++j) {
    if (box.dims[j] < 0)
      return absl::InvalidArgumentError(absl::StrCat("StridedCopy dim ", j, " is negative"));
    total *= box.dims[j];
  }
  if (total == 0) return absl::OkStatus();
  if (src == nullptr || dst == nullptr) return absl::InvalidArgumentError("StridedCopy: null");
  const auto* s0 = static_cast<const std::byte*>(src) + box.src_offset * elem_size;
  auto* d0 = static_cast<std::byte*>(dst) + box.dst_offset * elem_size;
  if (box.rank == 0) {
    std::memcpy(d0, s0, static_cast<size_t>(elem_size));
    return absl::OkStatus();
  }
  const int last = box.rank - 1;
  const int64_t n = box.dims[last], ss = box.src_strides[last], ds = box.dst_strides[last];
  const int64_t rows = total / n;
  const bool contiguous = ss == 1 && ds == 1;
  // ≥ 64 KiB per chunk before a row range goes to another thread.
  const int64_t row_bytes = n * elem_size;
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{64} << 10) / row_bytes);
  ParallelFor(ctx, rows, min_rows, [&](int64_t begin, int64_t end) {
    // The odometer over dims 0..last-1, started at row `begin`.
    int64_t idx[kernels::kMaxCopyRank] = {};
    int64_t so = 0, dof = 0;
    for (int64_t r = begin, j = last - 1; j >= 0; --j) {
      idx[j] = r % box.dims[j];
      r /= box.dims[j];
      so += idx[j] * box.src_strides[j];
      dof += idx[j] * box.dst_strides[j];
    }
    for (int64_t r = begin; r < end; ++r) {
      const std::byte* s = s0 + so * elem_size;
      std::byte* d = d0 + dof * elem_size;
      if (contiguous) {
        std::memcpy(d, s, static_cast<size_t>(row_bytes));
      } else {
        switch (elem_size) {
          case 1:
            CopyRow<uint8_t>(s, d, n, ss, ds);
            break;
          case 2:
            CopyRow<uint16_t>(s, d, n, ss, ds);
            break;
          case 4:
            CopyRow<uint32_t>(s, d, n, ss, ds);
            break;
          case 8:
            CopyRow<uint64_t>(s, d, n, ss, ds);
            break;
          default:
            CopyRowAny(s, d, n, ss, ds, elem_size);
        }
      }
      for (int j = last - 1; j >= 0; --j) {  // advance the odometer
        so += box.src_strides[j];
        dof += box.dst_strides[j];
        if (++idx[j] < box.dims[j]) break;
        so -= idx[j] * box.src_strides[j];
        dof -= idx[j] * box.dst_strides[j];
        idx[j] = 0;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
