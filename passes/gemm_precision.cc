// gemm-precision: for a cpu plan at bf16 or int8, or a cuda plan at int8
// (PassContext::precision), stores the GEMM weights below fp32 while every activation
// between kernels stays f32 (cuda int8: lower-precision then moves the rest, the
// QuantLinears' X and Y included, to fp16). On a CPU the GEMMs are nearly all of a
// Transformer's time (docs/benchmarks.md) and gain 2-4x from bf16 / int8 dot-product
// instructions; the other ops would gain little and lose accuracy (a LayerNorm's variance,
// a softmax's exponentials).
//   - bf16: each kiln.Linear's W is stored in bf16 (nearest even); the kernel rounds X to
//     bf16 and accumulates in fp32.
//   - int8: each kiln.Linear becomes kiln.QuantLinear: W as [N, K], quantized symmetric per
//     output channel (w_scale[n] = max_k |W[n,k]| / 127); the kernel quantizes X per row at
//     run time (docs/fused-ops.md). With calibration inputs (PassContext), the graph runs
//     once per set on the reference executor first, and each Linear is smoothed
//     (SmoothingFactors: its input's outlier channels moved into W, x_mul = 1 / s).
//   - static activations (PassContext::static_activations, `--int8-activations static`): a
//     second run of the calibration sets records each Linear's |X ⊙ x_mul| in a histogram and
//     the observer (passes/observers.h: minmax, percentile, entropy) picks one range per
//     Linear; its QuantLinear gets x_quant="static", x_absmax=range (the precision note
//     carries it). A Linear no calibration run reached (one only a bucket's re-run fuses)
//     stays dynamic.
//   - --precision auto's fallbacks (PassContext::gemm_group_precision) move a group of
//     Linears — "attention" (the Q/K/V and output projections), "ffn" (the rest) — to bf16
//     or fp32, noted as such.
//   - Kept fp32, with the reason noted in the PrecisionReport: an output head (a Linear
//     whose result reaches a graph output through layout ops and one-input elementwise ops
//     only: a classifier's logits, a pooler, an LM head — its error is the score's error;
//     PassContext::head_precision, `--head-precision`, puts it at int8, bf16 or fp32 instead);
//     a Linear whose W or B is not a constant, whose X is not f32, or whose W holds inf/NaN;
//     at int8, one whose K is above kQuantLinearMaxK, and on cuda one whose K or N is not
//     a multiple of 4 (cuBLASLt's int8 GEMMs; lower-precision makes it fp16 instead);
//     and every other compute op (PrecisionPolicy::kLower), with its catalogue reason.
// Idempotent: a second run finds bf16 weights and QuantLinear nodes and changes nothing.
// Limits: only kiln.Linear (fuse-linear turns MatMul/Gemm with a constant operand into it);
// at -O1 nothing is fused and the plan stays fp32 but for what the notes say.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"
#include "passes/observers.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class GemmPrecisionPass final : public Pass {
 public:
  std::string_view name() const override { return "gemm-precision"; }
  std::string_view description() const override {
    return "cpu bf16/int8 and cuda int8 plans: GEMM weights in bf16 or s8 per output "
           "channel, every other op fp32 (cuda int8: lower-precision's fp16; "
           "docs/precision.md)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override;
};

bool IsLinear(const Node* n) { return n->domain() == "kiln" && n->op() == "Linear"; }

bool IsAttention(const Node* n) {
  return n->domain() == "kiln" && (n->op() == "MultiHeadAttention" || n->op() == "Attention" ||
                                   n->op() == "PackedAttention");
}

// Data movement between a projection and its attention: views, transposes, slices, splits,
// concats (a KV cache), rotary.
bool PassesThrough(const Node* n) {
  const OpInfo* info = FindOp(n->domain(), n->op());
  return HasTrait(info, kLayoutOnly) || (n->domain() == "kiln" && n->op() == "Rotary");
}

