// fuse-gelu: replaces the decomposed GELU that exporters write with ONNX Gelu (opset-20
// op, in kiln's opset-21 IR), approximate="none" for the erf form and "tanh" for the
// tanh approximation.
//   erf:  y = x · 0.5 · (1 + erf(x / √2))
//   tanh: y = x · 0.5 · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
// Root: the Erf / Tanh node. Cheap match (no candidate, nothing reported): Erf reads
// Mul(x, 1/√2) (canonicalize's form) or Div(x, √2); Tanh reads Mul(x + 0.044715·x³,
// √(2/π)) with x³ as Pow(x, 3) or Mul(Mul(x, x), x) in either association; then
// Add(·, 1) and the product of x, 0.5 and that sum in any of the exporters' orders:
// (x·0.5)·s, (x·s)·0.5, x·(s·0.5). Operands of Add/Mul may come in either order;
// constants match within 2^-23 relative of their f32 rounding (exporters write
// 0.70710677, 1.4142135, 0.7978846, 0.044715 as f32). Near-miss (reported): the whole
// chain matches but an interior value is read elsewhere or is a graph output, or a
// one-element constant has more dims than x (it would broadcast the result to a higher
// rank) or has rank >= 1 while x's rank is unknown.
// Limits: x·sigmoid(1.702·x) ("quick gelu"), a 0.5 folded into a neighbouring weight and
// the tanh form with √(2/π) distributed over the sum are not matched.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::IsOp;
using rewrite::OtherOperand;
using rewrite::ScalarNear;
using rewrite::UserIs;

const double kSqrt2 = std::sqrt(2.0);
const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
constexpr double kTanhCubic = 0.044715;

struct GeluMatch {
  Value x;
  bool tanh = false;
  std::vector<Node*> nodes;  // every pattern node, the root last
  Node* root() const { return nodes.back(); }
};

// Mul(a, b) with a == `x` and b satisfying `pred`, in either order: the node.
template <typename P>
Node* MulOf(Value v, Value x, P pred) {
  Node* m = rewrite::ProducerIs(v, "Mul");
  if (m == nullptr || m->num_inputs() != 2) return nullptr;
  return rewrite::MatchCommuted(
             m, [&](Value a) { return a == x; }, pred)
             ? m
             : nullptr;
}

// x³ as Pow(x, 3) or Mul(Mul(x, x), x) / Mul(x, Mul(x, x)): appends its nodes.
bool IsCube(Value c, Value x, std::vector<Node*>* nodes) {
  if (Node* p = rewrite::ProducerIs(c, "Pow")) {
    if (p->num_inputs() == 2 && p->input(0) == x && rewrite::ScalarConstant(p->input(1)) == 3.0) {
      nodes->push_back(p);
      return true;
    }
    return false;
  }
  Node* sq = nullptr;
  Node* m = MulOf(c, x, [&](Value s) {
    sq = MulOf(s, x, [&](Value t) { return t == x; });
    return sq != nullptr;
  });
  if (m == nullptr) return false;
  nodes->push_back(sq);
  nodes->push_back(m);
  return true;
}

// The pre-activation part: x and its nodes, for an Erf or Tanh `act`.
bool MatchArgument(Node* act, GeluMatch* m) {
  const Value in = act->input(0);
  if (IsOp(act, "Erf")) {
    if (Node* div = rewrite::ProducerIs(in, "Div")) {
      if (div->num_inputs() != 2 || !div->input(0) || !ScalarNear(div->input(1), kSqrt2))
        return false;
      m->x = div->input(0);
      m->nodes.push_back(div);
      return true;
    }
    Node* mul = rewrite::ProducerIs(in, "Mul");
    if (mul == nullptr) return false;
    auto xs = rewrite::MatchCommuted(
        mul, [](Value) { return true; },
        [](Value c) { return rewrite::ReciprocalNear(c, kSqrt2); });
    if (!xs) return false;
    m->x = xs->first;
    m->nodes.push_back(mul);
    return true;
  }
  // Tanh: Mul(Add(x, Mul(x³, 0.044715)), √(2/π)).
  m->tanh = true;
  Node* scale = rewrite::ProducerIs(in, "Mul");
  if (scale == nullptr) return false;
  auto parts = rewrite::MatchCommuted(
      scale, [](Value) { return true; }, [](Value c) { return ScalarNear(c, kSqrt2OverPi); });
  if (!parts) return false;
  Node* add = rewrite::ProducerIs(parts->first, "Add");
  if (add == nullptr || add->num_inputs() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    const Value x = add->input(i);
    std::vector<Node*> cube;
    Node* k = rewrite::ProducerIs(add->input(1 - i), "Mul");
    if (!x || k == nullptr) continue;
    auto kc = rewrite::MatchCommuted(
        k, [&](Value c) { return IsCube(c, x, &cube); },
        [](Value c) { return ScalarNear(c, kTanhCubic); });
    if (!kc) continue;
    m->x = x;
    m->nodes = cube;
    for (Node* n : {k, add, scale}) m->nodes.push_back(n);
    return true;
  }
  return false;
}

