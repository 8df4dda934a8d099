// Output-size bounds for constant folding (fold_bounds.h). Each rule bounds the largest
// output of one op family from its constant inputs and the output element size `elem`
// (the stored output dtype when known, else 8 bytes).
#include "passes/fold_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "kiln/ir/window.h"
#include "kiln/support/status.h"
#include "passes/rewrite_util.h"

namespace kiln::fold {
namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || MulOverflows(a, b, &r)) return kUnbounded;
  return r;
}

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || AddOverflows(a, b, &r)) return kUnbounded;
  return r;
}

int64_t Product(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = SatMul(n, std::max<int64_t>(d, 0));
  return n;
}

// Element count of numpy broadcasting `a` with `b`, saturating; dims that do not
// broadcast take the larger (the kernel will report the error).
std::vector<int64_t> BroadcastBound(absl::Span<const int64_t> a, absl::Span<const int64_t> b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = std::max(x, y);
  }
  return out;
}

// A rule's access to the node's constant inputs: null when omitted or past the end.
struct In {
  const std::vector<const Tensor*>& ins;
  const Tensor* operator()(size_t i) const { return i < ins.size() ? ins[i] : nullptr; }
};

using BoundRule = int64_t (*)(const Node& n, In in, int64_t elem);

std::string Key(std::string_view domain, std::string_view op) {
  return std::string(domain) + "::" + std::string(op);
}

int64_t ConstantOfShapeBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> shape = rewrite::IntList(in(0));
  if (!shape) return 0;  // the kernel rejects it before allocating
  const Tensor* v = n.attr_tensor("value");
  const int64_t es = v ? static_cast<int64_t>(DTypeSize(v->dtype())) : 4;
  return SatMul(Product(*shape), es);
}

int64_t ExpandBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> shape = rewrite::IntList(in(1));
  if (!in(0) || !shape) return 0;
  return SatMul(Product(BroadcastBound(in(0)->dims(), *shape)),
                static_cast<int64_t>(DTypeSize(in(0)->dtype())));
}

int64_t RangeBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(1) || !in(2) || in(0)->NumElements() != 1 || in(1)->NumElements() != 1 ||
      in(2)->NumElements() != 1)
    return 0;
  const double start = in(0)->GetAsDouble(0), limit = in(1)->GetAsDouble(0),
               delta = in(2)->GetAsDouble(0);
  if (delta == 0) return 0;
  const double count = std::ceil((limit - start) / delta);
  if (!(count < 9e18)) return std::isnan(count) ? 0 : kUnbounded;
  return SatMul(std::max<int64_t>(static_cast<int64_t>(count) + 1, 0),
                static_cast<int64_t>(DTypeSize(in(0)->dtype())));
}

int64_t MatMulBound(const Node& n, In in, int64_t elem) {
  const std::string& op = n.op();
  if (!in(0) || !in(1)) return 0;
  const std::vector<int64_t>& a = in(0)->dims();
  const std::vector<int64_t>& b = in(1)->dims();
  if (op == "Gemm") {  // out [M, N] from 2-D A [M,K] (or [K,M]) and B [K,N] (or [N,K])
    if (a.size() != 2 || b.size() != 2) return 0;
    const int64_t m = n.attr_int_or("transA", 0) ? a[1] : a[0];
    const int64_t nn = n.attr_int_or("transB", 0) ? b[0] : b[1];
    return SatMul(SatMul(m, nn), elem);
  }
  if (a.empty() || b.empty()) return 0;
  const std::vector<int64_t> abatch(a.begin(), a.size() >= 2 ? a.end() - 2 : a.begin());
  const std::vector<int64_t> bbatch(b.begin(), b.size() >= 2 ? b.end() - 2 : b.begin());
  const int64_t m = a.size() >= 2 ? a[a.size() - 2] : 1;
  const int64_t nn = b.size() >= 2 ? b.back() : 1;
  return SatMul(SatMul(Product(BroadcastBound(abatch, bbatch)), SatMul(m, nn)), elem);
}

