// Shape rules of the vision ops (src/reference/vision.cc, resize.cc, grid_sample.cc,
// detection.cc): Conv, ConvTranspose and the
// pools through the window geometry the kernels use (include/kiln/ir/window.h); a spatial
// dim that is not a known number gives an unknown output dim. The normalizations keep
// their input's type; DepthToSpace/SpaceToDepth move a blocksize² factor between the
// channels and the spatial dims.
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/window.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

// Known spatial dims of a (W) type, or empty when any is not a known number.
std::vector<int64_t> KnownSpatial(const Type& t) {
  std::vector<int64_t> k;
  if (!t.has_rank() || t.rank() < 3) return {};
  for (int i = 2; i < t.rank(); ++i) {
    if (!(*t.shape)[i].is_known()) return {};
    k.push_back((*t.shape)[i].value());
  }
  return k;
}

// [N, channels, out...] for a windowed op over X.
absl::StatusOr<std::vector<Type>> Windowed(const RuleContext& ctx, const Dim& channels,
                                           bool transposed, std::vector<int64_t> kernel) {
  const Type& x = ctx.input_type(0);
  const DType dt = x.dtype;
  if (!x.has_rank()) {
    std::vector<Type> out = Outputs(ctx, MakeType(dt, std::nullopt));
    if (out.size() > 1) out[1].dtype = DType::kI64;
    return out;
  }
  if (x.rank() < 3) return ctx.Error("X must be [N, C, spatial...] (rank >= 3)");
  const bool has_kernel = ctx.node().has_attr("kernel_shape") || !kernel.empty();
  Shape out = {(*x.shape)[0], channels};
  if (!has_kernel) {  // W's spatial dims not known yet
    for (int i = 2; i < x.rank(); ++i) out.push_back(Dim());
  } else {
    auto a = window::Read(ctx.node(), x.rank() - 2, kernel);
    if (!a.ok()) return ctx.Error(std::string(a.status().message()));
    for (int i = 0; i < a->spatial; ++i) {
      const Dim& d = (*x.shape)[i + 2];
      if (!d.is_known()) {
        out.push_back(Dim());
        continue;
      }
      auto e =
          transposed ? window::Transposed(*a, i, d.value()) : window::Forward(*a, i, d.value());
      if (!e.ok()) return ctx.Error(std::string(e.status().message()));
      out.push_back(Dim::Known(e->out));
    }
  }
  std::vector<Type> types = Outputs(ctx, MakeType(dt, out));
  if (types.size() > 1) types[1].dtype = DType::kI64;  // MaxPool's Indices
  return types;
}

absl::StatusOr<std::vector<Type>> ConvRule(const RuleContext& ctx) {
  const Type& w = ctx.input_type(1);
  const Dim m = w.has_rank() && w.rank() >= 1 ? (*w.shape)[0] : Dim();
  return Windowed(ctx, m, false, KnownSpatial(w));
}

// ConvInteger: Conv's shape in int32. QLinearConv: W is input 3, y_zero_point's dtype (x's
// without one).
absl::StatusOr<std::vector<Type>> ConvIntegerRule(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<Type> out, ConvRule(ctx));
  out[0].dtype = DType::kI32;
  return out;
}

absl::StatusOr<std::vector<Type>> QLinearConvRule(const RuleContext& ctx) {
  const Type& w = ctx.input_type(3);
  const Dim m = w.has_rank() && w.rank() >= 1 ? (*w.shape)[0] : Dim();
  KILN_ASSIGN_OR_RETURN(std::vector<Type> out, Windowed(ctx, m, false, KnownSpatial(w)));
  out[0].dtype = ctx.has_input(7) ? ctx.input_type(7).dtype : ctx.input_type(0).dtype;
  return out;
}

absl::StatusOr<std::vector<Type>> ConvTransposeRule(const RuleContext& ctx) {
  const Type& w = ctx.input_type(1);
  const int64_t group = ctx.node().attr_int_or("group", 1);
  Dim m;
  if (w.has_rank() && w.rank() >= 2 && (*w.shape)[1].is_known())
    m = Dim::Known((*w.shape)[1].value() * group);
  return Windowed(ctx, m, true, KnownSpatial(w));
}

