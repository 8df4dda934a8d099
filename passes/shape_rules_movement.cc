// Shape rules of the data-movement and shape family: Gather, Slice, Concat, Split, Reshape,
// Transpose, Unsqueeze, Squeeze, Expand, Flatten, Shape, ConstantOfShape, Range. Rules whose
// result depends on a shape-like input (Reshape's shape, Slice's starts/ends, Unsqueeze's
// axes ...) read its tracked contents, so Shape->Gather->Concat chains resolve; when the
// contents are not known only what the input's type implies is kept (e.g. the rank).
// Slice on a symbolic dim resolves only when the answer needs no clamping assumption
// (whole-axis slices, or an end provably equal to the dim); otherwise that dim is unknown.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

constexpr int64_t kBig = std::numeric_limits<int64_t>::max() / 2;

absl::StatusOr<std::vector<Type>> GatherRule(const RuleContext& ctx) {
  const Type& data = ctx.input_type(0);
  const Type& idx = ctx.input_type(1);
  if (!data.has_rank() || !idx.has_rank()) return Outputs(ctx, MakeType(data.dtype, std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(ctx, ctx.node().attr_int_or("axis", 0), data.rank()));
  Shape out(data.shape->begin(), data.shape->begin() + axis);
  out.insert(out.end(), idx.shape->begin(), idx.shape->end());
  out.insert(out.end(), data.shape->begin() + axis + 1, data.shape->end());
  return Outputs(ctx, MakeType(data.dtype, std::move(out)));
}

// Length of one sliced axis. `start`/`end` are tracked elements (nullopt: unknown).
absl::StatusOr<Dim> SliceDim(const RuleContext& ctx, const Dim& d,
                             const std::optional<DimExpr>& start, const std::optional<DimExpr>& end,
                             std::optional<int64_t> step) {
  if (!step || !start || !end) return Dim();
  if (*step == 0) return ctx.Error("Slice step must not be 0");
  const std::optional<int64_t> s = start->constant_value();
  const std::optional<int64_t> e = end->constant_value();
  if (d.is_known() && s && e) {
    const int64_t n = d.value();
    if (n == 0) return Dim::Known(0);
    int64_t b = *s < 0 ? *s + n : *s;
    int64_t f = *e < 0 ? *e + n : *e;
    int64_t len = 0;
    if (*step > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      f = std::clamp<int64_t>(f, 0, n);
      if (f > b) len = (f - b - 1) / *step + 1;
    } else {
      b = std::clamp<int64_t>(b, 0, n - 1);
      f = std::clamp<int64_t>(f, -1, n - 1);
      const int64_t st = *step == std::numeric_limits<int64_t>::min() ? kBig : -*step;
      if (b > f) len = (b - f - 1) / st + 1;
    }
    return Dim::Known(len);
  }
  // Symbolic or unknown dim: only whole-axis slices are certain.
  if (d.is_unknown()) return Dim();
  const std::optional<DimExpr> dim = DimExpr::FromDim(d);
  if (*step == 1) {
    const bool from_begin = s && (*s == 0 || *s <= -kBig);
    const bool to_end = (e && *e >= kBig) || (dim && *end == *dim);
    if (from_begin && to_end) return d;
  } else if (*step == -1) {
    const bool from_end = s && (*s == -1 || *s >= kBig);
    const bool to_begin = e && *e <= -kBig;
    if (from_end && to_begin) return d;
  }
  return Dim();
}

absl::StatusOr<std::vector<Type>> SliceRule(const RuleContext& ctx) {
  const Type& data = ctx.input_type(0);
  if (!data.has_rank()) return Outputs(ctx, MakeType(data.dtype, std::nullopt));
  const int64_t r = data.rank();
  const Contents* starts = ctx.contents(1);
  const Contents* ends = ctx.contents(2);
  // Number of sliced axes: from the tracked starts/ends or the starts' static type.
  std::optional<int64_t> n;
  if (starts)
    n = starts->elems.size();
  else if (ends)
    n = ends->elems.size();
  else if (ctx.input_type(1).is_static() && ctx.input_type(1).rank() == 1)
    n = (*ctx.input_type(1).shape)[0].value();
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) {
    axes = ctx.const_ints(3);
  } else if (n) {
    axes.emplace();
    for (int64_t i = 0; i < *n; ++i) axes->push_back(i);
  }
  if (!axes) return Outputs(ctx, MakeType(data.dtype, Shape(r, Dim())));
  const Contents* steps = ctx.has_input(4) ? ctx.contents(4) : nullptr;
  const size_t k = axes->size();
  auto bad_len = [&](const Contents* c) { return c && c->elems.size() != k; };
  if (bad_len(starts) || bad_len(ends) || bad_len(steps))
    return ctx.Error("starts, ends, axes and steps must have the same length");
  Shape out = *data.shape;
  std::set<int64_t> seen;
  for (size_t i = 0; i < k; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(ctx, (*axes)[i], r));
    if (!seen.insert(ax).second) return ctx.Error(absl::StrCat("axis ", (*axes)[i], " repeats"));
    std::optional<int64_t> step;
    if (!ctx.has_input(4)) {
      step = 1;
    } else if (steps && steps->elems[i]) {
      step = steps->elems[i]->constant_value();
    }
    KILN_ASSIGN_OR_RETURN(out[ax],
                          SliceDim(ctx, (*data.shape)[ax], starts ? starts->elems[i] : std::nullopt,
                                   ends ? ends->elems[i] : std::nullopt, step));
  }
  return Outputs(ctx, MakeType(data.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> ConcatRule(const RuleContext& ctx) {
  DType dt = DType::kUndefined;
  std::optional<int64_t> rank;
  bool all_ranked = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    if (dt == DType::kUndefined) dt = t.dtype;
    if (!t.has_rank()) {
      all_ranked = false;
      continue;
    }
    if (rank && *rank != t.rank())
      return ctx.Error(absl::StrCat("inputs have ranks ", *rank, " and ", t.rank()));
    rank = t.rank();
  }
  if (!rank) return Outputs(ctx, MakeType(dt, std::nullopt));
  const std::optional<int64_t> attr_axis = ctx.node().attr_int("axis");
  if (!attr_axis) return ctx.Error("attribute 'axis' is required");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, *attr_axis, *rank));
  Shape out(*rank, Dim());
  Dim sum = all_ranked ? Dim::Known(0) : Dim();
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    if (!t.has_rank()) continue;
    for (int64_t j = 0; j < *rank; ++j) {
      const Dim& d = (*t.shape)[j];
      if (j == axis) continue;
      Dim& o = out[j];
      if (d.is_known() && o.is_known() && d.value() != o.value())
        return ctx.Error(
            absl::StrCat("inputs differ in dim ", j, ": ", o.value(), " vs ", d.value()));
      // A valid model has equal dims here: any known name of the dim is right.
      if (o.is_unknown() || (o.is_symbol() && d.is_known())) o = d;
    }
    sum = DimAdd(sum, (*t.shape)[axis]);
  }
  out[axis] = sum;
  return Outputs(ctx, MakeType(dt, std::move(out)));
}

