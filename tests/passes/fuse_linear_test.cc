// Tests for fuse-linear: MatMul + bias in both operand orders, MatMul alone, MatMul of a
// shared transposed constant, Gemm, and each absorbed activation, as Before/Expected IR
// (run twice by ExpectRewrite) and numerically on the reference executor (1e-5: the
// kiln.Linear reference accumulates in double, MatMul + Add in f32 over K <= 8 terms);
// the near-misses with their reasons; the graphs left alone.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/text.h"
#include "kiln/passes/fusion_report.h"
#include "kiln/passes/pass.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-linear";

// The one linear near-miss of `text`, naming `nodes`.
void ExpectMiss(const std::string& text, const std::string& reason,
                const std::vector<std::string>& nodes) {
  EXPECT_EQ(testing::ExpectOneMiss(kPass, text, "linear", reason).nodes, nodes);
}

// torch.onnx writes Add(bias, MatMul(x, W)); W [4,3].
constexpr char kMatMulBias[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,5,4] "x"
  %1 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %2 = MatMul(%0, %1) : f32[2,5,3] @ "dense/MatMul"
  %3 = Constant() {value=tensor<f32[3]>[0.1, -0.2, 0.3]} : f32[3] "b"
  %4 = Add(%3, %2) : f32[2,5,3] "y" @ "dense/Add"
  return "y": %4
})";

TEST(FuseLinear, MatMulPlusBiasInEitherOrder) {
  const std::string want = R"(graph g opset=14 {
  %0 = Input() : f32[2,5,4] "x"
  %1 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %2 = Constant() {value=tensor<f32[3]>[0.1, -0.2, 0.3]} : f32[3] "b"
  %3 = kiln.Linear(%0, %1, %2) : f32[2,5,3] "y" @ "dense/MatMul", "dense/Add"
  return "y": %3
})";
  ExpectRewrite(kPass, kMatMulBias, want);
  ExpectNumericallyEquivalent(kPass, kMatMulBias);
  std::string swapped = kMatMulBias;
  swapped.replace(swapped.find("Add(%3, %2)"), 11, "Add(%2, %3)");
  ExpectRewrite(kPass, swapped, want);
  const testing::FusionRun r = RunWithReport({kPass}, kMatMulBias);
  EXPECT_EQ(r.report.kinds().at("linear").fused, 1);
  EXPECT_EQ(r.counters, (PassCounters{{"Linear from MatMul+Add", 1}}));
}

// No bias; the following Add of a non-constant (a residual) stays. Bias [1,1,3] on a
// second projection is reshaped to [3].
constexpr char kResidualAndBroadcastBias[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,5,4] "x"
  %1 = Input() : f32[2,5,3] "r"
  %2 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %3 = MatMul(%0, %2) : f32[2,5,3] @ "proj"
  %4 = Add(%3, %1) : f32[2,5,3] "h" @ "residual"
  %5 = Constant() {value=tensor<f32[3,3]>[1, 0, 0, 0, 1, 0, 0.5, 0.5, 1]} : f32[3,3] "W2"
  %6 = MatMul(%4, %5) : f32[2,5,3] @ "proj2"
  %7 = Constant() {value=tensor<f32[1,1,3]>[1, 2, 3]} : f32[1,1,3] "b2"
  %8 = Add(%6, %7) : f32[2,5,3] "y" @ "bias2"
  return "y": %8
})";

TEST(FuseLinear, NoBiasBeforeResidualAndBroadcastBias) {
  ExpectRewrite(kPass, kResidualAndBroadcastBias, R"(graph g opset=14 {
  %0 = Input() : f32[2,5,4] "x"
  %1 = Input() : f32[2,5,3] "r"
  %2 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %3 = kiln.Linear(%0, %2) : f32[2,5,3] @ "proj"
  %4 = Add(%3, %1) : f32[2,5,3] "h" @ "residual"
  %5 = Constant() {value=tensor<f32[3,3]>[1, 0, 0, 0, 1, 0, 0.5, 0.5, 1]} : f32[3,3] "W2"
  %6 = Constant() {value=tensor<f32[3]>[1, 2, 3]} : f32[3] "b2_vector"
  %7 = kiln.Linear(%4, %5, %6) : f32[2,5,3] "y" @ "proj2", "bias2"
  return "y": %7
})");
  ExpectNumericallyEquivalent(kPass, kResidualAndBroadcastBias);
}