// ONNX Attention: every output has at most (Q's rows) x (K's and V's rows, past
// included) elements, and Q's and K/V's element counts bound those rows.
int64_t OnnxAttentionBound(const Node&, In in, int64_t elem) {
  int64_t q = 1, kv = 1;
  if (in(0)) q = SatAdd(q, in(0)->NumElements());
  for (size_t i : {1, 2, 4, 5})
    if (in(i)) kv = SatAdd(kv, in(i)->NumElements());
  return SatMul(SatMul(SatMul(q, kv), 4), elem);
}

// Conv, ConvTranspose and the pools: the output's element count from the window geometry
// the kernels use (0 when the kernel would reject the inputs before allocating).
int64_t WindowBound(const Node& n, In in, int64_t elem) {
  const Tensor* x = in(0);
  const bool qlinear = n.op() == "QLinearConv";
  const Tensor* w = in(qlinear ? 3 : 1);
  const bool forward = n.op() == "Conv" || n.op() == "ConvInteger" || qlinear;
  const bool conv = forward || n.op() == "ConvTranspose";
  if (x == nullptr || x->rank() < 3 || (conv && (w == nullptr || w->rank() != x->rank()))) return 0;
  const absl::Span<const int64_t> kernel =
      conv ? absl::MakeSpan(w->dims()).subspan(2) : absl::Span<const int64_t>();
  absl::StatusOr<window::Attrs> a = window::Read(n, x->rank() - 2, kernel);
  if (!a.ok()) return 0;
  int64_t channels = x->dims()[1];
  if (forward) channels = w->dims()[0];
  if (n.op() == "ConvTranspose") channels = SatMul(w->dims()[1], n.attr_int_or("group", 1));
  int64_t total = SatMul(x->dims()[0], channels);
  for (int i = 0; i < a->spatial; ++i) {
    absl::StatusOr<window::Extent> e = n.op() == "ConvTranspose"
                                           ? window::Transposed(*a, i, x->dims()[i + 2])
                                           : window::Forward(*a, i, x->dims()[i + 2]);
    if (!e.ok()) return 0;
    total = SatMul(total, e->out);
  }
  // MaxPool's Indices: as many i64s again.
  return SatMul(SatMul(total, n.op() == "MaxPool" ? 2 : 1), std::max<int64_t>(elem, 8));
}

int64_t GatherBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(1)) return 0;
  return SatMul(SatMul(Product(in(0)->dims()), std::max<int64_t>(in(1)->NumElements(), 1)), elem);
}

// out[i] = data[i] * repeats[i]
int64_t TileBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> reps = rewrite::IntList(in(1));
  if (!in(0) || !reps) return 0;  // the kernel rejects it before allocating
  return SatMul(SatMul(Product(in(0)->dims()), Product(*reps)), elem);
}