absl::StatusOr<std::vector<Type>> PoolRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Dim c = x.has_rank() && x.rank() >= 2 ? (*x.shape)[1] : Dim();
  return Windowed(ctx, c, false, {});
}

absl::StatusOr<std::vector<Type>> GlobalPoolRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, x);
  if (x.rank() < 3) return ctx.Error("X must be [N, C, spatial...] (rank >= 3)");
  Shape out(x.rank(), Dim::Known(1));
  out[0] = (*x.shape)[0];
  out[1] = (*x.shape)[1];
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> SameAsX(const RuleContext& ctx) {
  return Outputs(ctx, ctx.input_type(0));
}

template <bool kToSpace>
absl::StatusOr<std::vector<Type>> BlockMoveRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, x);
  if (x.rank() != 4) return ctx.Error("input must be 4-D");
  const int64_t b = ctx.node().attr_int_or("blocksize", 0);
  if (b < 1) return ctx.Error("attribute 'blocksize' must be at least 1");
  const Shape& s = *x.shape;
  auto scale = [&](const Dim& d, bool up) {
    if (!d.is_known()) return Dim();
    return up ? Dim::Known(d.value() * b) : d.value() % b == 0 ? Dim::Known(d.value() / b) : Dim();
  };
  Shape out = {s[0], Dim(), Dim(), Dim()};
  if (kToSpace) {
    out[1] =
        s[1].is_known() && s[1].value() % (b * b) == 0 ? Dim::Known(s[1].value() / (b * b)) : Dim();
    out[2] = scale(s[2], true);
    out[3] = scale(s[3], true);
  } else {
    out[1] = s[1].is_known() ? Dim::Known(s[1].value() * b * b) : Dim();
    out[2] = scale(s[2], false);
    out[3] = scale(s[3], false);
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// A constant input's tensor, or null (absent, empty or computed at run time).
const Tensor* ConstInput(const RuleContext& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const Tensor* t = ctx.node().input(i).node->constant_value();
  return t != nullptr && t->NumElements() > 0 ? t : nullptr;
}

// Resize: X's type; a resized dim is floor(scale × dim) for constant scales and a known
// dim, the size for constant sizes (stretch policy), else unknown.
absl::StatusOr<std::vector<Type>> ResizeRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, AxesAttr(ctx, r));
  Shape out = *x.shape;
  for (int64_t a : axes) out[a] = Dim();
  const Tensor* scales = ConstInput(ctx, 2);
  const Tensor* sizes = ConstInput(ctx, 3);
  const std::string* policy = ctx.node().attr_string("keep_aspect_ratio_policy");
  const bool stretch = policy == nullptr || *policy == "stretch";
  if (sizes != nullptr && scales == nullptr && stretch) {
    if (static_cast<size_t>(sizes->NumElements()) != axes.size())
      return ctx.Error(
          absl::StrCat("sizes has ", sizes->NumElements(), " values for ", axes.size(), " axes"));
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t v = sizes->GetAsInt64(static_cast<int64_t>(i));
      if (v < 0) return ctx.Error(absl::StrCat("size ", v, " is negative"));
      out[axes[i]] = Dim::Known(v);
    }
  } else if (scales != nullptr && sizes == nullptr) {
    if (static_cast<size_t>(scales->NumElements()) != axes.size())
      return ctx.Error(
          absl::StrCat("scales has ", scales->NumElements(), " values for ", axes.size(), " axes"));
    for (size_t i = 0; i < axes.size(); ++i) {
      const double s = scales->GetAsDouble(static_cast<int64_t>(i));
      const Dim& d = (*x.shape)[axes[i]];
      if (!(s > 0) || !std::isfinite(s))
        return ctx.Error(absl::StrCat("scale ", s, " is not positive"));
      if (s == 1.0) {
        out[axes[i]] = d;
      } else if (d.is_known()) {
        const double o = std::floor(s * static_cast<double>(d.value()));
        if (o > 9e15) return ctx.Error("the output is too large");
        out[axes[i]] = Dim::Known(static_cast<int64_t>(o));
      }
    }
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// The dim two inputs must agree on: a known one wins over a symbol over an unknown one.
absl::StatusOr<Dim> UnifyDim(const RuleContext& ctx, const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known() && a.value() != b.value())
    return ctx.Error(absl::StrCat("batch dims ", a.value(), " and ", b.value(), " differ"));
  if (a.is_known() || (!b.is_known() && a.is_symbol())) return a;
  return b;
}

