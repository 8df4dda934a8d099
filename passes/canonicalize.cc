// canonicalize: rewrites the equivalent spellings exporters use into one form, so each
// fusion rule (fuse-layernorm, fuse-gelu, fuse-attention ...) looks at one pattern.
// Rules, one forward sweep in node order:
//   - commutative binary op (Add, Mul, ...) with a constant first operand and a
//     non-constant second: operands swapped, constant second. Exact.
//   - Add(x, Neg(y)) / Add(Neg(y), x) -> Sub(x, y). Exact (IEEE defines x - y as x + -y).
//   - Div(x, c), c a float constant, x not constant -> Mul(x, 1/c), 1/c rounded once to
//     c's dtype. Not bit-exact unless c is a power of two: |x·fl(1/c) − x/c| ≤ 2^-p·|x/c|
//     before the final rounding (p = 24 for f32, 11 for f16, 8 for bf16, 53 for f64), so
//     the results differ by at most 1 ulp. Only when 1/c is a finite normal number of
//     the dtype (no overflow, no subnormal precision loss); c = 0, inf, NaN stay Div.
//   - Div(1, x) -> Reciprocal(x) (exact), when the constant 1 does not broadcast x up.
//   - Pow(x, 0.5) -> Sqrt(x); Pow(x, -0.5) -> Reciprocal(Sqrt(x)); Pow(x, -1) ->
//     Reciprocal(x); Pow(x, 1) -> x. sqrt and 1/x are correctly rounded and pow is in
//     practice, so the first and third agree except pow(-0, .5) = +0 vs sqrt(-0) = -0 and
//     pow(-inf, .5) = +inf vs NaN; the second rounds twice (≤ 1 ulp more).
//   - Cast(Cast(x, T1), T2) where T1 holds every value of x's dtype T0 exactly (f16 ->
//     f32, f32 -> f64, i32 -> i64, ...): the outer Cast reads x; if T2 == T0 the pair
//     disappears. Exact. Cast(Cast(x, f16), f32) rounds and is left alone.
//     Integer -> float -> integer is left alone unless T2 holds every T0 value: the
//     float -> integer Cast saturates where integer -> integer wraps.
//   - CastLike(x, y) with y's dtype known -> Cast(x){to = that dtype} (the same
//     conversion; no target has a CastLike kernel). Exact.
//   - RMSNormalization (opset 23) over the last axis with a [hidden] scale of x's dtype
//     and f32 statistics -> kiln.RMSNorm (the same formula). Exact.
//   - RotaryEmbedding (opset 23) with known cache width and head size -> kiln.Rotary on the
//     caches gathered at the positions and widened to the rotary width. Exact.
// Why: exporters differ in operand order, Div vs Mul, Pow vs Sqrt; normalizing once here
// keeps every fusion rule to one spelling.
// Limits: only constant operands are moved (two non-constant operands keep their
// order); the reciprocal constant is made once per divisor constant; no algebra beyond
// the rules above (no reassociation, no Sub(x, c) -> Add(x, -c)).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::InsertConstant;
using rewrite::IsOp;
using rewrite::ProducerIs;

bool IsConst(Value v) { return v && v.node->is_constant(); }

// Smallest positive normal number of a float dtype.
double MinNormal(DType t) {
  switch (t) {
    case DType::kF16:
      return std::ldexp(1.0, -14);
    case DType::kF64:
      return std::numeric_limits<double>::min();
    default:
      return std::numeric_limits<float>::min();  // f32, bf16
  }
}

// 1/c elementwise in c's dtype, or nullopt when some element's reciprocal is not a finite
// normal number of that dtype.
std::optional<Tensor> Reciprocal(const Tensor& c) {
  if (!IsFloat(c.dtype())) return std::nullopt;
  Tensor r(c.dtype(), c.dims());
  for (int64_t i = 0; i < c.NumElements(); ++i) {
    const double v = c.GetAsDouble(i);
    if (!std::isfinite(v) || v == 0) return std::nullopt;
    r.SetFromDouble(i, 1.0 / v);
    const double back = r.GetAsDouble(i);
    if (!std::isfinite(back) || std::abs(back) < MinNormal(c.dtype())) return std::nullopt;
  }
  return r;
}