// Tied embeddings: the table feeds a Gather and, transposed, the LM head.
constexpr char kTiedEmbedding[] = R"(graph g opset=14 {
  %0 = Input() : i64[2,3] "ids"
  %1 = Constant() {value=tensor<f32[5,2]>[1, 0, 0, 1, 0.5, 0.5, -1, 2, 0.25, -0.75]} : f32[5,2] "emb"
  %2 = Gather(%1, %0) {axis=0} : f32[2,3,2] "h" @ "gather"
  %3 = Transpose(%1) {perm=[1, 0]} : f32[2,5] @ "transpose"
  %4 = MatMul(%2, %3) : f32[2,3,5] "logits" @ "lm_head"
  return "logits": %4
})";

TEST(FuseLinear, MatMulOfSharedTransposedConstantSetsTransW) {
  ExpectRewrite(kPass, kTiedEmbedding, R"(graph g opset=14 {
  %0 = Input() : i64[2,3] "ids"
  %1 = Constant() {value=tensor<f32[5,2]>[1, 0, 0, 1, 0.5, 0.5, -1, 2, 0.25, -0.75]} : f32[5,2] "emb"
  %2 = Gather(%1, %0) {axis=0} : f32[2,3,2] "h" @ "gather"
  %3 = kiln.Linear(%2, %1) {trans_w=1} : f32[2,3,5] "logits" @ "transpose", "lm_head"
  return "logits": %3
})");
  ExpectNumericallyEquivalent(kPass, kTiedEmbedding);
}

// Gemm(A, B, C){transB=1, beta=2}: bias becomes 2·C; followed by Tanh (BERT pooler).
constexpr char kGemmTanh[] = R"(graph g opset=14 {
  %0 = Input() : f32[3,4] "a"
  %1 = Constant() {value=tensor<f32[2,4]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1]} : f32[2,4] "B"
  %2 = Constant() {value=tensor<f32[2]>[0.1, -0.3]} : f32[2] "C"
  %3 = Gemm(%0, %1, %2) {beta=2.0, transB=1} : f32[3,2] @ "pooler/Gemm"
  %4 = Tanh(%3) : f32[3,2] "pooled" @ "pooler/Tanh"
  return "pooled": %4
})";

TEST(FuseLinear, GemmWithBetaAndTanh) {
  ExpectRewrite(kPass, kGemmTanh, R"(graph g opset=14 {
  %0 = Input() : f32[3,4] "a"
  %1 = Constant() {value=tensor<f32[2,4]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1]} : f32[2,4] "B"
  %2 = Constant() {value=tensor<f32[2]>[0.2, -0.6]} : f32[2] "C_vector"
  %3 = kiln.Linear(%0, %1, %2) {activation="tanh", trans_w=1} : f32[3,2] "pooled" @ "pooler/Gemm", "pooler/Tanh"
  return "pooled": %3
})");
  ExpectNumericallyEquivalent(kPass, kGemmTanh);
  const testing::FusionRun r = RunWithReport({kPass}, kGemmTanh);
  EXPECT_EQ(r.counters, (PassCounters{{"Linear from Gemm", 1}, {"activation tanh", 1}}));
}

// BiasGelu: MatMul + bias + Gelu (erf) and MatMul + Gelu(tanh) and + Relu.
constexpr char kActivations[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[4,4]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1, 0, 1, 0, -1]} : f32[4,4] "W"
  %2 = MatMul(%0, %1) : f32[2,4] @ "mm1"
  %3 = Constant() {value=tensor<f32[4]>[0.1, 0.2, 0.3, 0.4]} : f32[4] "b"
  %4 = Add(%2, %3) : f32[2,4] @ "add1"
  %5 = Gelu(%4) {approximate="none"} : f32[2,4] "g1" @ "gelu1"
  %6 = MatMul(%5, %1) : f32[2,4] @ "mm2"
  %7 = Gelu(%6) {approximate="tanh"} : f32[2,4] "g2" @ "gelu2"
  %8 = MatMul(%7, %1) : f32[2,4] @ "mm3"
  %9 = Relu(%8) : f32[2,4] "y" @ "relu"
  return "y": %9
})";

