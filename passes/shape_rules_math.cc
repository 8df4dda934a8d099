// Shape rules of the math family: MatMul (1-D operands and batch broadcasting),
// MatMulInteger, Gemm,
// the Reduce* ops (opset-18 form: optional `axes` input, keepdims, noop_with_empty_axes)
// ArgMax, Einsum, and the decoder ops RotaryEmbedding (input 0's type) and TensorScatter.
// Reductions whose axes input is not a known constant keep what can still be
// said (the rank with keepdims; dims that are already 1).
#include <algorithm>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/einsum.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

absl::Status CheckInner(const RuleContext& ctx, const Dim& k1, const Dim& k2) {
  if (k1.is_known() && k2.is_known() && k1.value() != k2.value())
    return ctx.Error(absl::StrCat("inner dimensions differ: ", k1.value(), " vs ", k2.value()));
  return absl::OkStatus();
}

// MatMul of inputs `ia` and `ib` (numpy's rules: 1-D operands, batch broadcasting).
absl::StatusOr<std::vector<Type>> MatMulOf(const RuleContext& ctx, int ia, int ib) {
  const Type& a = ctx.input_type(ia);
  const Type& b = ctx.input_type(ib);
  const DType dt = a.dtype != DType::kUndefined ? a.dtype : b.dtype;
  if (!a.has_rank() || !b.has_rank()) return Outputs(ctx, MakeType(dt, std::nullopt));
  if (a.rank() == 0 || b.rank() == 0) return ctx.Error("MatMul operands must have rank >= 1");
  Shape sa = *a.shape, sb = *b.shape;
  const bool drop_m = sa.size() == 1, drop_n = sb.size() == 1;
  if (drop_m) sa.insert(sa.begin(), Dim::Known(1));
  if (drop_n) sb.push_back(Dim::Known(1));
  KILN_RETURN_IF_ERROR(CheckInner(ctx, sa.back(), sb[sb.size() - 2]));
  const std::optional<Shape> batch_a = Shape(sa.begin(), sa.end() - 2);
  const std::optional<Shape> batch_b = Shape(sb.begin(), sb.end() - 2);
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> out, BroadcastShapes(ctx, {&batch_a, &batch_b}));
  if (!drop_m) out->push_back(sa[sa.size() - 2]);
  if (!drop_n) out->push_back(sb.back());
  return Outputs(ctx, MakeType(dt, std::move(out)));
}

absl::StatusOr<std::vector<Type>> MatMulRule(const RuleContext& ctx) { return MatMulOf(ctx, 0, 1); }

// QLinearMatMul: MatMul of a (0) and b (3), in y_zero_point's dtype (a's without one).
absl::StatusOr<std::vector<Type>> QLinearMatMulRule(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<Type> out, MatMulOf(ctx, 0, 3));
  for (Type& t : out)
    t.dtype = ctx.has_input(7) ? ctx.input_type(7).dtype : ctx.input_type(0).dtype;
  return out;
}

// MatMulInteger: MatMul's shape, int32.
absl::StatusOr<std::vector<Type>> MatMulIntegerRule(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<Type> out, MatMulRule(ctx));
  for (Type& t : out) t.dtype = DType::kI32;
  return out;
}

absl::StatusOr<std::vector<Type>> GemmRule(const RuleContext& ctx) {
  const Type& a = ctx.input_type(0);
  const Type& b = ctx.input_type(1);
  const DType dt = a.dtype != DType::kUndefined ? a.dtype : b.dtype;
  if ((a.has_rank() && a.rank() != 2) || (b.has_rank() && b.rank() != 2))
    return ctx.Error("Gemm operands must have rank 2");
  const bool ta = ctx.node().attr_int_or("transA", 0) != 0;
  const bool tb = ctx.node().attr_int_or("transB", 0) != 0;
  Dim m, n, k1, k2;
  if (a.has_rank()) {
    m = (*a.shape)[ta ? 1 : 0];
    k1 = (*a.shape)[ta ? 0 : 1];
  }
  if (b.has_rank()) {
    k2 = (*b.shape)[tb ? 1 : 0];
    n = (*b.shape)[tb ? 0 : 1];
  }
  KILN_RETURN_IF_ERROR(CheckInner(ctx, k1, k2));
  return Outputs(ctx, MakeType(dt, Shape{m, n}));
}

