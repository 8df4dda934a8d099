// EmbedLayerNorm driver: validates all ids first (serially, cheap), then gathers, sums and
// normalizes rows in parallel with the ISA row kernels.
#include "kernels/cpu/embed_layer_norm.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {
namespace {

// Resolves `count` ids (i64 or i32) against a table of `rows` rows into `out`.
absl::Status ResolveIds(const int64_t* ids64, const int32_t* ids32, int64_t count, int64_t rows,
                        const char* what, std::vector<int64_t>& out) {
  if ((ids64 == nullptr) == (ids32 == nullptr))
    return absl::InvalidArgumentError(
        absl::StrCat("EmbedLayerNorm: give exactly one of the i64 and i32 ", what, " pointers"));
  out.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t id = ids64 ? ids64[i] : ids32[i];
    if (id < -rows || id >= rows)
      return absl::InvalidArgumentError(absl::StrCat("EmbedLayerNorm: ", what, " contains ", id,
                                                     ", out of range for a table of ", rows,
                                                     " rows"));
    out[i] = id < 0 ? id + rows : id;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EmbedLayerNorm(const CpuContext& ctx, const EmbedLayerNormArgs& a) {
  const int64_t nb = a.batch, s = a.seq, h = a.hidden;
  if (nb < 0 || s < 0 || h <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("EmbedLayerNorm got B=", nb, " S=", s, " H=", h));
  if (nb == 0 || s == 0) return absl::OkStatus();
  if (!a.word || !a.pos || !a.gamma || !a.beta || !a.y)
    return absl::InvalidArgumentError("EmbedLayerNorm: null pointer");
  const bool has_seg = a.segment_ids || a.segment_ids32;
  if (has_seg != (a.segment != nullptr))
    return absl::InvalidArgumentError(
        "EmbedLayerNorm: segment ids and the segment table must be given together");
  const int64_t count = nb * s;
  std::vector<int64_t> word_row, seg_row, pos_row;
  if (auto st = ResolveIds(a.input_ids, a.input_ids32, count, a.word_rows, "input_ids", word_row);
      !st.ok())
    return st;
  if (has_seg) {
    if (auto st = ResolveIds(a.segment_ids, a.segment_ids32, count, a.segment_rows, "segment_ids",
                             seg_row);
        !st.ok())
      return st;
  }
  const bool has_pos = a.position_ids || a.position_ids32;
  if (has_pos) {
    if (a.position_rows != 1 && a.position_rows != nb)
      return absl::InvalidArgumentError(absl::StrCat(
          "EmbedLayerNorm: position_rows must be 1 or B=", nb, ", got ", a.position_rows));
    if (auto st = ResolveIds(a.position_ids, a.position_ids32, a.position_rows * s, a.pos_rows,
                             "position_ids", pos_row);
        !st.ok())
      return st;
  } else if (s > a.pos_rows) {
    return absl::InvalidArgumentError(absl::StrCat("EmbedLayerNorm: sequence length ", s,
                                                   " exceeds the position table's ", a.pos_rows,
                                                   " rows"));
  }
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, count, std::max<int64_t>(1, 4096 / h), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t t = r % s;
      const int64_t p = has_pos ? pos_row[(a.position_rows == 1 ? 0 : r / s) * s + t] : t;
      float* out = a.y + r * h;
      float* e = a.sum ? a.sum + r * h : out;  // the sum, then normalized from it
      k.add_row(a.word + word_row[r] * h, a.pos + p * h,
                has_seg ? a.segment + seg_row[r] * h : nullptr, h, e);
      k.layer_norm_row(e, a.gamma, a.beta, a.eps, h, out);
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
