// Factories of the registered passes (one pass per file, named after it). The registry
// (registry.cc) is the one list of passes; pipelines (pipelines.cc) refer to them by name.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateShapeInferencePass();         // shape_inference.cc
std::unique_ptr<Pass> CreateConstantFoldingPass();        // constant_folding.cc
std::unique_ptr<Pass> CreateDeadCodeEliminationPass();    // dead_code_elimination.cc
std::unique_ptr<Pass> CreateCommonSubexpressionPass();    // common_subexpression.cc
std::unique_ptr<Pass> CreateTransposeEliminationPass();   // transpose_elimination.cc
std::unique_ptr<Pass> CreateReshapeSimplificationPass();  // reshape_simplification.cc

}  // namespace kiln