// Resize: out[a] = floor(scale[a] * data[a]) for scales; for sizes at most the largest
// size / dim ratio times the dim, rounded up (keep_aspect_ratio_policy may scale an axis
// by another axis's ratio). Every dim bounded as if resized.
int64_t ResizeBound(const Node& n, In in, int64_t elem) {
  if (!in(0)) return 0;
  const std::vector<int64_t>& dims = in(0)->dims();
  double factor = 0;  // the largest per-axis growth
  if (in(3) && in(3)->NumElements() > 0) {
    const std::optional<std::vector<int64_t>> sizes = rewrite::IntList(in(3));
    if (!sizes) return 0;
    std::vector<int64_t> axes;
    if (const std::vector<int64_t>* a = n.attr_ints("axes")) {
      axes = *a;
    } else {
      for (size_t i = 0; i < dims.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (axes.size() != sizes->size()) return 0;  // the kernel rejects it
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t r = static_cast<int64_t>(dims.size());
      const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (a < 0 || a >= r) return 0;
      factor = std::max(factor, static_cast<double>((*sizes)[i]) /
                                    static_cast<double>(std::max<int64_t>(dims[a], 1)));
    }
  } else if (in(2) && in(2)->NumElements() > 0) {
    for (int64_t i = 0; i < in(2)->NumElements(); ++i)
      factor = std::max(factor, in(2)->GetAsDouble(i));
  } else {
    return 0;  // the kernel rejects it
  }
  if (!(factor < 1e15)) return kUnbounded;  // also NaN
  int64_t total = elem;
  for (int64_t d : dims) {
    const double grown = std::ceil(std::max(factor, 1.0) * static_cast<double>(d)) + 1;
    total = SatMul(total, grown < 9e18 ? static_cast<int64_t>(grown) : kUnbounded);
  }
  return total;
}

// GridSample: [N, C, O1..Or] from X's batch and channels and grid's middle dims.
int64_t GridSampleBound(const Node& n, In in, int64_t elem) {
  const Tensor* x = in(0);
  const Tensor* g = in(1);
  if (!x || !g || x->rank() < 3 || g->rank() != x->rank()) return 0;
  const absl::Span<const int64_t> gd = g->dims();
  return SatMul(SatMul(SatMul(x->dims()[0], x->dims()[1]), Product(gd.subspan(1, gd.size() - 2))),
                elem);
}

// AffineGrid: [N, H, W, 2] or [N, D, H, W, 3] from the constant size.
int64_t AffineGridBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> size = rewrite::IntList(in(1));
  if (!size || (size->size() != 4 && size->size() != 5)) return 0;
  for (int64_t d : *size)
    if (d < 0) return 0;
  const int64_t sp = static_cast<int64_t>(size->size()) - 2;
  return SatMul(SatMul(Product(absl::MakeSpan(*size).subspan(2)), SatMul((*size)[0], sp)), elem);
}

// RNN, GRU, LSTM: Y has seq·batch (X's first two dims) × directions × hidden (R's dims 0, 2).
int64_t RecurrentBound(const Node&, In in, int64_t elem) {
  const Tensor* x = in(0);
  const Tensor* r = in(2);
  if (x == nullptr || r == nullptr || x->rank() != 3 || r->rank() != 3) return 0;
  const int64_t sn = SatMul(std::max<int64_t>(x->dims()[0], 1), std::max<int64_t>(x->dims()[1], 1));
  return SatMul(SatMul(sn, SatMul(r->dims()[0], r->dims()[2])), elem);
}

// DFT: [signal dims..., 2] with one signal dim replaced by dft_length (2·dim when omitted,
// covering the inverse onesided default); the largest over the signal dims.
int64_t DftBound(const Node& n, In in, int64_t elem) {
  const bool has_len = n.num_inputs() > 1 && n.input(1);
  if (!in(0) || (has_len && (!in(1) || in(1)->NumElements() != 1))) return 0;
  const std::vector<int64_t>& d = in(0)->dims();
  if (d.size() < 2) return 0;
  int64_t best = 0;
  for (size_t a = 0; a + 1 < d.size(); ++a) {
    const int64_t len = has_len ? in(1)->GetAsInt64(0) : SatMul(d[a], 2);
    int64_t total = SatMul(elem, 2);
    for (size_t i = 0; i + 1 < d.size(); ++i)
      total = SatMul(total, std::max<int64_t>(i == a ? len : d[i], 0));
    best = std::max(best, total);
  }
  return best;
}

// STFT: batch · frames · frame_length · 2, frames = 1 + (length - frame_length) / step.
int64_t StftBound(const Node& n, In in, int64_t elem) {
  const bool has_window = n.num_inputs() > 2 && n.input(2);
  const bool has_frame = n.num_inputs() > 3 && n.input(3);
  if (!in(0) || !in(1) || (has_window && !in(2)) || (has_frame && !in(3))) return 0;
  const std::vector<int64_t>& d = in(0)->dims();
  if (d.size() != 3 || in(1)->NumElements() != 1) return 0;
  const int64_t step = in(1)->GetAsInt64(0);
  int64_t frame = d[1];
  if (has_frame) {
    if (in(3)->NumElements() != 1) return 0;
    frame = in(3)->GetAsInt64(0);
  } else if (has_window) {
    if (in(2)->rank() != 1) return 0;
    frame = in(2)->dims()[0];
  }
  if (step < 1 || frame < 1 || frame > d[1]) return 0;
  const int64_t frames = 1 + (d[1] - frame) / step;
  return SatMul(SatMul(SatMul(SatMul(d[0], frames), frame), 2), elem);
}

