// fuse-rotary: replaces the rotate-half rotary position embedding that HF LLaMA, Qwen2,
// Mistral and GPT-NeoX-style exports write per Q and K,
//   Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, D/2:)), Slice(x, :D/2)), sin))
// (operands of the Adds and Muls in either order), with kiln.Rotary(x, cos, sin)
// (docs/fused-ops.md). Why: seven element-wise and copy steps per head tensor, each a
// full pass over [B, N, S, D], become one; and the attention matcher can see one op
// between the head split and Q·Kᵀ instead of a subgraph.
// Root: Add. Cheap match (nothing reported): an Add of two Muls, one of which reads a
// Concat of a Neg of a Slice and a Slice of the same x that the other Mul reads.
// Near-misses (reported, kind "rotary"): the head size is not static, the slices do not
// cut x's last axis exactly at D/2 (with step 1), cos / sin are not [.., D] tables that
// broadcast to x without growing it, the dtypes differ, or an interior value is read
// elsewhere.
// Limits: the full-width form only (partial rotary — rotating the first R < D elements
// and concatenating the rest, GPT-NeoX's rotary_pct — stays unfused, although kiln.Rotary
// takes it); the interleaved GPT-J form (even/odd pairs) is not matched.
#include <limits>
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
using rewrite::NodeLabel;
using rewrite::ProducerIs;

struct RotaryMatch {
  Node* add = nullptr;
  Node* mul_x = nullptr;    // Mul(x, cos)
  Node* mul_rot = nullptr;  // Mul(rotate_half(x), sin)
  Node* concat = nullptr;
  Node* neg = nullptr;
  Node* lo = nullptr;  // Slice(x, 0, D/2)
  Node* hi = nullptr;  // Slice(x, D/2, end)
  Value x, cos, sin;
  std::vector<Node*> Nodes() const { return {lo, hi, neg, concat, mul_rot, mul_x, add}; }
};

// The other operand of a two-input node whose operand `v` is one of them; null otherwise.
Value Other(const Node* n, Value v) {
  if (n->num_inputs() != 2) return {};
  if (n->input(0) == v) return n->input(1);
  if (n->input(1) == v) return n->input(0);
  return {};
}

// Concat(Neg(Slice(x, ...)), Slice(x, ...)) on the last axis: fills the match's slices.
bool RotateHalf(Value v, RotaryMatch* m) {
  Node* c = ProducerIs(v, "Concat");
  if (c == nullptr || c->num_inputs() != 2 || !c->input(0) || !c->input(1)) return false;
  Node* neg = ProducerIs(c->input(0), "Neg");
  Node* lo = ProducerIs(c->input(1), "Slice");
  Node* hi = neg ? ProducerIs(neg->input(0), "Slice") : nullptr;
  if (lo == nullptr || hi == nullptr || !lo->input(0) || lo->input(0) != hi->input(0)) return false;
  m->concat = c;
  m->neg = neg;
  m->lo = lo;
  m->hi = hi;
  m->x = lo->input(0);
  return true;
}

std::optional<RotaryMatch> RecognizeRotary(Node* add) {
  if (add->num_inputs() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    Node* mr = ProducerIs(add->input(i), "Mul");
    Node* mx = ProducerIs(add->input(1 - i), "Mul");
    if (mr == nullptr || mx == nullptr || mr->num_inputs() != 2) continue;
    for (int j = 0; j < 2; ++j) {
      RotaryMatch m;
      if (!RotateHalf(mr->input(j), &m)) continue;
      const Value cos = Other(mx, m.x);
      if (!cos) continue;
      m.add = add;
      m.mul_x = mx;
      m.mul_rot = mr;
      m.cos = cos;
      m.sin = mr->input(1 - j);
      return m;
    }
  }
  return std::nullopt;
}

// Slice(x, starts, ends, axes, steps) on one axis: (start, end) when the axis is the last
// of a rank-`rank` input and the step is 1, constants all.
std::optional<std::pair<int64_t, int64_t>> LastAxisSlice(const Node* s, int rank) {
  if (s->num_inputs() < 3) return std::nullopt;
  auto starts = rewrite::IntConstant(s->input(1)), ends = rewrite::IntConstant(s->input(2));
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  int64_t axis = rank - 1;
  if (s->num_inputs() > 3 && s->input(3)) {
    auto axes = rewrite::IntConstant(s->input(3));
    if (!axes || axes->size() != 1) return std::nullopt;
    axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  }
  if (s->num_inputs() > 4 && s->input(4)) {
    auto steps = rewrite::IntConstant(s->input(4));
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
  }
  if (axis != rank - 1) return std::nullopt;
  return std::make_pair((*starts)[0], (*ends)[0]);
}