TEST(FuseLinear, AbsorbsGeluGeluTanhAndRelu) {
  ExpectRewrite(kPass, kActivations, R"(graph g opset=14 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[4,4]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1, 0, 1, 0, -1]} : f32[4,4] "W"
  %2 = Constant() {value=tensor<f32[4]>[0.1, 0.2, 0.3, 0.4]} : f32[4] "b"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu"} : f32[2,4] "g1" @ "mm1", "add1", "gelu1"
  %4 = kiln.Linear(%3, %1) {activation="gelu_tanh"} : f32[2,4] "g2" @ "mm2", "gelu2"
  %5 = kiln.Linear(%4, %1) {activation="relu"} : f32[2,4] "y" @ "mm3", "relu"
  return "y": %5
})");
  ExpectNumericallyEquivalent(kPass, kActivations);
}

TEST(FuseLinear, ActivationNotAbsorbedWhenLinearOutputIsShared) {
  // The projection's output is also a graph output: the Gelu stays separate.
  ExpectRewrite(kPass, R"(graph g opset=14 {
  %0 = Input() : f32[2,2] "x"
  %1 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2] "W"
  %2 = MatMul(%0, %1) : f32[2,2] "p" @ "mm"
  %3 = Gelu(%2) : f32[2,2] "y" @ "gelu"
  return "y": %3, "p": %2
})",
                R"(graph g opset=14 {
  %0 = Input() : f32[2,2] "x"
  %1 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2] "W"
  %2 = kiln.Linear(%0, %1) : f32[2,2] "p" @ "mm"
  %3 = Gelu(%2) : f32[2,2] "y" @ "gelu"
  return "y": %3, "p": %2
})");
}

TEST(FuseLinear, NearMissBiasShape) {
  ExpectMiss(R"(graph g opset=14 {
  %0 = Input() : f32[2,5,4] "x"
  %1 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %2 = MatMul(%0, %1) : f32[2,5,3] @ "dense/MatMul"
  %3 = Constant() {value=tensor<f32[5,1]>[1, 2, 3, 4, 5]} : f32[5,1] "b"
  %4 = Add(%2, %3) : f32[2,5,3] "y" @ "dense/Add"
  return "y": %4
})",
             "bias 'b' has shape [5,1]; only [N] (or [1,..,1,N]) with N = 3 fuses",
             {"dense/Add", "dense/MatMul"});
}

TEST(FuseLinear, NearMissWeightNotConstantOnlyWithBias) {
  ExpectMiss(R"(graph g opset=14 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[4,3] "w_in"
  %2 = MatMul(%0, %1) : f32[2,3] @ "mm"
  %3 = Constant() {value=tensor<f32[3]>[1, 2, 3]} : f32[3] "b"
  %4 = Add(%2, %3) : f32[2,3] "y" @ "add"
  return "y": %4
})",
             "weight 'w_in' is not a constant", {"add", "mm"});
  // Without a bias it is an attention-style MatMul of two activations: not reported.
  const std::string scores = R"(graph g opset=14 {
  %0 = Input() : f32[2,4,4] "q"
  %1 = Input() : f32[2,4,4] "k"
  %2 = MatMul(%0, %1) : f32[2,4,4] "s" @ "scores"
  %3 = Input() : f32[2,4,4] "m"
  %4 = Add(%2, %3) : f32[2,4,4] "y" @ "mask"
  return "y": %4
})";
  ExpectNoChange(kPass, scores);
  EXPECT_EQ(RunWithReport({kPass}, scores).report.total_missed(), 0);
}

TEST(FuseLinear, NearMissGemm) {
  ExpectMiss(R"(graph g opset=14 {
  %0 = Input() : f32[4,3] "a"
  %1 = Constant() {value=tensor<f32[4,2]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[4,2] "B"
  %2 = Gemm(%0, %1) {transA=1} : f32[3,2] "y" @ "gemm"
  return "y": %2
})",
             "Gemm 'gemm' has transA=1; kiln.Linear does not transpose X", {"gemm"});
  ExpectMiss(R"(graph g opset=14 {
  %0 = Input() : f32[3,4] "a"
  %1 = Constant() {value=tensor<f32[4,2]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[4,2] "B"
  %2 = Constant() {value=tensor<f32[3,2]>[1, 2, 3, 4, 5, 6]} : f32[3,2] "C"
  %3 = Gemm(%0, %1, %2) : f32[3,2] "y" @ "gemm"
  return "y": %3
})",
             "Gemm 'gemm' bias C has shape [3,2]; only [N], [1,N] or a scalar with N = 2 fuses",
             {"gemm"});
}