// The group a Linear belongs to for --precision auto's fallbacks (CompileOptions::
// gemm_group_precision): "attention" when it feeds an attention op or reads one's output
// through data movement only (the Q/K/V and output projections), else "ffn".
std::string GemmGroup(Node* linear) {
  for (Value v = linear->input(0); v && v.node;) {
    if (IsAttention(v.node)) return "attention";
    if (!PassesThrough(v.node) || v.node->num_inputs() == 0) break;
    v = v.node->input(0);
  }
  std::vector<Value> todo = {linear->output(0)};
  std::set<std::pair<int, int>> seen;
  while (!todo.empty()) {
    const Value cur = todo.back();
    todo.pop_back();
    if (!seen.insert({cur.node->id(), cur.index}).second) continue;
    for (const Use& u : cur.node->output_info(cur.index).uses) {
      if (IsAttention(u.user)) return "attention";
      if (PassesThrough(u.user))
        for (int o = 0; o < u.user->num_outputs(); ++o) todo.push_back(u.user->output(o));
    }
  }
  return "ffn";
}

// Does `v` reach a graph output through layout ops and elementwise ops with one run-time
// input only (no residual add, no norm, no other GEMM, no Concat with other run-time data)?
bool ReachesOutputDirectly(const Graph& g, Value v) {
  std::vector<Value> todo = {v};
  std::set<std::pair<int, int>> seen;
  while (!todo.empty()) {
    const Value cur = todo.back();
    todo.pop_back();
    if (!seen.insert({cur.node->id(), cur.index}).second) continue;
    if (rewrite::IsGraphOutput(g, cur)) return true;
    for (const Use& u : cur.node->output_info(cur.index).uses) {
      const OpInfo* info = FindOp(u.user->domain(), u.user->op());
      bool passes = HasTrait(info, kLayoutOnly);
      // A Concat with other run-time data (a KV decoder's present = Concat(past, new)) is
      // not this GEMM's result alone: its output is a cache, not a head.
      if (passes && u.user->domain().empty() && u.user->op() == "Concat")
        for (const Value& in : u.user->inputs())
          if (in && in != cur && !in.node->is_constant()) passes = false;
      if (!passes && HasTrait(info, kElementwise)) {
        int runtime_inputs = 0;
        for (const Value& in : u.user->inputs())
          if (in && !in.node->is_constant()) ++runtime_inputs;
        passes = runtime_inputs == 1;
      }
      if (!passes) continue;
      for (int o = 0; o < u.user->num_outputs(); ++o) todo.push_back(u.user->output(o));
    }
  }
  return false;
}

bool AllFinite(const Tensor& t) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.NumElements(); ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// SmoothQuant-style smoothing of one int8 Linear (Xiao et al., 2023): per input channel k,
// s_k = sqrt(max|X_k|) / sqrt(max|W_k|) moves the activations' outlier channels into the
// weights — X̃ = X / s is what the kernel quantizes per row (x_mul = 1 / s), W̃ = diag(s)·W what
// it quantizes per output channel — so one large channel no longer coarsens the whole row.
// s_k = 1 where either side is zero; clamped to [1e-4, 1e4].
std::vector<float> SmoothingFactors(const std::vector<float>& x_absmax, const Tensor& w,
                                    bool trans_w) {
  const int64_t k = trans_w ? w.dims()[1] : w.dims()[0];
  const int64_t n = trans_w ? w.dims()[0] : w.dims()[1];
  const float* p = w.data<float>();
  std::vector<float> s(static_cast<size_t>(k), 1.0f);
  for (int64_t i = 0; i < k; ++i) {
    float wmax = 0;
    for (int64_t j = 0; j < n; ++j)
      wmax = std::max(wmax, std::fabs(trans_w ? p[j * k + i] : p[i * n + j]));
    if (x_absmax[i] > 0 && wmax > 0)
      s[i] = std::clamp(std::sqrt(x_absmax[i]) / std::sqrt(wmax), 1e-4f, 1e4f);
  }
  return s;
}

