// Reference kernels of ONNX's decoder ops besides Attention (onnx_attention.cc):
//  - RotaryEmbedding (opset 23): X is [B, N, S, D] or [B, S, N·D] (num_heads given);
//    cos_cache / sin_cache are [max_position, R/2] read at position_ids [B, S], or
//    [B, S, R/2] without them; the first R = rotary_embedding_dim (default D) elements of
//    each head rotate, in halves (x1 = x[:R/2], x2 = x[R/2:R]) or interleaved pairs (x1 =
//    x[0::2], x2 = x[1::2]): (x1, x2) -> (x1·cos - x2·sin, x1·sin + x2·cos); the rest pass
//    through. Computed in double, one rounding per output.
//  - TensorScatter (opset 24): the KV-cache update. present = past_cache with update's
//    rows written along `axis` (default -2, never the batch axis 0) starting at
//    write_indices[b] (0 when omitted) for batch row b; mode "circular" wraps positions
//    modulo the cache length, "linear" refuses a write past the end.
// Both follow onnx's reference implementations (onnx/reference/ops/op_rotary_embedding.py,
// op_tensor_scatter.py); every index is checked before it is read or written.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

Result RotaryEmbeddingKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* cos, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* sin, Arg(in, 2, node.op()));
  const Tensor* pos = OptArg(in, 3);
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  if (cos->dtype() != x->dtype() || sin->dtype() != x->dtype())
    return Bad("cos_cache and sin_cache must have the input's dtype");
  const std::vector<int64_t>& d = x->dims();
  if (x->NumElements() == 0) return std::vector<Tensor>{Tensor(x->dtype(), d)};
  // [B, S, N, D] view of X: element (b, s, n, i) at b·bs + s·ss + n·ns + i.
  int64_t B, S, N, D, bs, ss, ns;
  if (d.size() == 4) {
    B = d[0], N = d[1], S = d[2], D = d[3];
    bs = N * S * D, ns = S * D, ss = D;
  } else if (d.size() == 3) {
    const int64_t heads = node.attr_int_or("num_heads", 0);
    if (heads <= 0 || d[2] % heads != 0)
      return Bad(absl::StrCat("a 3-D input needs num_heads dividing its last dim ", d[2]));
    B = d[0], S = d[1], N = heads, D = d[2] / heads;
    bs = S * N * D, ss = N * D, ns = D;
  } else {
    return Bad(absl::StrCat("input must be 3-D or 4-D, got ", DimsStr(d)));
  }
  int64_t R = node.attr_int_or("rotary_embedding_dim", 0);
  if (R == 0) R = D;
  if (R < 0 || R > D || R % 2 != 0)
    return Bad(absl::StrCat("rotary_embedding_dim ", R, " must be even and at most ", D));
  const int64_t half = R / 2;
  if (cos->dims() != sin->dims()) return Bad("cos_cache and sin_cache differ in shape");
  // cos/sin row for (b, s): pos[b, s] of a [max_pos, R/2] table, or (b, s) of [B, S, R/2].
  std::vector<int64_t> row(static_cast<size_t>(B * S));
  if (pos != nullptr) {
    if (pos->dims() != std::vector<int64_t>{B, S})
      return Bad(
          absl::StrCat("position_ids must be ", DimsStr({B, S}), ", got ", DimsStr(pos->dims())));
    if (cos->rank() != 2 || cos->dims()[1] != half)
      return Bad(absl::StrCat("with position_ids the caches must be [max_position, ", half,
                              "], got ", DimsStr(cos->dims())));
    for (int64_t i = 0; i < B * S; ++i) {
      const int64_t p = pos->GetAsInt64(i);
      if (p < 0 || p >= cos->dims()[0])
        return Bad(
            absl::StrCat("position id ", p, " is outside the caches' ", cos->dims()[0], " rows"));
      row[i] = p;
    }
  } else {
    if (cos->dims() != std::vector<int64_t>{B, S, half})
      return Bad(absl::StrCat("without position_ids the caches must be ", DimsStr({B, S, half}),
                              ", got ", DimsStr(cos->dims())));
    for (int64_t i = 0; i < B * S; ++i) row[i] = i;
  }
  const bool interleaved = node.attr_int_or("interleaved", 0) != 0;
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), d));
  std::memcpy(y.raw(), x->raw(), x->NumBytes());  // the unrotated part passes through
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t r = row[b * S + s] * half;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = b * bs + s * ss + n * ns;
        for (int64_t j = 0; j < half; ++j) {
          const int64_t i1 = base + (interleaved ? 2 * j : j);
          const int64_t i2 = base + (interleaved ? 2 * j + 1 : j + half);
          const double x1 = x->GetAsDouble(i1), x2 = x->GetAsDouble(i2);
          const double c = cos->GetAsDouble(r + j), sn = sin->GetAsDouble(r + j);
          y.SetFromDouble(i1, x1 * c - x2 * sn);
          y.SetFromDouble(i2, x1 * sn + x2 * c);
        }
      }
    }
  return std::vector<Tensor>{std::move(y)};
}