// ---------------------------------------------------------------------------------------
// GPT-2's Conv1D: Reshape(x, [-1, K]) -> Gemm -> Reshape([B, S, N]) around every
// projection; kiln.Linear maps [..., K] rows itself, so both Reshapes go and the Gelu
// after the second one is absorbed.
constexpr char kConv1D[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[-1, 4]} : i64[2] "flat"
  %2 = Reshape(%0, %1) : f32[6,4] @ "c_fc/Reshape"
  %3 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %4 = Constant() {value=tensor<f32[3]>[0.1, -0.2, 0.3]} : f32[3] "b"
  %5 = Gemm(%2, %3, %4) : f32[6,3] @ "c_fc/Gemm"
  %6 = Constant() {value=tensor<i64[3]>[2, 3, 3]} : i64[3] "unflat"
  %7 = Reshape(%5, %6) : f32[2,3,3] "h" @ "c_fc/Reshape_1"
  %8 = Gelu(%7) {approximate="tanh"} : f32[2,3,3] "y" @ "act"
  return "y": %8
})";

TEST(FuseLinear, Conv1DReshapesRemovedAndGeluAbsorbed) {
  ExpectRewrite(kPass, kConv1D, R"(graph g opset=14 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %2 = Constant() {value=tensor<f32[3]>[0.1, -0.2, 0.3]} : f32[3] "b"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu_tanh"} : f32[2,3,3] "y" @ "c_fc/Gemm", "c_fc/Reshape", "c_fc/Reshape_1", "act"
  return "y": %3
})");
  ExpectNumericallyEquivalent(kPass, kConv1D);
  const testing::FusionRun r = RunWithReport({kPass}, kConv1D);
  EXPECT_EQ(r.counters, (PassCounters{{"Linear from Gemm", 1},
                                      {"reshapes around Linear removed", 1},
                                      {"activation gelu_tanh", 1}}));
}

// Symbolic dims: the types say the second Reshape restores [batch, seq]; its shape input
// is computed (here a graph input), which goes dead with it.
TEST(FuseLinear, Conv1DReshapesRemovedWithSymbolicDims) {
  ExpectRewrite(kPass, R"(graph g opset=14 {
  %0 = Input() : f32[batch,seq,4] "x"
  %1 = Input() : i64[3] "unflat"
  %2 = Constant() {value=tensor<i64[2]>[-1, 4]} : i64[2] "flat"
  %3 = Reshape(%0, %2) : f32["batch*seq",4] @ "r1"
  %4 = Constant() {value=tensor<f32[4,2]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1]} : f32[4,2] "W"
  %5 = kiln.Linear(%3, %4) : f32["batch*seq",2] @ "lin"
  %6 = Reshape(%5, %1) : f32[batch,seq,2] "y" @ "r2"
  return "y": %6
})",
                R"(graph g opset=14 {
  %0 = Input() : f32[batch,seq,4] "x"
  %1 = Input() : i64[3] "unflat"
  %2 = Constant() {value=tensor<f32[4,2]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1]} : f32[4,2] "W"
  %3 = kiln.Linear(%0, %2) : f32[batch,seq,2] "y" @ "lin", "r1", "r2"
  return "y": %3
})");
}

// Attention's merged heads: [B, S, heads, d] -> [B*S, heads*d] -> Linear -> [B, S, N].
// The first Reshape becomes Reshape(x, [0, 0, K]) (fuse-attention absorbs it later).
constexpr char kMergedHeads[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,2,2] "ctx"
  %1 = Constant() {value=tensor<i64[2]>[6, 4]} : i64[2] "flat"
  %2 = Reshape(%0, %1) : f32[6,4] @ "merge"
  %3 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %4 = Constant() {value=tensor<f32[3]>[0.1, -0.2, 0.3]} : f32[3] "b"
  %5 = Gemm(%2, %3, %4) : f32[6,3] @ "c_proj/Gemm"
  %6 = Constant() {value=tensor<i64[3]>[2, 3, 3]} : i64[3] "unflat"
  %7 = Reshape(%5, %6) : f32[2,3,3] "y" @ "c_proj/Reshape_1"
  return "y": %7
})";