absl::StatusOr<std::vector<Type>> ReduceRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const bool keepdims = ctx.node().attr_int_or("keepdims", 1) != 0;
  const bool noop = ctx.node().attr_int_or("noop_with_empty_axes", 0) != 0;
  std::optional<std::vector<int64_t>> axes;
  if (!ctx.has_input(1)) {
    axes.emplace();
  } else {
    axes = ctx.const_ints(1);
    const Type& at = ctx.input_type(1);
    if (!axes && at.is_static() && at.rank() == 1 && (*at.shape)[0].value() == 0) axes.emplace();
  }
  if (axes && axes->empty() && noop) return Outputs(ctx, x);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  Shape out;
  if (axes) {
    std::set<int64_t> reduced;
    for (int64_t a : *axes) {
      KILN_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, r));
      if (!reduced.insert(n).second) return ctx.Error(absl::StrCat("axis ", a, " repeats"));
    }
    for (int64_t i = 0; i < r; ++i) {
      const bool all = axes->empty();
      if (all || reduced.count(i)) {
        if (keepdims) out.push_back(Dim::Known(1));
      } else {
        out.push_back((*x.shape)[i]);
      }
    }
    return Outputs(ctx, MakeType(x.dtype, std::move(out)));
  }
  // Axes not known: with keepdims the rank stays and dims already 1 stay 1.
  if (keepdims) {
    for (const Dim& d : *x.shape) out.push_back(d == Dim::Known(1) ? d : Dim());
    return Outputs(ctx, MakeType(x.dtype, std::move(out)));
  }
  const Type& at = ctx.input_type(1);
  if (at.is_static() && at.rank() == 1 && (*at.shape)[0].value() <= r)
    return Outputs(ctx, MakeType(x.dtype, Shape(r - (*at.shape)[0].value(), Dim())));
  return Outputs(ctx, MakeType(x.dtype, std::nullopt));
}

absl::StatusOr<std::vector<Type>> ArgMaxRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(DType::kI64, std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(ctx, ctx.node().attr_int_or("axis", 0), x.rank()));
  const bool keepdims = ctx.node().attr_int_or("keepdims", 1) != 0;
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != axis) {
      out.push_back((*x.shape)[i]);
    } else if (keepdims) {
      out.push_back(Dim::Known(1));
    }
  }
  return Outputs(ctx, MakeType(DType::kI64, std::move(out)));
}

// ONNX Attention (opset 23): Y [B, Hq, Sq, Dv] (4-D) or [B, Sq, Hq·Dv] (3-D); present
// key/value [B, Hkv, P + Skv, D/Dv]; qk_matmul_output [B, Hq, Sq, P + Skv].
absl::StatusOr<std::vector<Type>> OnnxAttentionRule(const RuleContext& ctx) {
  const Type& q = ctx.input_type(0);
  const Type& k = ctx.input_type(1);
  const Type& v = ctx.input_type(2);
  const Type& pk = ctx.input_type(4);
  std::vector<Type> out(ctx.node().num_outputs());
  out[0] = MakeType(q.dtype, std::nullopt);
  for (size_t i = 1; i < out.size(); ++i)
    out[i] = MakeType(i == 2 ? v.dtype : i == 1 ? k.dtype : q.dtype, std::nullopt);
  if (!q.has_rank() || !k.has_rank() || !v.has_rank()) return out;
  const int r = q.rank();
  if ((r != 3 && r != 4) || k.rank() != r || v.rank() != r)
    return ctx.Error("Q, K and V must all be 3-D or all 4-D");
  const Shape &sq = *q.shape, &sk = *k.shape, &sv = *v.shape;
  const int64_t hq_attr = ctx.node().attr_int_or("q_num_heads", 0);
  const int64_t hkv_attr = ctx.node().attr_int_or("kv_num_heads", 0);
  auto div = [](const Dim& d, int64_t n) {
    return d.is_known() && n > 0 && d.value() % n == 0 ? Dim::Known(d.value() / n) : Dim();
  };
  const Dim batch = sq[0];
  const Dim hq = r == 4 ? sq[1] : hq_attr > 0 ? Dim::Known(hq_attr) : Dim();
  const Dim hkv = r == 4 ? sk[1] : hkv_attr > 0 ? Dim::Known(hkv_attr) : Dim();
  const Dim seq_q = r == 4 ? sq[2] : sq[1];
  const Dim seq_kv = r == 4 ? sk[2] : sk[1];
  const Dim dk = r == 4 ? sk[3] : div(sk[2], hkv_attr);
  const Dim dv = r == 4 ? sv[3] : div(sv[2], hkv_attr);
  Dim total = seq_kv;
  if (ctx.has_input(4)) {
    const Dim past = pk.has_rank() && pk.rank() == 4 ? (*pk.shape)[2] : Dim();
    total =
        past.is_known() && seq_kv.is_known() ? Dim::Known(past.value() + seq_kv.value()) : Dim();
  }
  if (r == 4) {
    out[0] = MakeType(q.dtype, Shape{batch, hq, seq_q, dv});
  } else {
    out[0] = MakeType(
        q.dtype,
        Shape{batch, seq_q,
              hq.is_known() && dv.is_known() ? Dim::Known(hq.value() * dv.value()) : Dim()});
  }
  if (out.size() > 1) out[1] = MakeType(k.dtype, Shape{batch, hkv, total, dk});
  if (out.size() > 2) out[2] = MakeType(v.dtype, Shape{batch, hkv, total, dv});
  if (out.size() > 3) out[3] = MakeType(q.dtype, Shape{batch, hq, seq_q, total});
  return out;
}

// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss: the loss is the target's shape
// (reduction "none") or a scalar; SoftmaxCrossEntropyLoss's log_prob is the scores' type.
absl::StatusOr<std::vector<Type>> LossRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const std::string* red = ctx.node().attr_string("reduction");
  std::vector<Type> out(ctx.node().num_outputs(), x);
  if (red != nullptr && *red == "none") {
    out[0] = MakeType(x.dtype, ctx.input_type(1).shape);
  } else {
    out[0] = MakeType(x.dtype, Shape{});
  }
  return out;
}

// EyeLike: the input's shape, of `dtype` (the input's when absent).
absl::StatusOr<std::vector<Type>> EyeLikeRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  DType dt = x.dtype;
  if (ctx.node().has_attr("dtype")) {
    const std::optional<DType> d =
        DTypeFromOnnx(static_cast<int32_t>(ctx.node().attr_int_or("dtype", 0)));
    if (!d) return ctx.Error("attribute 'dtype' is not a known ONNX dtype");
    dt = *d;
  }
  if (x.has_rank() && x.rank() != 2) return ctx.Error("EyeLike's input must be 2-D");
  return Outputs(ctx, MakeType(dt, x.shape));
}

// Einsum: the output term's axes, each letter's dim from an input axis it names (known
// values preferred; two known values that differ are an error), the `...` axes the
// inputs' broadcast. Unknown rank when an input's rank is.
absl::StatusOr<std::vector<Type>> EinsumRule(const RuleContext& ctx) {
  const std::string* eq = ctx.node().attr_string("equation");
  if (eq == nullptr) return ctx.Error("Einsum needs the 'equation' attribute");
  absl::StatusOr<EinsumSpec> spec = ParseEinsum(*eq, static_cast<size_t>(ctx.num_inputs()));
  if (!spec.ok()) return ctx.Error(std::string(spec.status().message()));
  const DType dt = ctx.input_type(0).dtype;
  std::vector<std::optional<Dim>> dim_of(128);
  Shape ell;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    if (!t.has_rank()) return Outputs(ctx, MakeType(dt, std::nullopt));
    const std::vector<int>& labels = spec->inputs[i];
    const bool has_ell = EinsumHasEllipsis(labels);
    const int64_t ell_rank = t.rank() - static_cast<int64_t>(labels.size()) + (has_ell ? 1 : 0);
    if (ell_rank < 0 || (!has_ell && ell_rank != 0))
      return ctx.Error(absl::StrCat("input ", i, " has rank ", t.rank(), ", its term names ",
                                    labels.size() - (has_ell ? 1 : 0), " axes"));
    int64_t axis = 0;
    for (int l : labels) {
      if (l == kEinsumEllipsis) {
        const std::optional<Shape> mine =
            Shape(t.shape->begin() + axis, t.shape->begin() + axis + ell_rank);
        const std::optional<Shape> so_far = ell;
        KILN_ASSIGN_OR_RETURN(std::optional<Shape> b, BroadcastShapes(ctx, {&so_far, &mine}));
        ell = *b;
        axis += ell_rank;
        continue;
      }
      const Dim& d = (*t.shape)[axis++];
      if (!dim_of[l] || (!dim_of[l]->is_known() && d.is_known())) {
        dim_of[l] = d;
      } else if (dim_of[l]->is_known() && d.is_known() && dim_of[l]->value() != d.value()) {
        return ctx.Error(absl::StrCat("'", std::string(1, static_cast<char>(l)), "' is ",
                                      dim_of[l]->value(), " and ", d.value()));
      }
    }
  }
  Shape out;
  for (int l : spec->output) {
    if (l == kEinsumEllipsis) {
      out.insert(out.end(), ell.begin(), ell.end());
    } else {
      out.push_back(*dim_of[l]);
    }
  }
  return Outputs(ctx, MakeType(dt, std::move(out)));
}

