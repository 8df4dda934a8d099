// dequantize: turns what onnxruntime's quantizers wrote into a model (the
// `model_quantized.onnx` files model hubs ship) back into the float graph the quantizer
// started from, so that kiln's fusions see their usual patterns and `--precision` decides
// how the GEMMs run (docs/precision.md "Quantized models"):
//   - quantize_dynamic's MatMul: DynamicQuantizeLinear(X) -> MatMulInteger(Xq, Wq, Xzp, Wzp)
//     -> Cast(float) -> Mul(·, Mul(Xscale, Wscale)) becomes MatMul(X, W) with
//     W = (Wq - Wzp) · Wscale (per tensor or per column), a constant;
//   - its embedding tables: DequantizeLinear(Gather(Tq, ids), s, zp) with one scale and
//     zero point becomes Gather(DequantizeLinear(Tq, s, zp), ids), the table dequantized once;
//   - static QDQ: a QuantizeLinear -> DequantizeLinear pair on an activation, with the same
//     constant scale and zero point, is dropped (the DequantizeLinear of constant weights
//     and biases is constant folding's).
// Not exact: the activations are no longer rounded to the model's 8-bit grid (weights keep
// their quantized values exactly). An fp32 plan computes the quantized weights in fp32;
// an int8 plan (gemm-precision, after the fusions) quantizes the activations per token row
// at run time instead of the model's per-tensor scale. At fp32 each rewritten MatMulInteger
// gets a precision note saying so. Runs at -O2 and above; -O1 keeps the integer ops exact
// (reference steps).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::ProducerIs;