TEST(FuseLinear, MergedHeadsReshapeKeptAsLeadingDimsPlusK) {
  ExpectRewrite(kPass, kMergedHeads, R"(graph g opset=14 {
  %0 = Input() : f32[2,3,2,2] "ctx"
  %1 = Constant() {value=tensor<f32[4,3]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1, 1.5, 0.75, -2, 0.1]} : f32[4,3] "W"
  %2 = Constant() {value=tensor<f32[3]>[0.1, -0.2, 0.3]} : f32[3] "b"
  %3 = Constant() {value=tensor<i64[3]>[0, 0, 4]} : i64[3]
  %4 = Reshape(%0, %3) : f32[2,3,4] @ "merge"
  %5 = kiln.Linear(%4, %1, %2) : f32[2,3,3] "y" @ "c_proj/Gemm", "merge", "c_proj/Reshape_1"
  return "y": %5
})");
  ExpectNumericallyEquivalent(kPass, kMergedHeads);
}

TEST(FuseLinear, ReshapesStayWhenLeadingDimsChangeOrLinearIsShared) {
  // [2,3,4] -> [6,4] -> Linear -> [3,2,3]: not x's leading dims.
  const std::string regrouped = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[6, 4]} : i64[2] "flat"
  %2 = Reshape(%0, %1) : f32[6,4] @ "r1"
  %3 = Constant() {value=tensor<f32[4,2]>[1, 0.5, -1, 2, 0.25, 0, -0.5, 1]} : f32[4,2] "W"
  %4 = kiln.Linear(%2, %3) : f32[6,2] @ "lin"
  %5 = Constant() {value=tensor<i64[3]>[3, 2, 2]} : i64[3] "unflat"
  %6 = Reshape(%4, %5) : f32[3,2,2] "y" @ "r2"
  return "y": %6
})";
  ExpectNoChange(kPass, regrouped);
  // The Linear's 2-D output is also a graph output.
  std::string shared = regrouped;
  shared.replace(shared.find("[3, 2, 2]} : i64[3]"), 9, "[2, 3, 2]");
  shared.replace(shared.find("f32[3,2,2]"), 10, "f32[2,3,2]");
  shared.replace(shared.find("return \"y\": %6"), 14, "return \"y\": %6, \"flat_y\": %4");
  ExpectNoChange(kPass, shared);
}

TEST(FuseLinear, DoesNothingWithoutConstantWeights) {
  ExpectNoChange(kPass, R"(graph g opset=14 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[4,3] "w"
  %2 = MatMul(%0, %1) : f32[2,3] "y"
  %3 = Relu(%2) : f32[2,3] "z"
  return "z": %3
})");
}

// An int4 projection (kiln.BlockQuantLinear, from MatMulNBits) takes the following constant
// bias Add ([1, N] here) into its bias input as [N], and then a Gelu into its epilogue.
constexpr char kBlockQuantBiasGelu[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,16] "x"
  %1 = Constant() {value=tensor<u4[3,16]>[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 8, 8, 8, 8, 0, 15, 0, 15, 3, 5, 7, 9, 11, 13, 2, 4]} : u4[3,16] "w"
  %2 = Constant() {value=tensor<f32[3,1]>[0.1, 0.05, 0.2]} : f32[3,1] "s"
  %3 = kiln.BlockQuantLinear(%0, %1, %2) {block_size=16} : f32[2,3,3] @ "proj"
  %4 = Constant() {value=tensor<f32[1,3]>[0.5, -0.25, 1]} : f32[1,3] "b"
  %5 = Add(%3, %4) : f32[2,3,3] @ "bias"
  %6 = Gelu(%5) : f32[2,3,3] "y" @ "act"
  return "y": %6
})";

TEST(FuseLinear, BlockQuantLinearTakesBiasAndActivation) {
  ExpectNumericallyEquivalent(kPass, kBlockQuantBiasGelu);
  const testing::FusionRun r = RunWithReport({kPass}, kBlockQuantBiasGelu);
  const std::string text = PrintGraph(*r.graph);
  EXPECT_NE(text.find("kiln.BlockQuantLinear(%0, %1, %2, _, %"), std::string::npos) << text;
  EXPECT_NE(text.find("{activation=\"gelu\", block_size=16} : f32[2,3,3] \"y\""), std::string::npos)
      << text;
  EXPECT_EQ(text.find("Add("), std::string::npos) << text;
  EXPECT_EQ(r.counters.at("bias into BlockQuantLinear"), 1);
}

}  // namespace
}  // namespace kiln