// A one-element constant that, broadcast against `x`, does not change x's shape: its
// rank is at most x's known rank. Its value as double.
std::optional<double> ScalarOperand(Value c, Value x) {
  const Tensor* t = ConstantOf(c);
  if (t == nullptr || t->NumElements() != 1 || !x || !x.type().has_rank() ||
      t->rank() > x.type().rank())
    return std::nullopt;
  return t->GetAsDouble(0);
}

bool IsFloatValue(Value v) { return v && IsFloat(v.type().dtype); }

// Cast from `from` to `to` keeps every value exactly.
bool Lossless(DType from, DType to) {
  using D = DType;
  if (from == to) return true;
  switch (from) {
    case D::kBool:
      return to != D::kString && to != D::kUndefined;
    case D::kF16:
    case D::kBF16:
      return to == D::kF32 || to == D::kF64;
    case D::kF32:
      return to == D::kF64;
    case D::kI8:
      return to == D::kI16 || to == D::kI32 || to == D::kI64 || IsFloat(to);
    case D::kU8:
      return to == D::kI16 || to == D::kU16 || to == D::kI32 || to == D::kU32 || to == D::kI64 ||
             to == D::kU64 || IsFloat(to);
    case D::kI16:
      return to == D::kI32 || to == D::kI64 || to == D::kF32 || to == D::kF64;
    case D::kU16:
      return to == D::kI32 || to == D::kU32 || to == D::kI64 || to == D::kU64 || to == D::kF32 ||
             to == D::kF64;
    case D::kI32:
      return to == D::kI64 || to == D::kF64;
    case D::kU32:
      return to == D::kI64 || to == D::kU64 || to == D::kF64;
    default:
      return false;
  }
}

class CanonicalizePass final : public Pass {
 public:
  std::string_view name() const override { return "canonicalize"; }
  std::string_view description() const override {
    return "one spelling per pattern before fusion: constants second, Div by constant -> "
           "Mul, Add(Neg) -> Sub, Pow(.5) -> Sqrt, lossless Cast pairs dropped, last-axis "
           "RMSNormalization -> kiln.RMSNorm, RotaryEmbedding -> kiln.Rotary";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    g_ = &g;
    touched_.clear();
    reciprocals_.clear();
    std::vector<Node*> order;
    for (const auto& n : g.nodes()) order.push_back(n.get());
    bool changed = false;
    for (Node* n : order) changed |= Visit(n);
    rewrite::RemoveIfDead(g, touched_);
    return changed;
  }

 private:
  bool Visit(Node* n) {
    if (!n->domain().empty()) return false;
    if (n->num_inputs() == 2 && n->num_outputs() == 1 &&
        HasTrait(FindOp("", n->op()), kCommutative) && IsConst(n->input(0)) && n->input(1) &&
        !IsConst(n->input(1))) {
      const Value a = n->input(0), b = n->input(1);
      g_->SetInput(n, 0, b);
      g_->SetInput(n, 1, a);
      Count("commuted constant operand second");
      // Fall through: the same node may match a rule below.
      Visit(n);
      return true;
    }
    if (IsOp(n, "Add") && n->num_inputs() == 2) return AddNeg(n);
    if (IsOp(n, "Div") && n->num_inputs() == 2) return DivRules(n);
    if (IsOp(n, "Pow") && n->num_inputs() == 2) return PowRules(n);
    if (IsOp(n, "Cast") && n->num_inputs() == 1) return CastPair(n);
    if (IsOp(n, "CastLike") && n->num_inputs() == 2) return CastLikeToCast(n);
    if (IsOp(n, "RMSNormalization") && n->num_inputs() == 2) return RmsNormalization(n);
    if (IsOp(n, "RotaryEmbedding") && n->num_inputs() >= 3) return RotaryEmbedding(n);
    return false;
  }

