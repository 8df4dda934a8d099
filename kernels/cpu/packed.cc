// Packed-token kernels (packed.h).
#include "kernels/cpu/packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/cumsum.h"
#include "kernels/cpu/isa_kernels.h"
#include "kiln/support/status.h"

namespace kiln::cpu {
namespace {

// Checks the lengths against the T tokens there are; the first token after the last
// sequence in *used.
absl::Status CheckLengths(const int64_t* lengths, int64_t sequences, int64_t tokens,
                          int64_t* used) {
  if (sequences < 0 || tokens < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("packed kernel got ", sequences, " sequences and ", tokens, " tokens"));
  if (sequences > 0 && lengths == nullptr)
    return absl::InvalidArgumentError("packed kernel: null lengths");
  int64_t sum = 0;
  for (int64_t b = 0; b < sequences; ++b) {
    if (lengths[b] < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", b, " has a negative length (", lengths[b], ")"));
    if (lengths[b] > tokens - sum)
      return absl::InvalidArgumentError(
          absl::StrCat("the sequence lengths add up to more than the ", tokens,
                       " tokens (at sequence ", b, ")"));
    sum += lengths[b];
  }
  *used = sum;
  return absl::OkStatus();
}

}  // namespace

absl::Status PackedAttention(const CpuContext& ctx, const PackedAttentionArgs& a) {
  const int64_t nh = a.num_heads, d = a.head_size;
  const int64_t nkv = a.num_kv_heads > 0 ? a.num_kv_heads : nh;
  if (nh <= 0 || d <= 0 || nh % nkv != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("PackedAttention got N=", nh, " Nkv=", nkv, " D=", d, " (Nkv must divide N)"));
  int64_t used = 0;
  KILN_RETURN_IF_ERROR(CheckLengths(a.lengths, a.sequences, a.tokens, &used));
  if (a.tokens == 0) return absl::OkStatus();
  if (!a.qkv || !a.y) return absl::InvalidArgumentError("PackedAttention: null pointer");
  const int64_t ld = (nh + 2 * nkv) * d, h = nh * d;
  std::fill(a.y + used * h, a.y + a.tokens * h, 0.0f);
  int64_t off = 0;
  for (int64_t b = 0; b < a.sequences; ++b) {
    const int64_t len = a.lengths[b];
    if (len == 0) continue;
    MultiHeadAttentionArgs m;
    m.qkv = a.qkv + off * ld;
    m.batch = 1;
    m.seq = len;
    m.num_heads = nh;
    m.num_kv_heads = nkv;
    m.head_size = d;
    m.scale = a.scale;
    m.y = a.y + off * h;
    KILN_RETURN_IF_ERROR(
        internal::MultiHeadAttentionWithPath(ctx, m, internal::AttentionPath::kAuto));
    off += len;
  }
  return absl::OkStatus();
}

absl::Status PackedPool(const CpuContext& ctx, const PackedPoolArgs& a) {
  const int64_t nb = a.sequences, h = a.hidden_size;
  if (h < 0) return absl::InvalidArgumentError(absl::StrCat("PackedPool got H=", h));
  int64_t used = 0;
  KILN_RETURN_IF_ERROR(CheckLengths(a.lengths, nb, a.tokens, &used));
  if (nb == 0 || h == 0) return absl::OkStatus();
  if (!a.y || (a.tokens > 0 && !a.hidden))
    return absl::InvalidArgumentError("PackedPool: null pointer");
  std::vector<int64_t> off(static_cast<size_t>(nb) + 1, 0);
  for (int64_t b = 0; b < nb; ++b) off[b + 1] = off[b] + a.lengths[b];
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, nb, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* out = a.y + b * h;
      const int64_t len = off[b + 1] - off[b];
      std::fill(out, out + h, 0.0f);
      if (len == 0) continue;
      const float* rows = a.hidden + off[b] * h;
      if (a.mode == PoolMode::kCls) {
        std::copy(rows, rows + h, out);
      } else {
        // As the padded kernel with a 0/1 mask: the visible rows in order, then 1 / count.
        for (int64_t t = 0; t < len; ++t) k.axpy(1.0f, rows + t * h, h, out);
        k.scale(1.0f / static_cast<float>(len), out, h);
      }
      if (a.normalize) {
        const float norm = std::sqrt(k.sum_squares(out, h));
        k.scale(1.0f / std::max(norm, 1e-12f), out, h);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status PackedPositions(const int64_t* lengths, int64_t sequences, int64_t tokens,
                             int64_t* y) {
  int64_t used = 0;
  KILN_RETURN_IF_ERROR(CheckLengths(lengths, sequences, tokens, &used));
  if (tokens > 0 && y == nullptr)
    return absl::InvalidArgumentError("PackedPositions: null pointer");
  int64_t t = 0;
  for (int64_t b = 0; b < sequences; ++b)
    for (int64_t i = 0; i < lengths[b]; ++i) y[t++] = i;
  std::fill(y + used, y + tokens, int64_t{0});
  return absl::OkStatus();
}

absl::Status PackedCumSum(const CpuContext& ctx, const PackedCumSumArgs& a) {
  int64_t used = 0;
  KILN_RETURN_IF_ERROR(CheckLengths(a.lengths, a.sequences, a.tokens, &used));
  if (a.tokens > 0 && (a.x == nullptr || a.y == nullptr))
    return absl::InvalidArgumentError("PackedCumSum: null pointer");
  const size_t elem = DTypeSize(a.dtype);
  const auto* x = static_cast<const std::byte*>(a.x);
  auto* y = static_cast<std::byte*>(a.y);
  int64_t t = 0;
  for (int64_t b = 0; b < a.sequences; t += a.lengths[b], ++b) {
    if (a.lengths[b] == 0) continue;
    CumSumArgs c;
    c.x = x + t * elem;
    c.y = y + t * elem;
    c.dtype = a.dtype;
    c.outer = c.inner = 1;
    c.len = a.lengths[b];
    c.exclusive = a.exclusive;
    KILN_RETURN_IF_ERROR(CumSum(ctx, c));
  }
  std::memset(y + used * elem, 0, static_cast<size_t>(a.tokens - used) * elem);
  return absl::OkStatus();
}

}  // namespace kiln::cpu
