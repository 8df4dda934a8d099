// transpose-elimination: removes Transpose nodes that exporters leave behind (weights
// stored transposed, NCHW<->NHWC round trips, attention head permutes undone later).
// Rules, each looking upwards from a Transpose T with permutation q (out.dim[j] =
// in.dim[q[j]]; no `perm` means reversed dims):
//   - identity q: T is dropped ("removed identity transposes"; the form and the perm rules
//     are passes/no_ops.h's, which DCE removes too).
//   - T(T1(x, p), q): the composition is c[j] = p[q[j]]. c == identity -> x, whatever
//     else uses T1 ("cancelled pairs"). Otherwise T reads x with perm c, but only when T1
//     has no other user, so the graph never grows ("composed").
//   - T(Constant): a new constant holding the permuted data replaces T ("folded into
//     constants"). Only when the constant has no other user or is at most 4 KiB, so a big
//     weight that other nodes still read is never duplicated.
//   - T(E_k(...E_1(T1(x, p)))) where every E_i is kElementwise, has a single user, and
//     reads the chain value plus only constants or scalar-like values (static all-ones
//     shape of rank <= r): T1 sinks through the chain, E_1 reads x directly, and T then
//     cancels or composes with it ("moved through elementwise" counts the E_i). A
//     non-scalar constant operand C is replaced by Transpose(C padded to rank r, p^-1);
//     that is a new constant, so the same 4 KiB / single-user limit applies. A Transpose
//     is only ever moved when it meets another one this way: never "for nothing".
// Limits: transposes above elementwise chains with fan-out, binary ops fed by two
// transposes, and transposes through non-elementwise ops (Reduce*, Softmax, MatMul) are
// left alone. A perm that is not a permutation of the input rank is left for the
// executor to report.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/ops.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"
#include "passes/live_nodes.h"
#include "passes/no_ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

constexpr size_t kSmallConstantBytes = 4096;
constexpr int kMaxChain = 16;
constexpr int kMaxRounds = 16;

using Perm = std::vector<int64_t>;
using rewrite::IsOp;
using rewrite::IsSingleUseNode;
using rewrite::UnionProvenance;

Perm Inverse(const Perm& p) {
  Perm inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

// Type of Transpose(x, p) given x's type.
Type PermuteType(const Type& t, const Perm& p) {
  Type out;
  out.dtype = t.dtype;
  if (t.rank() != static_cast<int>(p.size())) return out;
  out.shape.emplace();
  for (int64_t i : p) out.shape->push_back((*t.shape)[i]);
  return out;
}

// Permutes a constant tensor with the reference Transpose kernel.
absl::StatusOr<Tensor> PermuteTensor(const Tensor& t, const Perm& p) {
  Graph scratch;
  Node* x = scratch.AddInput("x", Type::Of(t));
  Node* n = scratch.AddNode("Transpose", {x->output()}, 1);
  n->set_attr("perm", p);
  const Tensor* in[] = {&t};
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, EvaluateNode(*n, in));
  if (out.size() != 1) return KILN_INTERNAL("Transpose evaluated to %d outputs", out.size());
  return std::move(out[0]);
}

// A constant may be replaced by a rewritten copy when that does not duplicate a big
// weight: it is small, or this is its only use.
bool MayRewriteConstant(const Graph& g, Node* c) {
  return IsSingleUseNode(g, c) || c->constant_value()->NumBytes() <= kSmallConstantBytes;
}

bool IsScalarLike(const Type& t, int rank) {
  auto dims = t.StaticDims();
  if (!dims || static_cast<int>(dims->size()) > rank) return false;
  return std::all_of(dims->begin(), dims->end(), [](int64_t d) { return d == 1; });
}

class TransposeEliminationPass final : public Pass {
 public:
  std::string_view name() const override { return "transpose-elimination"; }
  std::string_view description() const override {
    return "cancels, composes and folds Transposes, sinking them through elementwise ops "
           "when that makes them meet";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    return live_.RunRounds(
        g, kMaxRounds, [](const Node* n) { return IsOp(n, "Transpose"); },
        [&](Node* t) { return Visit(g, t); });
  }