  // RotaryEmbedding (opset 23; onnxruntime's com.microsoft one imports as it) ->
  // kiln.Rotary, which has a plan kernel and which the attention fusion folds in: the
  // caches gathered at the position ids and widened to the rotary width R (each of the R/2
  // frequencies twice: concatenated for rotate-half, interleaved for GPT-J pairs),
  // broadcast over the heads; a 3-D input split into [B, S, N, D] heads and merged back.
  // The same products and sums: exact. Needs the cache width and head size known.
  bool RotaryEmbedding(Node* n) {
    const Value x = n->input(0), cos = n->input(1), sin = n->input(2);
    const Value pos = n->num_inputs() > 3 ? n->input(3) : Value();
    if (!IsFloatValue(x) || !x.type().has_rank() || !cos || !sin) return false;
    const Type& xt = x.type();
    const int64_t rank = xt.rank();
    const Type& ct = cos.type();
    if ((rank != 3 && rank != 4) || !ct.has_rank() || ct.dtype != xt.dtype ||
        sin.type().dtype != xt.dtype || sin.type().shape != ct.shape)
      return false;
    const std::optional<int64_t> half = rewrite::StaticLastDim(cos);
    if (!half || *half <= 0) return false;
    Dim b, s;  // the caches' [B, S] after the gather
    if (pos) {
      const Type& pt = pos.type();
      if (!pt.has_rank() || pt.rank() != 2 || ct.rank() != 2) return false;
      b = (*pt.shape)[0], s = (*pt.shape)[1];
    } else {
      if (ct.rank() != 3) return false;
      b = (*ct.shape)[0], s = (*ct.shape)[1];
    }
    const int64_t heads = n->attr_int_or("num_heads", 0);
    int64_t d;
    if (rank == 4) {
      if (!(*xt.shape)[3].is_known()) return false;
      d = (*xt.shape)[3].value();
    } else {
      const std::optional<int64_t> h = rewrite::StaticLastDim(x);
      if (!h || heads <= 0 || *h % heads != 0) return false;
      d = *h / heads;
    }
    const int64_t rot = n->attr_int_or("rotary_embedding_dim", 0);
    const int64_t r = rot == 0 ? d : rot;
    if (r != 2 * *half || r > d) return false;
    const bool interleaved = n->attr_int_or("interleaved", 0) != 0;
    const DType dt = xt.dtype;
    using Shape = std::vector<Dim>;
    auto op = [&](const std::string& name, std::vector<Value> in, Shape shape) {
      Node* m = NewNode(n, name, std::move(in), {n});
      m->set_output_type(0, Type{dt, std::move(shape)});
      return m;
    };
    auto ints = [&](std::vector<int64_t> v) {
      return InsertConstant(*g_, n, "", Tensor::FromI64({static_cast<int64_t>(v.size())}, v))
          ->output(0);
    };
    const Dim hd = Dim::Known(*half), rd = Dim::Known(r);
    auto widen = [&](Value c) {
      if (pos) c = op("Gather", {c, pos}, {b, s, hd})->output(0);
      Value full;
      if (interleaved) {
        Value u = op("Unsqueeze", {c, ints({3})}, {b, s, hd, Dim::Known(1)})->output(0);
        Node* pair = op("Concat", {u, u}, {b, s, hd, Dim::Known(2)});
        pair->set_attr("axis", int64_t{3});
        full = op("Reshape", {pair->output(0), ints({0, 0, -1})}, {b, s, rd})->output(0);
      } else {
        Node* cat = op("Concat", {c, c}, {b, s, rd});
        cat->set_attr("axis", int64_t{2});
        full = cat->output(0);
      }
      return rank == 4 ? op("Unsqueeze", {full, ints({1})}, {b, Dim::Known(1), s, rd})->output(0)
                       : op("Unsqueeze", {full, ints({2})}, {b, s, Dim::Known(1), rd})->output(0);
    };
    const Value cw = widen(cos), sw = widen(sin);
    Value in = x;
    Shape heads_shape;
    if (rank == 3) {
      heads_shape = {(*xt.shape)[0], (*xt.shape)[1], Dim::Known(heads), Dim::Known(d)};
      in = op("Reshape", {x, ints({0, 0, heads, -1})}, heads_shape)->output(0);
    }
    Node* k = g_->InsertNodeBefore(n, "Rotary", {in, cw, sw}, 1, "kiln");
    k->set_provenance(n->provenance());
    k->set_attr("interleaved", int64_t{interleaved ? 1 : 0});
    Value y = k->output(0);
    if (rank == 3) {
      k->set_output_type(0, Type{dt, heads_shape});
      y = op("Reshape", {y, ints({0, 0, -1})}, *xt.shape)->output(0);
    }
    Replace(n, y, true);
    Count("RotaryEmbedding -> kiln.Rotary");
    return true;
  }

