// Shape rules of the vision ops (src/reference/vision.cc): Conv, ConvTranspose and the
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
  };
  auto it = rules->find(std::string(op));
  return it == rules->end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
