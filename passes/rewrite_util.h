// Helpers shared by the rewriting passes and the fusion rules: op tests, constant
// inspection (exact and approximate scalars, "this constant is really a [N] vector"),
// use and interior checks, constant insertion that keeps topological order, removal of
// what a rewrite orphaned, provenance merging, and labels for near-miss reasons.
// Header-only and IR-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/graph.h"

namespace kiln::rewrite {

// True if `n` is the default-domain op `op`.
inline bool IsOp(const Node* n, std::string_view op) {
  return n != nullptr && n->domain().empty() && n->op() == op;
}
// The node producing `v` if it is the default-domain op `op`, else nullptr.
inline Node* ProducerIs(Value v, std::string_view op) {
  return v && IsOp(v.node, op) ? v.node : nullptr;
}

// The first user of `v` that is default-domain op `op` (reading `v` as operand `operand`
// when >= 0), else nullptr.
inline Node* UserIs(Value v, std::string_view op, int operand = -1) {
  for (const Use& u : v.node->output_info(v.index).uses)
    if (IsOp(u.user, op) && (operand < 0 || u.operand == operand)) return u.user;
  return nullptr;
}

inline bool IsGraphOutput(const Graph& g, Value v) {
  for (const auto& o : g.outputs())
    if (o.value == v) return true;
  return false;
}

// `v` has exactly one use and is not a graph output: its producer may be folded into
// that one user.
inline bool HasSingleUse(const Graph& g, Value v) {
  return v.node->output_info(v.index).uses.size() == 1 && !IsGraphOutput(g, v);
}
// Every output of `n` is used only inside `allowed` (and none is a graph output): the
// node may disappear when `allowed` is replaced.
inline bool UsedOnlyBy(const Graph& g, const Node* n, const std::vector<const Node*>& allowed) {
  for (int i = 0; i < n->num_outputs(); ++i) {
    if (IsGraphOutput(g, Value{const_cast<Node*>(n), i})) return false;
    for (const Use& u : n->output_info(i).uses)
      if (std::find(allowed.begin(), allowed.end(), u.user) == allowed.end()) return false;
  }
  return true;
}

// The tensor of a Constant-produced value, else nullptr.
inline const Tensor* ConstantOf(Value v) { return v ? v.node->constant_value() : nullptr; }
// A constant with exactly one element (any rank), as double.
inline std::optional<double> ScalarConstant(Value v) {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || t->NumElements() != 1) return std::nullopt;
  return t->GetAsDouble(0);
}
// A constant integer tensor's values.
inline std::optional<std::vector<int64_t>> IntConstant(Value v) {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || !IsInteger(t->dtype())) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t->NumElements()));
  for (int64_t i = 0; i < t->NumElements(); ++i) out[i] = t->GetAsInt64(i);
  return out;
}

// The position of each node in the graph's order when the order was taken: a pass that
// needs the graph order of a few nodes many times (a fused block's nodes, the first of a
// group) takes it once instead of walking the graph each time. Nodes added since are not
// in it (Position says so); nodes added later never move the ones before.
class NodeOrder {
 public:
  explicit NodeOrder(const Graph& g) {
    int64_t i = 0;
    for (const auto& n : g.nodes()) position_[n.get()] = i++;
  }
  std::optional<int64_t> Position(const Node* n) const {
    const auto it = position_.find(n);
    if (it == position_.end()) return std::nullopt;
    return it->second;
  }
  // `nodes` sorted into graph order; false (nodes untouched) if one is not in the order.
  bool Sort(std::vector<Node*>& nodes) const {
    for (const Node* n : nodes)
      if (!position_.contains(n)) return false;
    std::sort(nodes.begin(), nodes.end(),
              [&](const Node* a, const Node* b) { return position_.at(a) < position_.at(b); });
    return true;
  }

 private:
  absl::flat_hash_map<const Node*, int64_t> position_;
};

