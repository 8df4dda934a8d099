// Symbolic value tracking for shape inference: the known integer contents of small 0-D /
// 1-D integer (and bool, as 0/1) tensors, each element a DimExpr or unknown. Seeded by
// Constant nodes, by Shape(x) (x's dims, honoring start/end) and by Size(x), and propagated
// through Gather (constant indices), Slice (constant parameters), Concat,
// Unsqueeze/Squeeze/Reshape, Identity, Cast to i64 (i32 for constants that fit), Add/Sub/Mul/Div,
// Equal, Where, ConstantOfShape, Expand and integer Range. This is what lets Reshape/Expand/Slice
// read shapes computed by Shape->Gather->Unsqueeze->Concat chains. Limits: only output 0, at most
// Contents::kMaxElements elements, axis 0 only; integer Div of a symbolic value needs a provably
// non-negative numerator and a positive constant divisor (then truncation equals floor division).
#include <algorithm>
#include <string>

#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

using Elem = std::optional<DimExpr>;

bool IsIntLike(DType t) { return IsInteger(t) || t == DType::kBool; }

Contents Vector(std::vector<Elem> elems, bool scalar = false) {
  Contents c;
  c.scalar = scalar;
  c.elems = std::move(elems);
  return c;
}

// Elementwise over two (three) contents with numpy broadcasting of 1-D vectors.
std::optional<size_t> BroadcastLen(std::initializer_list<const Contents*> cs) {
  size_t n = 1;
  for (const Contents* c : cs) {
    const size_t m = c->elems.size();
    if (m == 1) continue;
    if (n != 1 && n != m) return std::nullopt;
    n = m;
  }
  return n;
}
bool AllScalar(std::initializer_list<const Contents*> cs) {
  return std::all_of(cs.begin(), cs.end(), [](const Contents* c) { return c->scalar; });
}
const Elem& At(const Contents* c, size_t i) { return c->elems[c->elems.size() == 1 ? 0 : i]; }

Elem DivElem(const Elem& a, const Elem& b) {
  if (!a || !b) return std::nullopt;
  const std::optional<int64_t> bv = b->constant_value();
  if (!bv || *bv == 0) return std::nullopt;
  if (const std::optional<int64_t> av = a->constant_value()) {
    if (*av == INT64_MIN && *bv == -1) return std::nullopt;
    return DimExpr::Constant(*av / *bv);  // integer Div truncates toward zero
  }
  if (*bv > 0 && a->NonNegative()) return FloorDiv(*a, *bv);
  return std::nullopt;
}

Elem EqualElem(const Elem& a, const Elem& b) {
  if (!a || !b) return std::nullopt;
  if (*a == *b) return DimExpr::Constant(1);
  const std::optional<int64_t> av = a->constant_value(), bv = b->constant_value();
  if (av && bv) return DimExpr::Constant(0);
  // A provably non-negative value never equals a negative constant.
  if ((bv && *bv < 0 && a->NonNegative()) || (av && *av < 0 && b->NonNegative()))
    return DimExpr::Constant(0);
  return std::nullopt;
}

template <typename F>
std::optional<Contents> Binary(const RuleContext& ctx, F f) {
  const Contents* a = ctx.contents(0);
  const Contents* b = ctx.contents(1);
  if (!a || !b) return std::nullopt;
  std::optional<size_t> n = BroadcastLen({a, b});
  if (!n) return std::nullopt;
  std::vector<Elem> out;
  for (size_t i = 0; i < *n; ++i) out.push_back(f(At(a, i), At(b, i)));
  return Vector(std::move(out), AllScalar({a, b}));
}

template <typename Op>
auto Lift(Op op) {
  return [op](const Elem& a, const Elem& b) -> Elem {
    if (!a || !b) return std::nullopt;
    return op(*a, *b);
  };
}

bool IsAxisZero(const std::optional<std::vector<int64_t>>& axes) {
  return axes && axes->size() == 1 && ((*axes)[0] == 0 || (*axes)[0] == -1);
}