// The windows: 1-D of the constant size (unknown otherwise) in output_datatype.
absl::StatusOr<std::vector<Type>> WindowRule(const RuleContext& ctx) {
  const int64_t code = ctx.node().attr_int_or("output_datatype", 1);
  const std::optional<DType> dt = DTypeFromOnnx(static_cast<int32_t>(code));
  if (!dt) return ctx.Error(absl::StrCat("output_datatype ", code, " is not a known dtype"));
  const std::optional<std::vector<int64_t>> size = ctx.const_ints(0);
  const Dim d = size && size->size() == 1 && (*size)[0] >= 0 ? Dim::Known((*size)[0]) : Dim();
  return Outputs(ctx, MakeType(*dt, Shape{d}));
}

// Det: [..., M, M] -> [...].
absl::StatusOr<std::vector<Type>> DetRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  if (x.rank() < 2) return ctx.Error("Det's input must be [..., M, M]");
  return Outputs(ctx, MakeType(x.dtype, Shape(x.shape->begin(), x.shape->end() - 2)));
}

// RNN, GRU, LSTM: Y [seq, D, batch, H] ([batch, seq, D, H] for layout 1), Y_h and Y_c
// [D, batch, H] ([batch, D, H]); D = 2 for direction bidirectional else 1, H from
// hidden_size or R's last dim; every output in X's dtype.
absl::StatusOr<std::vector<Type>> RecurrentRule(const RuleContext& ctx) {
  const Node& n = ctx.node();
  const Type& x = ctx.input_type(0);
  const int64_t layout = n.attr_int_or("layout", 0);
  if (layout != 0 && layout != 1)
    return ctx.Error(absl::StrCat("layout must be 0 or 1, got ", layout));
  const std::string* dir_attr = n.attr_string("direction");
  const std::string dir = dir_attr != nullptr ? *dir_attr : "forward";
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ctx.Error(absl::StrCat("unknown direction '", dir, "'"));
  const Dim d = Dim::Known(dir == "bidirectional" ? 2 : 1);
  Dim h;
  const Type& r = ctx.input_type(2);
  if (const std::optional<int64_t> hs = n.attr_int("hidden_size")) {
    if (*hs < 0) return ctx.Error(absl::StrCat("hidden_size ", *hs, " is negative"));
    h = Dim::Known(*hs);
  } else if (ctx.has_input(2) && r.has_rank() && r.rank() == 3) {
    h = (*r.shape)[2];
  }
  std::optional<Shape> y, state;
  if (x.has_rank()) {
    if (x.rank() != 3) return ctx.Error(absl::StrCat("X must be 3-D, got rank ", x.rank()));
    const Dim seq = (*x.shape)[layout == 0 ? 0 : 1];
    const Dim batch = (*x.shape)[layout == 0 ? 1 : 0];
    y = layout == 0 ? Shape{seq, d, batch, h} : Shape{batch, seq, d, h};
    state = layout == 0 ? Shape{d, batch, h} : Shape{batch, d, h};
  }
  std::vector<Type> out = Outputs(ctx, MakeType(x.dtype, y));
  for (size_t i = 1; i < out.size(); ++i) out[i] = MakeType(x.dtype, state);
  return out;
}