class RotaryRule final : public fusion::FusionRule<RotaryMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "Add"); }
  std::optional<RotaryMatch> Recognize(const Graph&, Node* add, fusion::FusionSession&) override {
    return RecognizeRotary(add);
  }

  std::string Check(const Graph& g, RotaryMatch& m, fusion::FusionSession&) override {
    const Type& xt = m.x.type();
    const DType dt = xt.dtype;
    if (!IsFloat(dt) || m.cos.type().dtype != dt || m.sin.type().dtype != dt)
      return absl::StrCat("x, cos and sin are ", xt.ToString(), ", ", m.cos.type().ToString(),
                          " and ", m.sin.type().ToString(), "; they must share one float type");
    const std::optional<int64_t> d = rewrite::StaticLastDim(m.x);
    if (!xt.has_rank() || !d) return "the head size (x's last dim) is not static";
    if (*d % 2 != 0) return absl::StrCat("the head size ", *d, " is odd");
    const int rank = xt.rank();
    const int64_t h = *d / 2;
    const auto lo = LastAxisSlice(m.lo, rank), hi = LastAxisSlice(m.hi, rank);
    const int64_t kEnd = std::numeric_limits<int64_t>::max();
    const bool lo_ok = lo && lo->first == 0 && (lo->second == h || lo->second == h - *d);
    const bool hi_ok =
        hi && (hi->first == h || hi->first == -h) && (hi->second >= *d || hi->second == kEnd);
    if (!lo_ok || !hi_ok)
      return absl::StrCat("rotate_half's Slices ", NodeLabel(m.lo), " and ", NodeLabel(m.hi),
                          " do not split the last axis of ", xt.ToString(), " at ", h,
                          " (constant bounds, step 1); a partial or interleaved rotary is not "
                          "fused");
    for (const Value& t : {m.cos, m.sin}) {
      const Type& tt = t.type();
      const std::optional<int64_t> r = rewrite::StaticLastDim(t);
      if (!tt.has_rank() || !r || *r != *d || tt.rank() > rank)
        return absl::StrCat("the table ", rewrite::ValueLabel(t), " ", tt.ToString(),
                            " is not [.., ", *d, "] of rank <= ", rank);
    }
    if (m.cos.type().shape != m.sin.type().shape)
      return absl::StrCat("cos ", m.cos.type().ToString(), " and sin ", m.sin.type().ToString(),
                          " differ in shape");
    // The tables broadcast into x: the Add's result has x's type exactly.
    if (m.add->output_info(0).type != xt || m.mul_x->output_info(0).type != xt ||
        m.mul_rot->output_info(0).type != xt || m.concat->output_info(0).type != xt)
      return absl::StrCat("the tables broadcast ", xt.ToString(), " to ",
                          m.add->output_info(0).type.ToString());
    return rewrite::CheckInterior(g, m.Nodes(), {m.add});
  }

  absl::Status Rewrite(Graph& g, RotaryMatch& m, fusion::FusionSession& s) override {
    Node* rot = g.InsertNodeBefore(m.add, "Rotary", {m.x, m.cos, m.sin}, 1, "kiln");
    rot->set_provenance({});
    const std::vector<Node*> nodes = m.Nodes();
    rewrite::UnionProvenance(rot, {nodes.begin(), nodes.end()});
    rot->set_output_type(0, m.add->output_info(0).type);
    rot->set_output_name(0, m.add->output_info(0).name);
    g.ReplaceAllUsesWith(m.add->output(0), rot->output(0));
    s.Count("rotary");
    s.RemoveIfDead(g, nodes);
    return absl::OkStatus();
  }

  std::string_view Kind(const RotaryMatch&) const override { return "rotary"; }
  std::vector<const Node*> Involved(const RotaryMatch& m) const override {
    const std::vector<Node*> nodes = m.Nodes();
    return {nodes.begin(), nodes.end()};
  }
  std::string MissCounter(const RotaryMatch&) const override { return "rotary missed"; }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseRotaryPass() {
  return std::make_unique<fusion::RulePass<RotaryRule>>(
      "fuse-rotary",
      "rotate-half rotary position embedding (x·cos + rotate_half(x)·sin) -> "
      "kiln.Rotary");
}

}  // namespace kiln