std::optional<Contents> ShapeContents(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return std::nullopt;
  const int64_t r = x.rank();
  auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  const int64_t start = clampi(ctx.node().attr_int_or("start", 0));
  const int64_t end = clampi(ctx.node().attr_int_or("end", r));
  std::vector<Elem> out;
  for (int64_t i = start; i < end; ++i) out.push_back(DimExpr::FromDim((*x.shape)[i]));
  return Vector(std::move(out));
}

std::optional<Contents> SizeContents(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.has_rank()) return std::nullopt;
  Elem n = DimExpr::Constant(1);
  for (const Dim& d : *x.shape) {
    const Elem e = DimExpr::FromDim(d);
    n = n && e ? Mul(*n, *e) : std::nullopt;
  }
  return Vector({n}, /*scalar=*/true);
}

std::optional<Contents> GatherContents(const RuleContext& ctx) {
  const Contents* data = ctx.contents(0);
  const Contents* idx = ctx.contents(1);
  const int64_t axis = ctx.node().attr_int_or("axis", 0);
  if (!data || !idx || data->scalar || (axis != 0 && axis != -1)) return std::nullopt;
  std::optional<std::vector<int64_t>> ids = idx->Ints();
  if (!ids) return std::nullopt;
  const int64_t n = static_cast<int64_t>(data->elems.size());
  std::vector<Elem> out;
  for (int64_t i : *ids) {
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    out.push_back(data->elems[i]);
  }
  return Vector(std::move(out), idx->scalar);
}

std::optional<Contents> SliceContents(const RuleContext& ctx) {
  const Contents* data = ctx.contents(0);
  if (!data || data->scalar) return std::nullopt;
  std::optional<std::vector<int64_t>> starts = ctx.const_ints(1), ends = ctx.const_ints(2);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  if (ctx.has_input(3) && !IsAxisZero(ctx.const_ints(3))) return std::nullopt;
  int64_t step = 1;
  if (ctx.has_input(4)) {
    std::optional<std::vector<int64_t>> steps = ctx.const_ints(4);
    if (!steps || steps->size() != 1 || (*steps)[0] == 0 || (*steps)[0] == INT64_MIN)
      return std::nullopt;
    step = (*steps)[0];
  }
  const int64_t n = static_cast<int64_t>(data->elems.size());
  // Steps past the end take one element; clamping them keeps `i += step` from overflowing.
  step = std::clamp<int64_t>(step, -(n + 1), n + 1);
  int64_t b = (*starts)[0], e = (*ends)[0];
  if (b < 0) b += n;
  if (e < 0) e += n;
  std::vector<Elem> out;
  if (step > 0) {
    b = std::clamp<int64_t>(b, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
    for (int64_t i = b; i < e; i += step) out.push_back(data->elems[i]);
  } else if (n > 0) {
    b = std::clamp<int64_t>(b, 0, n - 1);
    e = std::clamp<int64_t>(e, -1, n - 1);
    for (int64_t i = b; i > e; i += step) out.push_back(data->elems[i]);
  }
  return Vector(std::move(out));
}

std::optional<Contents> ConcatContents(const RuleContext& ctx) {
  const int64_t axis = ctx.node().attr_int_or("axis", 0);
  if (axis != 0 && axis != -1) return std::nullopt;
  std::vector<Elem> out;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Contents* c = ctx.contents(i);
    if (!c || c->scalar) return std::nullopt;
    out.insert(out.end(), c->elems.begin(), c->elems.end());
  }
  return Vector(std::move(out));
}

std::optional<Contents> UnsqueezeContents(const RuleContext& ctx) {
  const Contents* c = ctx.contents(0);
  if (!c || !c->scalar || !IsAxisZero(ctx.const_ints(1))) return std::nullopt;
  return Vector(c->elems);
}

std::optional<Contents> SqueezeContents(const RuleContext& ctx) {
  const Contents* c = ctx.contents(0);
  if (!c || c->scalar || c->elems.size() != 1) return std::nullopt;
  if (ctx.has_input(1) && !IsAxisZero(ctx.const_ints(1))) return std::nullopt;
  return Vector(c->elems, /*scalar=*/true);
}