// Why Linear `n` stays f32 in a low-precision cpu plan, or "" when its weights may go low
// (or, bf16: already are: `weight_dtype` is the dtype a converted W has; kUndefined: none).
// An output head stays f32 unless `lower_heads` (--head-precision).
std::string KeepReason(const Graph& g, const Node& n, DType weight_dtype, bool lower_heads) {
  const Value x = n.input(0);
  if (!x || x.type().dtype != DType::kF32)
    return absl::StrCat("X is ", x ? std::string(DTypeName(x.type().dtype)) : "absent",
                        ", not f32");
  const Tensor* w = rewrite::ConstantOf(n.input(1));
  if (w == nullptr) return "W is not a constant";
  if (w->dtype() == weight_dtype) return "";  // already converted (a second run)
  if (w->dtype() != DType::kF32 || w->rank() != 2)
    return absl::StrCat("W is ", std::string(DTypeName(w->dtype())), " of rank ", w->rank());
  if (!AllFinite(*w)) return "W holds inf or NaN";
  if (n.num_inputs() > 2 && n.input(2) && !rewrite::ConstantOf(n.input(2)))
    return "B is not a constant";
  if (!lower_heads && ReachesOutputDirectly(g, const_cast<Node&>(n).output(0)))
    return "output head: its result is a graph output (through layout and activation ops "
           "only), so its error is the output's error";
  return "";
}

// The note of an output head at --head-precision's precision; "" for any other GEMM.
std::string HeadWhy(const Graph& g, const PassContext& ctx, Node* n) {
  if (!ctx.head_precision || !ReachesOutputDirectly(g, n->output(0))) return "";
  return absl::StrCat("--head-precision ", std::string(PrecisionName(*ctx.head_precision)),
                      ": an output head, at this precision on request");
}

// Whether Linear `n` becomes an int8 QuantLinear in this plan: the plan's or its output
// head's precision is int8, its group was not moved, and nothing keeps it f32.
bool GoesInt8(const Graph& g, const PassContext& ctx, Node* n) {
  const bool head = ctx.head_precision && ReachesOutputDirectly(g, n->output(0));
  if (head)
    return *ctx.head_precision == Precision::kInt8 &&
           KeepReason(g, *n, DType::kUndefined, true).empty();
  return ctx.precision == Precision::kInt8 && !ctx.gemm_group_precision.count(GemmGroup(n)) &&
         KeepReason(g, *n, DType::kUndefined, false).empty();
}

// W (f32 [K, N], or [N, K] when trans_w), its input channel k times smooth[k] (may be
// empty: ones), as s8 [N, K] and its per-row scale [N]: q = clamp(rne(w · (127 / a)), ±127),
// scale = a / 127, a = max |row|; zero rows stay zero.
std::pair<Tensor, Tensor> QuantizePerOutputChannel(const Tensor& w, bool trans_w,
                                                   const std::vector<float>& smooth) {
  const int64_t k = trans_w ? w.dims()[1] : w.dims()[0];
  const int64_t n = trans_w ? w.dims()[0] : w.dims()[1];
  const float* src = w.data<float>();
  auto at = [&](int64_t j, int64_t i) {
    const float v = trans_w ? src[j * k + i] : src[i * n + j];
    return smooth.empty() ? v : v * smooth[i];
  };
  Tensor q(DType::kI8, {n, k});
  Tensor scale(DType::kF32, {n});
  int8_t* qp = q.data<int8_t>();
  float* sp = scale.data<float>();
  for (int64_t j = 0; j < n; ++j) {
    float a = 0.0f;
    for (int64_t i = 0; i < k; ++i) a = std::max(a, std::fabs(at(j, i)));
    // A row whose 127 / max |w| overflows (max below ~3.7e-37) quantizes to zeros.
    const float inv = a > 0.0f && std::isfinite(127.0f / a) ? 127.0f / a : 0.0f;
    sp[j] = a / 127.0f;
    for (int64_t i = 0; i < k; ++i)
      qp[j * k + i] =
          static_cast<int8_t>(std::clamp(std::nearbyint(at(j, i) * inv), -127.0f, 127.0f));
  }
  return {std::move(q), std::move(scale)};
}

Tensor ToBF16(const Tensor& t) {
  Tensor out(DType::kBF16, t.dims());
  const float* src = t.data<float>();
  uint16_t* dst = reinterpret_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = FloatToBF16(src[i]);
  return out;
}

Node* NewConstant(Graph& g, Node* before, Tensor t, const std::string& name,
                  const std::vector<std::string>& provenance) {
  return rewrite::InsertConstant(g, before, name, std::move(t), provenance);
}

// Removes `constant` when nothing reads it any more, so weights are never held twice.
absl::Status DropIfUnused(Graph& g, Node* constant) {
  if (constant->output_info(0).uses.empty() && !rewrite::IsGraphOutput(g, constant->output(0)))
    return g.RemoveNode(constant);
  return absl::OkStatus();
}