  // RMSNormalization(x, scale) over x's last axis, scale a vector of x's hidden size and
  // dtype, f32 statistics (stash_type 1): kiln.RMSNorm(x, scale) — the same formula, with
  // a plan kernel on every target and the fusions' knowledge.
  bool RmsNormalization(Node* n) {
    const Value x = n->input(0), scale = n->input(1);
    if (!x || !scale || !IsFloatValue(x) || !x.type().has_rank()) return false;
    const int64_t r = x.type().rank();
    int64_t axis = n->attr_int_or("axis", -1);
    if (axis < 0) axis += r;
    const std::optional<int64_t> h = rewrite::StaticLastDim(x);
    const Type& st = scale.type();
    if (r < 1 || axis != r - 1 || !h || n->attr_int_or("stash_type", 1) != 1 ||
        st.dtype != x.type().dtype || !st.is_static() || st.rank() != 1 ||
        (*st.shape)[0].value() != *h)
      return false;
    Node* k = g_->InsertNodeBefore(n, "RMSNorm", {x, scale}, 1, "kiln");
    k->set_attr("epsilon", n->attr_float_or("epsilon", 1e-5f));
    k->set_provenance(n->provenance());
    Replace(n, k->output(0), true);
    Count("RMSNormalization over the last axis -> kiln.RMSNorm");
    return true;
  }

  // Replaces every use of `old` (one output) by `v`, keeping the tensor name.
  void Replace(Node* old, Value v, bool keep_name) {
    if (keep_name && v.node->num_outputs() == 1) {
      v.node->set_output_type(0, old->output_info(0).type);
      v.node->set_output_name(0, old->output_info(0).name);
    }
    g_->ReplaceAllUsesWith(old->output(0), v);
    touched_.push_back(old);
  }

  Node* NewNode(Node* before, const std::string& op, std::vector<Value> inputs,
                const std::vector<const Node*>& from) {
    Node* m = g_->InsertNodeBefore(before, op, std::move(inputs), 1);
    m->set_provenance({});
    rewrite::UnionProvenance(m, from);
    return m;
  }

  // Add(x, Neg(y)) -> Sub(x, y): x + (-y) == x - y exactly.
  bool AddNeg(Node* add) {
    for (int i = 0; i < 2; ++i) {
      Node* neg = ProducerIs(add->input(i), "Neg");
      const Value x = add->input(1 - i);
      if (neg == nullptr || !x || neg->num_inputs() != 1 || !neg->input(0)) continue;
      Node* sub = NewNode(add, "Sub", {x, neg->input(0)}, {add, neg});
      Replace(add, sub->output(0), true);
      touched_.push_back(neg);
      Count("Add(x, Neg(y)) -> Sub");
      return true;
    }
    return false;
  }

  bool DivRules(Node* div) {
    const Value x = div->input(0), c = div->input(1);
    if (!x || !c) return false;
    // Div(x, c) -> Mul(x, 1/c), 1/c rounded to c's dtype.
    if (IsConst(c) && !IsConst(x) && IsFloatValue(x) && c.type().dtype == x.type().dtype) {
      Node*& recip = reciprocals_[c.node];
      if (recip == nullptr) {
        std::optional<Tensor> r = Reciprocal(*ConstantOf(c));
        if (!r) return false;
        recip = InsertConstant(*g_, div, absl::StrCat(c.name(), "_reciprocal"), *std::move(r));
        recip->set_provenance(c.node->provenance());
      }
      Node* mul = NewNode(div, "Mul", {x, recip->output(0)}, {div});
      Replace(div, mul->output(0), true);
      Count("Div by constant -> Mul by reciprocal");
      return true;
    }
    // Div(1, x) -> Reciprocal(x).
    if (IsFloatValue(x) && IsFloatValue(c) && ScalarOperand(x, c) == 1.0) {
      Node* r = NewNode(div, "Reciprocal", {c}, {div});
      Replace(div, r->output(0), true);
      Count("Div(1, x) -> Reciprocal");
      return true;
    }
    return false;
  }

