// Shape rules of the math family: MatMul (1-D operands and batch broadcasting),
// MatMulInteger, Gemm,
// the Reduce* ops (opset-18 form: optional `axes` input, keepdims, noop_with_empty_axes)
// and ArgMax. Reductions whose axes input is not a known constant keep what can still be
// said (the rank with keepdims; dims that are already 1).
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

absl::Status CheckInner(const RuleContext& ctx, const Dim& k1, const Dim& k2) {
  if (k1.is_known() && k2.is_known() && k1.value() != k2.value())
    return ctx.Error(absl::StrCat("inner dimensions differ: ", k1.value(), " vs ", k2.value()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Type>> MatMulRule(const RuleContext& ctx) {
  const Type& a = ctx.input_type(0);
  const Type& b = ctx.input_type(1);
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

const absl::flat_hash_map<std::string, ShapeRule>& Table() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, ShapeRule>();
    (*t)["MatMul"] = &MatMulRule;
    (*t)["MatMulInteger"] = &MatMulIntegerRule;
    (*t)["Gemm"] = &GemmRule;
    for (const char* op :
         {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
      (*t)[op] = &ReduceRule;
    (*t)["ArgMax"] = &ArgMaxRule;
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