std::optional<Contents> ReshapeContents(const RuleContext& ctx, const Type& out) {
  const Contents* c = ctx.contents(0);
  if (!c || !out.has_rank() || out.rank() > 1) return std::nullopt;
  return Vector(c->elems, out.rank() == 0);
}

std::optional<Contents> CastContents(const RuleContext& ctx, DType to) {
  const Contents* c = ctx.contents(0);
  if (!c || !IsIntLike(ctx.input_type(0).dtype)) return std::nullopt;
  Contents out = *c;
  for (Elem& e : out.elems) {
    if (!e) continue;
    const std::optional<int64_t> v = e->constant_value();
    if (to == DType::kBool) {
      e = v ? Elem(DimExpr::Constant(*v != 0)) : std::nullopt;
    } else if (to == DType::kI32) {
      if (!v || *v < INT32_MIN || *v > INT32_MAX) e = std::nullopt;
    } else if (to != DType::kI64) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<Contents> WhereContents(const RuleContext& ctx) {
  const Contents* c = ctx.contents(0);
  const Contents* x = ctx.contents(1);
  const Contents* y = ctx.contents(2);
  if (!c || !x || !y) return std::nullopt;
  std::optional<size_t> n = BroadcastLen({c, x, y});
  if (!n) return std::nullopt;
  std::vector<Elem> out;
  for (size_t i = 0; i < *n; ++i) {
    const Elem& ci = At(c, i);
    const std::optional<int64_t> cv = ci ? ci->constant_value() : std::nullopt;
    out.push_back(!cv ? std::nullopt : (*cv != 0 ? At(x, i) : At(y, i)));
  }
  return Vector(std::move(out), AllScalar({c, x, y}));
}

std::optional<Contents> ConstantOfShapeContents(const RuleContext& ctx) {
  const Tensor* v = ctx.node().attr_tensor("value");
  if (!v || v->NumElements() != 1 || !IsIntLike(v->dtype())) return std::nullopt;
  std::optional<std::vector<int64_t>> shape = ctx.const_ints(0);
  if (!shape || shape->size() > 1) return std::nullopt;
  const int64_t n = shape->empty() ? 1 : (*shape)[0];
  if (n < 0 || n > Contents::kMaxElements) return std::nullopt;
  return Vector(std::vector<Elem>(n, DimExpr::Constant(v->GetAsInt64(0))), shape->empty());
}

std::optional<Contents> ExpandContents(const RuleContext& ctx) {
  const Contents* c = ctx.contents(0);
  std::optional<std::vector<int64_t>> shape = ctx.const_ints(1);
  if (!c || !shape || shape->size() > 1) return std::nullopt;
  if (shape->empty()) return *c;
  const int64_t m = (*shape)[0];
  const int64_t len = static_cast<int64_t>(c->elems.size());
  if (m < 0 || m > Contents::kMaxElements) return std::nullopt;
  if (len == 1) return Vector(std::vector<Elem>(m, c->elems[0]));
  if (m == 1 || m == len) return Vector(c->elems);
  return std::nullopt;
}

std::optional<Contents> RangeContents(const RuleContext& ctx) {
  std::optional<std::vector<int64_t>> s = ctx.const_ints(0), l = ctx.const_ints(1),
                                      d = ctx.const_ints(2);
  if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1) return std::nullopt;
  const int64_t start = (*s)[0], limit = (*l)[0], delta = (*d)[0];
  if (delta == 0) return std::nullopt;
  std::vector<Elem> out;
  int64_t v = start;
  while (delta > 0 ? v < limit : v > limit) {
    if (static_cast<int64_t>(out.size()) >= Contents::kMaxElements) return std::nullopt;
    out.push_back(DimExpr::Constant(v));
    if (AddOverflows(v, delta, &v)) break;
  }
  return Vector(std::move(out));
}

bool Consistent(const Contents& c, const Type& t) {
  if (static_cast<int64_t>(c.elems.size()) > Contents::kMaxElements) return false;
  if (c.scalar && c.elems.size() != 1) return false;
  if (!t.has_rank()) return true;
  if (c.scalar) return t.rank() == 0;
  if (t.rank() != 1) return false;
  const Dim& d = (*t.shape)[0];
  return !d.is_known() || d.value() == static_cast<int64_t>(c.elems.size());
}

}  // namespace

