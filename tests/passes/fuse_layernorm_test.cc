// Tests for fuse-layernorm: the exporter variants of the decomposed LayerNorm (Pow or
// Mul-self variance, Div or Mul-by-Reciprocal normalization, gamma/beta present, absent
// or broadcast-shaped) and RMSNorm, each as Before/Expected IR (run twice by
// ExpectRewrite) and numerically on the reference executor; the near-misses with their
// reported reasons; and the graphs it must leave alone.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/text.h"
#include "kiln/passes/fusion_report.h"
#include "kiln/passes/pass.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Edit;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-layernorm";

// BERT as torch.onnx (opset 14) writes it: Pow 2, Div, Mul gamma, Add beta.
constexpr char kBertLayerNorm[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[2,3,8] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) : f32[2,3,1] @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[]>[1e-12]} : f32[] "eps"
  %8 = Add(%6, %7) : f32[2,3,1] @ "ln/Add"
  %9 = Sqrt(%8) : f32[2,3,1] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[2,3,8] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[2,3,8] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[2,3,8] "y" @ "ln/Add_1"
  return "y": %14
})";

TEST(FuseLayerNorm, BertOpset14Form) {
  ExpectRewrite(kPass, kBertLayerNorm, R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %2 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %3 = LayerNormalization(%0, %1, %2) {axis=-1, epsilon=1e-12} : f32[2,3,8] "y" @ "ln/ReduceMean", "ln/Sub", "ln/Pow", "ln/ReduceMean_1", "ln/Add", "ln/Sqrt", "ln/Div", "ln/Mul", "ln/Add_1"
  return "y": %3
})");
  ExpectNumericallyEquivalent(kPass, kBertLayerNorm);
  const testing::FusionRun run = RunWithReport({kPass}, kBertLayerNorm);
  EXPECT_TRUE(run.changed);
  const FusionReport& r = run.report;
  EXPECT_EQ(r.kinds().at("layernorm").fused, 1);
  EXPECT_TRUE(r.kinds().at("layernorm").missed.empty());
}

// Mul-self variance, Reciprocal/Mul normalization (canonicalized Pow(·, -0.5)), gamma as
// [1,1,8] first operand, no beta, axis written as 2.
constexpr char kReciprocalForm[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[2]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "mean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "sub"
  %4 = Mul(%3, %3) : f32[2,3,8] @ "sq"
  %5 = ReduceMean(%4, %1) : f32[2,3,1] @ "var"
  %6 = Constant() {value=tensor<f32[1]>[1e-05]} : f32[1] "eps"
  %7 = Add(%6, %5) : f32[2,3,1] @ "add_eps"
  %8 = Sqrt(%7) : f32[2,3,1] @ "sqrt"
  %9 = Reciprocal(%8) : f32[2,3,1] @ "rsqrt"
  %10 = Mul(%9, %3) : f32[2,3,8] @ "norm"
  %11 = Constant() {value=tensor<f32[1,1,8]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[1,1,8] "gamma"
  %12 = Mul(%11, %10) : f32[2,3,8] "y" @ "scale"
  return "y": %12
})";

TEST(FuseLayerNorm, ReciprocalFormWithBroadcastGammaAndNoBeta) {
  ExpectRewrite(kPass, kReciprocalForm, R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[8] "gamma_vector"
  %2 = LayerNormalization(%0, %1) {axis=-1, epsilon=1e-05} : f32[2,3,8] "y" @ "mean", "sub", "sq", "var", "add_eps", "sqrt", "rsqrt", "norm", "scale"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kReciprocalForm);
}

// No gamma, no beta: a ones gamma is made; an Add of a non-[H] value after it stays.
constexpr char kNoAffine[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "r"
  %2 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %3 = ReduceMean(%0, %2) : f32[2,1] @ "mean"
  %4 = Sub(%0, %3) : f32[2,4] @ "sub"
  %5 = Constant() {value=tensor<f32[]>[2]} : f32[]
  %6 = Pow(%4, %5) : f32[2,4] @ "pow"
  %7 = ReduceMean(%6, %2) : f32[2,1] @ "var"
  %8 = Constant() {value=tensor<f32[]>[0.001]} : f32[]
  %9 = Add(%7, %8) : f32[2,1] @ "add"
  %10 = Sqrt(%9) : f32[2,1] @ "sqrt"
  %11 = Div(%4, %10) : f32[2,4] "n" @ "div"
  %12 = Add(%11, %1) : f32[2,4] "y" @ "residual"
  return "y": %12
})";