 private:
  absl::StatusOr<bool> Visit(Graph& g, Node* t) {
    if (t->num_inputs() != 1 || !t->input(0) || t->num_outputs() != 1) return false;
    std::optional<Perm> q = noop::TransposePerm(*t);
    if (!q) return false;
    Value x = t->input(0);
    if (noop::IsIdentityPerm(*q)) {
      KILN_RETURN_IF_ERROR(Replace(g, t, x));
      Count("removed identity transposes");
      return true;
    }
    Node* producer = x.node;
    if (IsOp(producer, "Transpose")) return Compose(g, t, *q, producer, {});
    if (producer->is_constant()) return Fold(g, t, *q, producer);
    return SinkThroughElementwise(g, t, *q);
  }

  // T(T1(...)), where `chain` (top-down: node, operand that carries the chain value)
  // are elementwise nodes between T1 and T, already checked by SinkThroughElementwise.
  absl::StatusOr<bool> Compose(Graph& g, Node* t, const Perm& q, Node* t1,
                               const std::vector<std::pair<Node*, int>>& chain) {
    std::optional<Perm> p = noop::TransposePerm(*t1);
    if (!p || p->size() != q.size() || !t1->input(0)) return false;
    Perm c(q.size());
    for (size_t j = 0; j < q.size(); ++j) c[j] = (*p)[q[j]];
    const bool cancels = noop::IsIdentityPerm(c);
    if ((!chain.empty() || !cancels) && !IsSingleUseNode(g, t1)) return false;
    const int t1_id = t1->id();
    const Value x = t1->input(0);
    if (!chain.empty()) {
      KILN_ASSIGN_OR_RETURN(bool moved, MoveChain(g, x, *p, chain));
      if (!moved) return false;
      Count("moved through elementwise", static_cast<int64_t>(chain.size()));
    }
    if (cancels) {
      KILN_RETURN_IF_ERROR(Replace(g, t, chain.empty() ? x : t->input(0)));
      KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, t1_id));
      Count("cancelled pairs");
      return true;
    }
    if (chain.empty()) g.SetInput(t, 0, x);
    t->set_attr("perm", c);
    UnionProvenance(t, t1);
    KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, t1_id));
    Count("composed");
    return true;
  }

  // T(Constant) -> Constant(permuted data).
  absl::StatusOr<bool> Fold(Graph& g, Node* t, const Perm& q, Node* c) {
    const Tensor* value = c->constant_value();
    if (!value || value->rank() != static_cast<int>(q.size())) return false;
    if (!MayRewriteConstant(g, c)) return false;
    absl::StatusOr<Tensor> permuted = PermuteTensor(*value, q);
    if (!permuted.ok()) return false;  // malformed data: the executor reports it
    Node* folded = NewConstant(g, t, *std::move(permuted), c);
    folded->set_output_name(0, t->output_info(0).name);
    UnionProvenance(folded, t);
    KILN_RETURN_IF_ERROR(Replace(g, t, folded->output()));
    Count("folded into constants");
    return true;
  }

  // Walks up from T through single-use elementwise nodes to a Transpose T1; checks every
  // side operand, then lets Compose do the move.
  absl::StatusOr<bool> SinkThroughElementwise(Graph& g, Node* t, const Perm& q) {
    const int r = static_cast<int>(q.size());
    std::vector<std::pair<Node*, int>> chain;  // bottom-up while walking
    Value v = t->input(0);
    while (static_cast<int>(chain.size()) < kMaxChain) {
      Node* e = v.node;
      if (IsOp(e, "Transpose")) {
        if (chain.empty()) return false;
        std::reverse(chain.begin(), chain.end());
        for (const auto& [n, operand] : chain)
          if (!SideOperandsMovable(g, n, operand, r)) return false;
        return Compose(g, t, q, e, chain);
      }
      if (!HasTrait(FindOp(e->domain(), e->op()), kElementwise) || !IsSingleUseNode(g, e))
        return false;
      if (e->output_info(0).type.has_rank() && e->output_info(0).type.rank() != r) return false;
      int chain_operand = -1;
      for (int i = 0; i < e->num_inputs(); ++i) {
        Value in = e->input(i);
        if (!in || in.node->is_constant() || IsScalarLike(in.type(), r)) continue;
        if (chain_operand >= 0) return false;  // two non-constant operands
        chain_operand = i;
      }
      if (chain_operand < 0) return false;  // all-constant: constant folding's job
      chain.emplace_back(e, chain_operand);
      v = e->input(chain_operand);
    }
    return false;
  }

  // True when every side operand of `e` is scalar-like or a constant of rank <= r that
  // may be rewritten.
  bool SideOperandsMovable(const Graph& g, Node* e, int chain_operand, int r) {
    for (int i = 0; i < e->num_inputs(); ++i) {
      Value in = e->input(i);
      if (i == chain_operand || !in || IsScalarLike(in.type(), r)) continue;
      const Tensor* c = in.node->constant_value();
      if (!c || c->rank() > r || !MayRewriteConstant(g, in.node)) return false;
    }
    return true;
  }

  // Rewires the chain (top-down) to read x instead of T1(x, p): E_1 reads x, non-scalar
  // constants become Transpose(pad(C), p^-1), output types are un-permuted.
  absl::StatusOr<bool> MoveChain(Graph& g, Value x, const Perm& p,
                                 const std::vector<std::pair<Node*, int>>& chain) {
    const int r = static_cast<int>(p.size());
    const Perm inv = Inverse(p);
    // Compute every new constant before touching the graph so a failure changes nothing.
    std::vector<std::vector<std::pair<int, Tensor>>> new_constants;
    for (const auto& [e, operand] : chain) {
      std::vector<std::pair<int, Tensor>> consts;
      for (int i = 0; i < e->num_inputs(); ++i) {
        Value in = e->input(i);
        if (i == operand || !in || IsScalarLike(in.type(), r)) continue;
        const Tensor* c = in.node->constant_value();
        std::vector<int64_t> padded(r - c->rank(), 1);
        padded.insert(padded.end(), c->dims().begin(), c->dims().end());
        absl::StatusOr<Tensor> permuted = PermuteTensor(c->Reshaped(padded), inv);
        if (!permuted.ok()) return false;
        consts.emplace_back(i, *std::move(permuted));
      }
      new_constants.push_back(std::move(consts));
    }
    Value prev = x;
    for (size_t k = 0; k < chain.size(); ++k) {
      auto [e, operand] = chain[k];
      for (auto& [i, tensor] : new_constants[k]) {
        Node* old = e->input(i).node;
        Node* c = NewConstant(g, e, std::move(tensor), old);
        c->set_output_name(0, old->output_info(0).name);
        g.SetInput(e, i, c->output());
        KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, old->id()));
      }
      g.SetInput(e, operand, prev);
      e->set_output_type(0, PermuteType(e->output_info(0).type, inv));
      prev = e->output();
    }
    return true;
  }

  // A Constant holding `value`, inserted before `before`, with `origin`'s provenance.
  Node* NewConstant(Graph& g, Node* before, Tensor value, const Node* origin) {
    Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
    c->set_output_type(0, Type::Of(value));
    c->set_attr("value", std::move(value));
    c->set_provenance(origin->provenance());
    live_.Add(c);
    return c;
  }

  // Replaces every use of `n`'s output by `v` and removes `n`.
  absl::Status Replace(Graph& g, Node* n, Value v) {
    g.ReplaceAllUsesWith(n->output(), v);
    return live_.RemoveIfDead(g, n->id());
  }

  // Nodes alive in the current round, and their removal.
  rewrite::LiveNodes live_;
};

}  // namespace

std::unique_ptr<Pass> CreateTransposeEliminationPass() {
  return std::make_unique<TransposeEliminationPass>();
}

}  // namespace kiln
