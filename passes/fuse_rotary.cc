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
// Interleaved (GPT-J's rotate_every_two): Mul(x, cos) + Mul(rot2(x), sin) with
//   rot2(x) = Reshape(Concat(Unsqueeze(Neg(Slice(x, 1::2)), -1), Unsqueeze(Slice(x, 0::2), -1),
//                     axis = -1), x's shape)
// becomes kiln.Rotary(x, cos, sin){interleaved = 1} (counter "interleaved"); partial as above.
#include <algorithm>
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
  Node* lo = nullptr;  // Slice(x, 0, D/2); interleaved: Slice(x, 0::2)
  Node* hi = nullptr;  // Slice(x, D/2, end); interleaved: Slice(x, 1::2)
  Value x, cos, sin;
  // Interleaved: the stack's Unsqueezes of Neg(hi) and lo, and the Reshape that flattens it
  // (concat is then the stack's Concat).
  bool interleaved = false;
  Node* unsq_neg = nullptr;
  Node* unsq_lo = nullptr;
  Node* flatten = nullptr;
  // The symbolic exports compute the flatten's target from shape ops (TorchScript: Shape of
  // the stack itself); those read only by the pattern die with it (KeepOwnTarget).
  std::vector<Node*> target;
  // Partial rotary (GPT-NeoX's rotary_pct): x = Slice(q, 0:R) and the result is put back by
  // Concat(result, Slice(q, R:)) on the last axis; the Concat is then the root replaced.
  Node* rot_slice = nullptr;   // Slice(q, 0, R)
  Node* pass_slice = nullptr;  // Slice(q, R, end)
  Node* merge = nullptr;       // the Concat
  std::vector<Node*> Nodes() const {
    std::vector<Node*> n;
    if (merge) n = {rot_slice, pass_slice};
    n.insert(n.end(), {lo, hi, neg, concat, mul_rot, mul_x, add});
    if (interleaved) {
      n.insert(n.end(), {unsq_neg, unsq_lo, flatten});
      n.insert(n.end(), target.begin(), target.end());
    }
    if (merge) n.push_back(merge);
    return n;
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

// Reshape(Concat(Unsqueeze(Neg(Slice(x, ..)), ..), Unsqueeze(Slice(x, ..), ..))): GPT-J's
// rotate_every_two, its slices and axes checked later.
bool RotateEveryTwo(Value v, RotaryMatch* m) {
  Node* r = ProducerIs(v, "Reshape");
  Node* c = r ? ProducerIs(r->input(0), "Concat") : nullptr;
  if (c == nullptr || c->num_inputs() != 2 || !c->input(0) || !c->input(1)) return false;
  Node* un = ProducerIs(c->input(0), "Unsqueeze");
  Node* ul = ProducerIs(c->input(1), "Unsqueeze");
  Node* neg = un ? ProducerIs(un->input(0), "Neg") : nullptr;
  Node* lo = ul ? ProducerIs(ul->input(0), "Slice") : nullptr;
  Node* hi = neg ? ProducerIs(neg->input(0), "Slice") : nullptr;
  if (lo == nullptr || hi == nullptr || !lo->input(0) || lo->input(0) != hi->input(0)) return false;
  m->interleaved = true;
  m->flatten = r;
  m->concat = c;
  m->unsq_neg = un;
  m->unsq_lo = ul;
  m->neg = neg;
  m->lo = lo;
  m->hi = hi;
  m->x = lo->input(0);
  // The target's shape arithmetic back to its Shape ops.
  std::vector<Value> work = {r->input(1)};
  while (!work.empty() && m->target.size() < 16) {
    Node* n = work.back().node;
    work.pop_back();
    if (n == nullptr || std::find(m->target.begin(), m->target.end(), n) != m->target.end())
      continue;
    if (IsOp(n, "Shape")) {
      m->target.push_back(n);
    } else if (IsOp(n, "Concat") || IsOp(n, "Slice") || IsOp(n, "Gather") || IsOp(n, "Unsqueeze") ||
               IsOp(n, "Squeeze") || IsOp(n, "Cast")) {
      m->target.push_back(n);
      for (const Value& in : n->inputs()) work.push_back(in);
    }
  }
  return true;
}

// Empty when the interleaved match's stack is exactly rotate_every_two of x (rank `rank`,
// last dim d): slices 0::2 and 1::2 of the last axis, Unsqueeze and Concat on a new last
// axis, the Reshape back to x's type.
std::string CheckEveryTwo(const RotaryMatch& m, int rank, int64_t d) {
  const int64_t kEnd = std::numeric_limits<int64_t>::max();
  const auto lo = rewrite::LastAxisSlice(m.lo, rank, 2), hi = rewrite::LastAxisSlice(m.hi, rank, 2);
  const bool slices_ok = lo && hi && lo->first == 0 && hi->first == 1 &&
                         (lo->second >= d || lo->second == kEnd) &&
                         (hi->second >= d || hi->second == kEnd);
  auto new_last = [&](const Node* u) {
    const auto axes = u->num_inputs() > 1 ? rewrite::IntConstant(u->input(1)) : std::nullopt;
    return axes && axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == rank);
  };
  const int64_t axis = m.concat->attr_int_or("axis", 0);
  if (!slices_ok || !new_last(m.unsq_neg) || !new_last(m.unsq_lo) || (axis != -1 && axis != rank) ||
      m.flatten->output_info(0).type != m.x.type())
    return absl::StrCat(
        "rotate_every_two (", NodeLabel(m.lo), ", ", NodeLabel(m.hi), ", ", NodeLabel(m.concat),
        ", ", NodeLabel(m.flatten), ") is not the even/odd Slices (step 2) of the last axis of ",
        m.x.type().ToString(), " stacked on a new last axis and flattened back to its shape");
  return "";
}