absl::StatusOr<std::vector<Type>> SplitRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const int num = ctx.node().num_outputs();
  if (num < 1) return std::vector<Type>();
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(ctx, ctx.node().attr_int_or("axis", 0), x.rank()));
  const Dim& d = (*x.shape)[axis];
  std::vector<Dim> sizes(num, Dim());
  if (ctx.has_input(1)) {
    if (const Contents* split = ctx.contents(1)) {
      if (static_cast<int>(split->elems.size()) != num)
        return ctx.Error(absl::StrCat("split has ", split->elems.size(),
                                      " entries but the node has ", num, " outputs"));
      for (int i = 0; i < num; ++i) sizes[i] = ElemDim(split->elems[i]);
      if (std::optional<std::vector<int64_t>> v = split->Ints(); v && d.is_known()) {
        int64_t total = 0;
        for (int64_t s : *v)
          if (s < 0 || AddOverflows(total, s, &total)) return ctx.Error("invalid split sizes");
        if (total != d.value())
          return ctx.Error(
              absl::StrCat("split sizes sum to ", total, ", the axis has ", d.value()));
      }
    }
  } else if (d.is_known()) {
    // Chunks of ceil(d / num); the last one takes what is left (opset 18).
    const int64_t chunk = d.value() / num + (d.value() % num != 0 ? 1 : 0);
    const int64_t last = d.value() - chunk * (num - 1);
    if (last < 0)
      return ctx.Error(absl::StrCat("cannot split ", d.value(), " into ", num, " chunks"));
    for (int i = 0; i < num; ++i) sizes[i] = Dim::Known(i + 1 < num ? chunk : last);
  } else if (std::optional<DimExpr> e = DimExpr::FromDim(d)) {
    // Symbolic: only an exact division by `num` is certain.
    std::optional<DimExpr> q = FloorDiv(*e, num);
    std::optional<DimExpr> back = q ? Mul(*q, DimExpr::Constant(num)) : std::nullopt;
    if (back && *back == *e)
      for (Dim& s : sizes) s = q->ToDim();
  }
  std::vector<Type> out;
  for (int i = 0; i < num; ++i) {
    Shape s = *x.shape;
    s[axis] = sizes[i];
    out.push_back(MakeType(x.dtype, std::move(s)));
  }
  return out;
}

