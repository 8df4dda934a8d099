// The one list of passes. Adding a pass: write passes/<name>.cc with a Create<Name>Pass
// factory, declare it in passes/passes.h, add a row here, and give it tests and a
// section in docs/passes.md (docs/adding-a-pass.md).
#include <string>
#include <utility>
#include <vector>

#include "passes/passes.h"

namespace kiln {
namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Pass> (*create)();
};

constexpr Entry kPasses[] = {
    {"shape-inference", CreateShapeInferencePass},
    {"constant-folding", CreateConstantFoldingPass},
    {"dce", CreateDeadCodeEliminationPass},
    {"cse", CreateCommonSubexpressionPass},
    {"transpose-elimination", CreateTransposeEliminationPass},
    {"reshape-simplification", CreateReshapeSimplificationPass},
    {"dequantize", CreateDequantizePass},
    {"block-quant-weights", CreateBlockQuantWeightsPass},
    {"widen-fp16", CreateWidenFp16Pass},
    {"canonicalize", CreateCanonicalizePass},
    {"fuse-layernorm", CreateFuseLayerNormPass},
    {"fuse-gelu", CreateFuseGeluPass},
    {"fuse-rotary", CreateFuseRotaryPass},
    {"fuse-glu", CreateFuseGluPass},
    {"fuse-linear", CreateFuseLinearPass},
    {"fuse-skip-layernorm", CreateFuseSkipLayerNormPass},
    {"fuse-qkv", CreateFuseQkvPass},
    {"fuse-attention", CreateFuseAttentionPass},
    {"fuse-embed-layernorm", CreateFuseEmbedLayerNormPass},
    {"fuse-pooling", CreateFusePoolingPass},
    {"split-to-slices", CreateSplitToSlicesPass},
    {"f32-operands", CreateF32OperandsPass},
    {"lower-precision", CreateLowerPrecisionPass},
    {"gemm-precision", CreateGemmPrecisionPass},
    {"numeric-safety", CreateNumericSafetyPass},
};

std::vector<std::pair<std::string, std::unique_ptr<Pass> (*)()>>& ExtraPasses() {
  static auto* extra = new std::vector<std::pair<std::string, std::unique_ptr<Pass> (*)()>>();
  return *extra;
}

}  // namespace

bool RegisterPass(const std::string& name, std::unique_ptr<Pass> (*factory)()) {
  if (CreatePass(name)) return false;
  ExtraPasses().emplace_back(name, factory);
  return true;
}

std::unique_ptr<Pass> CreatePass(std::string_view name) {
  for (const Entry& e : kPasses)
    if (name == e.name) return e.create();
  for (const auto& [n, create] : ExtraPasses())
    if (name == n) return create();
  return nullptr;
}

std::vector<std::string> RegisteredPassNames() {
  std::vector<std::string> out;
  for (const Entry& e : kPasses) out.push_back(e.name);
  for (const auto& [n, create] : ExtraPasses()) out.push_back(n);
  return out;
}

}  // namespace kiln
