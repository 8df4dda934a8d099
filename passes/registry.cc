// The one list of passes. Adding a pass: write passes/<name>.cc with a Create<Name>Pass
// factory, declare it in passes/passes.h, add a row here, and give it tests and a
// section in docs/passes.md (docs/adding-a-pass.md).
#include <functional>

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
};

}  // namespace

std::unique_ptr<Pass> CreatePass(std::string_view name) {
  for (const Entry& e : kPasses)
    if (name == e.name) return e.create();
  return nullptr;
}

std::vector<std::string> RegisteredPassNames() {
  std::vector<std::string> out;
  for (const Entry& e : kPasses) out.push_back(e.name);
  return out;
}

}  // namespace kiln