// The product of `dims` as a DimExpr; unknown dims become opaque atoms keyed by position
// so that a dim copied through a Reshape (shape 0) cancels out of a -1 computation.
std::optional<DimExpr> ProductWithOpaque(const std::vector<Dim>& dims,
                                         const std::vector<int>& opaque_ids) {
  DimExpr p = DimExpr::Constant(1);
  for (size_t i = 0; i < dims.size(); ++i) {
    std::optional<DimExpr> e = DimExpr::FromDim(dims[i]);
    if (!e) {
      if (opaque_ids[i] < 0) return std::nullopt;
      e = DimExpr::Opaque(opaque_ids[i]);
    }
    std::optional<DimExpr> m = Mul(p, *e);
    if (!m) return std::nullopt;
    p = std::move(*m);
  }
  return p;
}

absl::StatusOr<std::vector<Type>> ReshapeRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Contents* shape = ctx.contents(1);
  if (!shape) {
    const Type& st = ctx.input_type(1);
    if (st.is_static() && st.rank() == 1)
      return Outputs(ctx, MakeType(x.dtype, Shape((*st.shape)[0].value(), Dim())));
    return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  }
  const bool allowzero = ctx.node().attr_int_or("allowzero", 0) != 0;
  const size_t n = shape->elems.size();
  Shape out(n, Dim());
  std::vector<int> out_opaque(n, -1);  // opaque id of a copied unknown input dim
  std::optional<size_t> infer;
  for (size_t i = 0; i < n; ++i) {
    const std::optional<DimExpr>& e = shape->elems[i];
    if (!e) continue;
    const std::optional<int64_t> v = e->constant_value();
    if (v && *v == 0 && !allowzero) {
      if (!x.has_rank()) continue;
      if (static_cast<int64_t>(i) >= x.rank())
        return ctx.Error(
            absl::StrCat("shape entry ", i, " is 0 (copy) but the input has rank ", x.rank()));
      out[i] = (*x.shape)[i];
      if (out[i].is_unknown() || !DimExpr::FromDim(out[i])) out_opaque[i] = static_cast<int>(i);
    } else if (v && *v == -1) {
      if (infer) return ctx.Error("shape has more than one -1");
      infer = i;
    } else if (v && *v < -1) {
      return ctx.Error(absl::StrCat("shape entry ", *v, " is negative"));
    } else {
      out[i] = ElemDim(e);
    }
  }
  if (x.has_rank()) {
    std::vector<int> in_opaque(x.rank());
    for (int i = 0; i < x.rank(); ++i) in_opaque[i] = i;
    std::optional<DimExpr> total = ProductWithOpaque(*x.shape, in_opaque);
    std::vector<Dim> rest;
    std::vector<int> rest_opaque;
    for (size_t i = 0; i < n; ++i) {
      if (infer && i == *infer) continue;
      rest.push_back(out[i]);
      rest_opaque.push_back(out_opaque[i]);
    }
    std::optional<DimExpr> other = ProductWithOpaque(rest, rest_opaque);
    const bool both_known = total && other && total->is_constant() && other->is_constant();
    const int64_t tv = both_known ? total->constant_value().value_or(0) : 0;
    const int64_t ov = both_known ? other->constant_value().value_or(0) : 0;
    if (infer) {
      if (both_known && (ov == 0 ? tv != 0 : tv % ov != 0))
        return ctx.Error(absl::StrCat(
            "cannot reshape ", tv, " elements with shape entries of product ", ov, " and one -1"));
      const bool zero_other = other && other->constant_value() == 0;
      if (total && other && !zero_other) {
        std::optional<DimExpr> q = DivExact(*total, *other);
        if (q) out[*infer] = q->ToDim();
      }
    } else if (both_known && tv != ov) {
      return ctx.Error(absl::StrCat("cannot reshape ", tv, " elements into ", ov));
    }
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> TransposeRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  std::vector<int64_t> perm;
  if (const std::vector<int64_t>* p = ctx.node().attr_ints("perm")) {
    perm = *p;
  } else {
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != r)
    return ctx.Error(absl::StrCat("perm has ", perm.size(), " entries for rank ", r));
  std::vector<bool> used(r, false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= r || used[p]) return ctx.Error("perm is not a permutation");
    used[p] = true;
    out.push_back((*x.shape)[p]);
  }
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// The axes input as constants, or nullopt; `count` is its static length when known.
std::optional<std::vector<int64_t>> AxesInput(const RuleContext& ctx, int i,
                                              std::optional<int64_t>* count) {
  const Type& t = ctx.input_type(i);
  if (t.is_static() && t.rank() == 1) *count = (*t.shape)[0].value();
  if (t.is_static() && t.rank() == 0) *count = 1;
  return ctx.const_ints(i);
}