// MelWeightMatrix: (dft_length / 2 + 1) · num_mel_bins.
int64_t MelWeightMatrixBound(const Node&, In in, int64_t elem) {
  if (!in(0) || !in(1) || in(0)->NumElements() != 1 || in(1)->NumElements() != 1) return 0;
  const int64_t mels = in(0)->GetAsInt64(0), dft = in(1)->GetAsInt64(0);
  if (mels < 0 || dft < 0) return 0;
  return SatMul(SatMul(dft / 2 + 1, mels), elem);
}

// NonMaxSuppression: at most one [batch, class, box] row of i64 per score.
int64_t NonMaxSuppressionBound(const Node& n, In in, int64_t elem) {
  if (!in(1)) return 0;
  return SatMul(SatMul(Product(in(1)->dims()), 3), 8);
}

// RoiAlign: [num_rois, C, output_height, output_width].
int64_t RoiAlignBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(1) || in(0)->rank() != 4 || in(1)->rank() != 2) return 0;
  const int64_t oh = n.attr_int_or("output_height", 1), ow = n.attr_int_or("output_width", 1);
  if (oh < 1 || ow < 1) return 0;
  return SatMul(SatMul(SatMul(in(1)->dims()[0], in(0)->dims()[1]), SatMul(oh, ow)), elem);
}

// Unique: no output outgrows X's elements, except inverse_indices along an axis of an
// empty X (as long as that axis); four outputs, the index ones i64.
int64_t UniqueBound(const Node& n, In in, int64_t elem) {
  if (!in(0)) return 0;
  int64_t c = std::max<int64_t>(Product(in(0)->dims()), 1);
  for (int64_t d : in(0)->dims()) c = std::max(c, d);
  return SatMul(c, SatMul(std::max<int64_t>(elem, 8), 4));
}

// Col2Im: [N, input dim 1 / prod(block_shape), image_shape...].
int64_t Col2ImBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> image = rewrite::IntList(in(1));
  std::optional<std::vector<int64_t>> block = rewrite::IntList(in(2));
  if (!in(0) || in(0)->rank() != 3 || !image || !block) return 0;
  const int64_t b = Product(*block);
  if (b < 1) return 0;  // the kernel rejects a block dim below 1
  return SatMul(SatMul(in(0)->dims()[0], in(0)->dims()[1] / b), SatMul(Product(*image), elem));
}

// MaxUnpool: output_shape when given, else [N, C, (in - 1)·stride + kernel...] (an upper
// bound: without the pads).
int64_t MaxUnpoolBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || in(0)->rank() < 3) return 0;
  if (in(2)) {
    std::optional<std::vector<int64_t>> shape = rewrite::IntList(in(2));
    return shape ? SatMul(Product(*shape), elem) : 0;
  }
  const size_t k = static_cast<size_t>(in(0)->rank() - 2);
  const std::vector<int64_t>* kernel = n.attr_ints("kernel_shape");
  const std::vector<int64_t>* strides = n.attr_ints("strides");
  if (kernel == nullptr || kernel->size() != k || (strides && strides->size() != k)) return 0;
  const std::vector<int64_t>& d = in(0)->dims();
  int64_t total = SatMul(d[0], d[1]);
  for (size_t i = 0; i < k; ++i) {
    const int64_t s = strides ? (*strides)[i] : 1;
    if (s < 1 || (*kernel)[i] < 1) return 0;
    total = SatMul(total, SatAdd(SatMul(std::max<int64_t>(d[i + 2] - 1, 0), s), (*kernel)[i]));
  }
  return SatMul(total, elem);
}

