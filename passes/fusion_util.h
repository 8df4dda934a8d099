// Helpers shared by canonicalize and the normalization / activation / Linear fusions:
// approximate constant tests, "this constant is really a [N] vector" checks, constant
// insertion that keeps topological order, and shape strings for miss reasons.
// Header-only and IR-only, on top of passes/rewrite_util.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/graph.h"
#include "passes/rewrite_util.h"

namespace kiln::fusion {

// A one-element float constant equal to `want` rounded to f32, give or take 2^-23 of it
// (one f32 ulp, two at the bottom of a binade): what the exporters write — 0.5,
// 1.4142135 / 0.70710677, 0.044715, 0.7978846 as f32, or the exact double in an f64
// model. Says nothing about the constant's rank: see ScalarRankFits.
inline bool ScalarNear(Value v, double want) {
  const Tensor* t = rewrite::ConstantOf(v);
  if (t == nullptr || !IsFloat(t->dtype()) || t->NumElements() != 1) return false;
  const double f = static_cast<float>(want);
  return std::abs(t->GetAsDouble(0) - f) <= std::ldexp(std::abs(f), -23);
}

// "" when one-element constant `c`, combined elementwise with a value of `other`'s
// type, cannot broadcast the result to a higher rank than `other`'s: `c` has rank 0, or
// `other`'s rank is known and at least `c`'s. Else the near-miss reason. A fusion that
// treats `c` as a scalar keeps `other`'s rank and would silently change the shape.
inline std::string ScalarRankFits(Value c, Value other) {
  const Tensor* t = rewrite::ConstantOf(c);
  if (t == nullptr || t->rank() == 0) return "";
  const Type& ty = other.type();
  const std::string& name = c.node->output_info(c.index).name;
  const std::string what =
      absl::StrCat("constant ", name.empty() ? "(unnamed)" : absl::StrCat("'", name, "'"),
                   " has shape [", absl::StrJoin(t->dims(), ","), "]");
  if (!ty.has_rank())
    return absl::StrCat(what, " and its operand has unknown rank; it may broadcast the "
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
inline Node* InsertConstant(Graph& g, Node* before, const std::string& name, Tensor t) {
  Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
  c->set_output_type(0, Type::Of(t));
  c->set_output_name(0, name);
  c->set_attr("value", std::move(t));
  return c;
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
  if (rewrite::IsGraphOutput(g, v)) return false;
  for (const Use& u : v.node->output_info(v.index).uses)
    if (std::find(allowed.begin(), allowed.end(), u.user) == allowed.end()) return false;
  return true;
}

// The single user of `v` (not a graph output), else nullptr.
inline Node* SingleUser(const Graph& g, Value v) {
  if (!v || !rewrite::HasSingleUse(g, v)) return nullptr;
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
      const std::string what =
          absl::StrCat("interior value of ", NodeLabel(n), " (", n->op(), ")");
      if (rewrite::IsGraphOutput(g, v)) return absl::StrCat(what, " is a graph output");
      if (!ValueUsedOnlyBy(g, v, inside))
        return absl::StrCat(what, " is also read outside the pattern");
    }
  }
  return "";
}

// Removes the nodes of `seeds` that nothing reads any more (no uses, not a graph output,
// not a graph input), then their producers that became dead the same way. Returns the
// number removed. Only what a rewrite orphaned goes; other dead code is DCE's business.
inline int RemoveIfDead(Graph& g, std::vector<Node*> work) {
  std::vector<const Node*> removed;
  int count = 0;
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    if (std::find(removed.begin(), removed.end(), n) != removed.end() || n->is_input())
      continue;
    bool dead = true;
    for (int i = 0; i < n->num_outputs() && dead; ++i)
      dead = n->output_info(i).uses.empty() && !rewrite::IsGraphOutput(g, n->output(i));
    if (!dead) continue;
    std::vector<Node*> producers;
    for (const Value& v : n->inputs())
      if (v) producers.push_back(v.node);
    if (!g.RemoveNode(n).ok()) continue;
    removed.push_back(n);
    ++count;
    work.insert(work.end(), producers.begin(), producers.end());
  }
  return count;
}

}  // namespace kiln::fusion
