// fuse-attention: replaces each self-attention block — Q·Kᵀ, scale, mask, Softmax, P·V and
// the head split/merge around them — with one kiln.MultiHeadAttention(qkv, mask?)
// {num_heads, scale, causal} (docs/fused-ops.md).
// Algebra: Reshape(Transpose(softmax(c·Q·Kᵀ + M) · V)) = MHA(concat(Q, K, V), M){scale=c}.
// Why: the block is ~15 small ops whose [B, N, S, S] intermediates dominate memory traffic;
// one fused kernel keeps them in registers and lets the CPU/GPU kernels pick their layout.
// Root: Softmax. The structural match (passes/attention_match.cc) accepts the exporter
// variants listed in docs/passes.md; qkv is the packed projection when Q, K, V are the
// fuse-qkv Split's outputs (the Split then dies), else a Concat of the three projections.
// The fused op replaces the head-merge Reshape when that produces [B, S, H]; a merge
// straight to another shape (GPT-2's [B·S, H]) is kept and reads the fused op's output.
// A Softmax between MatMul(Q, Kᵀ) and MatMul(P, V) that does not fuse is reported as a
// near-miss with its reason (fusion report kind "attention").
// Limits: self-attention only (cross-attention is a reported miss); the scale must be a
// constant (symbolic Shape-derived scales that did not fold are a reported miss); a Where
// mask with a finite fill becomes an additive Where(cond, 0, fill) mask, which differs
// from the original only on rows where every key is masked.
#include <set>
#include <string>
#include <vector>

#include "passes/attention_match.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using attention::AttentionBlock;
using attention::MaskKind;

// A scalar constant of `dtype` inserted before `before`.
Value ScalarBefore(Graph& g, Node* before, DType dtype, double v) {
  Tensor t(dtype, {});
  t.SetFromDouble(0, v);
  Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
  c->set_attr("value", t);
  c->set_output_type(0, Type::Of(t));
  return c->output(0);
}

// The mask operand of the fused op, building what the original expressed differently.
Value FusedMask(Graph& g, const AttentionBlock& b, Node* before, DType dtype) {
  const Value m = b.mask.value;
  switch (b.mask.kind) {
    case MaskKind::kNone:
      return {};
    case MaskKind::kAdditive:
    case MaskKind::kBoolKeep:
      return m;
    case MaskKind::kBoolDrop: {
      if (Node* inner = rewrite::ProducerIs(m, "Not")) return inner->input(0);
      Node* n = g.InsertNodeBefore(before, "Not", {m}, 1);
      n->set_output_type(0, m.type());
      n->set_provenance(m.node->provenance());
      return n->output(0);
    }
    case MaskKind::kWhereFill: {
      const Value zero = ScalarBefore(g, before, dtype, 0.0);
      const Value fill = ScalarBefore(g, before, dtype, b.mask.fill);
      Node* w = g.InsertNodeBefore(before, "Where",
                                   {m, b.mask.keep ? zero : fill, b.mask.keep ? fill : zero}, 1);
      Type t = m.type();
      t.dtype = dtype;
      w->set_output_type(0, t);
      w->set_provenance(m.node->provenance());
      return w->output(0);
    }
  }
  return {};
}

Value PackedQkv(Graph& g, const AttentionBlock& b, Node* before) {
  if (b.qkv_split) return b.qkv_split->input(0);
  Node* c = g.InsertNodeBefore(before, "Concat", {b.q.proj, b.k.proj, b.v.proj}, 1);
  c->set_attr("axis", int64_t{-1});
  Type t = b.q.proj.type();
  if (t.shape && !t.shape->empty()) t.shape->back() = Dim::Known(3 * b.num_heads * b.head_dim);
  c->set_output_type(0, t);
  rewrite::UnionProvenance(c, {b.q.proj.node, b.k.proj.node, b.v.proj.node});
  return c->output(0);
}

class FuseAttentionPass final : public Pass {
 public:
  std::string_view name() const override { return "fuse-attention"; }
  std::string_view description() const override {
    return "fuse self-attention blocks into kiln.MultiHeadAttention (packed qkv, mask, "
           "causal flag)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    std::vector<Node*> roots;
    for (const auto& n : g.nodes())
      if (rewrite::IsOp(n.get(), "Softmax")) roots.push_back(n.get());
    std::set<const Node*> removed;
    const rewrite::NodeOrder order(g);
    bool changed = false;
    for (Node* softmax : roots) {
      if (removed.count(softmax)) continue;
      attention::MatchResult m = attention::MatchAttention(g, softmax, &order);
      if (m.stage == attention::Stage::kNotAttention) continue;
      if (m.stage != attention::Stage::kComplete) {
        Count("missed");
        if (ctx.fusion_report) ctx.fusion_report->Missed("attention", m.nodes, m.reason);
        continue;
      }
      Rewrite(g, m.block, &removed);
      changed = true;
      Count("fused");
      if (m.block.causal) Count("causal");
      if (m.block.mask.kind != MaskKind::kNone) Count("masked");
      if (!m.block.qkv_split) Count("qkv concatenated");
      if (ctx.fusion_report) ctx.fusion_report->Fused("attention");
    }
    return changed;
  }

 private:
  static void Rewrite(Graph& g, const AttentionBlock& b, std::set<const Node*>* removed) {
    Node* out = b.output;
    const DType dtype = b.scores->output_info(0).type.dtype != DType::kUndefined
                            ? b.scores->output_info(0).type.dtype
                            : b.q.proj.type().dtype;
    const Value qkv = PackedQkv(g, b, out);
    const Value mask = FusedMask(g, b, out, dtype);
    std::vector<Value> inputs = {qkv};
    if (mask) inputs.push_back(mask);
    Node* mha = g.InsertNodeBefore(out, "MultiHeadAttention", inputs, 1, "kiln");
    mha->set_attr("num_heads", b.num_heads);
    mha->set_attr("scale", static_cast<float>(b.scale));
    mha->set_attr("causal", int64_t{b.causal ? 1 : 0});
    std::vector<const Node*> from(b.interior.begin(), b.interior.end());
    rewrite::UnionProvenance(mha, from);
    if (b.merge_kept) {
      // [B, S, H] from the merge Transpose's [B, S, N, D]; the kept Reshape reads it.
      const Value merged = b.merge_transpose->output(0);
      Type t = merged.type();
      if (t.shape && t.shape->size() == 4)
        t.shape = std::vector<Dim>{(*t.shape)[0], (*t.shape)[1],
                                   Dim::Known(b.num_heads * b.head_dim)};
      else
        t.shape.reset();
      mha->set_output_type(0, t);
      mha->set_output_name(0, merged.name());
      g.SetInput(out, 0, mha->output(0));
      attention::RemoveDeadFrom(g, {b.merge_transpose}, removed);
      return;
    }
    mha->set_output_type(0, out->output_info(0).type);
    mha->set_output_name(0, out->output_info(0).name);
    g.ReplaceAllUsesWith(out->output(0), mha->output(0));
    attention::RemoveDeadFrom(g, {out}, removed);
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAttentionPass() { return std::make_unique<FuseAttentionPass>(); }

}  // namespace kiln