// QLinearMatMul: MatMul's bound for a (0) and b (3).
int64_t QLinearMatMulBound(const Node& n, In in, int64_t elem) {
  const std::vector<const Tensor*> ab = {in(0), in(3)};
  return MatMulBound(n, In{ab}, elem);
}

// Einsum: every output axis is an axis of some input, so the output holds at most the
// product of the inputs' dims (an empty dim counted as 1: the others still size it).
int64_t EinsumBound(const Node& n, In in, int64_t elem) {
  int64_t total = elem;
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (!in(i)) return 0;  // the kernel rejects it
    for (int64_t d : in(i)->dims()) total = SatMul(total, std::max<int64_t>(d, 1));
  }
  return total;
}

// CenterCropPad: every dim at most the larger of its size and the largest wanted size.
int64_t CenterCropPadBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> shape = rewrite::IntList(in(1));
  if (!in(0) || !shape) return 0;
  int64_t widest = 0;
  for (int64_t v : *shape) widest = std::max(widest, v);
  int64_t total = elem;
  for (int64_t d : in(0)->dims()) total = SatMul(total, std::max(d, widest));
  return total;
}

// The signal windows: `size` elements.
int64_t SignalWindowBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || in(0)->NumElements() != 1) return 0;
  return SatMul(std::max<int64_t>(in(0)->GetAsInt64(0), 0), elem);
}

// out[a] = data[a] + pads_begin[a] + pads_end[a]
int64_t PadBound(const Node& n, In in, int64_t elem) {
  std::optional<std::vector<int64_t>> pads = rewrite::IntList(in(1));
  if (!in(0) || !pads) return 0;
  std::vector<int64_t> dims = in(0)->dims();
  const int64_t r = static_cast<int64_t>(dims.size());
  std::vector<int64_t> axes;
  if (std::optional<std::vector<int64_t>> a = rewrite::IntList(in(3)); in(3) && a) {
    axes = *a;
  } else if (in(3)) {
    return 0;
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const int64_t na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads->size()) != 2 * na) return 0;
  for (int64_t i = 0; i < na; ++i) {
    const int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
    if (ax < 0 || ax >= r) return 0;
    // Negative pads crop; only growth can push the output over the limit.
    dims[ax] = SatAdd(
        dims[ax], SatAdd(std::max<int64_t>((*pads)[i], 0), std::max<int64_t>((*pads)[na + i], 0)));
  }
  return SatMul(Product(dims), elem);
}

// out = indices dims with depth inserted
int64_t OneHotBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(1) || in(1)->NumElements() != 1) return 0;
  const double depth = std::ceil(in(1)->GetAsDouble(0));
  if (!(depth >= 1)) return 0;  // the kernel rejects it (NaN too)
  if (!(depth < 9e18)) return kUnbounded;
  return SatMul(SatMul(Product(in(0)->dims()), static_cast<int64_t>(depth)), elem);
}

int64_t GatherNDBound(const Node& n, In in, int64_t elem) {
  // out = indices.dims[:-1] + data.dims[batch_dims + q:], q = indices.dims[-1].
  if (!in(0) || !in(1) || in(1)->rank() < 1) return 0;
  const std::vector<int64_t>& d = in(0)->dims();
  const std::vector<int64_t>& id = in(1)->dims();
  const int64_t b = n.attr_int_or("batch_dims", 0), q = id.back();
  if (b < 0 || q < 0 || b > static_cast<int64_t>(d.size()) ||
      q > static_cast<int64_t>(d.size()) - b)
    return 0;
  return SatMul(SatMul(Product(absl::MakeConstSpan(id).first(id.size() - 1)),
                       Product(absl::MakeConstSpan(d).subspan(static_cast<size_t>(b + q)))),
                elem);
}

// [rank, count] of i64
int64_t NonZeroBound(const Node& n, In in, int64_t elem) {
  if (!in(0)) return 0;
  return SatMul(SatMul(std::max<int64_t>(in(0)->rank(), 1), Product(in(0)->dims())), 8);
}

