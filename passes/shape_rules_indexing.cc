// Shape rules of the indexing and padding family: Tile, Pad (constant pads, optional
// axes), GatherElements, GatherND (the output rank needs indices' last dim known),
// ScatterND, OneHot (depth from a constant or tracked value), NonZero (the count of
// non-zeros is never known: [rank, ?]), Size, TopK (K from a tracked value). Like the
// other families, what the inputs do not determine stays unknown.
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

absl::StatusOr<std::vector<Type>> TileRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  Shape out(x.rank(), Dim());
  if (const Contents* reps = ctx.contents(1)) {
    if (static_cast<int>(reps->elems.size()) != x.rank())
      return ctx.Error(
          absl::StrCat("repeats has ", reps->elems.size(), " entries for rank ", x.rank()));
    for (int i = 0; i < x.rank(); ++i) out[i] = DimMul((*x.shape)[i], ElemDim(reps->elems[i]));
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> PadRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    std::optional<std::vector<int64_t>> a = ctx.const_ints(3);
    if (!a) return Outputs(ctx, MakeType(x.dtype, Shape(r, Dim())));
    for (int64_t v : *a) {
      KILN_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, v, r));
      axes.push_back(n);
    }
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const Contents* pads = ctx.contents(1);
  Shape out = *x.shape;
  const size_t k = axes.size();
  if (!pads) {
    for (int64_t a : axes) out[a] = Dim();
    return Outputs(ctx, MakeType(x.dtype, std::move(out)));
  }
  if (pads->elems.size() != 2 * k)
    return ctx.Error(absl::StrCat("pads has ", pads->elems.size(), " entries for ", k, " axes"));
  for (size_t i = 0; i < k; ++i) {
    const std::optional<DimExpr> d = DimExpr::FromDim((*x.shape)[axes[i]]);
    const auto& b = pads->elems[i];
    const auto& e = pads->elems[i + k];
    std::optional<DimExpr> sum = d && b ? Add(*d, *b) : std::nullopt;
    if (sum && e)
      sum = Add(*sum, *e);
    else
      sum.reset();
    if (sum && sum->constant_value() && *sum->constant_value() < 0)
      return ctx.Error(absl::StrCat("pads make axis ", axes[i], " negative"));
    out[axes[i]] = ElemDim(sum);
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> GatherElementsRule(const RuleContext& ctx) {
  const Type& data = ctx.input_type(0);
  const Type& idx = ctx.input_type(1);
  if (data.has_rank() && idx.has_rank() && data.rank() != idx.rank())
    return ctx.Error("data and indices must have the same rank");
  return Outputs(ctx, MakeType(data.dtype, idx.shape));
}

// out = indices.shape[:-1] + data.shape[batch_dims + k:], k = indices.shape[-1]. A batch
// dim unknown in indices is taken from data.
absl::StatusOr<std::vector<Type>> GatherNDRule(const RuleContext& ctx) {
  const Type& data = ctx.input_type(0);
  const Type& idx = ctx.input_type(1);
  const int64_t b = ctx.node().attr_int_or("batch_dims", 0);
  if (b < 0) return ctx.Error(absl::StrCat("batch_dims ", b, " must not be negative"));
  if (!data.has_rank() || !idx.has_rank()) return Outputs(ctx, MakeType(data.dtype, std::nullopt));
  const int64_t r = data.rank(), q = idx.rank();
  if (b >= std::min(r, q))
    return ctx.Error(absl::StrCat("batch_dims ", b, " must be less than data rank ", r,
                                  " and indices rank ", q));
  const Shape& ds = *data.shape;
  Shape out(idx.shape->begin(), idx.shape->end() - 1);
  for (int64_t a = 0; a < b; ++a) {
    if (ds[a].is_known() && out[a].is_known() && ds[a] != out[a])
      return ctx.Error(absl::StrCat("batch dim ", a, " is ", ds[a].ToString(), " in data but ",
                                    out[a].ToString(), " in indices"));
    if (out[a].is_unknown()) out[a] = ds[a];
  }
  const Dim& last = idx.shape->back();
  if (!last.is_known()) return Outputs(ctx, MakeType(data.dtype, std::nullopt));
  const int64_t k = last.value();
  if (k < 1 || k > r - b)
    return ctx.Error(absl::StrCat("indices last dim ", k, " must be in [1, ", r - b, "]"));
  out.insert(out.end(), ds.begin() + b + k, ds.end());
  return Outputs(ctx, MakeType(data.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> ScatterNDRule(const RuleContext& ctx) {
  return Outputs(ctx, ctx.input_type(0));
}

absl::StatusOr<std::vector<Type>> OneHotRule(const RuleContext& ctx) {
  const Type& idx = ctx.input_type(0);
  const DType dt = ctx.input_type(2).dtype;
  if (!idx.has_rank()) return Outputs(ctx, MakeType(dt, std::nullopt));
  const int64_t r = idx.rank() + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int_or("axis", -1), r));
  Dim depth;
  if (const Contents* c = ctx.contents(1); c && c->elems.size() == 1) {
    depth = ElemDim(c->elems[0]);
  } else if (const Tensor* t =
                 ctx.has_input(1) ? ctx.node().input(1).node->constant_value() : nullptr;
             t && t->NumElements() == 1) {
    // A floating depth is cast to an integer (ONNX: "casted to int64").
    const double v = t->GetAsDouble(0);
    if (std::isfinite(v) && v >= 0 && v < 9e15) depth = Dim::Known(static_cast<int64_t>(v));
  }
  Shape out = *idx.shape;
  out.insert(out.begin() + axis, depth);
  return Outputs(ctx, MakeType(dt, std::move(out)));
}

absl::StatusOr<std::vector<Type>> NonZeroRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  return Outputs(ctx,
                 MakeType(DType::kI64, Shape{x.has_rank() ? Dim::Known(x.rank()) : Dim(), Dim()}));
}

// Compress: the selected count is data: unknown along the axis (1-D without one).
absl::StatusOr<std::vector<Type>> CompressRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!ctx.node().has_attr("axis")) return Outputs(ctx, MakeType(x.dtype, Shape{Dim()}));
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(ctx, ctx.node().attr_int_or("axis", 0), x.rank()));
  Shape out = *x.shape;
  out[axis] = Dim();
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// CenterCropPad: the listed axes take the constant `shape` values (unknown otherwise).
absl::StatusOr<std::vector<Type>> CenterCropPadRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, AxesAttr(ctx, r));
  Shape out = *x.shape;
  const std::optional<std::vector<int64_t>> shape = ctx.const_ints(1);
  if (shape && shape->size() != axes.size())
    return ctx.Error(
        absl::StrCat("shape has ", shape->size(), " values for ", axes.size(), " axes"));
  for (size_t i = 0; i < axes.size(); ++i)
    out[axes[i]] = shape && (*shape)[i] >= 0 ? Dim::Known((*shape)[i]) : Dim();
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> SameAsData(const RuleContext& ctx) {
  return Outputs(ctx, ctx.input_type(0));
}