std::optional<std::vector<int64_t>> Contents::Ints() const {
  std::vector<int64_t> out;
  for (const auto& e : elems) {
    if (!e || !e->constant_value()) return std::nullopt;
    out.push_back(*e->constant_value());
  }
  return out;
}

std::optional<Contents> ConstantContents(const Tensor& t) {
  if (!IsIntLike(t.dtype()) || t.rank() > 1 || t.NumElements() > Contents::kMaxElements)
    return std::nullopt;
  if (t.dtype() == DType::kU64) return std::nullopt;  // may not fit int64
  std::vector<Elem> out;
  for (int64_t i = 0; i < t.NumElements(); ++i) out.push_back(DimExpr::Constant(t.GetAsInt64(i)));
  return Vector(std::move(out), t.rank() == 0);
}

std::optional<Contents> ComputeContents(const RuleContext& ctx, const Node& node) {
  if (!node.domain().empty() || node.num_outputs() < 1) return std::nullopt;
  const Type& out_type = node.output_info(0).type;
  if (!IsIntLike(out_type.dtype) || (out_type.has_rank() && out_type.rank() > 1))
    return std::nullopt;
  const std::string& op = node.op();
  std::optional<Contents> c;
  if (op == "Shape")
    c = ShapeContents(ctx);
  else if (op == "Size")
    c = SizeContents(ctx);
  else if (op == "Gather")
    c = GatherContents(ctx);
  else if (op == "Slice")
    c = SliceContents(ctx);
  else if (op == "Concat")
    c = ConcatContents(ctx);
  else if (op == "Unsqueeze")
    c = UnsqueezeContents(ctx);
  else if (op == "Squeeze")
    c = SqueezeContents(ctx);
  else if (op == "Reshape")
    c = ReshapeContents(ctx, out_type);
  else if (op == "Identity")
    c = ctx.contents(0) ? std::optional<Contents>(*ctx.contents(0)) : std::nullopt;
  else if (op == "Cast")
    c = CastContents(ctx, out_type.dtype);
  else if (op == "Add")
    c = Binary(ctx, Lift([](const DimExpr& a, const DimExpr& b) { return Add(a, b); }));
  else if (op == "Sub")
    c = Binary(ctx, Lift([](const DimExpr& a, const DimExpr& b) { return Sub(a, b); }));
  else if (op == "Mul")
    c = Binary(ctx, Lift([](const DimExpr& a, const DimExpr& b) { return Mul(a, b); }));
  else if (op == "Div")
    c = Binary(ctx, &DivElem);
  else if (op == "Equal")
    c = Binary(ctx, &EqualElem);
  else if (op == "Where")
    c = WhereContents(ctx);
  else if (op == "ConstantOfShape")
    c = ConstantOfShapeContents(ctx);
  else if (op == "Expand")
    c = ExpandContents(ctx);
  else if (op == "Range")
    c = RangeContents(ctx);
  if (!c || !Consistent(*c, out_type)) return std::nullopt;
  // Narrow integer types: a constant that does not fit would have wrapped; forget it.
  if (out_type.dtype != DType::kI64 && out_type.dtype != DType::kBool) {
    const int bits = static_cast<int>(DTypeSize(out_type.dtype)) * 8;
    const bool is_unsigned = out_type.dtype == DType::kU8 || out_type.dtype == DType::kU16 ||
                             out_type.dtype == DType::kU32 || out_type.dtype == DType::kU64;
    for (Elem& e : c->elems) {
      const std::optional<int64_t> v = e ? e->constant_value() : std::nullopt;
      if (!v) continue;
      if (is_unsigned && *v < 0) e = std::nullopt;
      if (bits >= 64) continue;
      const int64_t lo = is_unsigned ? 0 : -(int64_t{1} << (bits - 1));
      const int64_t hi = is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
      if (*v < lo || *v > hi) e = std::nullopt;
    }
  }
  return c;
}

}  // namespace kiln::shape_inference