// x̃ = X ⊙ (1 / s) of each Linear in `absmax` (its channels' max |X| from the first run),
// s its smoothing (ones when absent): one histogram of |x̃| per Linear from a second run of
// the calibration sets, and the range ctx's observer picks from it (0: all zeros).
absl::StatusOr<std::map<int, float>> StaticRanges(
    const Graph& g, const PassContext& ctx, const std::map<int, std::vector<float>>& absmax,
    const std::map<int, std::vector<float>>& smoothing) {
  std::map<int, std::vector<float>> x_mul;  // id -> [K]
  std::map<int, AbsHistogram> hist;
  std::map<std::pair<int, int>, std::vector<int>> readers;
  for (const auto& [id, m] : absmax) {
    std::vector<float>& mul = x_mul[id];
    mul.assign(m.size(), 1.0f);
    if (auto it = smoothing.find(id); it != smoothing.end())
      for (size_t i = 0; i < mul.size(); ++i) mul[i] = 1.0f / it->second[i];
    float top = 0.0f;
    for (size_t i = 0; i < m.size(); ++i) top = std::max(top, m[i] * mul[i]);
    hist.emplace(id, AbsHistogram(top));
    const Value x = g.FindNodeById(id)->input(0);
    readers[{x.node->id(), x.index}].push_back(id);
  }
  for (const auto& feeds : *ctx.calibration_inputs) {
    auto run = RunReference(g, feeds, [&](const Node& n, int o, const Tensor& t) {
      auto it = readers.find({n.id(), o});
      if (it == readers.end() || t.dtype() != DType::kF32 || t.rank() == 0) return;
      for (int id : it->second) {
        const std::vector<float>& mul = x_mul.at(id);
        if (t.dims().back() != static_cast<int64_t>(mul.size())) continue;
        hist.at(id).Add(t.data<float>(), t.NumElements(), mul.data(),
                        static_cast<int64_t>(mul.size()));
      }
    });
    if (!run.ok())
      return absl::Status(run.status().code(),
                          absl::StrCat("gemm-precision: running the calibration inputs for the "
                                       "static activation ranges: ",
                                       run.status().message()));
  }
  std::map<int, float> ranges;
  for (const auto& [id, h] : hist) {
    KILN_ASSIGN_OR_RETURN(float a, ObservedRange(h, ctx.static_activations.observer,
                                                 ctx.static_activations.percentile));
    if (a > 0) ranges[id] = a;
  }
  return ranges;
}

