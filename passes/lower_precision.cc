// lower-precision: for a compile at fp16 or bf16 (ComputePrecision: a cuda int8 plan's is
// fp16, its QuantLinears reading and writing fp16), moves the graph's f32 compute path to
// 16 bits while callers keep the model's own dtypes.
// Rules, one forward sweep in node order, per the op catalogue's PrecisionPolicy:
//   - kLower ops (GEMMs, norms, softmax, attention, embeddings, pooling: kernels that keep
//     fp32 statistics and accumulation inside) run in 16 bits: their f32 inputs become
//     16-bit (constants converted at compile time, round to nearest even; other values
//     through a Cast), their f32 outputs 16-bit. Inputs listed in the op's f32_inputs stay
//     f32 (attention's additive mask: its -3.4e38 "minus infinity" has no fp16 value).
//   - kFollow ops (elementwise, data movement) run in 16 bits when one of their float
//     inputs already is, or when their only f32 inputs are constants (a Gather from an
//     embedding table: the table is stored in 16 bits); their other f32 inputs are
//     converted as above. So the mask chain Cast(mask) -> Sub -> Mul, which starts from
//     an integer input, stays f32.
//   - kKeepF32 ops (Exp, Log, Pow, Reciprocal, reductions, CumSum) stay f32: 16-bit inputs
//     are cast up.
//   - An op whose f32 constant operand does not fit the 16-bit type (fp16: a finite
//     |value| > 65504) stays f32, so no constant turns into infinity.
//   - Cast nodes keep their `to`; graph outputs that became 16-bit are cast back to f32.
//   - fp16: a run-time f32 value cast down goes through Clip(±65504) first, so it
//     saturates instead of overflowing to ±inf (an additive mask's -3.4e38 would become
//     -inf, and a fully masked softmax row NaN; bf16 has f32's range and needs none).
// Why: a plan's weights are stored in the target precision (half the bytes), Casts sit only
// at the region boundaries, and the numerically delicate parts stay where they are safe.
// An op the numeric-safety pass found out of fp16's range on the calibration inputs
// (PrecisionReport::ForcedF32) stays f32 as a kKeepF32 op does, and so, in a generation
// compile (PassContext::kv_cache_f32), does a KV cache's append (a graph output
// Concat(past, new) on axis 2, or TensorScatter(Pad(past), new, ...)) with the kiln.Attention
// nodes reading it: the cache pools stay f32, only the new rows, the queries and the
// attention's output are cast; each compute op's precision
// (and why one stays f32) is noted in the PrecisionReport for the plan.
// Limits: only f32 values move (f64 and existing 16-bit values are left as they are); the
// range check covers constants and the values cast down, and run-time values only as far
// as numeric-safety's calibration saw them (bf16 has f32's range).
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class LowerPrecisionPass final : public Pass {
 public:
  std::string_view name() const override { return "lower-precision"; }
  std::string_view description() const override {
    return "fp16/bf16 plans: the compute path in 16 bits, weights converted, casts at the "
           "boundaries (docs/precision.md)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override;
};

bool IsF32(Value v) { return v && v.type().dtype == DType::kF32; }

// Does every element of the f32 tensor `t` have a finite-preserving `low` value?
bool Fits(const Tensor& t, DType low) {
  if (low != DType::kF16) return true;  // bf16 has f32's exponent range
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.NumElements(); ++i)
    if (std::isfinite(p[i]) && std::fabs(p[i]) > 65504.0f) return false;
  return true;
}

Tensor Convert(const Tensor& t, DType low) {
  Tensor out(low, t.dims());
  const float* src = t.data<float>();
  uint16_t* dst = reinterpret_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < t.NumElements(); ++i)
    dst[i] = low == DType::kF16 ? FloatToHalf(src[i]) : FloatToBF16(src[i]);
  return out;
}

