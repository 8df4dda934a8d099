// widen-fp16: a cpu compile of an fp16 or bf16 export (`model_fp16.onnx`, a bf16 torch
// export, onnxruntime-genai's bf16 MatMulNBits files: 16-bit weights and activations, Casts
// at the edges) computes in f32 — kiln's cpu kernels are f32 (the CPUs it runs on have no
// fp16 arithmetic; bf16 only in dot products) — while the graph's inputs and outputs keep
// their 16-bit dtypes. "16-bit" below is f16 or bf16, whichever the model holds:
//   - every 16-bit constant (and ConstantOfShape's value) becomes f32 (exactly: both ⊂ f32);
//   - every 16-bit graph input is read through one Cast to f32;
//   - every Cast to f16 or bf16 casts to f32 instead;
//   - every computed value's stored type loses its shape and, if 16-bit, becomes f32: shape
//     inference derives them again from the inputs (an fp16 converter's value_info names
//     extents with its own symbols, which would block the fusions);
//   - every graph output that was 16-bit gets a Cast back to its dtype (named as the output).
// A generation compile (PassContext::kv_cache_f32: `--decode-context`) widens the graph's
// 16-bit inputs and outputs too, no Casts at the edges: such a plan's I/O is the generation
// session's own (its caches are the f32 pools, its logits f32), so an fp16 LLM file (a
// q4f16 one) pages its cache like an f32 file's.
// Not exact: the 16-bit rounding between ops is gone (the results are closer to the fp32
// model the export came from). cpu target, -O2 and above (-O1 keeps the 16-bit ops,
// reference steps); a cuda plan keeps them (its kernels have fp16 and bf16). Does nothing to
// a graph without f16 or bf16 values. (The pass's name predates bf16.)
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class WidenFp16Pass final : public Pass {
 public:
  std::string_view name() const override { return "widen-fp16"; }
  std::string_view description() const override {
    return "cpu: an fp16 or bf16 export computes in f32 (16-bit I/O kept, Casts at the edges)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override;
};

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

Tensor ToF32(const Tensor& t) {
  Tensor out(DType::kF32, t.dims());
  const uint16_t* src = reinterpret_cast<const uint16_t*>(t.raw());
  float* dst = out.data<float>();
  const bool bf16 = t.dtype() == DType::kBF16;
  for (int64_t i = 0; i < t.NumElements(); ++i)
    dst[i] = bf16 ? BF16ToFloat(src[i]) : HalfToFloat(src[i]);
  return out;
}

// The type a computed value gets: f16 or bf16 becomes f32, and the shape is forgotten for shape
// inference to derive again. fp16 converters store value_info for every intermediate, with
// exporter symbols (`unk__3`) that inference cannot tie to the inputs' (`sequence`); kept,
// they would block the fusions that need to prove two extents equal.
Type Widened(Type t, bool keep_shape) {
  if (IsHalf(t.dtype)) t.dtype = DType::kF32;
  if (!keep_shape) t.shape.reset();
  return t;
}

bool IsCastTo(const Node* n, DType to) {
  return rewrite::IsOp(n, "Cast") && n->attr_int_or("to", 0) == DTypeToOnnx(to);
}

// What this pass leaves in 16 bits (so a second run, or the re-run per shape bucket, changes
// nothing): a 16-bit input read only by Casts to f32, a Cast to f16 or bf16 read only as a
// graph output.
bool IsBoundary(const Graph& g, const Node* n) {
  if (n->is_input()) {
    for (const Use& u : n->output_info(0).uses)
      if (!IsCastTo(u.user, DType::kF32)) return false;
    return true;
  }
  return (IsCastTo(n, DType::kF16) || IsCastTo(n, DType::kBF16)) &&
         n->output_info(0).uses.empty() &&
         rewrite::IsGraphOutput(g, const_cast<Node*>(n)->output(0));
}

absl::StatusOr<bool> WidenFp16Pass::RunImpl(Graph& g, const PassContext& ctx) {
  if (ctx.target != PlanTarget::kCpu) return false;
  const int64_t kF16 = DTypeToOnnx(DType::kF16), kBF16 = DTypeToOnnx(DType::kBF16),
                kF32 = DTypeToOnnx(DType::kF32);
  const bool widen_io = ctx.kv_cache_f32;  // a generation plan: no f16 edges
  bool any = false;
  for (const auto& p : g.nodes()) {
    if (!widen_io && IsBoundary(g, p.get())) continue;
    for (int i = 0; i < p->num_outputs(); ++i) any |= IsHalf(p->output_info(i).type.dtype);
    if (const Tensor* t = p->constant_value()) any |= IsHalf(t->dtype());
  }
  if (!any) return false;

  std::vector<DType> output_half;  // a 16-bit graph output's dtype, to cast back to; else kF32
  for (const GraphOutput& o : g.outputs())
    output_half.push_back(!widen_io && IsHalf(o.value.type().dtype) ? o.value.type().dtype
                                                                    : DType::kF32);
  std::vector<Node*> order;
  for (const auto& p : g.nodes()) order.push_back(p.get());
  for (Node* n : order) {
    if (!widen_io && IsBoundary(g, n)) continue;
    if (n->is_input()) {
      if (!IsHalf(n->output_info(0).type.dtype)) continue;
      if (widen_io) {  // its readers now read f32 (a Cast to f32 of it becomes an identity)
        n->set_output_type(0, Widened(n->output_info(0).type, /*keep_shape=*/true));
        Count("16-bit inputs widened (generation plan)");
        continue;
      }
      const std::vector<Use> uses = n->output_info(0).uses;
      Node* cast = rewrite::InsertCast(g, nullptr, n->output(0), DType::kF32,
                                       absl::StrCat(n->output_info(0).name, "_f32"));
      for (const Use& u : uses) g.SetInput(u.user, u.operand, cast->output(0));
      Count("16-bit inputs cast to f32");
      continue;
    }
    if (const Tensor* t = n->constant_value(); t != nullptr && IsHalf(t->dtype())) {
      n->set_attr("value", ToF32(*t));
      Count("16-bit constants widened");
    }
    if (rewrite::IsOp(n, "ConstantOfShape")) {
      const Tensor* t = n->attr_tensor("value");
      if (t != nullptr && IsHalf(t->dtype())) n->set_attr("value", ToF32(*t));
    }
    if (rewrite::IsOp(n, "Cast") &&
        (n->attr_int_or("to", 0) == kF16 || n->attr_int_or("to", 0) == kBF16)) {
      n->set_attr("to", kF32);
      Count("casts to 16 bits made casts to f32");
    }
    if (n->is_constant()) {
      n->set_output_type(0, Type::Of(*n->constant_value()));
      continue;
    }
    for (int i = 0; i < n->num_outputs(); ++i)
      n->set_output_type(i, Widened(n->output_info(i).type, /*keep_shape=*/false));
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    if (output_half[o] == DType::kF32) continue;
    const Value v = g.outputs()[o].value;
    Node* c = rewrite::InsertCast(g, nullptr, v, output_half[o], g.outputs()[o].name);
    g.SetOutputValue(static_cast<int>(o), c->output(0));
    Count("16-bit outputs cast back");
  }
  KILN_RETURN_IF_ERROR(g.TopoSort());
  return true;
}

}  // namespace

std::unique_ptr<Pass> CreateWidenFp16Pass() { return std::make_unique<WidenFp16Pass>(); }

}  // namespace kiln