std::optional<RotaryMatch> RecognizeRotary(Node* add) {
  if (add->num_inputs() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    Node* mr = ProducerIs(add->input(i), "Mul");
    Node* mx = ProducerIs(add->input(1 - i), "Mul");
    if (mr == nullptr || mx == nullptr || mr->num_inputs() != 2) continue;
    for (int j = 0; j < 2; ++j) {
      RotaryMatch m;
      if (!RotateHalf(mr->input(j), &m) && !RotateEveryTwo(mr->input(j), &m)) continue;
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
    if (m.interleaved) {
      if (std::string why = CheckEveryTwo(m, rank, *d); !why.empty()) return why;
    } else {
      const auto lo = rewrite::LastAxisSlice(m.lo, rank), hi = rewrite::LastAxisSlice(m.hi, rank);
      const int64_t kEnd = std::numeric_limits<int64_t>::max();
      const bool lo_ok = lo && lo->first == 0 && (lo->second == h || lo->second == h - *d);
      const bool hi_ok =
          hi && (hi->first == h || hi->first == -h) && (hi->second >= *d || hi->second == kEnd);
      if (!lo_ok || !hi_ok)
        return absl::StrCat("rotate_half's Slices ", NodeLabel(m.lo), " and ", NodeLabel(m.hi),
                            " do not split the last axis of ", xt.ToString(), " at ", h,
                            " (constant bounds, step 1)");
    }
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
        m.mul_rot->output_info(0).type != xt ||
        (m.interleaved ? m.flatten : m.concat)->output_info(0).type != xt)
      return absl::StrCat("the tables broadcast ", xt.ToString(), " to ",
                          m.add->output_info(0).type.ToString());
    if (m.interleaved) KeepOwnTarget(g, m);
    const std::string why = rewrite::CheckInterior(g, m.Nodes(), {m.add});
    if (why.empty()) DetectPartial(g, m, *d);
    return why;
  }

  absl::Status Rewrite(Graph& g, RotaryMatch& m, fusion::FusionSession& s) override {
    Node* root = m.merge ? m.merge : m.add;
    const Value x = m.merge ? m.rot_slice->input(0) : m.x;
    Node* rot = g.InsertNodeBefore(root, "Rotary", {x, m.cos, m.sin}, 1, "kiln");
    if (m.interleaved) rot->set_attr("interleaved", int64_t{1});
    rot->set_provenance({});
    const std::vector<Node*> nodes = m.Nodes();
    rewrite::UnionProvenance(rot, {nodes.begin(), nodes.end()});
    rot->set_output_type(0, root->output_info(0).type);
    rot->set_output_name(0, root->output_info(0).name);
    g.ReplaceAllUsesWith(root->output(0), rot->output(0));
    s.Count(m.merge ? "partial rotary" : "rotary");
    if (m.interleaved) s.Count("interleaved");
    s.RemoveIfDead(g, nodes);
    return absl::OkStatus();
  }

 private:
  // Drops from m.target the shape ops that something outside the pattern also reads (the
  // dynamo export shares one target among the layers' Reshapes): they stay.
  static void KeepOwnTarget(const Graph& g, RotaryMatch& m) {
    for (bool changed = true; changed;) {
      changed = false;
      const std::vector<Node*> nodes = m.Nodes();
      for (size_t i = 0; i < m.target.size(); ++i) {
        const Node* n = m.target[i];
        bool own = true;
        for (int o = 0; o < n->num_outputs() && own; ++o) {
          const Value v{const_cast<Node*>(n), o};
          if (rewrite::IsGraphOutput(g, v)) own = false;
          for (const Use& u : n->output_info(o).uses)
            if (std::find(nodes.begin(), nodes.end(), u.user) == nodes.end()) own = false;
        }
        if (!own) {
          m.target.erase(m.target.begin() + static_cast<std::ptrdiff_t>(i));
          changed = true;
          break;
        }
      }
    }
  }

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
      "rotary position embedding (x·cos + rotate_half(x)·sin, or GPT-J's rotate_every_two) "
      "-> kiln.Rotary");
}

}  // namespace kiln
