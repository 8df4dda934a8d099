// fuse-qkv: merges the three projections that feed one attention block's Q, K and V into
// one kiln.Linear with concatenated weights, followed by a Split whose outputs replace
// the three (so everything downstream still works if fuse-attention does not fire).
// Algebra: [x·Wq + bq, x·Wk + bk, x·Wv + bv] = split(x·[Wq | Wk | Wv] + [bq | bk | bv]).
// Why: one GEMM of width 3H instead of three of width H (better weight streaming and
// fewer launches), and the packed [B, S, 3H] tensor is exactly kiln.MultiHeadAttention's
// qkv input, so after fuse-attention the Split dies.
// Which three: only projections proven to be one attention's Q, K, V by the shared
// attention matcher (passes/attention_match.h), concatenated in the order the attention
// uses them (Q feeds the left of Q·Kᵀ, K the right, V the P·V MatMul) — never unrelated
// Linears that happen to share an input. Projections are kiln.Linear (activation none) or,
// where fuse-linear missed one, MatMul(x, W) with an optional Add of a constant bias.
// Limits: constant weights only, one dtype, the same input x, trans_w equal on all three,
// bias on all three or none; cross-attention (K/V from another input) is a reported miss.
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/attention_match.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::ProducerIs;

// One of the three projections, in the form the merged Linear needs.
struct Projection {
  Value out;
  Value x;
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;
  int64_t trans_w = 0;
  std::vector<Node*> nodes;  // the nodes the merged Linear replaces
  int64_t k() const { return w->dims()[trans_w ? 1 : 0]; }
  int64_t n() const { return w->dims()[trans_w ? 0 : 1]; }
};

bool IsLinear(const Node* n) { return n && n->domain() == "kiln" && n->op() == "Linear"; }

// Fills `p` for projection value `v`; the reason it cannot be merged otherwise.
std::string AnalyzeProjection(const Graph& g, Value v, const char* which, Projection* p) {
  p->out = v;
  Node* n = v.node;
  Node* mm = nullptr;
  Value bias;
  if (IsLinear(n)) {
    const std::string* act = n->attr_string("activation");
    if (act && *act != "none")
      return absl::StrFormat("the %s projection has a fused activation (%s)", which, *act);
    p->trans_w = n->attr_int_or("trans_w", 0);
    if (p->trans_w != 0 && p->trans_w != 1)
      return absl::StrFormat("the %s projection has trans_w=%d", which, p->trans_w);
    p->x = n->input(0);
    p->w = ConstantOf(n->input(1));
    if (n->num_inputs() > 2) bias = n->input(2);
    p->nodes = {n};
  } else {
    if (IsOp(n, "Add") && n->num_inputs() == 2) {
      for (int i = 0; i < 2 && mm == nullptr; ++i)
        if ((mm = ProducerIs(n->input(i), "MatMul"))) bias = n->input(1 - i);
      if (mm == nullptr || !rewrite::HasSingleUse(g, mm->output(0)))
        return absl::StrFormat("the %s projection is an Add, not MatMul + bias", which);
      p->nodes = {mm, n};
    } else if (IsOp(n, "MatMul")) {
      mm = n;
      p->nodes = {n};
    } else {
      return absl::StrFormat("the %s projection is %s, not a Linear or MatMul", which, n->op());
    }
    if (mm->num_inputs() != 2) return "malformed MatMul";
    p->x = mm->input(0);
    p->w = ConstantOf(mm->input(1));
    if (!p->x.type().has_rank() || p->x.type().rank() < 2)
      return absl::StrFormat("the %s projection's input rank is unknown or below 2", which);
  }
  if (p->w == nullptr || p->w->rank() != 2 || !IsFloat(p->w->dtype()))
    return absl::StrFormat("the %s projection's weight is not a constant float matrix", which);
  if (bias) {
    p->bias = ConstantOf(bias);
    if (p->bias == nullptr || p->bias->NumElements() != p->n() || p->bias->dtype() != p->w->dtype())
      return absl::StrFormat("the %s projection's bias is not a constant vector of size %d", which,
                             p->n());
    for (int64_t d : p->bias->dims())
      if (d != 1 && d != p->n())
        return absl::StrFormat("the %s projection's bias has shape %s", which,
                               p->bias->ShapeString());
  }
  return "";
}

