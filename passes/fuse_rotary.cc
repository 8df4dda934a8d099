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
// Partial rotary (GPT-NeoX's rotary_pct): when x is Slice(q, 0:R) and the result is
// concatenated back with Slice(q, R:), the whole Concat becomes kiln.Rotary(q, cos, sin)
// with [.., R] tables (counter "partial rotary").
// Limits: the interleaved GPT-J form (even/odd pairs) is not matched.
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
  // Partial rotary (GPT-NeoX's rotary_pct): x = Slice(q, 0:R) and the result is put back by
  // Concat(result, Slice(q, R:)) on the last axis; the Concat is then the root replaced.
  Node* rot_slice = nullptr;   // Slice(q, 0, R)
  Node* pass_slice = nullptr;  // Slice(q, R, end)
  Node* merge = nullptr;       // the Concat
  std::vector<Node*> Nodes() const {
    if (merge) return {rot_slice, pass_slice, lo, hi, neg, concat, mul_rot, mul_x, add, merge};
    return {lo, hi, neg, concat, mul_rot, mul_x, add};
  }
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
    const auto lo = rewrite::LastAxisSlice(m.lo, rank), hi = rewrite::LastAxisSlice(m.hi, rank);
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
    const std::string why = rewrite::CheckInterior(g, m.Nodes(), {m.add});
    if (why.empty()) DetectPartial(g, m, *d);
    return why;
  }

  absl::Status Rewrite(Graph& g, RotaryMatch& m, fusion::FusionSession& s) override {
    Node* root = m.merge ? m.merge : m.add;
    const Value x = m.merge ? m.rot_slice->input(0) : m.x;
    Node* rot = g.InsertNodeBefore(root, "Rotary", {x, m.cos, m.sin}, 1, "kiln");
    rot->set_provenance({});
    const std::vector<Node*> nodes = m.Nodes();
    rewrite::UnionProvenance(rot, {nodes.begin(), nodes.end()});
    rot->set_output_type(0, root->output_info(0).type);
    rot->set_output_name(0, root->output_info(0).name);
    g.ReplaceAllUsesWith(root->output(0), rot->output(0));
    s.Count(m.merge ? "partial rotary" : "rotary");
    s.RemoveIfDead(g, nodes);
    return absl::OkStatus();
  }

 private:
  // Fills m.rot_slice / pass_slice / merge when the matched rotary (over `r` elements) is
  // the rotated part of a partial rotary of q: x = Slice(q, 0, r) on q's last axis, and
  // the Add's only reader is Concat(add, Slice(q, r, end)) on that axis with q's type.
  // Anything else leaves the plain fusion of the rotated part.
  static void DetectPartial(const Graph& g, RotaryMatch& m, int64_t r) {
    Node* rs = ProducerIs(m.x, "Slice");
    Node* cat = rewrite::SingleUser(g, m.add->output(0));
    if (rs == nullptr || !IsOp(cat, "Concat") || cat->num_inputs() != 2 ||
        cat->input(0) != m.add->output(0))
      return;
    Node* ps = ProducerIs(cat->input(1), "Slice");
    const Value q = rs->input(0);
    if (ps == nullptr || ps->input(0) != q || !q.type().has_rank()) return;
    const int rank = q.type().rank();
    const std::optional<int64_t> dq = rewrite::StaticLastDim(q);
    const int64_t axis = cat->attr_int_or("axis", 0);
    const auto a = rewrite::LastAxisSlice(rs, rank), b = rewrite::LastAxisSlice(ps, rank);
    const int64_t kEnd = std::numeric_limits<int64_t>::max();
    if (!dq || *dq <= r || (axis != -1 && axis != rank - 1) || !a || a->first != 0 ||
        (a->second != r && a->second != r - *dq) || !b || (b->first != r && b->first != r - *dq) ||
        (b->second < *dq && b->second != kEnd) || cat->output_info(0).type != q.type())
      return;
    RotaryMatch p = m;
    p.rot_slice = rs;
    p.pass_slice = ps;
    p.merge = cat;
    if (rewrite::CheckInterior(g, p.Nodes(), {cat}).empty()) m = p;
  }

 public:
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