absl::StatusOr<std::vector<Type>> UnsqueezeRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  std::optional<int64_t> count;
  std::optional<std::vector<int64_t>> axes = AxesInput(ctx, 1, &count);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  if (!axes) {
    if (count) return Outputs(ctx, MakeType(x.dtype, Shape(x.rank() + *count, Dim())));
    return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  }
  const int64_t r = x.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> inserted(r, false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, r));
    if (inserted[n]) return ctx.Error(absl::StrCat("axis ", a, " repeats"));
    inserted[n] = true;
  }
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(inserted[i] ? Dim::Known(1) : (*x.shape)[j++]);
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> SqueezeRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  const int64_t r = x.rank();
  Shape out;
  if (!ctx.has_input(1)) {
    // Every dim of size 1 goes: a symbolic dim might be 1, so the rank is then unknown.
    for (const Dim& d : *x.shape) {
      if (!d.is_known()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
      if (d.value() != 1) out.push_back(d);
    }
    return Outputs(ctx, MakeType(x.dtype, std::move(out)));
  }
  std::optional<int64_t> count;
  std::optional<std::vector<int64_t>> axes = AxesInput(ctx, 1, &count);
  if (!axes) {
    if (count && *count <= r) return Outputs(ctx, MakeType(x.dtype, Shape(r - *count, Dim())));
    return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  }
  std::vector<bool> removed(r, false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, r));
    const Dim& d = (*x.shape)[n];
    if (d.is_known() && d.value() != 1)
      return ctx.Error(absl::StrCat("cannot squeeze axis ", a, " of size ", d.value()));
    removed[n] = true;
  }
  for (int64_t i = 0; i < r; ++i)
    if (!removed[i]) out.push_back((*x.shape)[i]);
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// The target shape of Expand / ConstantOfShape from input i: tracked contents, or just
// the rank from a static 1-D type.
std::optional<Shape> ShapeFromInput(const RuleContext& ctx, int i) {
  if (const Contents* c = ctx.contents(i)) {
    if (c->scalar) return std::nullopt;
    Shape s;
    for (const auto& e : c->elems) s.push_back(ElemDim(e));
    return s;
  }
  const Type& t = ctx.input_type(i);
  if (t.is_static() && t.rank() == 1) return Shape((*t.shape)[0].value(), Dim());
  return std::nullopt;
}

absl::StatusOr<std::vector<Type>> ExpandRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const std::optional<Shape> target = ShapeFromInput(ctx, 1);
  if (!target) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> out, BroadcastShapes(ctx, {&x.shape, &target}));
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

absl::StatusOr<std::vector<Type>> FlattenRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, Shape(2, Dim())));
  const int64_t r = x.rank();
  int64_t axis = ctx.node().attr_int_or("axis", 1);
  if (axis < -r || axis > r) return ctx.Error(absl::StrCat("axis ", axis, " is out of range"));
  if (axis < 0) axis += r;
  Dim outer = Dim::Known(1), inner = Dim::Known(1);
  for (int64_t i = 0; i < r; ++i) {
    Dim& acc = i < axis ? outer : inner;
    acc = DimMul(acc, (*x.shape)[i]);
  }
  return Outputs(ctx, MakeType(x.dtype, Shape{outer, inner}));
}