Result TensorScatterKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* past, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* update, Arg(in, 1, node.op()));
  const Tensor* where = OptArg(in, 2);
  if (update->dtype() != past->dtype()) return Bad("update must have past_cache's dtype");
  const int r = past->rank();
  if (r < 2 || update->rank() != r)
    return Bad(absl::StrCat("past_cache ", DimsStr(past->dims()), " and update ",
                            DimsStr(update->dims()), " must have one rank, at least 2"));
  KILN_ASSIGN_OR_RETURN(const int axis, NormalizeAxis(node.attr_int_or("axis", -2), r));
  if (axis == 0) return Bad("axis must not be the batch axis 0");
  const std::vector<int64_t>& pd = past->dims();
  const std::vector<int64_t>& ud = update->dims();
  for (int i = 0; i < r; ++i)
    if (i == axis ? ud[i] > pd[i] : ud[i] != pd[i])
      return Bad(absl::StrCat("update ", DimsStr(ud), " does not fit past_cache ", DimsStr(pd),
                              " along axis ", axis));
  const std::string* mode_attr = node.attr_string("mode");
  const std::string mode = mode_attr ? *mode_attr : "linear";
  if (mode != "linear" && mode != "circular")
    return Bad(absl::StrCat("mode '", mode, "' is not linear or circular"));
  const int64_t batch = pd[0], cap = pd[axis], seq = ud[axis];
  std::vector<int64_t> start(static_cast<size_t>(batch), 0);
  if (where != nullptr) {
    if (where->dims() != std::vector<int64_t>{batch})
      return Bad(absl::StrCat("write_indices must be [", batch, "], got ", DimsStr(where->dims())));
    for (int64_t b = 0; b < batch; ++b) {
      start[b] = where->GetAsInt64(b);
      if (start[b] < 0 || (mode == "linear" && start[b] > cap - seq))
        return Bad(absl::StrCat("write index ", start[b], " for batch row ", b, " and ", seq,
                                " new positions do not fit ", cap));
    }
  }
  // Rows of `inner` contiguous elements: [outer (dims 1..axis-1 within a batch row),
  // position, inner (dims after axis)].
  int64_t outer = 1, inner = 1;
  for (int i = 1; i < axis; ++i) outer *= pd[i];
  for (int i = axis + 1; i < r; ++i) inner *= pd[i];
  const size_t es = DTypeSize(past->dtype());
  if (es == 0) return UnsupportedDType(node.op(), past->dtype());
  Tensor y = past->Clone();
  const std::byte* src = update->raw();
  std::byte* dst = y.raw();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t at = (start[b] % cap + s) % cap;  // linear: start + s < cap, checked
        const int64_t from = ((b * outer + o) * seq + s) * inner;
        const int64_t to = ((b * outer + o) * cap + at) * inner;
        std::memcpy(dst + to * es, src + from * es, static_cast<size_t>(inner) * es);
      }
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace

void RegisterDecoderKernels(KernelTable& t) {
  t[KernelKey("", "RotaryEmbedding")] = &RotaryEmbeddingKernel;
  t[KernelKey("", "TensorScatter")] = &TensorScatterKernel;
}

}  // namespace kiln::reference
