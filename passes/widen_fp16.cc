// widen-fp16: a cpu compile of an fp16 export (`model_fp16.onnx`: fp16 weights and
// activations, Casts at the edges) computes in f32 — the CPUs kiln runs on have no fp16
// arithmetic and its cpu kernels are f32 — while the graph's inputs and outputs keep their
// fp16 dtypes:
//   - every f16 constant (and ConstantOfShape's f16 value) becomes f32 (exactly: f16 ⊂ f32);
//   - every f16 graph input is read through one Cast to f32;
//   - every Cast to f16 casts to f32 instead;
//   - every computed value's stored type loses its shape and, if f16, becomes f32: shape
//     inference derives them again from the inputs (an fp16 converter's value_info names
//     extents with its own symbols, which would block the fusions);
//   - every graph output that was f16 gets a Cast back to f16 (named as the output).
// A generation compile (PassContext::kv_cache_f32: `--decode-context`) widens the graph's
// f16 inputs and outputs too, no Casts at the edges: such a plan's I/O is the generation
// session's own (its caches are the f32 pools, its logits f32), so an fp16 LLM file (a
// q4f16 one) pages its cache like an f32 file's.
// Not exact: the f16 rounding between ops is gone (the results are closer to the fp32
// model the export came from). cpu target, -O2 and above (-O1 keeps the f16 ops, reference
// steps); a cuda plan keeps fp16 (its kernels have it). Does nothing to a graph without f16.
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
    return "cpu: an fp16 export computes in f32 (fp16 I/O kept, Casts at the edges)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override;
};

Tensor ToF32(const Tensor& t) {
  Tensor out(DType::kF32, t.dims());
  const uint16_t* src = reinterpret_cast<const uint16_t*>(t.raw());
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = HalfToFloat(src[i]);
  return out;
}

// The type a computed value gets: f16 becomes f32, and the shape is forgotten for shape
// inference to derive again. fp16 converters store value_info for every intermediate, with
// exporter symbols (`unk__3`) that inference cannot tie to the inputs' (`sequence`); kept,
// they would block the fusions that need to prove two extents equal.
Type Widened(Type t, bool keep_shape) {
  if (t.dtype == DType::kF16) t.dtype = DType::kF32;
  if (!keep_shape) t.shape.reset();
  return t;
}

bool IsCastTo(const Node* n, DType to) {
  return rewrite::IsOp(n, "Cast") && n->attr_int_or("to", 0) == DTypeToOnnx(to);
}

// What this pass leaves in fp16 (so a second run, or the re-run per shape bucket, changes
// nothing): an f16 input read only by Casts to f32, a Cast to f16 read only as a graph
// output.
bool IsBoundary(const Graph& g, const Node* n) {
  if (n->is_input()) {
    for (const Use& u : n->output_info(0).uses)
      if (!IsCastTo(u.user, DType::kF32)) return false;
    return true;
  }
  return IsCastTo(n, DType::kF16) && n->output_info(0).uses.empty() &&
         rewrite::IsGraphOutput(g, const_cast<Node*>(n)->output(0));
}

absl::StatusOr<bool> WidenFp16Pass::RunImpl(Graph& g, const PassContext& ctx) {
  if (ctx.target != PlanTarget::kCpu) return false;
  const int64_t kF16 = DTypeToOnnx(DType::kF16), kF32 = DTypeToOnnx(DType::kF32);
  const bool widen_io = ctx.kv_cache_f32;  // a generation plan: no f16 edges
  bool any = false;
  for (const auto& p : g.nodes()) {
    if (!widen_io && IsBoundary(g, p.get())) continue;
    for (int i = 0; i < p->num_outputs(); ++i) any |= p->output_info(i).type.dtype == DType::kF16;
    if (const Tensor* t = p->constant_value()) any |= t->dtype() == DType::kF16;
  }
  if (!any) return false;

  std::vector<bool> output_f16;
  for (const GraphOutput& o : g.outputs())
    output_f16.push_back(!widen_io && o.value.type().dtype == DType::kF16);
  std::vector<Node*> order;
  for (const auto& p : g.nodes()) order.push_back(p.get());
  for (Node* n : order) {
    if (!widen_io && IsBoundary(g, n)) continue;
    if (n->is_input()) {
      if (n->output_info(0).type.dtype != DType::kF16) continue;
      if (widen_io) {  // its readers now read f32 (a Cast to f32 of it becomes an identity)
        n->set_output_type(0, Widened(n->output_info(0).type, /*keep_shape=*/true));
        Count("f16 inputs widened (generation plan)");
        continue;
      }
      const std::vector<Use> uses = n->output_info(0).uses;
      Node* cast = rewrite::InsertCast(g, nullptr, n->output(0), DType::kF32,
                                       absl::StrCat(n->output_info(0).name, "_f32"));
      for (const Use& u : uses) g.SetInput(u.user, u.operand, cast->output(0));
      Count("f16 inputs cast to f32");
      continue;
    }
    if (const Tensor* t = n->constant_value(); t != nullptr && t->dtype() == DType::kF16) {
      n->set_attr("value", ToF32(*t));
      Count("f16 constants widened");
    }
    if (rewrite::IsOp(n, "ConstantOfShape")) {
      const Tensor* t = n->attr_tensor("value");
      if (t != nullptr && t->dtype() == DType::kF16) n->set_attr("value", ToF32(*t));
    }
    if (rewrite::IsOp(n, "Cast") && n->attr_int_or("to", 0) == kF16) {
      n->set_attr("to", kF32);
      Count("casts to f16 made casts to f32");
    }
    if (n->is_constant()) {
      n->set_output_type(0, Type::Of(*n->constant_value()));
      continue;
    }
    for (int i = 0; i < n->num_outputs(); ++i)
      n->set_output_type(i, Widened(n->output_info(i).type, /*keep_shape=*/false));
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    if (!output_f16[o]) continue;
    const Value v = g.outputs()[o].value;
    Node* c = rewrite::InsertCast(g, nullptr, v, DType::kF16, g.outputs()[o].name);
    g.SetOutputValue(static_cast<int>(o), c->output(0));
    Count("f16 outputs cast back");
  }
  KILN_RETURN_IF_ERROR(g.TopoSort());
  return true;
}

}  // namespace

std::unique_ptr<Pass> CreateWidenFp16Pass() { return std::make_unique<WidenFp16Pass>(); }

}  // namespace kiln