absl::StatusOr<std::vector<Type>> ShapeRuleFn(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return Outputs(ctx, MakeType(DType::kI64, Shape{Dim()}));
  const int64_t r = x.rank();
  auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  const int64_t start = clampi(ctx.node().attr_int_or("start", 0));
  const int64_t end = clampi(ctx.node().attr_int_or("end", r));
  return Outputs(ctx, MakeType(DType::kI64, Shape{Dim::Known(std::max<int64_t>(0, end - start))}));
}

absl::StatusOr<std::vector<Type>> ConstantOfShapeRule(const RuleContext& ctx) {
  DType dt = DType::kF32;
  if (const Tensor* v = ctx.node().attr_tensor("value")) dt = v->dtype();
  return Outputs(ctx, MakeType(dt, ShapeFromInput(ctx, 0)));
}

// Range: one dim, ceil((limit - start) / delta) clamped at 0; symbolic when delta is a
// constant and limit - start is provably >= 0 (or <= 0 for a negative delta).
absl::StatusOr<std::vector<Type>> RangeRule(const RuleContext& ctx) {
  DType dt = DType::kUndefined;
  for (int i = 0; i < 3 && dt == DType::kUndefined; ++i) dt = ctx.input_type(i).dtype;
  Dim len;
  if (IsFloat(dt)) {
    const Tensor* v[3];
    bool all = true;
    for (int i = 0; i < 3; ++i) {
      v[i] = ctx.has_input(i) ? ctx.node().input(i).node->constant_value() : nullptr;
      all = all && v[i] && v[i]->NumElements() == 1;
    }
    if (all && v[2]->GetAsDouble(0) != 0) {
      const double c =
          std::ceil((v[1]->GetAsDouble(0) - v[0]->GetAsDouble(0)) / v[2]->GetAsDouble(0));
      if (c >= 0 && c <= static_cast<double>(int64_t{1} << 40))
        len = Dim::Known(static_cast<int64_t>(c));
      if (c < 0) len = Dim::Known(0);
    }
  } else {
    const Contents* c[3] = {ctx.contents(0), ctx.contents(1), ctx.contents(2)};
    if (c[0] && c[1] && c[2] && c[0]->elems.size() == 1 && c[1]->elems.size() == 1 &&
        c[2]->elems.size() == 1 && c[0]->elems[0] && c[1]->elems[0] && c[2]->elems[0]) {
      const std::optional<int64_t> delta = c[2]->elems[0]->constant_value();
      if (delta && *delta == 0) return ctx.Error("Range delta is 0");
      if (delta) {
        std::optional<DimExpr> diff = *delta > 0 ? Sub(*c[1]->elems[0], *c[0]->elems[0])
                                                 : Sub(*c[0]->elems[0], *c[1]->elems[0]);
        const int64_t ad = *delta > 0 ? *delta : (*delta == INT64_MIN ? kBig : -*delta);
        if (diff && diff->constant_value()) {
          const int64_t dv = *diff->constant_value();
          len = Dim::Known(dv <= 0 ? 0 : dv / ad + (dv % ad != 0 ? 1 : 0));
        } else if (diff && diff->NonNegative()) {
          std::optional<DimExpr> up = Add(*diff, DimExpr::Constant(ad - 1));
          std::optional<DimExpr> q = up ? FloorDiv(*up, ad) : std::nullopt;
          if (q) len = q->ToDim();
        }
      }
    }
  }
  return Outputs(ctx, MakeType(dt, Shape{len}));
}

const absl::flat_hash_map<std::string, ShapeRule>& Table() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, ShapeRule>();
    (*t)["Gather"] = &GatherRule;
    (*t)["Slice"] = &SliceRule;
    (*t)["Concat"] = &ConcatRule;
    (*t)["Split"] = &SplitRule;
    (*t)["Reshape"] = &ReshapeRule;
    (*t)["Transpose"] = &TransposeRule;
    (*t)["Unsqueeze"] = &UnsqueezeRule;
    (*t)["Squeeze"] = &SqueezeRule;
    (*t)["Expand"] = &ExpandRule;
    (*t)["Flatten"] = &FlattenRule;
    (*t)["Shape"] = &ShapeRuleFn;
    (*t)["ConstantOfShape"] = &ConstantOfShapeRule;
    (*t)["Range"] = &RangeRule;
    return t;
  }();
  return *table;
}

}  // namespace

ShapeRule FindMovementRule(std::string_view op) {
  auto it = Table().find(std::string(op));
  return it == Table().end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