// GridSample: X [N, C, D1..Dr], grid [N, O1..Or, r] -> X's dtype [N, C, O1..Or].
absl::StatusOr<std::vector<Type>> GridSampleRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& g = ctx.input_type(1);
  if (!x.has_rank() && !g.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int rank = x.has_rank() ? x.rank() : g.rank();
  if (rank < 3) return ctx.Error("X and grid must have rank >= 3");
  if (x.has_rank() && g.has_rank() && x.rank() != g.rank())
    return ctx.Error(absl::StrCat("X has rank ", x.rank(), " but grid rank ", g.rank()));
  if (g.has_rank() && (*g.shape)[rank - 1].is_known() && (*g.shape)[rank - 1].value() != rank - 2)
    return ctx.Error(absl::StrCat("grid's last dim must be ", rank - 2));
  const Dim xn = x.has_rank() ? (*x.shape)[0] : Dim();
  const Dim gn = g.has_rank() ? (*g.shape)[0] : Dim();
  KILN_ASSIGN_OR_RETURN(Dim n, UnifyDim(ctx, xn, gn));
  Shape out = {n, x.has_rank() ? (*x.shape)[1] : Dim()};
  for (int i = 1; i < rank - 1; ++i) out.push_back(g.has_rank() ? (*g.shape)[i] : Dim());
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// AffineGrid: theta [N, 2, 3] / [N, 3, 4] and size [N, C, H, W] / [N, C, D, H, W] ->
// theta's dtype [N, H, W, 2] / [N, D, H, W, 3].
absl::StatusOr<std::vector<Type>> AffineGridRule(const RuleContext& ctx) {
  const Type& theta = ctx.input_type(0);
  const Type& size_type = ctx.input_type(1);
  const std::optional<std::vector<int64_t>> size = ctx.const_ints(1);
  int sp = 0;  // 2 or 3 once known
  if (size) {
    if (size->size() != 4 && size->size() != 5) return ctx.Error("size must have 4 or 5 values");
    sp = static_cast<int>(size->size()) - 2;
  } else if (size_type.has_rank() && size_type.rank() == 1 && (*size_type.shape)[0].is_known()) {
    const int64_t len = (*size_type.shape)[0].value();
    if (len != 4 && len != 5) return ctx.Error("size must have 4 or 5 values");
    sp = static_cast<int>(len) - 2;
  }
  if (theta.has_rank()) {
    if (theta.rank() != 3) return ctx.Error("theta must be [N, 2, 3] or [N, 3, 4]");
    const Dim& rows = (*theta.shape)[1];
    if (rows.is_known()) {
      if (rows.value() != 2 && rows.value() != 3)
        return ctx.Error("theta must be [N, 2, 3] or [N, 3, 4]");
      if (sp != 0 && rows.value() != sp)
        return ctx.Error(absl::StrCat("theta has ", rows.value(), " rows for a ", sp, "-D size"));
      sp = static_cast<int>(rows.value());
    }
  }
  if (sp == 0) return Outputs(ctx, MakeType(theta.dtype, std::nullopt));
  Dim n = theta.has_rank() ? (*theta.shape)[0] : Dim();
  if (size && (*size)[0] >= 0) {
    KILN_ASSIGN_OR_RETURN(n, UnifyDim(ctx, n, Dim::Known((*size)[0])));
  }
  Shape out = {n};
  for (int i = 0; i < sp; ++i)
    out.push_back(size && (*size)[i + 2] >= 0 ? Dim::Known((*size)[i + 2]) : Dim());
  out.push_back(Dim::Known(sp));
  return Outputs(ctx, MakeType(theta.dtype, std::move(out)));
}

// NonMaxSuppression: the number of kept boxes is data: [?, 3] of i64.
absl::StatusOr<std::vector<Type>> NonMaxSuppressionRule(const RuleContext& ctx) {
  return Outputs(ctx, MakeType(DType::kI64, Shape{Dim(), Dim::Known(3)}));
}

// RoiAlign: [num_rois, C, output_height, output_width] in X's dtype; num_rois from rois or
// batch_indices.
absl::StatusOr<std::vector<Type>> RoiAlignRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& rois = ctx.input_type(1);
  const Type& bi = ctx.input_type(2);
  if (x.has_rank() && x.rank() != 4) return ctx.Error("X must be [N, C, H, W]");
  if (rois.has_rank() &&
      (rois.rank() != 2 || ((*rois.shape)[1].is_known() && (*rois.shape)[1].value() != 4)))
    return ctx.Error("rois must be [num_rois, 4]");
  if (bi.has_rank() && bi.rank() != 1) return ctx.Error("batch_indices must be 1-D");
  const int64_t oh = ctx.node().attr_int_or("output_height", 1);
  const int64_t ow = ctx.node().attr_int_or("output_width", 1);
  if (oh < 1 || ow < 1) return ctx.Error("output_height and output_width must be positive");
  Dim r = rois.has_rank() ? (*rois.shape)[0] : Dim();
  if (bi.has_rank()) {
    const Dim& b = (*bi.shape)[0];
    if (r.is_known() && b.is_known() && r.value() != b.value())
      return ctx.Error(absl::StrCat("rois has ", r.value(), " rows, batch_indices ", b.value()));
    if (!r.is_known() && b.is_known()) r = b;
  }
  const Dim c = x.has_rank() ? (*x.shape)[1] : Dim();
  return Outputs(ctx, MakeType(x.dtype, Shape{r, c, Dim::Known(oh), Dim::Known(ow)}));
}