// Concatenates the weights along the output axis (columns of [K, N], rows of [N, K]).
Tensor ConcatWeights(const std::vector<Projection>& ps) {
  const int64_t k = ps[0].k();
  int64_t total = 0;
  for (const Projection& p : ps) total += p.n();
  const DType dt = ps[0].w->dtype();
  const size_t es = DTypeSize(dt);
  const bool tw = ps[0].trans_w == 1;
  Tensor w(dt, tw ? std::vector<int64_t>{total, k} : std::vector<int64_t>{k, total});
  std::byte* dst = w.raw();
  if (tw) {
    for (const Projection& p : ps) {
      std::memcpy(dst, p.w->raw(), p.w->NumBytes());
      dst += p.w->NumBytes();
    }
  } else {
    for (int64_t r = 0; r < k; ++r)
      for (const Projection& p : ps) {
        const size_t row = static_cast<size_t>(p.n()) * es;
        std::memcpy(dst, p.w->raw() + r * row, row);
        dst += row;
      }
  }
  return w;
}

Tensor ConcatBiases(const std::vector<Projection>& ps) {
  int64_t total = 0;
  for (const Projection& p : ps) total += p.n();
  Tensor b(ps[0].bias->dtype(), {total});
  std::byte* dst = b.raw();
  for (const Projection& p : ps) {
    std::memcpy(dst, p.bias->raw(), p.bias->NumBytes());
    dst += p.bias->NumBytes();
  }
  return b;
}

Value ConstantBefore(Graph& g, Node* before, Tensor t, std::string name) {
  Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
  c->set_output_type(0, Type::Of(t));
  c->set_attr("value", std::move(t));
  c->set_output_name(0, std::move(name));
  return c->output(0);
}

// The three projections of one attention block, by the shared matcher.
struct QkvMatch {
  Value outs[3];               // Q, K, V as the attention reads them
  std::vector<Projection> ps;  // filled by Check
};