absl::StatusOr<std::vector<Type>> SizeRule(const RuleContext& ctx) {
  return Outputs(ctx, MakeType(DType::kI64, Shape{}));
}

absl::StatusOr<std::vector<Type>> TopKRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  std::vector<Type> out(ctx.node().num_outputs(), MakeType(x.dtype, std::nullopt));
  if (out.size() > 1) out[1].dtype = DType::kI64;
  if (!x.has_rank()) return out;
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(ctx, ctx.node().attr_int_or("axis", -1), x.rank()));
  Shape s = *x.shape;
  const Contents* k = ctx.contents(1);
  s[axis] = k && k->elems.size() == 1 ? ElemDim(k->elems[0]) : Dim();
  if (s[axis].is_known() && (*x.shape)[axis].is_known() &&
      s[axis].value() > (*x.shape)[axis].value())
    return ctx.Error(
        absl::StrCat("K = ", s[axis].value(), " exceeds the axis size ", (*x.shape)[axis].value()));
  for (Type& t : out) t.shape = s;
  return out;
}

const absl::flat_hash_map<std::string, ShapeRule>& Table() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, ShapeRule>();
    (*t)["Tile"] = &TileRule;
    (*t)["Pad"] = &PadRule;
    (*t)["GatherElements"] = &GatherElementsRule;
    (*t)["GatherND"] = &GatherNDRule;
    (*t)["ScatterND"] = &ScatterNDRule;
    (*t)["ScatterElements"] = &ScatterNDRule;  // the data's type, as ScatterND
    (*t)["Scatter"] = &ScatterNDRule;
    (*t)["OneHot"] = &OneHotRule;
    (*t)["NonZero"] = &NonZeroRule;
    (*t)["Compress"] = &CompressRule;
    (*t)["CenterCropPad"] = &CenterCropPadRule;
    (*t)["ReverseSequence"] = &SameAsData;
    (*t)["Size"] = &SizeRule;
    (*t)["TopK"] = &TopKRule;
    return t;
  }();
  return *table;
}

}  // namespace

ShapeRule FindIndexingRule(std::string_view op) {
  auto it = Table().find(std::string(op));
  return it == Table().end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
