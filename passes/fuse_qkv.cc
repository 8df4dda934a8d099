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
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/attention_match.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/projection_merge.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using projection::Projection;
using rewrite::IsOp;

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
    // The heads form has no projections to merge (its K/V are a cache's, or another input's).
    if (m.stage < attention::Stage::kProjections || m.block.heads_form) return std::nullopt;
    const attention::AttentionBlock& b = m.block;
    // Already packed (by this pass, or by the exporter as in GPT-2's c_attn and
    // ModernBERT's Wqkv, whose [B, S, 3, N, D] head split reads one projection).
    if ((IsOp(b.q.proj.node, "Split") || b.q.proj == b.k.proj) && b.q.proj.node == b.k.proj.node &&
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
      why = projection::Analyze(g, m.outs[i], names[i], &m.ps[i]);
    if (!why.empty()) return why;
    return projection::CheckGroup(m.ps, "Q, K and V",
                                  "cross-attention (K/V from a different input than Q) is not "
                                  "merged");
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
  static void Merge(Graph& g, const std::vector<Projection>& ps, const rewrite::NodeOrder& order,
                    fusion::FusionSession& s) {
    const std::string base = ps[0].out.name().empty() ? "" : ps[0].out.name() + "/qkv";
    Node* first = nullptr;  // the Split goes before it, after the merged Linear
    Node* lin = projection::InsertMerged(g, ps, order, base, &first);
    std::vector<int64_t> sizes;
    for (const Projection& p : ps) sizes.push_back(p.n());
    auto named = [&](const char* suffix) { return base.empty() ? "" : base + suffix; };
    const Value split_sizes =
        projection::ConstantBefore(g, first, Tensor::FromI64({3}, sizes), named("_split"));
    Node* split = g.InsertNodeBefore(first, "Split", {lin->output(0), split_sizes}, 3);
    split->set_attr("axis", int64_t{-1});
    for (const Projection& p : ps)
      rewrite::UnionProvenance(split, std::vector<const Node*>(p.nodes.begin(), p.nodes.end()));
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