// DFT: the input's shape with the axis dim dft_length (dft_length / 2 + 1 for the forward
// onesided transform; default the axis dim, 2·(dim - 1) for the inverse onesided one) and
// the last dim 2 (1 for the inverse onesided transform). Axis: the `axis` attribute (import
// sets it for opsets before 20), else constant input 2, else -2.
absl::StatusOr<std::vector<Type>> DftRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  if (r < 2) return ctx.Error("DFT's input must be [..., 1] or [..., 2]");
  const Node& n = ctx.node();
  const bool inverse = n.attr_int_or("inverse", 0) != 0;
  const bool onesided = n.attr_int_or("onesided", 0) != 0;
  Shape out = *x.shape;
  out[r - 1] = Dim::Known(inverse && onesided ? 1 : 2);
  std::optional<int64_t> axis = n.attr_int("axis");
  if (!axis && !ctx.has_input(2)) {
    axis = -2;
  } else if (!axis) {
    if (std::optional<std::vector<int64_t>> c = ctx.const_ints(2); c && c->size() == 1)
      axis = (*c)[0];
  }
  if (!axis) {  // not a constant: any signal dim may be the transformed one
    for (int64_t i = 0; i < r - 1; ++i) out[i] = Dim();
    return Outputs(ctx, MakeType(x.dtype, std::move(out)));
  }
  if (*axis < -r || *axis > r - 2 || *axis == -1)
    return ctx.Error(absl::StrCat("DFT axis ", *axis, " is out of range for rank ", r));
  const int64_t ax = *axis < 0 ? *axis + r : *axis;
  const Dim& d = (*x.shape)[ax];
  if (ctx.has_input(1)) {
    const std::optional<std::vector<int64_t>> c = ctx.const_ints(1);
    const int64_t len = c && c->size() == 1 ? (*c)[0] : -1;
    out[ax] = len < 1 ? Dim() : Dim::Known(onesided && !inverse ? len / 2 + 1 : len);
  } else if (onesided) {
    out[ax] = !d.is_known() ? Dim()
              : inverse     ? Dim::Known(2 * (d.value() - 1))
                            : Dim::Known(d.value() / 2 + 1);
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// STFT: [batch, frames, bins, 2]; frame_length is input 3, else the window's length, else
// the signal's; frames = 1 + (length - frame_length) / frame_step; bins = frame_length / 2
// + 1 when onesided (the default), else frame_length.
absl::StatusOr<std::vector<Type>> StftRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (x.has_rank() && x.rank() != 3)
    return ctx.Error("STFT's signal must be [batch, length, 1] or [batch, length, 2]");
  const Dim batch = x.has_rank() ? (*x.shape)[0] : Dim();
  std::optional<int64_t> len;
  if (x.has_rank() && (*x.shape)[1].is_known()) len = (*x.shape)[1].value();
  std::optional<int64_t> frame;
  if (ctx.has_input(3)) {
    if (std::optional<std::vector<int64_t>> c = ctx.const_ints(3); c && c->size() == 1)
      frame = (*c)[0];
  } else if (ctx.has_input(2)) {
    const Type& w = ctx.input_type(2);
    if (w.has_rank() && w.rank() == 1 && (*w.shape)[0].is_known()) frame = (*w.shape)[0].value();
  } else {
    frame = len;
  }
  std::optional<int64_t> step;
  if (std::optional<std::vector<int64_t>> c = ctx.const_ints(1); c && c->size() == 1)
    step = (*c)[0];
  Dim frames, bins;
  if (frame && *frame >= 1)
    bins = Dim::Known(ctx.node().attr_int_or("onesided", 1) != 0 ? *frame / 2 + 1 : *frame);
  if (frame && len && step && *frame >= 1 && *step >= 1 && *len >= *frame)
    frames = Dim::Known(1 + (*len - *frame) / *step);
  return Outputs(ctx, MakeType(x.dtype, Shape{batch, frames, bins, Dim::Known(2)}));
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] in output_datatype (default FLOAT).
absl::StatusOr<std::vector<Type>> MelWeightMatrixRule(const RuleContext& ctx) {
  const int64_t code = ctx.node().attr_int_or("output_datatype", 1);
  const std::optional<DType> dt =
      code > 0 && code <= INT32_MAX ? DTypeFromOnnx(static_cast<int32_t>(code)) : std::nullopt;
  if (!dt) return ctx.Error(absl::StrCat("output_datatype ", code, " is not a known dtype"));
  const std::optional<std::vector<int64_t>> mels = ctx.const_ints(0);
  const std::optional<std::vector<int64_t>> dft = ctx.const_ints(1);
  const Dim rows =
      dft && dft->size() == 1 && (*dft)[0] >= 0 ? Dim::Known((*dft)[0] / 2 + 1) : Dim();
  const Dim cols = mels && mels->size() == 1 && (*mels)[0] >= 0 ? Dim::Known((*mels)[0]) : Dim();
  return Outputs(ctx, MakeType(*dt, Shape{rows, cols}));
}

