// f32-operands: an op's f32-only operands (the op catalogue's OpInfo::f32_inputs:
// attention's additive mask, whose "minus infinity" fp16 cannot hold) are f32: a 16-bit
// value there is read through a Cast to f32.
// Why: a model exported in fp16 (model_fp16.onnx, optimum's fp16 and O4 files) builds its
// mask in fp16; on the cpu widen-fp16 has already made it f32, but a cuda plan keeps the
// model's fp16, and the attention kernels take an f32 mask only — so every fp16 export
// was refused for cuda ("no cuda kernel takes this node"). lower-precision casts the
// masks of the values it lowered itself; this covers the model's own 16-bit ones, at
// every plan precision. Exact: f16 and bf16 values are f32 values.
// Runs after the fusions, whose ops carry the f32_inputs; does nothing to a graph without
// 16-bit operands there.
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class F32OperandsPass final : public Pass {
 public:
  std::string_view name() const override { return "f32-operands"; }
  std::string_view description() const override {
    return "a 16-bit value at an f32-only operand (attention's mask) read through a Cast "
           "to f32";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    std::vector<Node*> order;
    for (const auto& p : g.nodes()) order.push_back(p.get());
    bool changed = false;
    for (Node* n : order) {
      const OpInfo* info = FindOp(n->domain(), n->op());
      if (info == nullptr || info->f32_inputs == 0) continue;
      for (int i = 0; i < n->num_inputs(); ++i) {
        const Value v = n->input(i);
        if (!((info->f32_inputs >> i) & 1u) || !v) continue;
        const DType dt = v.type().dtype;
        if (dt != DType::kF16 && dt != DType::kBF16) continue;
        Node* cast = rewrite::InsertCast(g, n, v, DType::kF32,
                                         absl::StrCat(v.node->output_info(v.index).name, "_f32"));
        g.SetInput(n, i, cast->output(0));
        Count("16-bit operands cast to f32");
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateF32OperandsPass() { return std::make_unique<F32OperandsPass>(); }

}  // namespace kiln