  bool PowRules(Node* pow) {
    const Value x = pow->input(0);
    if (!IsFloatValue(x)) return false;
    const std::optional<double> e = ScalarOperand(pow->input(1), x);
    if (!e) return false;
    if (*e == 1.0 && pow->output_info(0).type.dtype == x.type().dtype) {
      g_->ReplaceAllUsesWith(pow->output(0), x);
      touched_.push_back(pow);
      Count("Pow(x, 1) -> x");
      return true;
    }
    if (*e == 0.5) {
      Node* s = NewNode(pow, "Sqrt", {x}, {pow});
      Replace(pow, s->output(0), true);
      Count("Pow(x, 0.5) -> Sqrt");
      return true;
    }
    if (*e == -1.0) {
      Node* r = NewNode(pow, "Reciprocal", {x}, {pow});
      Replace(pow, r->output(0), true);
      Count("Pow(x, -1) -> Reciprocal");
      return true;
    }
    if (*e == -0.5) {
      Node* s = NewNode(pow, "Sqrt", {x}, {pow});
      s->set_output_type(0, pow->output_info(0).type);
      Node* r = NewNode(pow, "Reciprocal", {s->output(0)}, {pow});
      Replace(pow, r->output(0), true);
      Count("Pow(x, -0.5) -> Reciprocal(Sqrt)");
      return true;
    }
    return false;
  }

  // Cast(Cast(x, T1), T2) with T0 -> T1 lossless: Cast(x, T2), or x when T2 == T0.
  // Sound only when T1 -> T2 and T0 -> T2 map every value v of T0 alike. T0 -> T1 keeps
  // v exactly, and the reference Cast converts by value class of the source: to float it
  // rounds v (same for any exact source), to bool it tests v != 0, float -> integer
  // saturates, integer -> integer wraps (mod 2^bits), bool -> anything gives 0/1. The one
  // mismatch is an integer T0 through a float T1 into an integer T2: saturate(v) vs
  // wrap(v), which differ whenever some v of T0 lies outside T2 (u8 200 -> f32 -> i8 is
  // 127, u8 200 -> i8 is -56). That pair is kept unless every T0 value fits in T2
  // (T2 == T0 or T0 -> T2 lossless), where both give v.
  bool CastLikeToCast(Node* n) {
    const Value x = n->input(0), like = n->input(1);
    if (!x || !like || like.type().dtype == DType::kUndefined) return false;
    Node* cast = g_->InsertNodeBefore(n, "Cast", {x}, 1);
    cast->set_attr("to", DTypeToOnnx(like.type().dtype));
    cast->set_provenance(n->provenance());
    Replace(n, cast->output(0), true);
    Count("CastLike made a Cast");
    return true;
  }

  bool CastPair(Node* outer) {
    Node* inner = ProducerIs(outer->input(0), "Cast");
    if (inner == nullptr || inner->num_inputs() != 1 || !inner->input(0)) return false;
    const Value x = inner->input(0);
    const DType t0 = x.type().dtype;
    const DType t1 = inner->output_info(0).type.dtype;
    const DType t2 = outer->output_info(0).type.dtype;
    if (t0 == DType::kUndefined || t1 == DType::kUndefined || t2 == DType::kUndefined ||
        t0 == DType::kString || !Lossless(t0, t1))
      return false;
    if (IsInteger(t0) && IsFloat(t1) && IsInteger(t2) && !Lossless(t0, t2)) return false;
    if (t2 == t0) {
      g_->ReplaceAllUsesWith(outer->output(0), x);
      touched_.push_back(outer);
      Count("Cast pair removed");
    } else {
      g_->SetInput(outer, 0, x);
      rewrite::UnionProvenance(outer, inner);
      touched_.push_back(inner);
      Count("Cast pair shortened");
    }
    return true;
  }

  Graph* g_ = nullptr;
  std::vector<Node*> touched_;
  absl::flat_hash_map<const Node*, Node*> reciprocals_;
};

}  // namespace

std::unique_ptr<Pass> CreateCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

}  // namespace kiln