// RotaryEmbedding: input 0's type.
absl::StatusOr<std::vector<Type>> FirstInputType(const RuleContext& ctx) {
  return Outputs(ctx, ctx.input_type(0));
}

// TensorScatter(past_cache, update, write_indices?){axis = -2}: past_cache's type, where a
// dim off the batch and the scatter axis that the cache leaves symbolic or unknown is the
// update's when that is known (they must be equal: a KV cache whose head size is a symbol
// of its own, as onnxruntime-genai's files declare it, gets the size of the heads written
// into it). Known dims that differ are an error naming the node.
absl::StatusOr<std::vector<Type>> TensorScatterRule(const RuleContext& ctx) {
  Type out = ctx.input_type(0);
  const Type& update = ctx.input_type(1);
  if (!out.has_rank() || !update.has_rank() || out.rank() != update.rank() || out.rank() < 2)
    return Outputs(ctx, out);
  KILN_ASSIGN_OR_RETURN(const int64_t axis,
                        NormalizeAxis(ctx, ctx.node().attr_int_or("axis", -2), out.rank()));
  for (int i = 1; i < out.rank(); ++i) {
    if (i == axis) continue;
    Dim& d = (*out.shape)[i];
    const Dim& u = (*update.shape)[i];
    if (!u.is_known()) continue;
    if (d.is_known() && d.value() != u.value())
      return ctx.Error(
          absl::StrCat("update dim ", i, " is ", u.value(), ", the cache's ", d.value()));
    d = u;
  }
  return Outputs(ctx, out);
}

const absl::flat_hash_map<std::string, ShapeRule>& Table() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, ShapeRule>();
    (*t)["MatMul"] = &MatMulRule;
    (*t)["MatMulInteger"] = &MatMulIntegerRule;
    (*t)["QLinearMatMul"] = &QLinearMatMulRule;
    (*t)["Gemm"] = &GemmRule;
    for (const char* op :
         {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
      (*t)[op] = &ReduceRule;
    (*t)["ArgMax"] = &ArgMaxRule;
    (*t)["ArgMin"] = &ArgMaxRule;
    (*t)["Attention"] = &OnnxAttentionRule;
    (*t)["NegativeLogLikelihoodLoss"] = &LossRule;
    (*t)["SoftmaxCrossEntropyLoss"] = &LossRule;
    (*t)["EyeLike"] = &EyeLikeRule;
    (*t)["Einsum"] = &EinsumRule;
    (*t)["Det"] = &DetRule;
    for (const char* op : {"RNN", "GRU", "LSTM"}) (*t)[op] = &RecurrentRule;
    (*t)["DFT"] = &DftRule;
    (*t)["STFT"] = &StftRule;
    (*t)["MelWeightMatrix"] = &MelWeightMatrixRule;
    for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) (*t)[op] = &WindowRule;
    (*t)["RotaryEmbedding"] = &FirstInputType;
    (*t)["TensorScatter"] = &TensorScatterRule;
    return t;
  }();
  return *table;
}

}  // namespace

ShapeRule FindMathRule(std::string_view op) {
  auto it = Table().find(std::string(op));
  return it == Table().end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