absl::StatusOr<bool> LowerPrecisionPass::RunImpl(Graph& g, const PassContext& ctx) {
  const Precision precision = ComputePrecision(ctx);
  if (precision != Precision::kFp16 && precision != Precision::kBf16) return false;
  const DType low = precision == Precision::kFp16 ? DType::kF16 : DType::kBF16;
  bool changed = false;
  using Key = std::pair<int, int>;  // (node id, output index)
  auto key_of = [](Value v) { return Key{v.node->id(), v.index}; };
  std::map<int, Node*> converted;                  // constant node id -> low copy
  std::map<std::pair<Key, DType>, Value> cast_to;  // (value, dtype) -> its Cast
  std::set<Key> lowered;        // values this run made 16-bit (never the model's own 16-bit ones)
  Value fp16_max, fp16_lowest;  // the Clip bounds, made once
  auto constant = [&](Node* before, float x, const std::string& name) {
    Node* k = g.InsertNodeBefore(before, "Constant", {}, 1);
    k->set_attr("value", Tensor::ScalarF32(x));
    k->set_output_type(0, Type::Of(Tensor::ScalarF32(x)));
    k->set_output_name(0, name);
    return k->output(0);
  };
  auto cast = [&](Node* before, Value v, DType to) {
    const std::pair<Key, DType> key{key_of(v), to};
    if (auto it = cast_to.find(key); it != cast_to.end()) return it->second;
    Value src = v;
    if (to == DType::kF16 && v.type().dtype == DType::kF32) {
      // A run-time f32 value into fp16 saturates at ±65504 rather than becoming ±inf: an
      // additive mask's -3.4e38 stays "very negative", so a fully masked softmax row stays
      // finite (uniform, as in f32) instead of turning NaN and spreading.
      if (!fp16_max) {
        fp16_max = constant(before, 65504.0f, "kiln_fp16_max");
        fp16_lowest = constant(before, -65504.0f, "kiln_fp16_lowest");
      }
      Node* clip = g.InsertNodeBefore(before, "Clip", {v, fp16_lowest, fp16_max}, 1);
      clip->set_output_type(0, v.type());
      clip->set_output_name(0, absl::StrCat(v.node->output_info(v.index).name, "_sat"));
      clip->set_provenance(v.node->provenance());
      Count("saturating clips inserted");
      src = clip->output(0);
    }
    Node* c = rewrite::InsertCast(
        g, before, src, to,
        absl::StrCat(v.node->output_info(v.index).name, "_", std::string(DTypeName(to))));
    c->set_provenance(v.node->provenance());
    Count("casts inserted");
    if (to == low) lowered.insert(key_of(c->output(0)));
    return cast_to[key] = c->output(0);
  };
  auto low_operand = [&](Node* n, int i) -> absl::Status {
    const Value v = n->input(i);
    if (const Tensor* t = v.node->constant_value()) {
      Node*& c = converted[v.node->id()];
      if (c == nullptr) {
        c = g.InsertNodeBefore(v.node, "Constant", {}, 1);
        Tensor lt = Convert(*t, low);
        c->set_output_type(0, Type::Of(lt));
        c->set_output_name(0, v.node->output_info(0).name);
        c->set_attr("value", std::move(lt));
        c->set_provenance(v.node->provenance());
        Count("constants converted");
      }
      Node* original = v.node;
      g.SetInput(n, i, c->output(0));
      // The f32 original goes once nothing reads it, so a model's weights are never held
      // in both widths (the topological order has visited it: producers come first).
      if (original->output_info(0).uses.empty() && !rewrite::IsGraphOutput(g, original->output(0)))
        return g.RemoveNode(original);
    } else {
      g.SetInput(n, i, cast(n, v, low));
    }
    return absl::OkStatus();
  };
  // A generation compile's KV caches (see the file comment): node id -> why it stays f32.
  std::map<int, std::string> kv_f32;
  if (ctx.kv_cache_f32)
    for (const GraphOutput& o : g.outputs()) {
      Node* n = o.value.node;
      if (n == nullptr || !n->domain().empty() || n->num_inputs() < 2 || !n->input(0)) continue;
      const int64_t axis =
          n->op() == "Concat" ? n->attr_int_or("axis", 0) : n->attr_int_or("axis", -2);
      const bool rank4_axis2 =
          o.value.type().has_rank() && o.value.type().rank() == 4 && (axis == 2 || axis == -2);
      Node* pad = n->op() == "TensorScatter" ? n->input(0).node : nullptr;
      const bool concat =
          n->op() == "Concat" && n->num_inputs() == 2 && n->input(0).node->is_input();
      const bool scatter = pad != nullptr && pad->domain().empty() && pad->op() == "Pad" &&
                           pad->input(0) && pad->input(0).node->is_input();
      if (!rank4_axis2 || !IsF32(o.value) || (!concat && !scatter)) continue;
      const std::string why = "the KV cache stays f32 (generation plans' cache pools are f32)";
      kv_f32[n->id()] = why;
      if (scatter) kv_f32[pad->id()] = why;
      for (const Use& u : n->output_info(0).uses)
        if (u.user->domain() == "kiln" && u.user->op() == "Attention" &&
            (u.operand == 1 || u.operand == 2))
          kv_f32[u.user->id()] = "reads the KV cache, which stays f32 (generation plans)";
    }
  // Graph outputs that are f32 now must still be f32 afterwards.
  std::vector<bool> output_was_f32;
  for (const GraphOutput& o : g.outputs()) output_was_f32.push_back(IsF32(o.value));

  std::vector<Node*> order;
  for (const auto& p : g.nodes()) order.push_back(p.get());
  for (Node* n : order) {
    if (n->is_input() || n->is_constant()) continue;
    if (n->domain().empty() && (n->op() == "Cast" || n->op() == "CastLike")) continue;
    const OpInfo* info = FindOp(n->domain(), n->op());
    const std::string* forced =
        ctx.precision_report ? ctx.precision_report->ForcedF32(*n) : nullptr;
    if (auto it = kv_f32.find(n->id()); forced == nullptr && it != kv_f32.end())
      forced = &it->second;
    const PrecisionPolicy policy = forced ? PrecisionPolicy::kKeepF32
                                   : info ? info->precision
                                          : PrecisionPolicy::kFollow;
    const unsigned keep = info ? info->f32_inputs : 0;
    auto kept = [&](int i) { return (keep >> i) & 1u; };
    bool go_low = false;
    std::string why_f32 = forced ? *forced : "";
    if (policy == PrecisionPolicy::kLower) {
      go_low = true;
    } else if (policy == PrecisionPolicy::kFollow) {
      bool runtime_f32 = false, constant_f32 = false;
      for (int i = 0; i < n->num_inputs(); ++i) {
        const Value v = n->input(i);
        if (!v) continue;
        if (lowered.count(key_of(v)))
          go_low = true;
        else if (IsF32(v) && !kept(i))
          (v.node->constant_value() ? constant_f32 : runtime_f32) = true;
      }
      // Only constants among its f32 operands (a Gather from an embedding table, a Where
      // between two constants): it runs low, so the constants are stored in 16 bits.
      if (constant_f32 && !runtime_f32) go_low = true;
    }
    // Not with an f32 constant the 16-bit type cannot hold, nor with no f32 in sight.
    bool has_f32 = false;
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value v = n->input(i);
      if (!IsF32(v) || kept(i)) continue;
      has_f32 = true;
      if (const Tensor* t = v.node->constant_value(); t && !Fits(*t, low)) {
        go_low = false;
        why_f32 = "a constant operand beyond fp16's range (|v| > 65504)";
      }
    }
    // Compute ops (kLower in the catalogue) get a note: their precision, or why f32.
    // (A cuda int8 plan's QuantLinear keeps gemm-precision's "int8" note.)
    const bool compute = info && info->precision == PrecisionPolicy::kLower &&
                         !(n->domain() == "kiln" && n->op() == "QuantLinear");
    if (compute && ctx.precision_report)
      ctx.precision_report->Note(*n, go_low ? std::string(PrecisionName(precision)) : "fp32",
                                 go_low ? "" : why_f32);
    for (int o = 0; o < n->num_outputs(); ++o)
      has_f32 |= n->output_info(o).type.dtype == DType::kF32;
    for (int i = 0; i < n->num_inputs(); ++i)  // an f32-only operand to cast back up
      has_f32 |= kept(i) && n->input(i) && n->input(i).type().dtype == low;
    if (go_low && !has_f32) continue;  // nothing of ours to lower (e.g. already 16-bit)
    if (go_low) {
      for (int i = 0; i < n->num_inputs(); ++i) {
        const Value v = n->input(i);
        if (!v) continue;
        if (kept(i)) {
          // Also a value of the low type from an earlier run: a fusion that only a bucket's
          // shapes allow makes its op after the symbolic graph's run lowered the operand
          // (genai's GroupQueryAttention mask).
          if (lowered.count(key_of(v)) || v.type().dtype == low)
            g.SetInput(n, i, cast(n, v, DType::kF32));
        } else if (IsF32(v)) {
          KILN_RETURN_IF_ERROR(low_operand(n, i));
        }
      }
      // LayerNormalization's mean / inv-std-dev outputs keep their stash_type.
      const bool ln = n->domain().empty() && n->op() == "LayerNormalization";
      for (int o = 0; o < (ln ? 1 : n->num_outputs()); ++o) {
        Type t = n->output_info(o).type;
        if (t.dtype != DType::kF32) continue;
        t.dtype = low;
        n->set_output_type(o, t);
        lowered.insert(key_of(n->output(o)));
      }
      Count(policy == PrecisionPolicy::kLower ? "ops lowered" : "ops following");
      changed = true;
    } else {
      // Stays f32 (kKeepF32, or kept by a constant the 16-bit type cannot hold): what this
      // pass made 16-bit comes back up; for a KV cache's op also what an earlier run did (an
      // attention a bucket's shapes fused after the symbolic run lowered its query).
      const bool kv = kv_f32.count(n->id()) > 0;
      for (int i = 0; i < n->num_inputs(); ++i) {
        const Value v = n->input(i);
        if (!v || !(lowered.count(key_of(v)) || (kv && v.type().dtype == low))) continue;
        g.SetInput(n, i, cast(n, v, DType::kF32));
        changed = true;
      }
    }
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const Value v = g.outputs()[o].value;
    if (!output_was_f32[o] || !lowered.count(key_of(v))) continue;
    Node* c = rewrite::InsertCast(g, nullptr, v, DType::kF32, g.outputs()[o].name);
    g.SetOutputValue(static_cast<int>(o), c->output(0));
    Count("casts inserted");
    changed = true;
  }
  return changed;
}

}  // namespace

std::unique_ptr<Pass> CreateLowerPrecisionPass() { return std::make_unique<LowerPrecisionPass>(); }

}  // namespace kiln