TEST(FuseLayerNorm, WithoutGammaGetsOnesAndLeavesResidualAdd) {
  ExpectRewrite(kPass, kNoAffine, R"(graph g opset=14 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "r"
  %2 = Constant() {value=tensor<f32[4]>[1, 1, 1, 1]} : f32[4] "n_gamma"
  %3 = LayerNormalization(%0, %2) {axis=-1, epsilon=0.001} : f32[2,4] "n" @ "mean", "sub", "pow", "var", "add", "sqrt", "div"
  %4 = Add(%3, %1) : f32[2,4] "y" @ "residual"
  return "y": %4
})");
  ExpectNumericallyEquivalent(kPass, kNoAffine);
}

// LLaMA/T5-style RMSNorm: Pow 2 -> ReduceMean -> Add eps -> Sqrt -> Reciprocal -> Mul x
// -> Mul gamma (gamma first, as HF writes weight * hidden).
constexpr char kRmsNorm[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<f32[]>[2]} : f32[]
  %2 = Pow(%0, %1) : f32[2,3,8] @ "pow"
  %3 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %4 = ReduceMean(%2, %3) : f32[2,3,1] @ "mean"
  %5 = Constant() {value=tensor<f32[]>[1e-06]} : f32[]
  %6 = Add(%4, %5) : f32[2,3,1] @ "add"
  %7 = Sqrt(%6) : f32[2,3,1] @ "sqrt"
  %8 = Reciprocal(%7) : f32[2,3,1] @ "rsqrt"
  %9 = Mul(%0, %8) : f32[2,3,8] @ "norm"
  %10 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[8] "w"
  %11 = Mul(%10, %9) : f32[2,3,8] "y" @ "scale"
  %12 = Relu(%0) : f32[2,3,8] "z"
  return "y": %11, "z": %12
})";

TEST(FuseLayerNorm, RmsNorm) {
  ExpectRewrite(kPass, kRmsNorm, R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[8] "w"
  %2 = kiln.RMSNorm(%0, %1) {epsilon=1e-06} : f32[2,3,8] "y" @ "pow", "mean", "add", "sqrt", "rsqrt", "norm", "scale"
  %3 = Relu(%0) : f32[2,3,8] "z"
  return "y": %2, "z": %3
})");
  ExpectNumericallyEquivalent(kPass, kRmsNorm);
  const FusionReport r = RunWithReport({kPass}, kRmsNorm).report;
  EXPECT_EQ(r.kinds().at("rmsnorm").fused, 1);
  EXPECT_EQ(r.kinds().count("layernorm"), 0u);
}

// RMSNorm with Div and Mul-self square.
TEST(FuseLayerNorm, RmsNormDivForm) {
  const std::string before = R"(graph g opset=14 {
  %0 = Input() : f32[4,6] "x"
  %1 = Mul(%0, %0) : f32[4,6] @ "sq"
  %2 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %3 = ReduceMean(%1, %2) : f32[4,1] @ "mean"
  %4 = Constant() {value=tensor<f32[]>[1e-05]} : f32[]
  %5 = Add(%3, %4) : f32[4,1] @ "add"
  %6 = Sqrt(%5) : f32[4,1] @ "sqrt"
  %7 = Div(%0, %6) : f32[4,6] @ "div"
  %8 = Constant() {value=tensor<f32[6]>[1, -1, 2, -2, 3, -3]} : f32[6] "w"
  %9 = Mul(%7, %8) : f32[4,6] "y" @ "scale"
  return "y": %9
})";
  ExpectRewrite(kPass, before, R"(graph g opset=14 {
  %0 = Input() : f32[4,6] "x"
  %1 = Constant() {value=tensor<f32[6]>[1, -1, 2, -2, 3, -3]} : f32[6] "w"
  %2 = kiln.RMSNorm(%0, %1) {epsilon=1e-05} : f32[4,6] "y" @ "sq", "mean", "add", "sqrt", "div", "scale"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, before);
}

// The one `kind` near-miss of `text`, which names the pattern's ONNX nodes.
void ExpectMiss(const std::string& text, const std::string& kind, const std::string& reason) {
  const FusionMiss miss = testing::ExpectOneMiss(kPass, text, kind, reason);
  EXPECT_NE(std::find(miss.nodes.begin(), miss.nodes.end(), "ln/Sqrt"), miss.nodes.end());
}

