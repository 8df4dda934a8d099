// fuse-attention: replaces each self-attention block — Q·Kᵀ, scale, mask, Softmax, P·V and
// the head split/merge around them, and on decoders the kiln.Rotary of Q and K and the
// repeat_kv expansion of grouped K/V heads — with one kiln.MultiHeadAttention(qkv, mask?,
// cos?, sin?) {num_heads, num_kv_heads, scale, causal} (docs/fused-ops.md).
// Algebra: Reshape(Transpose(softmax(c·Q·Kᵀ + M) · V)) = MHA(concat(Q, K, V), M){scale=c}.
// Why: the block is ~15 small ops whose [B, N, S, S] intermediates dominate memory traffic;
// one fused kernel keeps them in registers and lets the CPU/GPU kernels pick their layout.
// Root: Softmax. The structural match (passes/attention_match.cc) accepts the exporter
// variants listed in docs/passes.md; qkv is the packed projection when Q, K, V are the
// fuse-qkv Split's outputs (the Split then dies), else a Concat of the three projections.
// The fused op replaces the head-merge Reshape when that produces [B, S, H]; a merge
// straight to another shape (GPT-2's [B·S, H]) is kept and reads the fused op's output.
// A Softmax between MatMul(Q, Kᵀ) and MatMul(P, V) that does not fuse is reported as a
// near-miss with its reason (fusion report kind "attention"), and so is any Softmax whose
// probabilities feed a MatMul but whose scores are not Q·Kᵀ under scales and masks
// (DeBERTa's disentangled terms): no attention-shaped block goes unreported. Several
// additive masks (MPNet's relative position bias beside the padding mask) become one,
// their sum (a rounding-level difference: the terms are added in another order).
// Limits: self-attention only (cross-attention is a reported miss); the scale must be a
// constant (symbolic Shape-derived scales that did not fold are a reported miss); a Where
// mask with a finite fill becomes an additive Where(cond, 0, fill) mask, which differs
// from the original only on rows where every key is masked.
#include <string>
#include <vector>

#include "passes/attention_match.h"
#include "passes/fusion_rule.h"
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
    case MaskKind::kAdditive: {
      // Further additive terms summed in (each broadcasts to the scores, so the sum does).
      Value sum = m;
      for (const Value& more : b.more_additive) {
        Node* add = g.InsertNodeBefore(before, "Add", {sum, more}, 1);
        Type t;
        t.dtype = m.type().dtype;
        add->set_output_type(0, t);  // shape inference types it after the fusions
        add->set_provenance(more.node->provenance());
        sum = add->output(0);
      }
      return sum;
    }
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
  if (b.packed_qkv) return b.packed_qkv;
  Node* c = g.InsertNodeBefore(before, "Concat", {b.q.proj, b.k.proj, b.v.proj}, 1);
  c->set_attr("axis", int64_t{-1});
  Type t = b.q.proj.type();
  if (t.shape && !t.shape->empty())
    t.shape->back() = Dim::Known((b.num_heads + 2 * b.num_kv_heads) * b.head_dim);
  c->set_output_type(0, t);
  rewrite::UnionProvenance(c, {b.q.proj.node, b.k.proj.node, b.v.proj.node});
  return c->output(0);
}

// A rotary table as the fused op takes it, [1 or B, S, R]: the Rotary's table with its
// head axis squeezed ([B, 1, S, R]) or a batch axis added ([S, R]).
Value FusedTable(Graph& g, const AttentionBlock& b, Value table, Node* before) {
  using Fix = AttentionBlock::TableFix;
  if (b.table_fix == Fix::kNone) return table;
  const bool squeeze = b.table_fix != Fix::kUnsqueezeBatch;
  const int64_t axis = b.table_fix == Fix::kSqueezeAxis2 ? 2 : squeeze ? 1 : 0;
  // The exporters' tables are Unsqueeze(t [1 or B, S, R], [axis]): take t itself.
  if (Node* u = rewrite::ProducerIs(table, "Unsqueeze"); squeeze && u && u->num_inputs() == 2) {
    const auto axes = rewrite::IntConstant(u->input(1));
    if (axes && *axes == std::vector<int64_t>{axis} && u->input(0).type().has_rank() &&
        u->input(0).type().rank() == 3)
      return u->input(0);
  }
  Tensor axes(DType::kI64, {1});
  axes.SetFromDouble(0, static_cast<double>(axis));
  Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
  c->set_attr("value", axes);
  c->set_output_type(0, Type::Of(axes));
  Node* n = g.InsertNodeBefore(before, squeeze ? "Squeeze" : "Unsqueeze", {table, c->output(0)}, 1);
  Type t = table.type();
  if (squeeze)
    t.shape->erase(t.shape->begin() + axis);
  else
    t.shape->insert(t.shape->begin(), Dim::Known(1));
  n->set_output_type(0, t);
  n->set_provenance(table.node->provenance());
  return n->output(0);
}