// Unique: the number of distinct values is data. Y is [?] (X's shape with the axis dim
// unknown when `axis` is given), indices and counts [?], inverse_indices as long as the
// flattened X (X's axis dim with `axis`); all i64 but Y.
absl::StatusOr<std::vector<Type>> UniqueRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Node& n = ctx.node();
  std::vector<Type> out(n.num_outputs(), MakeType(DType::kI64, Shape{Dim()}));
  out[0] = MakeType(x.dtype, Shape{Dim()});
  Dim inverse;
  if (n.has_attr("axis")) {
    if (!x.has_rank()) {
      out[0].shape = std::nullopt;
    } else {
      KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, n.attr_int_or("axis", 0), x.rank()));
      Shape y = *x.shape;
      y[axis] = Dim();
      out[0].shape = std::move(y);
      inverse = (*x.shape)[axis];
    }
  } else if (x.has_rank()) {
    int64_t count = 1;
    bool known = true;
    for (const Dim& d : *x.shape)
      if (!d.is_known() || MulOverflows(count, d.value(), &count)) known = false;
    if (known) inverse = Dim::Known(count);
  }
  if (out.size() > 2) out[2].shape = Shape{inverse};
  return out;
}

// Col2Im: [N, C, image_shape...] with C = input dim 1 / prod(block_shape); image dims from a
// constant image_shape (as many unknown dims when only its length is known).
absl::StatusOr<std::vector<Type>> Col2ImRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (x.has_rank() && x.rank() != 3)
    return ctx.Error("input must be [N, C * prod(block_shape), L]");
  const std::optional<std::vector<int64_t>> image = ctx.const_ints(1);
  const std::optional<std::vector<int64_t>> block = ctx.const_ints(2);
  Shape out = {x.has_rank() ? (*x.shape)[0] : Dim(), Dim()};
  if (block) {
    int64_t b = 1;
    for (int64_t v : *block)
      if (v < 1 || MulOverflows(b, v, &b)) return ctx.Error("block_shape values must be positive");
    if (x.has_rank() && (*x.shape)[1].is_known()) {
      const int64_t planes = (*x.shape)[1].value();
      if (planes % b != 0)
        return ctx.Error(absl::StrCat("input dim 1 (", planes, ") is not a multiple of ", b));
      out[1] = Dim::Known(planes / b);
    }
  }
  const Type& it = ctx.input_type(1);
  if (image) {
    for (int64_t v : *image) {
      if (v < 0) return ctx.Error("image_shape values must not be negative");
      out.push_back(Dim::Known(v));
    }
  } else if (it.has_rank() && it.rank() == 1 && (*it.shape)[0].is_known()) {
    for (int64_t i = 0; i < (*it.shape)[0].value(); ++i) out.push_back(Dim());
  } else {
    return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// MaxUnpool: output_shape when given (its values when constant, else X's rank of unknown
// dims); else [N, C, (in - 1)·stride - pads + kernel...].
absl::StatusOr<std::vector<Type>> MaxUnpoolRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Node& n = ctx.node();
  if (ctx.has_input(2)) {
    if (const std::optional<std::vector<int64_t>> s = ctx.const_ints(2)) {
      Shape out;
      for (int64_t v : *s) {
        if (v < 0) return ctx.Error("output_shape values must not be negative");
        out.push_back(Dim::Known(v));
      }
      return Outputs(ctx, MakeType(x.dtype, std::move(out)));
    }
    if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
    return Outputs(ctx, MakeType(x.dtype, Shape(x.rank(), Dim())));
  }
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  if (x.rank() < 3) return ctx.Error("X must be [N, C, spatial...] (rank >= 3)");
  const size_t k = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t>* kernel = n.attr_ints("kernel_shape");
  const std::vector<int64_t>* strides = n.attr_ints("strides");
  const std::vector<int64_t>* pads = n.attr_ints("pads");
  if (kernel == nullptr || kernel->size() != k || (strides && strides->size() != k) ||
      (pads && pads->size() != 2 * k))
    return ctx.Error(absl::StrCat("kernel_shape, strides and pads must have ", k, ", ", k, " and ",
                                  2 * k, " values"));
  Shape out = {(*x.shape)[0], (*x.shape)[1]};
  for (size_t i = 0; i < k; ++i) {
    const Dim& d = (*x.shape)[i + 2];
    if (!d.is_known()) {
      out.push_back(Dim());
      continue;
    }
    const int64_t s = strides ? (*strides)[i] : 1;
    const int64_t p = pads ? (*pads)[i] + (*pads)[i + k] : 0;
    int64_t o = 0;
    if (s < 1 || MulOverflows(d.value() - 1, s, &o) || AddOverflows(o, (*kernel)[i] - p, &o) ||
        o < 0)
      return ctx.Error(absl::StrCat("spatial dim ", d.value(), " gives no valid unpooled size"));
    out.push_back(Dim::Known(o));
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

}  // namespace

ShapeRule FindVisionRule(std::string_view op) {
  static const auto* rules = new absl::flat_hash_map<std::string, ShapeRule>{
      {"Conv", &ConvRule},
      {"ConvInteger", &ConvIntegerRule},
      {"QLinearConv", &QLinearConvRule},
      {"ConvTranspose", &ConvTransposeRule},
      {"MaxPool", &PoolRule},
      {"AveragePool", &PoolRule},
      {"LpPool", &PoolRule},
      {"GlobalAveragePool", &GlobalPoolRule},
      {"GlobalMaxPool", &GlobalPoolRule},
      {"BatchNormalization", &SameAsX},
      {"InstanceNormalization", &SameAsX},
      {"GroupNormalization", &SameAsX},
      {"LpNormalization", &SameAsX},
      {"LRN", &SameAsX},
      {"DepthToSpace", &BlockMoveRule<true>},
      {"SpaceToDepth", &BlockMoveRule<false>},
      {"Resize", &ResizeRule},
      {"GridSample", &GridSampleRule},
      {"AffineGrid", &AffineGridRule},
      {"NonMaxSuppression", &NonMaxSuppressionRule},
      {"RoiAlign", &RoiAlignRule},
      {"Unique", &UniqueRule},
      {"Col2Im", &Col2ImRule},
      {"MaxUnpool", &MaxUnpoolRule},
  };
  auto it = rules->find(std::string(op));
  return it == rules->end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
