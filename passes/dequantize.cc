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
//     constant per-tensor scale and zero point, is dropped — or becomes Clip(x, 0, max) when
//     its zero point is the type's minimum and x may be negative, since onnxruntime's QDQ
//     quantizer removes a Relu/Clip there and leaves its job to the pair's saturation (the
//     DequantizeLinear of constant weights and biases is constant folding's).
// Not exact: the activations are no longer rounded to the model's 8-bit grid (weights keep
// their quantized values exactly). An fp32 plan computes the quantized weights in fp32;
// an int8 plan (gemm-precision, after the fusions) quantizes the activations per token row
// at run time instead of the model's per-tensor scale. At fp32 each rewritten MatMulInteger
// gets a precision note saying so. Runs at -O2 and above; -O1 keeps the integer ops exact
// (reference steps).
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
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

// Dequantized constants made so far, by the node ids of what they were computed from (a
// table or weight, its scale, its zero point or -1), so a shared one is converted once.
using Converted = std::map<std::tuple<int, int, int>, Node*>;

int IdOf(Value v) { return v ? v.node->id() : -1; }

// quantize_dynamic's MatMul, from its MatMulInteger `mi`; true when rewritten.
absl::StatusOr<bool> RewriteMatMulInteger(Graph& g, Node* mi, const PassContext& ctx,
                                          Converted& weights) {
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
  Node*& wc =
      weights[{IdOf(mi->input(1)), IdOf(w_scale), mi->num_inputs() > 3 ? IdOf(mi->input(3)) : -1}];
  if (wc == nullptr) {
    std::optional<Tensor> w = DequantizeColumns(*wq, wzp, *ws);
    if (!w) return false;
    // Before the quantized weight, which precedes every reader of it.
    Node* wnode = mi->input(1).node;
    wc = NewConstant(g, wnode, *std::move(w),
                     absl::StrCat(wnode->output_info(0).name, "_dequantized"), wnode->provenance());
  }

  const Value x = dq->input(0);
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
// dequantized once (`tables` keeps one copy per quantized table, scale and zero point).
bool RewriteGatheredTable(Graph& g, Node* dql, Converted& tables) {
  Node* gather = ProducerIs(dql->input(0), "Gather");
  if (gather == nullptr || !rewrite::HasSingleUse(g, gather->output(0))) return false;
  const Tensor* tq = ConstantOf(gather->input(0));
  const Tensor* s = ConstantOf(dql->input(1));
  const bool has_zp = dql->num_inputs() > 2 && dql->input(2);
  const Tensor* zp = has_zp ? ConstantOf(dql->input(2)) : nullptr;
  if (tq == nullptr || !OneElement(s) || (has_zp && !OneElement(zp)) ||
      dql->attr_int_or("block_size", 0) != 0)
    return false;
  Node*& table =
      tables[{IdOf(gather->input(0)), IdOf(dql->input(1)), has_zp ? IdOf(dql->input(2)) : -1}];
  if (table == nullptr) {
    std::vector<const Tensor*> ins = {tq, s};
    if (has_zp) ins.push_back(zp);
    auto out = EvaluateNode(*dql, ins);
    if (!out.ok()) return false;  // not a table this rewrite understands: left as it is
    // Before the quantized table, which precedes every Gather of it.
    Node* tnode = gather->input(0).node;
    table =
        NewConstant(g, tnode, std::move((*out)[0]),
                    absl::StrCat(tnode->output_info(0).name, "_dequantized"), tnode->provenance());
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

// A lower bound of every value of `v` (NaN aside), when a few structural facts give one:
// constants, ops whose outputs are >= 0 (Relu, Softmax, Sigmoid, Exp, Abs, Sqrt) or >= -1
// (Erf, Tanh), sums of bounded values, products of non-negative ones, and what passes a value
// through unchanged (Dropout, Identity, the layout ops) — enough for GELU's 1 + erf(·) and
// attention probabilities, which QDQ quantizers give a zero point of 0.
std::optional<double> LowerBound(Value v, int depth = 0) {
  if (!v || depth > 8) return std::nullopt;
  const Node* n = v.node;
  if (const Tensor* t = n->constant_value()) {
    if (!IsFloat(t->dtype()) || t->NumElements() == 0 || t->NumElements() > 4096)
      return std::nullopt;
    double lo = t->GetAsDouble(0);
    for (int64_t i = 1; i < t->NumElements(); ++i) lo = std::min(lo, t->GetAsDouble(i));
    return std::isfinite(lo) ? std::optional<double>(lo) : std::nullopt;
  }
  for (const char* op : {"Relu", "Softmax", "Sigmoid", "Exp", "Abs", "Sqrt"})
    if (IsOp(n, op)) return 0.0;
  if (IsOp(n, "Erf") || IsOp(n, "Tanh")) return -1.0;
  const OpInfo* info = FindOp(n->domain(), n->op());
  if (IsOp(n, "Dropout") || IsOp(n, "Identity") || HasTrait(info, kLayoutOnly))
    return v.index == 0 ? LowerBound(n->input(0), depth + 1) : std::nullopt;
  if ((IsOp(n, "Add") || IsOp(n, "Mul")) && n->num_inputs() == 2) {
    const std::optional<double> a = LowerBound(n->input(0), depth + 1);
    const std::optional<double> b = a ? LowerBound(n->input(1), depth + 1) : std::nullopt;
    if (!a || !b) return std::nullopt;
    if (IsOp(n, "Add")) return *a + *b;
    if (*a >= 0 && *b >= 0) return 0.0;
  }
  return std::nullopt;
}

// A static QDQ pair DequantizeLinear(QuantizeLinear(x, s, zp), s, zp) on an activation with
// one scale: the pair rounds x to the grid and saturates it to [(qmin − zp)·s, (qmax − zp)·s].
// The rounding goes; the saturation goes too, unless its lower bound is 0 and x may be
// negative: onnxruntime's QDQ quantizer removes a Relu (or Clip(0, ·)) before such a pair
// and relies on that saturation, so the pair becomes Clip(x, 0, (qmax − zp)·s).
// "dropped" or "clip" when rewritten, "" when not.
std::string RewriteQdqPair(Graph& g, Node* dql) {
  Node* q = ProducerIs(dql->input(0), "QuantizeLinear");
  if (q == nullptr || q->input(0).node->is_constant()) return "";
  auto operand = [](const Node* n, int i) { return i < n->num_inputs() ? n->input(i) : Value{}; };
  const Tensor* s = ConstantOf(q->input(1));
  const Value zp_value = operand(q, 2);
  const Tensor* zp = ConstantOf(zp_value);
  if (!OneElement(s) || (zp_value && !OneElement(zp)) ||
      !SameConstant(q->input(1), dql->input(1)) || !SameConstant(zp_value, operand(dql, 2)) ||
      q->attr_int_or("block_size", 0) != 0 || dql->attr_int_or("block_size", 0) != 0)
    return "";
  const Value x = q->input(0);
  if (x.type().dtype != DType::kF32 || dql->output_info(0).type.dtype != DType::kF32) return "";
  const DType qt = q->output_info(0).type.dtype;
  double qmin = 0, qmax = 0;
  switch (qt) {
    case DType::kU8:
      qmax = 255;
      break;
    case DType::kI8:
      qmin = -128, qmax = 127;
      break;
    case DType::kU16:
      qmax = 65535;
      break;
    case DType::kI16:
      qmin = -32768, qmax = 32767;
      break;
    default:
      return "";
  }
  const double z = zp ? zp->GetAsDouble(0) : 0.0;
  const float scale = static_cast<float>(s->GetAsDouble(0));
  if (!(scale > 0) || !std::isfinite(scale)) return "";
  Value replacement = x;
  const std::optional<double> lower = LowerBound(x);
  const bool clip = z == qmin && !(lower && *lower >= 0);
  if (clip) {
    Tensor lo(DType::kF32, std::vector<int64_t>{}), hi(DType::kF32, std::vector<int64_t>{});
    lo.data<float>()[0] = 0.0f;
    hi.data<float>()[0] = static_cast<float>(qmax - z) * scale;
    const std::string name = dql->output_info(0).name;
    Node* lo_c = rewrite::InsertConstant(g, dql, absl::StrCat(name, "_clip_lo"), std::move(lo));
    Node* hi_c = rewrite::InsertConstant(g, dql, absl::StrCat(name, "_clip_hi"), std::move(hi));
    Node* c = g.InsertNodeBefore(dql, "Clip", {x, lo_c->output(0), hi_c->output(0)}, 1);
    c->set_output_type(0, dql->output_info(0).type);
    c->set_output_name(0, name);
    c->set_provenance(q->provenance());
    rewrite::UnionProvenance(c, dql);
    replacement = c->output(0);
  }
  g.ReplaceAllUsesWith(dql->output(0), replacement);
  rewrite::RemoveIfDead(g, {dql});
  return clip ? "clip" : "dropped";
}

absl::StatusOr<bool> DequantizePass::RunImpl(Graph& g, const PassContext& ctx) {
  // The candidates, taken first. No rewrite removes another candidate: each removes only
  // its own pattern's nodes and what they alone read, and the pattern's input stays read.
  std::vector<Node*> order;
  for (const auto& p : g.nodes())
    if (IsOp(p.get(), "MatMulInteger") || IsOp(p.get(), "DequantizeLinear"))
      order.push_back(p.get());
  bool changed = false;
  Converted weights, tables;
  for (Node* n : order) {
    if (IsOp(n, "MatMulInteger")) {
      KILN_ASSIGN_OR_RETURN(bool done, RewriteMatMulInteger(g, n, ctx, weights));
      if (done) Count("MatMulInteger -> MatMul on dequantized weights");
      changed |= done;
    } else if (IsOp(n, "DequantizeLinear")) {
      if (const std::string qdq = RewriteQdqPair(g, n); !qdq.empty()) {
        Count(qdq == "clip" ? "QuantizeLinear/DequantizeLinear pairs -> Clip(0, max)"
                            : "QuantizeLinear/DequantizeLinear pairs dropped");
        changed = true;
        continue;
      }
      const bool done = RewriteGatheredTable(g, n, tables);
      if (done) Count("quantized tables dequantized before their Gather");
      changed |= done;
    }
  }
  return changed;
}

}  // namespace

std::unique_ptr<Pass> CreateDequantizePass() { return std::make_unique<DequantizePass>(); }

}  // namespace kiln
