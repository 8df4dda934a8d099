// Gather, GatherND, GatherElements (gather.h): check every index, then copy — Gather's
// rows of `inner` elements in parallel when there is enough to copy; GatherND's slices and
// GatherElements' elements on the calling thread (the position-id and token-selection
// sizes real plans have).
#include "kernels/cpu/gather.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {

absl::Status BlockQuantGather(const CpuContext& ctx, const BlockQuantGatherArgs& a) {
  if (a.table_rows < 0 || a.k < 1 || a.block_size < 1 || a.num_indices < 0 ||
      (a.bits != 4 && a.bits != 8))
    return absl::InvalidArgumentError(absl::StrCat(
        "BlockQuantGather got rows=", a.table_rows, " k=", a.k, " block_size=", a.block_size,
        " num_indices=", a.num_indices, " bits=", a.bits));
  if (a.num_indices == 0) return absl::OkStatus();
  if (a.codes == nullptr || a.scales == nullptr || a.indices == nullptr || a.y == nullptr)
    return absl::InvalidArgumentError("BlockQuantGather: null pointer");
  auto index = [&](int64_t j) -> int64_t {
    return a.idx_i32 ? static_cast<const int32_t*>(a.indices)[j]
                     : static_cast<const int64_t*>(a.indices)[j];
  };
  for (int64_t j = 0; j < a.num_indices; ++j) {
    const int64_t i = index(j);
    if (i < -a.table_rows || i >= a.table_rows)
      return absl::InvalidArgumentError(absl::StrCat("BlockQuantGather index ", i, " at position ",
                                                     j, " is outside [", -a.table_rows, ", ",
                                                     a.table_rows, ")"));
  }
  const bool packed = a.bits == 4 && !a.one_code_per_byte;
  const int64_t row_bytes = packed ? (a.k + 1) / 2 : a.k;
  const int64_t blocks = (a.k + a.block_size - 1) / a.block_size;
  const int mask = a.bits == 8 ? 255 : 15;
  const float default_zero = a.bits == 8 ? 128.0f : 8.0f;
  ParallelFor(ctx, a.num_indices, std::max<int64_t>(1, (int64_t{64} << 10) / (4 * a.k)),
              [&](int64_t begin, int64_t end) {
                for (int64_t j = begin; j < end; ++j) {
                  int64_t r = index(j);
                  if (r < 0) r += a.table_rows;
                  const uint8_t* codes = a.codes + r * row_bytes;
                  const float* scales = a.scales + r * blocks;
                  float* y = a.y + j * a.k;
                  for (int64_t c = 0; c < a.k; ++c) {
                    const int64_t b = r * blocks + c / a.block_size;
                    const int code =
                        packed ? (codes[c / 2] >> (4 * (c & 1))) & 15 : codes[c] & mask;
                    const float zero = a.float_zero_points ? a.float_zero_points[b]
                                       : a.zero_points ? static_cast<float>(a.zero_points[b] & mask)
                                                       : default_zero;
                    y[c] = (static_cast<float>(code) - zero) * scales[c / a.block_size];
                  }
                }
              });
  return absl::OkStatus();
}

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

namespace {

int64_t IndexAt(const void* p, bool i32, int64_t j) {
  return i32 ? static_cast<const int32_t*>(p)[j] : static_cast<const int64_t*>(p)[j];
}

}  // namespace

absl::Status GatherND(const CpuContext&, const GatherNDArgs& a) {
  if (a.batch < 0 || a.tuples < 0 || a.slice < 0 || a.k < 1 || a.k > 8 || a.elem_size < 1 ||
      a.elem_size > 16)
    return absl::InvalidArgumentError(absl::StrCat(
        "GatherND got batch=", a.batch, " tuples=", a.tuples, " k=", a.k, " slice=", a.slice));
  const int64_t total = a.batch * a.tuples;
  if (total == 0 || a.slice == 0) return absl::OkStatus();
  if (a.data == nullptr || a.indices == nullptr || a.y == nullptr)
    return absl::InvalidArgumentError("GatherND: null pointer");
  for (int64_t t = 0; t < total; ++t)
    for (int j = 0; j < a.k; ++j) {
      const int64_t i = IndexAt(a.indices, a.idx_i32, t * a.k + j);
      if (i < -a.dims[j] || i >= a.dims[j])
        return absl::InvalidArgumentError(absl::StrCat("GatherND index ", i, " (entry ", j,
                                                       " of tuple ", t, ") is outside [",
                                                       -a.dims[j], ", ", a.dims[j], ")"));
    }
  const int64_t bytes = a.slice * a.elem_size;
  const auto* src = static_cast<const std::byte*>(a.data);
  auto* dst = static_cast<std::byte*>(a.y);
  for (int64_t t = 0; t < total; ++t) {
    int64_t off = (t / a.tuples) * a.batch_stride;
    for (int j = 0; j < a.k; ++j) {
      int64_t i = IndexAt(a.indices, a.idx_i32, t * a.k + j);
      if (i < 0) i += a.dims[j];
      off += i * a.strides[j];
    }
    std::memcpy(dst + t * bytes, src + off * a.elem_size, static_cast<size_t>(bytes));
  }
  return absl::OkStatus();
}

absl::Status GatherElements(const CpuContext&, const GatherElementsArgs& a) {
  if (a.rank < 1 || a.rank > 8 || a.axis < 0 || a.axis >= a.rank || a.n < 0 || a.elem_size < 1 ||
      a.elem_size > 16)
    return absl::InvalidArgumentError(
        absl::StrCat("GatherElements got rank=", a.rank, " axis=", a.axis, " n=", a.n));
  if (a.n == 0) return absl::OkStatus();
  if (a.data == nullptr || a.indices == nullptr || a.y == nullptr)
    return absl::InvalidArgumentError("GatherElements: null pointer");
  for (int64_t o = 0; o < a.n; ++o) {
    const int64_t i = IndexAt(a.indices, a.idx_i32, o);
    if (i < -a.axis_dim || i >= a.axis_dim)
      return absl::InvalidArgumentError(absl::StrCat("GatherElements index ", i, " at position ", o,
                                                     " is outside [", -a.axis_dim, ", ", a.axis_dim,
                                                     ")"));
  }
  const auto* src = static_cast<const std::byte*>(a.data);
  auto* dst = static_cast<std::byte*>(a.y);
  int64_t coord[8] = {};
  for (int64_t o = 0; o < a.n; ++o) {
    int64_t i = IndexAt(a.indices, a.idx_i32, o);
    if (i < 0) i += a.axis_dim;
    int64_t off = 0;
    for (int d = 0; d < a.rank; ++d) off += (d == a.axis ? i : coord[d]) * a.data_strides[d];
    std::memcpy(dst + o * a.elem_size, src + off * a.elem_size, static_cast<size_t>(a.elem_size));
    for (int d = a.rank - 1; d >= 0; --d) {  // the next output coordinate
      if (++coord[d] < a.idx_dims[d]) break;
      coord[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::cpu