// Pow(d, 2) with the 2 as f32[1,1,1,1] and the variance over axis 2: the original's Pow
// is [1,2,3,8], so axis 2 is S (not H) and the result is [1,2,3,8]. Fusing would
// normalize over H with a [2,3,8] result. A miss; the graph is left alone.
constexpr char kRank4Exponent[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[1,1,1,1]>[2]} : f32[1,1,1,1] "two"
  %5 = Pow(%3, %4) : f32[1,2,3,8] @ "ln/Pow"
  %6 = Constant() {value=tensor<i64[1]>[2]} : i64[1] "axes2"
  %7 = ReduceMean(%5, %6) : f32[1,2,1,8] @ "ln/ReduceMean_1"
  %8 = Constant() {value=tensor<f32[]>[1e-05]} : f32[] "eps"
  %9 = Add(%7, %8) : f32[1,2,1,8] @ "ln/Add"
  %10 = Sqrt(%9) : f32[1,2,1,8] @ "ln/Sqrt"
  %11 = Div(%3, %10) : f32[1,2,3,8] "y" @ "ln/Div"
  return "y": %11
})";

TEST(FuseLayerNorm, NearMissExponentOfHigherRank) {
  ExpectMiss(kRank4Exponent, "layernorm",
             "the exponent constant 'two' has shape [1,1,1,1], more dims than its rank-3 "
             "operand: it broadcasts the result to rank 4");
  // With the exponent as f32[1,1,1] (rank <= x's) axis 2 is x's last: fused, over H.
  std::string fits = Edit(kRank4Exponent, "tensor<f32[1,1,1,1]>[2]} : f32[1,1,1,1]",
                          "tensor<f32[1,1,1]>[2]} : f32[1,1,1]");
  fits = Edit(Edit(Edit(Edit(fits, "f32[1,2,3,8] @", "f32[2,3,8] @"), "f32[1,2,1,8] @ \"ln/Re",
                        "f32[2,3,1] @ \"ln/Re"),
                   "f32[1,2,1,8] @ \"ln/Add", "f32[2,3,1] @ \"ln/Add"),
              "f32[1,2,1,8] @ \"ln/Sqrt", "f32[2,3,1] @ \"ln/Sqrt");
  fits = Edit(fits, "f32[1,2,3,8] \"y\"", "f32[2,3,8] \"y\"");
  ExpectRewrite(kPass, fits, R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<f32[8]>[1, 1, 1, 1, 1, 1, 1, 1]} : f32[8] "y_gamma"
  %2 = LayerNormalization(%0, %1) {axis=-1, epsilon=1e-05} : f32[2,3,8] "y" @ "ln/ReduceMean", "ln/Sub", "ln/Pow", "ln/ReduceMean_1", "ln/Add", "ln/Sqrt", "ln/Div"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, fits);
}

// kBertLayerNorm on x of unknown rank with a rank-1 epsilon, which might broadcast.
constexpr char kEpsilonOnUnknownRank[] = R"(graph g opset=14 {
  %0 = Input() : f32[*] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[*] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[*] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[*] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) : f32[*] @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[1]>[1e-12]} : f32[1] "eps"
  %8 = Add(%6, %7) : f32[*] @ "ln/Add"
  %9 = Sqrt(%8) : f32[*] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[*] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[*] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[*] "y" @ "ln/Add_1"
  return "y": %14
})";

TEST(FuseLayerNorm, NearMissEpsilonOnUnknownRank) {
  ExpectMiss(kEpsilonOnUnknownRank, "layernorm",
             "epsilon constant 'eps' has shape [1] and its operand has unknown rank; it may "
             "broadcast the result to a higher rank");
}

// kBertLayerNorm over axis 1.
constexpr char kNonLastAxis[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,1,8] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[2,3,8] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) : f32[2,1,8] @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[]>[1e-12]} : f32[] "eps"
  %8 = Add(%6, %7) : f32[2,1,8] @ "ln/Add"
  %9 = Sqrt(%8) : f32[2,3,1] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[2,3,8] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[2,3,8] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[2,3,8] "y" @ "ln/Add_1"
  return "y": %14
})";

TEST(FuseLayerNorm, NearMissNonLastAxis) {
  ExpectMiss(kNonLastAxis, "layernorm",
             "normalizes over axis 1 of a rank-3 input; only the last axis (-1) is fused");
}