// Appends the provenance of `from` to `into`, keeping order and skipping duplicates.
inline void UnionProvenance(Node* into, const Node* from) {
  if (into == from) return;
  for (const std::string& s : from->provenance()) {
    const std::vector<std::string>& p = into->provenance();
    if (std::find(p.begin(), p.end(), s) == p.end()) into->add_provenance(s);
  }
}
inline void UnionProvenance(Node* into, const std::vector<const Node*>& from) {
  for (const Node* n : from) UnionProvenance(into, n);
}

// If `n` is a binary op whose operands satisfy (pa, pb) in either order, returns the
// operands in that (a, b) order. For commutative ops (Add, Mul) only.
template <typename PA, typename PB>
std::optional<std::pair<Value, Value>> MatchCommuted(const Node* n, PA pa, PB pb) {
  if (n->num_inputs() != 2) return std::nullopt;
  const Value x = n->input(0), y = n->input(1);
  if (x && y && pa(x) && pb(y)) return std::make_pair(x, y);
  if (x && y && pa(y) && pb(x)) return std::make_pair(y, x);
  return std::nullopt;
}

// `n` has a single output, used exactly once and not a graph output.
inline bool IsSingleUseNode(const Graph& g, const Node* n) {
  return n->num_outputs() == 1 && HasSingleUse(g, Value{const_cast<Node*>(n), 0});
}

// An int32/int64 tensor of rank <= 1 (a shape, axes, starts ... operand) as int64s;
// nullopt for nullptr or any other dtype or rank.
inline std::optional<std::vector<int64_t>> IntList(const Tensor* t) {
  if (t == nullptr || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32) || t->rank() > 1)
    return std::nullopt;
  std::vector<int64_t> v(static_cast<size_t>(t->NumElements()));
  for (int64_t i = 0; i < t->NumElements(); ++i) v[i] = t->GetAsInt64(i);
  return v;
}

// A one-element bool constant's value (Dropout's training_mode), else nullopt.
inline std::optional<bool> BoolConstant(Value v) {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || t->dtype() != DType::kBool || t->NumElements() != 1) return std::nullopt;
  return t->GetAsInt64(0) != 0;
}

// A one-element float constant equal to `want` rounded to f32, give or take 2^-23 of it
// (one f32 ulp, two at the bottom of a binade): what the exporters write — 0.5,
// 1.4142135 / 0.70710677, 0.044715, 0.7978846 as f32, or the exact double in an f64
// model. Says nothing about the constant's rank: see ScalarRankFits.
// Also true when the constant is exactly `want` rounded to f16 or bf16: an fp16 export
// (widened to f32 for a cpu plan by widen-fp16) holds GELU's √2 as 1.4140625, and means √2.
inline bool ScalarNear(Value v, double want) {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || !IsFloat(t->dtype()) || t->NumElements() != 1) return false;
  const double f = static_cast<float>(want);
  const double got = t->GetAsDouble(0);
  if (std::abs(got - f) <= std::ldexp(std::abs(f), -23)) return true;
  const float wf = static_cast<float>(want);
  return got == HalfToFloat(FloatToHalf(wf)) || got == BF16ToFloat(FloatToBF16(wf));
}

// A constant that is 1 / `want`, `want` as the model wrote it (f32, or rounded to f16 or
// bf16 by a 16-bit export): canonicalize turns Div(x, c) into Mul(x, 1 / c).
inline bool ReciprocalNear(Value v, double want) {
  const float wf = static_cast<float>(want);
  return ScalarNear(v, 1 / want) || ScalarNear(v, 1.0 / HalfToFloat(FloatToHalf(wf))) ||
         ScalarNear(v, 1.0 / BF16ToFloat(FloatToBF16(wf)));
}

// "" when one-element constant `c`, combined elementwise with a value of `other`'s
// type, cannot broadcast the result to a higher rank than `other`'s: `c` has rank 0, or
// `other`'s rank is known and at least `c`'s. Else the near-miss reason. A fusion that
// treats `c` as a scalar keeps `other`'s rank and would silently change the shape.
inline std::string ScalarRankFits(Value c, Value other) {
  const Tensor* t = ConstantOf(c);
  if (t == nullptr || t->rank() == 0) return "";
  const Type& ty = other.type();
  const std::string& name = c.node->output_info(c.index).name;
  const std::string what =
      absl::StrCat("constant ", name.empty() ? "(unnamed)" : absl::StrCat("'", name, "'"),
                   " has shape [", absl::StrJoin(t->dims(), ","), "]");
  if (!ty.has_rank())
    return absl::StrCat(what,
                        " and its operand has unknown rank; it may broadcast the "
                        "result to a higher rank");
  if (t->rank() > ty.rank())
    return absl::StrCat(what, ", more dims than its rank-", ty.rank(),
                        " operand: it broadcasts the result to rank ", t->rank());
  return "";
}