std::optional<GeluMatch> RecognizeGelu(Node* act) {
  GeluMatch m;
  if (act->num_inputs() != 1 || !act->input(0) || !MatchArgument(act, &m)) return std::nullopt;
  m.nodes.push_back(act);
  // s = 1 + act
  Node* add = UserIs(act->output(0), "Add");
  if (add == nullptr || !ScalarNear(OtherOperand(add, act->output(0)), 1.0)) return std::nullopt;
  m.nodes.push_back(add);
  const Value s = add->output(0);
  Node* m1 = UserIs(s, "Mul");
  if (m1 == nullptr) return std::nullopt;
  const Value o1 = OtherOperand(m1, s);
  const Value x = m.x;
  auto is_x = [&](Value v) { return v == x; };
  auto is_half = [](Value v) { return ScalarNear(v, 0.5); };
  if (Node* h = rewrite::ProducerIs(o1, "Mul");
      h != nullptr && o1 != x && rewrite::MatchCommuted(h, is_x, is_half)) {
    m.nodes.push_back(h);  // (x·0.5)·s
    m.nodes.push_back(m1);
    return m;
  }
  Node* m2 = UserIs(m1->output(0), "Mul");
  if (m2 == nullptr) return std::nullopt;
  const Value o2 = OtherOperand(m2, m1->output(0));
  if ((o1 == x && is_half(o2)) || (is_half(o1) && o2 == x)) {  // (x·s)·0.5, (s·0.5)·x
    m.nodes.push_back(m1);
    m.nodes.push_back(m2);
    return m;
  }
  return std::nullopt;
}

// "" when no constant of the chain broadcasts x to a higher rank (every node is
// elementwise, so each constant's operand has x's rank once the earlier ones fit); else
// the near-miss reason.
std::string RankIssue(const GeluMatch& m) {
  for (const Node* n : m.nodes)
    for (const Value& in : n->inputs()) {
      std::string why = rewrite::ScalarRankFits(in, m.x);
      if (!why.empty()) return why;
    }
  return "";
}

class GeluRule final : public fusion::FusionRule<GeluMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "Erf") || IsOp(&n, "Tanh"); }
  std::optional<GeluMatch> Recognize(const Graph&, Node* act, fusion::FusionSession&) override {
    std::optional<GeluMatch> m = RecognizeGelu(act);
    if (!m || !IsFloat(m->x.type().dtype)) return std::nullopt;
    return m;
  }
  std::string Check(const Graph& g, GeluMatch& m, fusion::FusionSession&) override {
    std::string why = RankIssue(m);
    return why.empty() ? rewrite::CheckInterior(g, m.nodes, {m.root()}) : why;
  }
  // Gelu(x){approximate}
  absl::Status Rewrite(Graph& g, GeluMatch& m, fusion::FusionSession& s) override {
    Node* root = m.root();
    Node* gelu = g.InsertNodeBefore(root, "Gelu", {m.x}, 1);
    gelu->set_attr("approximate", std::string(m.tanh ? "tanh" : "none"));
    gelu->set_provenance({});
    rewrite::UnionProvenance(gelu, {m.nodes.begin(), m.nodes.end()});
    gelu->set_output_type(0, root->output_info(0).type);
    gelu->set_output_name(0, root->output_info(0).name);
    g.ReplaceAllUsesWith(root->output(0), gelu->output(0));
    s.Count(m.tanh ? "gelu (tanh)" : "gelu (erf)");
    s.RemoveIfDead(g, m.nodes);
    return absl::OkStatus();
  }
  std::string_view Kind(const GeluMatch&) const override { return "gelu"; }
  std::vector<const Node*> Involved(const GeluMatch& m) const override {
    return {m.nodes.begin(), m.nodes.end()};
  }
  std::string MissCounter(const GeluMatch&) const override { return "gelu missed"; }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseGeluPass() {
  return std::make_unique<fusion::RulePass<GeluRule>>(
      "fuse-gelu", "decomposed erf / tanh GELU -> Gelu{approximate}");
}

}  // namespace kiln
