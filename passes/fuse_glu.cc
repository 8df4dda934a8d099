// fuse-glu: replaces the gated MLP activations of Llama / Qwen2 / Mistral (SwiGLU) and
// ModernBERT (GeGLU) with one kiln.Glu {activation} (docs/fused-ops.md) reading one packed
// projection:
//   SwiGLU: Mul(Mul(g, Sigmoid(g)), u)  -> Glu(Linear(x, [Wg | Wu])){silu}
//   GeGLU:  Mul(Gelu(g), u)             -> Glu(Linear(x, [Wg | Wu])){gelu | gelu_tanh}
// where g and u are projections of one x (MatMul, MatMul + constant bias or kiln.Linear
// without activation; merged as fuse-qkv merges Q, K, V), or the two halves of one tensor
// P (Split into two equal parts on the last axis, or Slices [0, F) and [F, 2F) of it:
// ModernBERT's Wi(x).chunk(2), dynamo and TorchScript) -> Glu(P).
// Why: two GEMMs of width F become one of width 2F (one pass over x, better weight
// streaming) and three element-wise passes over [T, F] (Sigmoid, Mul, Mul) become one.
// Root: Mul. Cheap match (nothing reported): one operand is SiLU or Gelu of a value g,
// the other u, and g and u are both MatMul/Linear-like or both outputs of one Split.
// Near-misses (reported, kind "glu"): the projections cannot merge (different inputs,
// trans_w, dtypes, bias on one only, a non-constant weight), the halves are unequal, the
// types of g and u differ or F is not static, an interior value is read elsewhere.
// Runs before fuse-linear (so the gate's Gelu is not taken into the gate's Linear).
// Limits: the activation on the first operand only (act(g)·u, any Mul operand order);
// halves by Slices only with constant bounds (static shapes fold TorchScript's
// Shape-computed ones); x·sigmoid(1.702·x) and other activations stay unfused.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/projection_merge.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using projection::Projection;
using rewrite::IsOp;
using rewrite::ProducerIs;

struct GluMatch {
  Node* root = nullptr;
  Value gate, up;
  std::string activation;  // silu, gelu, gelu_tanh
  std::vector<Node*> act;  // Sigmoid + Mul, or Gelu
  Node* split = nullptr;   // the halves' Split, when g and u are its outputs 0 and 1
  Node* lo = nullptr;      // ... or the halves' Slices [0, F) and [F, 2F) of one P
  Node* hi = nullptr;
  std::vector<Projection> ps;  // gate and up projections (filled by Check when no split)
};

bool ProjectionLike(const Node* n) {
  return n && ((n->domain() == "kiln" && (n->op() == "Linear" || n->op() == "BlockQuantLinear")) ||
               IsOp(n, "MatMul") || (IsOp(n, "Add") && n->num_inputs() == 2));
}

// SiLU(g) = Mul(g, Sigmoid(g)) (either order) or Gelu(g): fills gate, activation, act.
bool Activation(Value v, GluMatch* m) {
  Node* n = v.node;
  if (IsOp(n, "Gelu") && n->num_inputs() == 1) {
    const std::string* a = n->attr_string("approximate");
    m->activation = a && *a == "tanh" ? "gelu_tanh" : "gelu";
    if (a && *a != "none" && *a != "tanh") return false;
    m->gate = n->input(0);
    m->act = {n};
    return true;
  }
  if (!IsOp(n, "Mul") || n->num_inputs() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    Node* s = ProducerIs(n->input(i), "Sigmoid");
    if (s && s->input(0) == n->input(1 - i)) {
      m->activation = "silu";
      m->gate = n->input(1 - i);
      m->act = {s, n};
      return true;
    }
  }
  return false;
}