// kBertLayerNorm with the variance reduced with keepdims=0.
constexpr char kKeepdimsZero[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[2,3,8] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) {keepdims=0} : f32[2,3] @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[]>[1e-12]} : f32[] "eps"
  %8 = Add(%6, %7) : f32[2,3,1] @ "ln/Add"
  %9 = Sqrt(%8) : f32[2,3,1] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[2,3,8] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[2,3,8] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[2,3,8] "y" @ "ln/Add_1"
  return "y": %14
})";

TEST(FuseLayerNorm, NearMissKeepdimsZero) {
  ExpectMiss(
      kKeepdimsZero, "layernorm",
      "ReduceMean 'ln/ReduceMean_1' has keepdims=0; the normalization broadcasts a kept axis");
}

// kBertLayerNorm with epsilon a graph input.
constexpr char kEpsilonInput[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %99 = Input() : f32[] "eps_in"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[2,3,8] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) : f32[2,3,1] @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[]>[1e-12]} : f32[] "eps"
  %8 = Add(%6, %99) : f32[2,3,1] @ "ln/Add"
  %9 = Sqrt(%8) : f32[2,3,1] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[2,3,8] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[2,3,8] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[2,3,8] "y" @ "ln/Add_1"
  return "y": %14
})";

TEST(FuseLayerNorm, NearMissEpsilonNotAConstant) {
  ExpectMiss(kEpsilonInput, "layernorm", "epsilon 'eps_in' is not a scalar constant");
}

// kBertLayerNorm with the centred value x - mean also a graph output.
constexpr char kCentredIsOutput[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] "centred" @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[2,3,8] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) : f32[2,3,1] @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[]>[1e-12]} : f32[] "eps"
  %8 = Add(%6, %7) : f32[2,3,1] @ "ln/Add"
  %9 = Sqrt(%8) : f32[2,3,1] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[2,3,8] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[2,3,8] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[2,3,8] "y" @ "ln/Add_1"
  return "y": %14, "c": %3
})";

// kBertLayerNorm with the variance also read by another node.
constexpr char kVarianceReadElsewhere[] = R"(graph g opset=14 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
  %2 = ReduceMean(%0, %1) : f32[2,3,1] @ "ln/ReduceMean"
  %3 = Sub(%0, %2) : f32[2,3,8] @ "ln/Sub"
  %4 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %5 = Pow(%3, %4) : f32[2,3,8] @ "ln/Pow"
  %6 = ReduceMean(%5, %1) : f32[2,3,1] "var" @ "ln/ReduceMean_1"
  %7 = Constant() {value=tensor<f32[]>[1e-12]} : f32[] "eps"
  %8 = Add(%6, %7) : f32[2,3,1] @ "ln/Add"
  %9 = Sqrt(%8) : f32[2,3,1] @ "ln/Sqrt"
  %10 = Div(%3, %9) : f32[2,3,8] @ "ln/Div"
  %11 = Constant() {value=tensor<f32[8]>[1, 2, 3, 4, 0.5, 0.25, -1, 1.5]} : f32[8] "gamma"
  %12 = Mul(%10, %11) : f32[2,3,8] @ "ln/Mul"
  %13 = Constant() {value=tensor<f32[8]>[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]} : f32[8] "beta"
  %14 = Add(%12, %13) : f32[2,3,8] "y" @ "ln/Add_1"
  %20 = Relu(%6) : f32[2,3,1] "v"
  return "y": %14, "v": %20
})";

TEST(FuseLayerNorm, NearMissInteriorValueReadElsewhere) {
  ExpectMiss(kCentredIsOutput, "layernorm", "interior value of 'ln/Sub' (Sub) is a graph output");
  ExpectMiss(kVarianceReadElsewhere, "layernorm",
             "interior value of 'ln/ReduceMean_1' (ReduceMean) is also read outside the pattern");
}

TEST(FuseLayerNorm, LeavesUnrelatedReductionsAndExistingLayerNormalization) {
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2,8] "x"
  %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %2 = ReduceMean(%0, %1) : f32[2,1] "m"
  %3 = Sub(%0, %2) : f32[2,8] "c"
  %4 = Constant() {value=tensor<f32[8]>#0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f} : f32[8]
  %5 = LayerNormalization(%3, %4) {axis=-1} : f32[2,8] "y"
  return "y": %5
})");
  const FusionReport r = RunWithReport({kPass}, kBertLayerNorm).report;
  EXPECT_EQ(r.total_missed(), 0);
}

}  // namespace
}  // namespace kiln