// A float constant whose elements all equal `want` exactly (an all-ones gamma).
inline bool AllEqual(const Tensor& t, double want) {
  for (int64_t i = 0; i < t.NumElements(); ++i)
    if (t.GetAsDouble(i) != want) return false;
  return true;
}

// `t` seen as a [n] vector: dims all 1 except possibly the last, which is n, and rank at
// most `max_rank` (so adding it to a rank-`max_rank` value never grows the result).
// A one-element constant becomes n copies when `expand_scalar`. nullopt otherwise.
inline std::optional<Tensor> AsVector(const Tensor& t, int64_t n, int max_rank,
                                      bool expand_scalar = false) {
  if (t.rank() > max_rank || n < 0) return std::nullopt;
  for (int i = 0; i + 1 < t.rank(); ++i)
    if (t.dims()[i] != 1) return std::nullopt;
  if (t.NumElements() == n && (t.rank() == 0 ? n == 1 : t.dims().back() == n))
    return t.rank() == 1 ? t : t.Reshaped({n});
  if (expand_scalar && t.NumElements() == 1) {
    Tensor out(t.dtype(), {n});
    for (int64_t i = 0; i < n; ++i) out.SetFromDouble(i, t.GetAsDouble(0));
    return out;
  }
  return std::nullopt;
}

// Inserts a Constant holding `t` right before `before` (so every later node may read it).
// Cast(v){to}: inserted before `before` (appended when null), typed as v with dtype `to`,
// named `name`, attributed to v's producer.
inline Node* InsertCast(Graph& g, Node* before, Value v, DType to, const std::string& name) {
  Node* c = before ? g.InsertNodeBefore(before, "Cast", {v}, 1) : g.AddNode("Cast", {v}, 1);
  c->set_attr("to", static_cast<int64_t>(DTypeToOnnx(to)));
  Type t = v.type();
  t.dtype = to;
  c->set_output_type(0, t);
  c->set_output_name(0, name);
  c->set_provenance(v.node->provenance());
  return c;
}

inline Node* InsertConstant(Graph& g, Node* before, const std::string& name, Tensor t) {
  Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
  c->set_output_type(0, Type::Of(t));
  c->set_output_name(0, name);
  c->set_attr("value", std::move(t));
  return c;
}
// The same, with the ONNX nodes it derives from (a converted weight keeps its original's).
inline Node* InsertConstant(Graph& g, Node* before, const std::string& name, Tensor t,
                            const std::vector<std::string>& provenance) {
  Node* c = InsertConstant(g, before, name, std::move(t));
  c->set_provenance(provenance);
  return c;
}

// Slice(x, starts, ends, axes?, steps?) of one axis: (start, end) as written (negative
// values not normalized) when that axis is the last of a rank-`rank` x, the step is `step`
// (an absent steps input is 1) and the bounds are constants; else nullopt.
inline std::optional<std::pair<int64_t, int64_t>> LastAxisSlice(const Node* s, int rank,
                                                                int64_t step = 1) {
  if (s->num_inputs() < 3) return std::nullopt;
  auto starts = IntConstant(s->input(1)), ends = IntConstant(s->input(2));
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  int64_t axis = rank - 1;
  if (s->num_inputs() > 3 && s->input(3)) {
    auto axes = IntConstant(s->input(3));
    if (!axes || axes->size() != 1) return std::nullopt;
    axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  }
  if (s->num_inputs() > 4 && s->input(4)) {
    auto steps = IntConstant(s->input(4));
    if (!steps || steps->size() != 1 || (*steps)[0] != step) return std::nullopt;
  } else if (step != 1) {
    return std::nullopt;
  }
  if (axis != rank - 1) return std::nullopt;
  return std::make_pair((*starts)[0], (*ends)[0]);
}