int64_t ShapeBound(const Node& n, In in, int64_t elem) {
  if (!in(0)) return 0;
  return SatMul(in(0)->rank(), 8);
}

// Reductions keep every unreduced dim, and an empty reduced axis still gives one
// element: at most the product of the input dims with 0s counted as 1s.
int64_t ReduceBound(const Node& n, In in, int64_t elem) {
  if (!in(0)) return 0;
  int64_t c = 1;
  for (int64_t d : in(0)->dims()) c = SatMul(c, std::max<int64_t>(d, 1));
  return SatMul(c, elem);
}

// X[..., K] · W -> [..., M]
int64_t LinearBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(1) || in(0)->rank() < 1 || in(1)->rank() != 2) return 0;
  const std::vector<int64_t>& x = in(0)->dims();
  const int64_t m = n.attr_int_or("trans_w", 0) ? in(1)->dims()[0] : in(1)->dims()[1];
  return SatMul(SatMul(Product(absl::MakeConstSpan(x).first(x.size() - 1)), m), elem);
}

// [B, S, H] -> [B, H]
int64_t PoolBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || in(0)->rank() != 3) return 0;
  return SatMul(SatMul(in(0)->dims()[0], in(0)->dims()[2]), elem);
}

// hidden [1, T, H], lengths [N] -> [N, H]
int64_t PackedPoolBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(1) || in(0)->rank() != 3 || in(1)->rank() != 1) return 0;
  return SatMul(SatMul(in(1)->dims()[0], in(0)->dims()[2]), elem);
}

// ids [B, S], word [V, H] -> [B, S, H]
int64_t EmbedLayerNormBound(const Node& n, In in, int64_t elem) {
  if (!in(0) || !in(3) || in(3)->rank() != 2) return 0;
  return SatMul(SatMul(Product(in(0)->dims()), in(3)->dims()[1]), elem);
}

const absl::flat_hash_map<std::string, BoundRule>& Rules() {
  static const auto* rules = [] {
    struct Entry {
      std::string_view domain, op;
      BoundRule rule;
    };
    static const Entry kEntries[] = {
        {"", "ConstantOfShape", &ConstantOfShapeBound},
        {"", "Expand", &ExpandBound},
        {"", "Range", &RangeBound},
        {"", "MatMul", &MatMulBound},
        {"", "MatMulInteger", &MatMulBound},
        {"", "QLinearMatMul", &QLinearMatMulBound},
        {"", "Gemm", &MatMulBound},
        {"", "Gather", &GatherBound},
        {"kiln", "BlockQuantGather", &GatherBound},  // (W, indices, ...): as Gather's
        {"", "Tile", &TileBound},
        {"", "Pad", &PadBound},
        {"", "Resize", &ResizeBound},
        {"", "Einsum", &EinsumBound},
        {"", "GridSample", &GridSampleBound},
        {"", "NonMaxSuppression", &NonMaxSuppressionBound},
        {"", "RoiAlign", &RoiAlignBound},
        {"", "Unique", &UniqueBound},
        {"", "Col2Im", &Col2ImBound},
        {"", "MaxUnpool", &MaxUnpoolBound},
        {"", "RNN", &RecurrentBound},
        {"", "GRU", &RecurrentBound},
        {"", "LSTM", &RecurrentBound},
        {"", "DFT", &DftBound},
        {"", "STFT", &StftBound},
        {"", "MelWeightMatrix", &MelWeightMatrixBound},
        {"", "AffineGrid", &AffineGridBound},
        {"", "CenterCropPad", &CenterCropPadBound},
        {"", "HannWindow", &SignalWindowBound},
        {"", "HammingWindow", &SignalWindowBound},
        {"", "BlackmanWindow", &SignalWindowBound},
        {"", "OneHot", &OneHotBound},
        {"", "GatherND", &GatherNDBound},
        {"", "NonZero", &NonZeroBound},
        {"", "Shape", &ShapeBound},
        {"", "ReduceMean", &ReduceBound},
        {"", "ReduceSum", &ReduceBound},
        {"", "ReduceMax", &ReduceBound},
        {"", "ReduceMin", &ReduceBound},
        {"", "ReduceProd", &ReduceBound},
        {"", "ReduceL1", &ReduceBound},
        {"", "ReduceL2", &ReduceBound},
        {"", "ReduceSumSquare", &ReduceBound},
        {"", "ReduceLogSum", &ReduceBound},
        {"", "ReduceLogSumExp", &ReduceBound},
        {"", "ArgMax", &ReduceBound},
        {"", "ArgMin", &ReduceBound},
        {"", "Attention", &OnnxAttentionBound},
        {"", "Conv", &WindowBound},
        {"", "ConvInteger", &WindowBound},
        {"", "QLinearConv", &WindowBound},
        {"", "ConvTranspose", &WindowBound},
        {"", "MaxPool", &WindowBound},
        {"", "AveragePool", &WindowBound},
        {"", "LpPool", &WindowBound},
        {"kiln", "Linear", &LinearBound},
        {"kiln", "Pool", &PoolBound},
        {"kiln", "PackedPool", &PackedPoolBound},
        {"kiln", "EmbedLayerNorm", &EmbedLayerNormBound},
    };
    auto* m = new absl::flat_hash_map<std::string, BoundRule>();
    for (const Entry& e : kEntries) (*m)[Key(e.domain, e.op)] = e.rule;
    return m;
  }();
  return *rules;
}