class DequantizePass final : public Pass {
 public:
  std::string_view name() const override { return "dequantize"; }
  std::string_view description() const override {
    return "quantized ONNX (onnxruntime's QDQ and quantize_dynamic forms) back to float "
           "MatMuls on the exactly dequantized weights; --precision decides the GEMMs";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override;
};

bool OneElement(const Tensor* t) { return t != nullptr && t->NumElements() == 1 && t->rank() <= 1; }

Node* NewConstant(Graph& g, Node* before, Tensor t, const std::string& name,
                  const std::vector<std::string>& provenance) {
  return rewrite::InsertConstant(g, before, name, std::move(t), provenance);
}

// W = (Wq - zp) · scale for a constant [K, N] Wq (u8/i8) with one scale (and zero point)
// or one per column, in f32 like DequantizeLinear; nullopt when the shapes do not fit.
std::optional<Tensor> DequantizeColumns(const Tensor& wq, const Tensor* zp, const Tensor& scale) {
  if (wq.rank() != 2 || (wq.dtype() != DType::kU8 && wq.dtype() != DType::kI8)) return std::nullopt;
  if (scale.dtype() != DType::kF32) return std::nullopt;
  const int64_t n = wq.dims()[1];
  auto fits = [&](const Tensor* t) {
    return t == nullptr || OneElement(t) || (t->rank() == 1 && t->dims()[0] == n);
  };
  if (!fits(&scale) || !fits(zp) || (zp != nullptr && zp->dtype() != wq.dtype()))
    return std::nullopt;
  Tensor w(DType::kF32, wq.dims());
  float* out = w.data<float>();
  const float* s = scale.data<float>();
  for (int64_t i = 0; i < wq.NumElements(); ++i) {
    const int64_t col = i % n;
    const int64_t z = zp == nullptr ? 0 : zp->GetAsInt64(OneElement(zp) ? 0 : col);
    out[i] = static_cast<float>(wq.GetAsInt64(i) - z) * s[OneElement(&scale) ? 0 : col];
  }
  return w;
}

// quantize_dynamic's MatMul, from its MatMulInteger `mi`; true when rewritten.
absl::StatusOr<bool> RewriteMatMulInteger(Graph& g, Node* mi, const PassContext& ctx) {
  Node* dq = ProducerIs(mi->input(0), "DynamicQuantizeLinear");
  if (dq == nullptr || mi->input(0).index != 0) return false;
  if (mi->num_inputs() < 3 || mi->input(2) != dq->output(2)) return false;
  const Tensor* wq = ConstantOf(mi->input(1));
  const Tensor* wzp = mi->num_inputs() > 3 ? ConstantOf(mi->input(3)) : nullptr;
  if (wq == nullptr || (mi->num_inputs() > 3 && mi->input(3) && wzp == nullptr)) return false;
  Node* cast = rewrite::SingleUser(g, mi->output(0));
  if (!IsOp(cast, "Cast") || cast->attr_int_or("to", 0) != 1) return false;
  Node* mul = rewrite::SingleUser(g, cast->output(0));
  if (!IsOp(mul, "Mul")) return false;
  const Value scales = rewrite::OtherOperand(mul, cast->output(0));
  Node* scale_mul = ProducerIs(scales, "Mul");
  if (scale_mul == nullptr) return false;
  const Value w_scale = rewrite::OtherOperand(scale_mul, dq->output(1));
  const Tensor* ws = ConstantOf(w_scale);
  if (ws == nullptr) return false;
  std::optional<Tensor> w = DequantizeColumns(*wq, wzp, *ws);
  if (!w) return false;

  const Value x = dq->input(0);
  Node* wc = NewConstant(g, mul, *std::move(w),
                         absl::StrCat(mi->input(1).node->output_info(0).name, "_dequantized"),
                         mi->input(1).node->provenance());
  Node* mm = g.InsertNodeBefore(mul, "MatMul", {x, wc->output(0)}, 1);
  mm->set_output_type(0, mul->output_info(0).type);
  mm->set_output_name(0, mul->output_info(0).name);
  mm->set_provenance(mi->provenance());
  rewrite::UnionProvenance(mm, std::vector<const Node*>{cast, mul});
  g.ReplaceAllUsesWith(mul->output(0), mm->output(0));
  rewrite::RemoveIfDead(g, {mul});
  if (ctx.precision == Precision::kFp32 && ctx.precision_report != nullptr)
    ctx.precision_report->Note(*mm, "fp32",
                               "the model's int8 MatMulInteger, run in fp32 on its dequantized "
                               "weights; --precision int8 runs kiln's int8 GEMM");
  return true;
}

// DequantizeLinear(Gather(Tq, ids), s, zp) with one s and zp -> Gather(T, ids), T the table
// dequantized once (`tables` keeps one copy per quantized table).
absl::StatusOr<bool> RewriteGatheredTable(Graph& g, Node* dql,
                                          std::map<std::pair<Node*, Node*>, Node*>& tables) {
  Node* gather = ProducerIs(dql->input(0), "Gather");
  if (gather == nullptr || !rewrite::HasSingleUse(g, gather->output(0))) return false;
  const Tensor* tq = ConstantOf(gather->input(0));
  const Tensor* s = ConstantOf(dql->input(1));
  const bool has_zp = dql->num_inputs() > 2 && dql->input(2);
  const Tensor* zp = has_zp ? ConstantOf(dql->input(2)) : nullptr;
  if (tq == nullptr || !OneElement(s) || (has_zp && !OneElement(zp))) return false;
  Node*& table = tables[{gather->input(0).node, dql->input(1).node}];
  if (table == nullptr) {
    std::vector<const Tensor*> ins = {tq, s};
    if (has_zp) ins.push_back(zp);
    auto out = EvaluateNode(*dql, ins);
    if (!out.ok()) return out.status();
    Node* tnode = gather->input(0).node;
    table = NewConstant(g, gather, std::move((*out)[0]),
                        absl::StrCat(tnode->output_info(0).name, "_dequantized"),
                        tnode->provenance());
  }
  Node* quantized = gather->input(0).node;
  g.SetInput(gather, 0, table->output(0));
  gather->set_output_type(0, dql->output_info(0).type);
  gather->set_output_name(0, dql->output_info(0).name);
  rewrite::UnionProvenance(gather, dql);
  g.ReplaceAllUsesWith(dql->output(0), gather->output(0));
  rewrite::RemoveIfDead(g, {dql, quantized});
  return true;
}

bool SameConstant(Value a, Value b) {
  if (!a && !b) return true;
  const Tensor* ta = ConstantOf(a);
  const Tensor* tb = ConstantOf(b);
  if (ta == nullptr || tb == nullptr || ta->dtype() != tb->dtype() || ta->dims() != tb->dims())
    return false;
  for (int64_t i = 0; i < ta->NumElements(); ++i)
    if (ta->GetAsDouble(i) != tb->GetAsDouble(i)) return false;
  return true;
}

// A static QDQ pair DequantizeLinear(QuantizeLinear(x, s, zp), s, zp) on an activation ->
// x itself.
bool DropQdqPair(Graph& g, Node* dql) {
  Node* q = ProducerIs(dql->input(0), "QuantizeLinear");
  if (q == nullptr || q->input(0).node->is_constant()) return false;
  auto operand = [](const Node* n, int i) { return i < n->num_inputs() ? n->input(i) : Value{}; };
  if (!ConstantOf(q->input(1)) || !SameConstant(q->input(1), dql->input(1)) ||
      !SameConstant(operand(q, 2), operand(dql, 2)) ||
      q->attr_int_or("axis", 1) != dql->attr_int_or("axis", 1) ||
      q->attr_int_or("block_size", 0) != dql->attr_int_or("block_size", 0))
    return false;
  const Value x = q->input(0);
  if (x.type().dtype != dql->output_info(0).type.dtype) return false;
  g.ReplaceAllUsesWith(dql->output(0), x);
  rewrite::RemoveIfDead(g, {dql});
  return true;
}

absl::StatusOr<bool> DequantizePass::RunImpl(Graph& g, const PassContext& ctx) {
  // The candidates, taken first. No rewrite removes another candidate: each removes only
  // its own pattern's nodes and what they alone read, and the pattern's input stays read.
  std::vector<Node*> order;
  for (const auto& p : g.nodes())
    if (IsOp(p.get(), "MatMulInteger") || IsOp(p.get(), "DequantizeLinear"))
      order.push_back(p.get());
  bool changed = false;
  std::map<std::pair<Node*, Node*>, Node*> tables;
  for (Node* n : order) {
    if (IsOp(n, "MatMulInteger")) {
      KILN_ASSIGN_OR_RETURN(bool done, RewriteMatMulInteger(g, n, ctx));
      if (done) Count("MatMulInteger -> MatMul on dequantized weights");
      changed |= done;
    } else if (IsOp(n, "DequantizeLinear")) {
      if (DropQdqPair(g, n)) {
        Count("QuantizeLinear/DequantizeLinear pairs dropped");
        changed = true;
        continue;
      }
      KILN_ASSIGN_OR_RETURN(bool done, RewriteGatheredTable(g, n, tables));
      if (done) Count("quantized tables dequantized before their Gather");
      changed |= done;
    }
  }
  return changed;
}

}  // namespace

std::unique_ptr<Pass> CreateDequantizePass() { return std::make_unique<DequantizePass>(); }

}  // namespace kiln
