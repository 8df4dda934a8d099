// Structural verifier for the IR. Why: passes run it after every rewrite (in tests and
// with --verify-each) so a pass that breaks an invariant fails at the pass that broke it,
// not three passes later. Checks, in order: node ownership; use lists against operands in
// both directions (no stale, duplicate or missing uses); operands owned by this graph,
// with valid output indices, defined earlier in nodes() order (topological order, which
// also rules out cycles); graph inputs are exactly the Input nodes and carry a dtype;
// Constants hold a "value" tensor whose type equals the stored output type; graph outputs
// are defined values with distinct names.
// Limits: it does not re-run type inference (stored vs inferred types of ordinary ops)
// and cannot detect dangling pointers to deleted nodes beyond "not owned by this graph".
// Violations are InternalError (a graph that breaks these is a compiler bug, not a user
// error) and name the node via Node::Describe(). Returns the first violation found.
#include "kiln/ir/verifier.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

absl::Status Fail(const std::string& msg) {
  return absl::InternalError(absl::StrCat("verifier: ", msg));
}

absl::Status CheckInputNode(const Node& n, const absl::flat_hash_set<const Node*>& inputs) {
  if (!inputs.contains(&n))
    return Fail(absl::StrCat(n.Describe(), " is an Input node but not one of the graph's inputs"));
  if (n.num_inputs() != 0 || n.num_outputs() != 1)
    return Fail(absl::StrCat(n.Describe(), " is an Input node with ", n.num_inputs(),
                             " operands and ", n.num_outputs(),
                             " outputs (expected none and one)"));
  if (n.output_info(0).type.dtype == DType::kUndefined)
    return Fail(absl::StrCat(n.Describe(), " is a graph input without a dtype"));
  return absl::OkStatus();
}

absl::Status CheckConstantNode(const Node& n) {
  if (n.num_inputs() != 0 || n.num_outputs() != 1)
    return Fail(absl::StrCat(n.Describe(), " is a Constant with ", n.num_inputs(), " operands and ",
                             n.num_outputs(), " outputs (expected none and one)"));
  const Tensor* t = n.constant_value();
  if (t == nullptr)
    return Fail(absl::StrCat(n.Describe(), " is a Constant without a tensor 'value' attribute"));
  if (!t->defined())
    return Fail(absl::StrCat(n.Describe(), " is a Constant whose value has no dtype"));
  const size_t have = t->storage() ? t->storage()->size() : 0;
  if (have < t->NumBytes())
    return Fail(absl::StrCat(n.Describe(), " is a Constant whose value needs ", t->NumBytes(),
                             " bytes but its storage holds ", have));
  const Type of = Type::Of(*t);
  if (of != n.output_info(0).type)
    return Fail(absl::StrCat(n.Describe(), " stores output type ", n.output_info(0).type.ToString(),
                             " but its value is ", of.ToString()));
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyGraph(const Graph& g) {
  absl::flat_hash_map<const Node*, size_t> position;
  size_t pos = 0;
  for (const auto& p : g.nodes()) {
    if (p->graph() != &g) return Fail(absl::StrCat(p->Describe(), " belongs to another graph"));
    position[p.get()] = pos++;
  }

  // Use lists -> operands: every recorded use points back at its value, once.
  absl::flat_hash_set<std::pair<const Node*, int>> recorded;
  for (const auto& p : g.nodes()) {
    const Node& n = *p;
    for (int o = 0; o < n.num_outputs(); ++o) {
      for (const Use& u : n.output_info(o).uses) {
        if (!position.contains(u.user))
          return Fail(absl::StrCat(n.Describe(), " output ", o,
                                   " records a use by a node not in this graph (stale use)"));
        if (u.operand < 0 || u.operand >= u.user->num_inputs() ||
            u.user->input(u.operand).node != &n || u.user->input(u.operand).index != o)
          return Fail(absl::StrCat(n.Describe(), " output ", o, " records a use as operand ",
                                   u.operand, " of ", u.user->Describe(),
                                   ", but that operand is not this value (stale use)"));
        if (!recorded.insert({u.user, u.operand}).second)
          return Fail(absl::StrCat(n.Describe(), " output ", o, " records its use as operand ",
                                   u.operand, " of ", u.user->Describe(), " more than once"));
      }
    }
  }

  // Operands -> definitions and use lists.
  for (const auto& p : g.nodes()) {
    const Node& n = *p;
    const size_t here = position.at(&n);
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Value v = n.input(i);
      if (!v) continue;
      auto it = position.find(v.node);
      if (it == position.end())
        return Fail(absl::StrCat(n.Describe(), " operand ", i,
                                 " refers to a node not owned by this graph"));
      if (v.index < 0 || v.index >= v.node->num_outputs())
        return Fail(absl::StrCat(n.Describe(), " operand ", i, " refers to output ", v.index,
                                 " of ", v.node->Describe(), ", which has ", v.node->num_outputs(),
                                 " outputs"));
      if (it->second >= here)
        return Fail(absl::StrCat(
            n.Describe(), " operand ", i, " is defined by ", v.node->Describe(),
            it->second == here ? ", itself (a cycle)"
                               : ", which comes after it (graph not topologically ordered)"));
      if (!recorded.contains(std::make_pair(&n, i)))
        return Fail(absl::StrCat(n.Describe(), " operand ", i, " is missing from the use list of ",
                                 v.node->Describe(), " output ", v.index));
    }
  }

  // Graph inputs and the Input / Constant nodes.
  absl::flat_hash_set<const Node*> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Node* in = g.inputs()[i];
    if (!position.contains(in))
      return Fail(absl::StrCat("graph input ", i, " is not a node of this graph"));
    if (!in->is_input())
      return Fail(absl::StrCat("graph input ", i, " is ", in->Describe(), ", not an Input node"));
    if (!inputs.insert(in).second)
      return Fail(absl::StrCat("graph input ", i, " (", in->Describe(), ") is listed twice"));
  }
  for (const auto& p : g.nodes()) {
    if (p->is_input()) {
      absl::Status s = CheckInputNode(*p, inputs);
      if (!s.ok()) return s;
    } else if (p->is_constant()) {
      absl::Status s = CheckConstantNode(*p);
      if (!s.ok()) return s;
    }
  }

  // Graph outputs.
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const GraphOutput& o = g.outputs()[i];
    const std::string label = absl::StrCat("graph output ", i, " '", o.name, "'");
    if (!o.value) return Fail(absl::StrCat(label, " has no value"));
    if (!position.contains(o.value.node))
      return Fail(absl::StrCat(label, " refers to a node not owned by this graph"));
    if (o.value.index < 0 || o.value.index >= o.value.node->num_outputs())
      return Fail(absl::StrCat(label, " refers to output ", o.value.index, " of ",
                               o.value.node->Describe(), ", which has ",
                               o.value.node->num_outputs(), " outputs"));
    if (!names.insert(o.name).second)
      return Fail(absl::StrCat(label, " repeats an earlier output's name"));
  }
  return absl::OkStatus();
}

}  // namespace kiln
