// Small helpers shared by the rewriting passes and fusion rules: op tests, constant
// inspection, use checks and provenance merging. Header-only and IR-only.
#pragma once

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
inline const Tensor* ConstantOf(Value v) {
  return v ? v.node->constant_value() : nullptr;
}
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

}  // namespace kiln::rewrite