BoundRule FindRule(std::string_view domain, std::string_view op) {
  auto it = Rules().find(Key(domain, op));
  return it == Rules().end() ? nullptr : it->second;
}

}  // namespace

std::optional<int64_t> StaticOutputBytes(const Node& n, int i) {
  const Type& t = n.output_info(i).type;
  if (t.dtype == DType::kUndefined || DTypeSize(t.dtype) == 0) return std::nullopt;
  std::optional<std::vector<int64_t>> dims = t.StaticDims();
  if (!dims) return std::nullopt;
  return SatMul(Product(*dims), static_cast<int64_t>(DTypeSize(t.dtype)));
}

bool HasBoundRule(std::string_view domain, std::string_view op) {
  return FindRule(domain, op) != nullptr;
}

int64_t BoundOutputBytes(const Node& n, const OpInfo* info, const std::vector<const Tensor*>& ins) {
  // Element size: the stored output dtype when known, else the widest (8 bytes).
  int64_t elem = 8;
  bool all_known = true;
  int64_t widest = 0;
  for (int i = 0; i < n.num_outputs(); ++i) {
    const DType dt = n.output_info(i).type.dtype;
    if (dt == DType::kUndefined) all_known = false;
    widest = std::max<int64_t>(widest, static_cast<int64_t>(DTypeSize(dt)));
  }
  if (all_known && widest > 0) elem = widest;

  if (info != nullptr && info->grows) {
    if (BoundRule rule = FindRule(n.domain(), n.op())) return rule(n, In{ins}, elem);
  }
  if (HasTrait(info, kBroadcasting)) {
    std::vector<int64_t> dims;
    for (const Tensor* t : ins)
      if (t) dims = BroadcastBound(dims, t->dims());
    return SatMul(Product(dims), elem);
  }
  // Every other op produces at most as many elements as its inputs hold together (unary,
  // normalizations, Softmax, CumSum, Trilu, Concat, Split, Slice, the views, Transpose,
  // GatherElements, ScatterND, TopK, Size, kiln SkipLayerNorm/RMSNorm/SkipRMSNorm/
  // MultiHeadAttention): the catalogue leaves their `grows` false.
  int64_t total = 0;
  for (const Tensor* t : ins)
    if (t) total = SatAdd(total, std::max<int64_t>(t->NumElements(), 1));
  return SatMul(total, elem);
}

}  // namespace kiln::fold