class QkvRule final : public fusion::FusionRule<QkvMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "Softmax"); }
  void Begin(const Graph& g) override { order_.emplace(g); }

  std::optional<QkvMatch> Recognize(const Graph& g, Node* softmax,
                                    fusion::FusionSession& s) override {
    attention::MatchResult m = attention::MatchAttention(g, softmax, &*order_);
    if (m.stage < attention::Stage::kProjections) return std::nullopt;
    const attention::AttentionBlock& b = m.block;
    // Already packed (by this pass, or by the exporter as in GPT-2's c_attn).
    if (IsOp(b.q.proj.node, "Split") && b.q.proj.node == b.k.proj.node &&
        b.q.proj.node == b.v.proj.node) {
      s.Count("already packed");
      return std::nullopt;
    }
    return QkvMatch{{b.q.proj, b.k.proj, b.v.proj}, {}};
  }

  std::string Check(const Graph& g, QkvMatch& m, fusion::FusionSession&) override {
    m.ps.resize(3);
    const char* names[] = {"Q", "K", "V"};
    std::string why;
    for (int i = 0; i < 3 && why.empty(); ++i)
      why = AnalyzeProjection(g, m.outs[i], names[i], &m.ps[i]);
    return why.empty() ? CheckGroup(m.ps) : why;
  }

  absl::Status Rewrite(Graph& g, QkvMatch& m, fusion::FusionSession& s) override {
    Merge(g, m.ps, *order_, s);
    s.Count("merged");
    return absl::OkStatus();
  }

  std::string_view Kind(const QkvMatch&) const override { return "qkv"; }
  std::vector<const Node*> Involved(const QkvMatch& m) const override {
    return {m.outs[0].node, m.outs[1].node, m.outs[2].node};
  }

 private:
  static std::string CheckGroup(const std::vector<Projection>& ps) {
    if (ps[0].out.node == ps[1].out.node || ps[0].out.node == ps[2].out.node ||
        ps[1].out.node == ps[2].out.node)
      return "Q, K and V share a projection node";
    if (ps[1].x != ps[2].x || ps[0].x != ps[1].x)
      return ps[1].x == ps[2].x
                 ? "cross-attention (K/V from a different input than Q) is not merged"
                 : "Q, K and V projections read different inputs";
    for (const Projection& p : ps) {
      if (p.trans_w != ps[0].trans_w) return "the projections differ in trans_w";
      if (p.w->dtype() != ps[0].w->dtype()) return "the projection weights differ in dtype";
      if (p.k() != ps[0].k())
        return absl::StrFormat("the projection weights differ in input size (%d vs %d)", p.k(),
                               ps[0].k());
      if ((p.bias == nullptr) != (ps[0].bias == nullptr))
        return "some projections have a bias and some do not";
    }
    return "";
  }

  static void Merge(Graph& g, const std::vector<Projection>& ps, const rewrite::NodeOrder& order,
                    fusion::FusionSession& s) {
    std::vector<Node*> replaced;
    for (const Projection& p : ps) replaced.insert(replaced.end(), p.nodes.begin(), p.nodes.end());
    // The first replaced node in graph order: the merged Linear goes before it.
    Node* first = nullptr;
    if (order.Sort(replaced)) {
      first = replaced.front();
    } else {
      const std::set<const Node*> set(replaced.begin(), replaced.end());
      for (const auto& n : g.nodes())
        if (set.count(n.get())) {
          first = n.get();
          break;
        }
    }
    const std::string base = ps[0].out.name().empty() ? "" : ps[0].out.name() + "/qkv";
    auto named = [&](const char* suffix) { return base.empty() ? "" : base + suffix; };
    std::vector<Value> inputs = {ps[0].x,
                                 ConstantBefore(g, first, ConcatWeights(ps), named("_weight"))};
    if (ps[0].bias) inputs.push_back(ConstantBefore(g, first, ConcatBiases(ps), named("_bias")));
    Node* lin = g.InsertNodeBefore(first, "Linear", inputs, 1, "kiln");
    lin->set_attr("trans_w", ps[0].trans_w);
    lin->set_attr("activation", std::string("none"));
    int64_t total = 0;
    std::vector<int64_t> sizes;
    for (const Projection& p : ps) {
      sizes.push_back(p.n());
      total += p.n();
    }
    Type t = ps[0].out.type();
    if (!t.has_rank()) {
      t = ps[0].x.type();
      t.dtype = ps[0].w->dtype();
    }
    if (t.shape && !t.shape->empty()) t.shape->back() = Dim::Known(total);
    lin->set_output_type(0, t);
    lin->set_output_name(0, base);
    const Value split_sizes =
        ConstantBefore(g, first, Tensor::FromI64({3}, sizes), named("_split"));
    Node* split = g.InsertNodeBefore(first, "Split", {lin->output(0), split_sizes}, 3);
    split->set_attr("axis", int64_t{-1});
    for (const Projection& p : ps) {
      rewrite::UnionProvenance(lin, std::vector<const Node*>(p.nodes.begin(), p.nodes.end()));
      rewrite::UnionProvenance(split, std::vector<const Node*>(p.nodes.begin(), p.nodes.end()));
    }
    std::vector<Node*> old;
    for (int i = 0; i < 3; ++i) {
      const Value from = ps[i].out;
      split->set_output_type(i, from.type());
      split->set_output_name(i, from.name());
      g.ReplaceAllUsesWith(from, split->output(i));
      old.push_back(from.node);
    }
    s.RemoveIfDead(g, old);
  }

  std::optional<rewrite::NodeOrder> order_;  // the graph order when the sweep began
};

}  // namespace

std::unique_ptr<Pass> CreateFuseQkvPass() {
  return std::make_unique<fusion::RulePass<QkvRule>>(
      "fuse-qkv", "merge an attention block's Q, K, V projections into one Linear + Split");
}

}  // namespace kiln
