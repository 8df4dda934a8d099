// Factories of the registered passes (one pass per file, named after it). The registry
// (registry.cc) is the one list of passes; pipelines (pipelines.cc) refer to them by name.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateShapeInferencePass();         // shape_inference.cc
std::unique_ptr<Pass> CreateConstantFoldingPass();        // constant_folding.cc
std::unique_ptr<Pass> CreateDeadCodeEliminationPass();    // dead_code_elimination.cc
std::unique_ptr<Pass> CreateSplitToSlicesPass();          // split_to_slices.cc
std::unique_ptr<Pass> CreateF32OperandsPass();            // f32_operands.cc
std::unique_ptr<Pass> CreateCommonSubexpressionPass();    // common_subexpression.cc
std::unique_ptr<Pass> CreateTransposeEliminationPass();   // transpose_elimination.cc
std::unique_ptr<Pass> CreateReshapeSimplificationPass();  // reshape_simplification.cc
// Fusions (docs/fused-ops.md) and the canonicalization that runs before them.
std::unique_ptr<Pass> CreateDequantizePass();          // dequantize.cc (quantized ONNX in)
std::unique_ptr<Pass> CreateBlockQuantWeightsPass();   // block_quant_weights.cc
std::unique_ptr<Pass> CreateWidenFp16Pass();           // widen_fp16.cc (cpu: fp16 exports)
std::unique_ptr<Pass> CreateCanonicalizePass();        // canonicalize.cc
std::unique_ptr<Pass> CreateFuseLayerNormPass();       // fuse_layernorm.cc (+ RMSNorm)
std::unique_ptr<Pass> CreateFuseGeluPass();            // fuse_gelu.cc
std::unique_ptr<Pass> CreateFuseRotaryPass();          // fuse_rotary.cc
std::unique_ptr<Pass> CreateFuseGluPass();             // fuse_glu.cc
std::unique_ptr<Pass> CreateFuseLinearPass();          // fuse_linear.cc (+ activation)
std::unique_ptr<Pass> CreateFuseSkipLayerNormPass();   // fuse_skip_layernorm.cc
std::unique_ptr<Pass> CreateFuseQkvPass();             // fuse_qkv.cc
std::unique_ptr<Pass> CreateFuseAttentionPass();       // fuse_attention.cc
std::unique_ptr<Pass> CreateFuseEmbedLayerNormPass();  // fuse_embed_layernorm.cc
std::unique_ptr<Pass> CreateFusePoolingPass();         // fuse_pooling.cc
// Target lowering.
std::unique_ptr<Pass> CreateLowerPrecisionPass();  // lower_precision.cc
std::unique_ptr<Pass> CreateGemmPrecisionPass();   // gemm_precision.cc
std::unique_ptr<Pass> CreateNumericSafetyPass();   // numeric_safety.cc

}  // namespace kiln