absl::StatusOr<bool> GemmPrecisionPass::RunImpl(Graph& g, const PassContext& ctx) {
  if (ctx.precision != Precision::kInt8 &&
      (ctx.precision != Precision::kBf16 || ctx.target != PlanTarget::kCpu))
    return false;
  const bool cuda = ctx.target == PlanTarget::kCuda;
  const bool int8 = ctx.precision == Precision::kInt8;
  auto note = [&](const Node& n, const std::string& precision, const std::string& reason) {
    if (ctx.precision_report) ctx.precision_report->Note(n, precision, reason);
  };
  // A Linear that stays above int8: fp32 on the cpu; on cuda lower-precision's 16 bits, or
  // fp32 where numeric-safety said so.
  const std::string rest = cuda ? std::string(PrecisionName(ComputePrecision(ctx))) : "fp32";
  auto note_kept = [&](const Node& n, const std::string& why) {
    const std::string* forced =
        cuda && ctx.precision_report ? ctx.precision_report->ForcedF32(n) : nullptr;
    note(n, forced ? "fp32" : rest, forced ? *forced : why);
  };
  bool changed = false;
  std::map<int, Node*> bf16_of;  // f32 constant node id -> its bf16 copy
  // int8 with calibration inputs: each quantized Linear's input channels' largest |X|,
  // for the smoothing (one run of the graph per input set on the reference executor).
  std::map<int, std::vector<float>> x_absmax;  // Linear node id -> [K]
  if (int8 && ctx.calibration_inputs != nullptr && !ctx.calibration_inputs->empty()) {
    std::map<std::pair<int, int>, std::vector<int>> readers;  // X value -> Linear ids
    for (const auto& p : g.nodes())
      if (IsLinear(p.get()) && GoesInt8(g, ctx, p.get())) {
        const Value x = p->input(0);
        readers[{x.node->id(), x.index}].push_back(p->id());
      }
    for (const auto& feeds : *ctx.calibration_inputs) {
      auto run = RunReference(g, feeds, [&](const Node& n, int o, const Tensor& t) {
        auto it = readers.find({n.id(), o});
        if (it == readers.end() || t.dtype() != DType::kF32 || t.rank() == 0) return;
        const int64_t k = t.dims().back();
        const float* p = t.data<float>();
        for (int id : it->second) {
          std::vector<float>& m = x_absmax[id];
          m.resize(static_cast<size_t>(k), 0.0f);
          for (int64_t i = 0; i < t.NumElements(); ++i)
            if (std::isfinite(p[i])) m[i % k] = std::max(m[i % k], std::fabs(p[i]));
        }
      });
      if (!run.ok())
        return absl::Status(run.status().code(),
                            absl::StrCat("gemm-precision: running the calibration inputs: ",
                                         run.status().message()));
    }
  }
  // Each smoothed Linear's factors, then (static activations) its input range: a second run
  // of the calibration sets fills one |X ⊙ x_mul| histogram per Linear, bounded by the first
  // run's exact maxima, and the observer picks the range from it.
  std::map<int, std::vector<float>> smoothing;  // Linear node id -> s [K]
  for (const auto& [id, absmax] : x_absmax) {
    const Node* n = g.FindNodeById(id);
    if (n == nullptr) continue;
    smoothing[id] = SmoothingFactors(absmax, *n->input(1).node->constant_value(),
                                     n->attr_int_or("trans_w", 0) != 0);
  }
  std::map<int, float> x_range;  // Linear node id -> static |X ⊙ x_mul| range
  if (int8 && ctx.static_activations.enabled && !x_absmax.empty()) {
    KILN_ASSIGN_OR_RETURN(x_range, StaticRanges(g, ctx, x_absmax, smoothing));
    Count("static activation ranges", static_cast<int64_t>(x_range.size()));
  }
  std::vector<Node*> order;
  for (const auto& p : g.nodes()) order.push_back(p.get());
  for (Node* n : order) {
    if (n->domain() == "kiln" && n->op() == "QuantLinear") {  // a second run, or the file's
      note(*n, "int8", HeadWhy(g, ctx, n));
      continue;
    }
    if (n->domain() == "kiln" && n->op() == "BlockQuantLinear") {  // the file's own int4/int8
      const bool wide = n->num_inputs() > 1 && n->input(1).type().dtype == DType::kU8;
      note(*n, wide ? "int8" : "int4",
           absl::StrCat("weight-only ", wide ? "int8" : "int4",
                        " from the model (MatMulNBits), activations fp32"));
      continue;
    }
    const OpInfo* info = FindOp(n->domain(), n->op());
    if (info == nullptr || info->precision != PrecisionPolicy::kLower) continue;
    if (!IsLinear(n)) {
      if (!cuda) note(*n, "fp32", std::string(info->keep_f32_reason));  // cuda: lower-precision's
      continue;
    }
    // The Linear's precision: the plan's, unless --precision auto moved its group, or an
    // output head's from --head-precision.
    std::string group_why = HeadWhy(g, ctx, n);
    const bool head = !group_why.empty();
    Precision target = head ? *ctx.head_precision : ctx.precision;
    if (auto it = ctx.gemm_group_precision.find(GemmGroup(n));
        !head && it != ctx.gemm_group_precision.end()) {
      target = it->second;
      group_why = absl::StrCat("--precision auto: the ", it->first, " GEMMs at ",
                               std::string(PrecisionName(target)));
    }
    std::string why =
        KeepReason(g, *n, target == Precision::kBf16 ? DType::kBF16 : DType::kUndefined, head);
    if (why.empty() && target == Precision::kFp32) why = group_why;
    if (!why.empty()) {
      Count("linears kept fp32");
      note_kept(*n, why);
      continue;
    }
    if (target == Precision::kBf16) {
      const Value w = n->input(1);
      if (w.type().dtype == DType::kBF16) {
        note(*n, "bf16", group_why);
        continue;
      }
      Node*& copy = bf16_of[w.node->id()];
      if (copy == nullptr) {
        copy = NewConstant(g, w.node, ToBF16(*w.node->constant_value()),
                           w.node->output_info(0).name, w.node->provenance());
        Count("weights converted to bf16");
      }
      Node* original = w.node;
      g.SetInput(n, 1, copy->output(0));
      KILN_RETURN_IF_ERROR(DropIfUnused(g, original));
      note(*n, "bf16", group_why);
      changed = true;
      continue;
    }
    // int8: Linear(X, W, B?) {trans_w, activation} -> QuantLinear(X, Wq, w_scale, B?,
    // x_mul?) (x_mul: the calibrated smoothing, when there were calibration inputs).
    Node* w_node = n->input(1).node;
    const bool trans_w = n->attr_int_or("trans_w", 0) != 0;
    const int64_t k = w_node->constant_value()->dims()[trans_w ? 1 : 0];
    if (k > kQuantLinearMaxK) {
      Count("linears kept fp32");
      note_kept(*n, absl::StrCat("K ", k, " is above kiln.QuantLinear's ", kQuantLinearMaxK,
                                 " (the int8 GEMM's int32 sums)"));
      continue;
    }
    const int64_t out_n = w_node->constant_value()->dims()[trans_w ? 0 : 1];
    if (cuda && (k % 4 != 0 || out_n % 4 != 0)) {
      Count("linears kept fp32");
      note_kept(*n, absl::StrCat("K ", k, " and N ", out_n,
                                 ": cuBLASLt's int8 GEMMs take multiples of 4"));
      continue;
    }
    std::vector<float> smooth;
    if (auto it = smoothing.find(n->id()); it != smoothing.end()) smooth = it->second;
    auto [q, scale] = QuantizePerOutputChannel(*w_node->constant_value(), trans_w, smooth);
    const std::string w_name = w_node->output_info(0).name;
    Node* qc = NewConstant(g, n, std::move(q), absl::StrCat(w_name, "_s8"), w_node->provenance());
    Node* sc =
        NewConstant(g, n, std::move(scale), absl::StrCat(w_name, "_scale"), w_node->provenance());
    std::vector<Value> inputs = {n->input(0), qc->output(0), sc->output(0),
                                 n->num_inputs() > 2 ? n->input(2) : Value{}};
    if (!smooth.empty()) {
      Tensor mul(DType::kF32, {static_cast<int64_t>(smooth.size())});
      for (size_t i = 0; i < smooth.size(); ++i) mul.data<float>()[i] = 1.0f / smooth[i];
      inputs.push_back(
          NewConstant(g, n, std::move(mul), absl::StrCat(w_name, "_x_mul"), w_node->provenance())
              ->output(0));
      Count("linears smoothed");
    } else if (!inputs.back()) {
      inputs.pop_back();
    }
    Node* ql = g.InsertNodeBefore(n, "QuantLinear", inputs, 1, "kiln");
    if (const std::string* act = n->attr_string("activation")) ql->set_attr("activation", *act);
    const auto range = x_range.find(n->id());
    const float fixed = range == x_range.end() ? 0.0f : range->second;
    ql->set_attr("x_quant", std::string(fixed > 0 ? "static" : "dynamic_row"));
    if (fixed > 0) ql->set_attr("x_absmax", fixed);
    ql->set_output_type(0, n->output_info(0).type);
    ql->set_output_name(0, n->output_info(0).name);
    ql->set_provenance(n->provenance());
    g.ReplaceAllUsesWith(n->output(0), ql->output(0));
    // cuda: numeric-safety's verdict on the Linear holds for its QuantLinear (X and Y stay
    // f32 around the int8 GEMM).
    const std::string* forced =
        cuda && ctx.precision_report ? ctx.precision_report->ForcedF32(*n) : nullptr;
    if (forced) ctx.precision_report->ForceF32(*ql, *forced);
    KILN_RETURN_IF_ERROR(g.RemoveNode(n));
    KILN_RETURN_IF_ERROR(DropIfUnused(g, w_node));
    Count("linears quantized");
    if (ctx.precision_report)
      ctx.precision_report->Note(
          *ql, "int8", forced ? absl::StrCat("X and Y fp32: ", *forced) : group_why, fixed);
    changed = true;
  }
  return changed;
}

}  // namespace

std::unique_ptr<Pass> CreateGemmPrecisionPass() { return std::make_unique<GemmPrecisionPass>(); }

}  // namespace kiln