class GluRule final : public fusion::FusionRule<GluMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "Mul") && n.num_inputs() == 2; }
  void Begin(const Graph& g) override { order_.emplace(g); }

  std::optional<GluMatch> Recognize(const Graph&, Node* root, fusion::FusionSession&) override {
    for (int i = 0; i < 2; ++i) {
      GluMatch m;
      m.root = root;
      if (!root->input(i) || !root->input(1 - i) || !Activation(root->input(i), &m)) continue;
      m.up = root->input(1 - i);
      if (!m.gate || m.gate.node == nullptr) continue;
      Node* gs = ProducerIs(m.gate, "Split");
      if (gs && gs == m.up.node && m.gate.index == 0 && m.up.index == 1) {
        m.split = gs;
        return m;
      }
      Node* lo = ProducerIs(m.gate, "Slice");
      Node* hi = ProducerIs(m.up, "Slice");
      if (lo && hi && lo->input(0) && lo->input(0) == hi->input(0)) {
        m.lo = lo;
        m.hi = hi;
        return m;
      }
      if (ProjectionLike(m.gate.node) && ProjectionLike(m.up.node)) return m;
    }
    return std::nullopt;
  }

  std::string Check(const Graph& g, GluMatch& m, fusion::FusionSession&) override {
    if (m.split) {
      const Node* s = m.split;
      const int rank = s->input(0).type().has_rank() ? s->input(0).type().rank() : -1;
      int64_t axis = s->attr_int_or("axis", 0);
      if (axis < 0) axis += rank;
      if (s->num_outputs() != 2 || rank < 1 || axis != rank - 1)
        return absl::StrCat(rewrite::NodeLabel(s), " does not split the last axis in two");
      if (s->num_inputs() > 1 && s->input(1)) {
        const auto sizes = rewrite::IntConstant(s->input(1));
        if (!sizes || sizes->size() != 2 || (*sizes)[0] != (*sizes)[1])
          return absl::StrCat(rewrite::NodeLabel(s), " splits into unequal parts");
      }
    }
    if (m.lo) {
      const Type& pt = m.lo->input(0).type();
      const std::optional<int64_t> two_f = rewrite::StaticLastDim(m.lo->input(0));
      const auto lo = pt.has_rank() ? rewrite::LastAxisSlice(m.lo, pt.rank()) : std::nullopt;
      const auto hi = pt.has_rank() ? rewrite::LastAxisSlice(m.hi, pt.rank()) : std::nullopt;
      if (!two_f || !lo || !hi || *two_f % 2 != 0 || lo->first != 0 || lo->second != *two_f / 2 ||
          hi->first != *two_f / 2 || hi->second < *two_f)
        return absl::StrCat(rewrite::NodeLabel(m.lo), " and ", rewrite::NodeLabel(m.hi),
                            " are not the halves [0, F) (activated) and [F, 2F) of the last "
                            "axis of ",
                            pt.ToString(), " (constant bounds, step 1)");
    }
    const Type& gt = m.gate.type();
    if (!IsFloat(gt.dtype) || gt != m.up.type())
      return absl::StrCat("the gate ", gt.ToString(), " and the up value ", m.up.type().ToString(),
                          " differ in type (or are not float)");
    const std::optional<int64_t> f = rewrite::StaticLastDim(m.gate);
    if (!gt.has_rank() || !f) return "the MLP width (the gate's last dim) is not static";
    std::vector<Node*> nodes = m.act;
    nodes.push_back(m.root);
    if (m.split || m.lo) {
      if (m.split) nodes.insert(nodes.begin(), m.split);
      if (m.lo) nodes.insert(nodes.begin(), {m.lo, m.hi});
      return rewrite::CheckInterior(g, nodes, {m.root});
    }
    m.ps.resize(2);
    std::string why = projection::Analyze(g, m.gate, "gate", &m.ps[0]);
    if (why.empty()) why = projection::Analyze(g, m.up, "up", &m.ps[1]);
    if (why.empty()) why = projection::CheckGroup(m.ps, "gate and up", "");
    if (!why.empty()) return why;
    std::vector<Node*> all;
    for (const Projection& p : m.ps) all.insert(all.end(), p.nodes.begin(), p.nodes.end());
    all.insert(all.end(), nodes.begin(), nodes.end());
    return rewrite::CheckInterior(g, all, {m.root});
  }

  absl::Status Rewrite(Graph& g, GluMatch& m, fusion::FusionSession& s) override {
    Value packed;
    std::vector<Node*> old = m.act;
    if (m.split) {
      packed = m.split->input(0);
      old.push_back(m.split);
      s.Count("glu of split halves");
    } else if (m.lo) {
      packed = m.lo->input(0);
      old.insert(old.end(), {m.lo, m.hi});
      s.Count("glu of sliced halves");
    } else {
      const std::string name = m.gate.name().empty() ? "" : m.gate.name() + "/gate_up";
      packed = projection::InsertMerged(g, m.ps, *order_, name)->output(0);
      for (const Projection& p : m.ps) old.insert(old.end(), p.nodes.begin(), p.nodes.end());
    }
    Node* glu = g.InsertNodeBefore(m.root, "Glu", {packed}, 1, "kiln");
    glu->set_attr("activation", m.activation);
    old.push_back(m.root);
    if (!order_->Sort(old)) return absl::InternalError("fuse-glu: a node is not in the graph");
    std::vector<const Node*> from(old.begin(), old.end());
    rewrite::UnionProvenance(glu, from);
    glu->set_output_type(0, m.root->output_info(0).type);
    glu->set_output_name(0, m.root->output_info(0).name);
    g.ReplaceAllUsesWith(m.root->output(0), glu->output(0));
    s.Count(m.activation == "silu" ? "swiglu" : "geglu");
    s.RemoveIfDead(g, old);
    return absl::OkStatus();
  }

  std::string_view Kind(const GluMatch&) const override { return "glu"; }
  std::vector<const Node*> Involved(const GluMatch& m) const override {
    std::vector<const Node*> v = {m.gate.node, m.up.node};
    v.insert(v.end(), m.act.begin(), m.act.end());
    v.push_back(m.root);
    return v;
  }
  std::string MissCounter(const GluMatch&) const override { return "glu missed"; }

 private:
  std::optional<rewrite::NodeOrder> order_;  // the graph order when the sweep began
};

}  // namespace

std::unique_ptr<Pass> CreateFuseGluPass() {
  return std::make_unique<fusion::RulePass<GluRule>>(
      "fuse-glu",
      "gated MLP activations act(g)·u (SwiGLU, GeGLU) -> kiln.Glu of one packed projection");
}

}  // namespace kiln
