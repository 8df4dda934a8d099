// The standard pipelines, as data. Each stage says why it is there and what it must come
// after. -O2 adds canonicalization and the fusions; -O3 is -O2 for now. A precision below
// fp32 appends its pass and clean-up at any level above -O0: lower-precision (cuda: the
// compute path in 16 bits; int8 after gemm-precision) or gemm-precision (cpu: the GEMM
// weights in bf16 or s8); the
// target changes nothing else but one stage (cpu: widen-fp16, since the cpu kernels are f32;
// fusions are target-neutral; kernel choice happens in lowering).
#include "absl/strings/str_cat.h"
#include "kiln/passes/pass_manager.h"

namespace kiln {

absl::StatusOr<Pipeline> StandardPipeline(int level, PlanTarget target, Precision precision) {
  if (level < 0 || level > 3)
    return absl::InvalidArgumentError(absl::StrCat("no optimization level -O", level));
  Pipeline p;
  p.name = absl::StrCat("O", level);
  auto add_precision = [&] {
    if (precision == Precision::kFp32) return;
    if (target == PlanTarget::kCpu) {
      p.stages.push_back({{"gemm-precision"},
                          1,
                          "cpu bf16/int8: the GEMM weights in bf16 or s8 per output channel, "
                          "activations and every other op fp32 (docs/precision.md)",
                          "last: after the fusions, whose kiln.Linear is what it lowers"});
    } else {
      if (precision == Precision::kFp16 || precision == Precision::kInt8)
        p.stages.push_back({{"numeric-safety"},
                            1,
                            "fp16 (and cuda int8's fp16 rest): ops whose values exceed fp16's "
                            "range on the calibration inputs stay fp32 (docs/precision.md)",
                            "after the fusions (it runs the fused graph), before "
                            "lower-precision (which obeys its verdicts)"});
      if (precision == Precision::kInt8)
        p.stages.push_back({{"gemm-precision"},
                            1,
                            "cuda int8: the GEMM weights in s8 per output channel (its "
                            "kiln.QuantLinear runs on cuBLASLt's int8 tensor cores)",
                            "after numeric-safety, whose verdict on a Linear it hands to its "
                            "QuantLinear; before lower-precision, which moves the rest to "
                            "fp16"});
      p.stages.push_back({{"lower-precision"},
                          1,
                          "fp16/bf16 (cuda int8: fp16 around the int8 GEMMs): the compute "
                          "path in 16 bits, weights converted once, casts only at the "
                          "boundaries (docs/precision.md)",
                          "last: after the fusions, whose ops (and their kernels' fp32 "
                          "statistics) are what it lowers"});
    }
    p.stages.push_back({{"shape-inference", "cse", "dce"},
                        4,
                        "type the casts and drop the f32 constants the conversion replaced",
                        "after the precision pass"});
  };
  if (level == 0) return p;  // import only
  p.stages = {
      {{"shape-inference"},
       1,
       "types and shapes (symbolic or specialized by --shape) for every value",
       "first: every other pass reads types and shapes"},
      {{"block-quant-weights", "dce"},
       1,
       "int4 weights of MatMul (QDQ) as kiln.BlockQuantLinear, kept 4-bit for its int4 GEMM "
       "(docs/precision.md)",
       "after shape-inference (x must be f32), before constant folding (which would widen the "
       "weights to f32)"},
      {{"constant-folding", "shape-inference", "reshape-simplification", "transpose-elimination",
        "cse", "dce"},
       8,
       "folding exposes constant shapes, shapes expose more folding and simplification",
       "after shape-inference; repeated until nothing changes (at most 8 rounds)"},
  };
  if (level == 1) {
    add_precision();
    return p;
  }
  if (target == PlanTarget::kCpu)
    p.stages.push_back({{"widen-fp16", "shape-inference", "constant-folding",
                         "reshape-simplification", "cse", "dce"},
                        8,
                        "cpu: an fp16 or bf16 export computes in f32 (the cpu kernels are "
                        "f32), its 16-bit inputs and outputs kept behind Casts",
                        "after the -O1 group, before the fusions (which then see f32 ops)"});
  p.stages.push_back({{"dequantize", "dce"},
                      1,
                      "quantized ONNX (QDQ, quantize_dynamic) back to float MatMuls on the "
                      "exactly dequantized weights, so the fusions see their patterns and "
                      "--precision decides the GEMMs (docs/precision.md)",
                      "after the -O1 group (folded weights, typed values), before "
                      "canonicalize and the fusions"});
  p.stages.push_back({{"canonicalize"},
                      1,
                      "one form per pattern (Div by constant -> Mul, commuted operands, "
                      "no-op Casts) so each fusion rule covers every exporter",
                      "after the -O1 group (needs folded constants and types), before fusions"});
  p.stages.push_back(
      {{"fuse-layernorm", "fuse-gelu", "fuse-rotary", "fuse-glu", "fuse-linear",
        "fuse-skip-layernorm", "fuse-qkv", "fuse-attention", "fuse-embed-layernorm",
        "fuse-pooling"},
       1,
       "turn the Transformer's chains of small ops into kiln's fused ops",
       "LayerNorm and Gelu before Linear (which absorbs a following Gelu); "
       "rotary before attention (whose matcher sees it between the head split "
       "and Q·Kᵀ); "
       "Gelu before glu (GeGLU's act), glu before Linear (which would take the gate's "
       "Gelu); "
       "Linear before SkipLayerNorm and QKV; QKV before attention; "
       "embeddings and pooling last"});
  p.stages.push_back({{"split-to-slices"},
                      1,
                      "the Splits the fusions left become Slices, which every target has a "
                      "kernel for",
                      "after the fusions, whose matchers look for the Split itself"});
  p.stages.push_back({{"f32-operands"},
                      1,
                      "an fp16 model's own 16-bit attention masks read through a Cast to "
                      "f32, the only mask the attention kernels take",
                      "after the fusions, whose ops list their f32-only operands"});
  p.stages.push_back({{"shape-inference", "constant-folding", "cse", "dce"},
                      4,
                      "type the fused ops and remove what the fusions left dead",
                      "after the fusions"});
  add_precision();
  return p;
}

}  // namespace kiln