class AttentionRule final : public fusion::FusionRule<attention::MatchResult> {
 public:
  bool IsRoot(const Node& n) const override { return rewrite::IsOp(&n, "Softmax"); }
  void Begin(const Graph& g) override { order_.emplace(g); }

  std::optional<attention::MatchResult> Recognize(const Graph& g, Node* softmax,
                                                  fusion::FusionSession&) override {
    attention::MatchResult m = attention::MatchAttention(g, softmax, &*order_);
    if (m.stage == attention::Stage::kNotAttention) return std::nullopt;
    return m;
  }

  std::string Check(const Graph&, attention::MatchResult& m, fusion::FusionSession&) override {
    return m.stage == attention::Stage::kComplete ? "" : m.reason;
  }

  absl::Status Rewrite(Graph& g, attention::MatchResult& m, fusion::FusionSession& s) override {
    Fuse(g, m.block, s);
    s.Count("fused");
    if (m.block.causal) s.Count("causal");
    if (m.block.mask.kind != MaskKind::kNone) s.Count("masked");
    if (m.block.cos) s.Count("rotary");
    if (m.block.num_kv_heads != m.block.num_heads) s.Count("grouped-query");
    if (m.block.heads_form)
      s.Count("heads form");
    else if (!m.block.qkv_split && !m.block.packed_qkv)
      s.Count("qkv concatenated");
    return absl::OkStatus();
  }

  std::string_view Kind(const attention::MatchResult&) const override { return "attention"; }
  std::vector<const Node*> Involved(const attention::MatchResult& m) const override {
    return m.nodes;
  }

 private:
  static void Fuse(Graph& g, const AttentionBlock& b, fusion::FusionSession& s) {
    Node* out = b.output;
    const Value q = b.heads_form ? b.q.heads_value : b.q.proj;
    const DType dtype = b.scores->output_info(0).type.dtype != DType::kUndefined
                            ? b.scores->output_info(0).type.dtype
                            : q.type().dtype;
    const Value mask = FusedMask(g, b, out, dtype);
    Node* mha = nullptr;
    if (b.heads_form) {
      std::vector<Value> inputs = {b.q.heads_value, b.k.heads_value, b.v.heads_value};
      if (mask) inputs.push_back(mask);
      mha = g.InsertNodeBefore(out, "Attention", inputs, 1, "kiln");
    } else {
      std::vector<Value> inputs = {PackedQkv(g, b, out)};
      if (mask || b.cos) inputs.push_back(mask);
      if (b.cos) {
        inputs.push_back(FusedTable(g, b, b.cos, out));
        inputs.push_back(FusedTable(g, b, b.sin, out));
      }
      mha = g.InsertNodeBefore(out, "MultiHeadAttention", inputs, 1, "kiln");
      mha->set_attr("num_heads", b.num_heads);
      if (b.num_kv_heads != b.num_heads) mha->set_attr("num_kv_heads", b.num_kv_heads);
      if (b.cos && b.rotary_interleaved) mha->set_attr("rotary_interleaved", int64_t{1});
    }
    mha->set_attr("scale", static_cast<float>(b.scale));
    mha->set_attr("causal", int64_t{b.causal ? 1 : 0});
    std::vector<const Node*> from(b.interior.begin(), b.interior.end());
    rewrite::UnionProvenance(mha, from);
    if (b.merge_kept) {
      // [B, S, H] from the merge Transpose's [B, S, N, D]; the kept Reshape reads it.
      const Value merged = b.merge_transpose->output(0);
      Type t = merged.type();
      if (t.shape && t.shape->size() == 4)
        t.shape =
            std::vector<Dim>{(*t.shape)[0], (*t.shape)[1], Dim::Known(b.num_heads * b.head_dim)};
      else
        t.shape.reset();
      mha->set_output_type(0, t);
      mha->set_output_name(0, merged.name());
      g.SetInput(out, 0, mha->output(0));
      s.RemoveIfDead(g, {b.merge_transpose});
      return;
    }
    mha->set_output_type(0, out->output_info(0).type);
    mha->set_output_name(0, out->output_info(0).name);
    g.ReplaceAllUsesWith(out->output(0), mha->output(0));
    s.RemoveIfDead(g, {out});
  }

  std::optional<rewrite::NodeOrder> order_;  // the graph order when the sweep began
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAttentionPass() {
  return std::make_unique<fusion::RulePass<AttentionRule>>(
      "fuse-attention",
      "fuse self-attention blocks into kiln.MultiHeadAttention (packed qkv, mask, "
      "causal flag)");
}

}  // namespace kiln