// The last dim of `v`'s type when it is a known size, else nullopt.
inline std::optional<int64_t> StaticLastDim(Value v) {
  const Type& t = v.type();
  if (!t.has_rank() || t.rank() == 0 || !t.shape->back().is_known()) return std::nullopt;
  return t.shape->back().value();
}

// "[1,16,64]" for a tensor's dims.
inline std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// A value's node and output as "'name'" for reasons (its ONNX tensor name, else its op).
inline std::string ValueLabel(Value v) {
  if (!v) return "(none)";
  const std::string& n = v.node->output_info(v.index).name;
  return n.empty() ? absl::StrCat("a ", v.node->op(), " output") : absl::StrCat("'", n, "'");
}

// A node for reasons: its first ONNX name (provenance) quoted, else its op.
inline std::string NodeLabel(const Node* n) {
  return n->provenance().empty() ? n->op() : absl::StrCat("'", n->provenance()[0], "'");
}

// Every use of `v` is by a node in `allowed`, and `v` is not a graph output.
inline bool ValueUsedOnlyBy(const Graph& g, Value v, const std::vector<const Node*>& allowed) {
  if (IsGraphOutput(g, v)) return false;
  for (const Use& u : v.node->output_info(v.index).uses)
    if (std::find(allowed.begin(), allowed.end(), u.user) == allowed.end()) return false;
  return true;
}

// The single user of `v` (not a graph output), else nullptr.
inline Node* SingleUser(const Graph& g, Value v) {
  if (!v || !HasSingleUse(g, v)) return nullptr;
  return v.node->output_info(v.index).uses[0].user;
}

// The other operand of binary `n` when one operand is `v`, else a null Value.
inline Value OtherOperand(const Node* n, Value v) {
  if (n->num_inputs() != 2) return Value{};
  if (n->input(0) == v) return n->input(1);
  if (n->input(1) == v) return n->input(0);
  return Value{};
}

// "" when every output of every node in `nodes` except the `exits` is read only by nodes
// in `nodes` and is not a graph output; else the near-miss reason naming the first
// offender: "interior value of 'ln/Sub' (Sub) is also read outside the pattern".
inline std::string CheckInterior(const Graph& g, const std::vector<Node*>& nodes,
                                 const std::vector<const Node*>& exits) {
  std::vector<const Node*> inside(nodes.begin(), nodes.end());
  for (const Node* n : nodes) {
    if (std::find(exits.begin(), exits.end(), n) != exits.end()) continue;
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Value v{const_cast<Node*>(n), i};
      const std::string what = absl::StrCat("interior value of ", NodeLabel(n), " (", n->op(), ")");
      if (IsGraphOutput(g, v)) return absl::StrCat(what, " is a graph output");
      if (!ValueUsedOnlyBy(g, v, inside))
        return absl::StrCat(what, " is also read outside the pattern");
    }
  }
  return "";
}

// Removes the nodes of `work` that nothing reads any more (no uses, not a graph output,
// not a graph input), then their producers that became dead the same way. Returns the
// number removed. Only what a rewrite orphaned goes; other dead code is DCE's business.
inline int RemoveIfDead(Graph& g, std::vector<Node*> work) {
  absl::flat_hash_set<const Node*> removed;  // compared, never dereferenced
  int count = 0;
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    if (n == nullptr || removed.contains(n) || n->is_input()) continue;
    bool dead = true;
    for (int i = 0; i < n->num_outputs() && dead; ++i)
      dead = n->output_info(i).uses.empty() && !IsGraphOutput(g, n->output(i));
    if (!dead) continue;
    std::vector<Node*> producers;
    for (const Value& v : n->inputs())
      if (v) producers.push_back(v.node);
    if (!g.RemoveNode(n).ok()) continue;
    removed.insert(n);
    ++count;
    work.insert(work.end(), producers.begin(), producers.end());
  }
  return count;
}

}  // namespace kiln::rewrite
