// Tests for fuse-glu: the Llama SwiGLU (two bias-free MatMul projections, SiLU as
// x·Sigmoid(x)) as Before/Expected IR (run twice by ExpectRewrite), the commuted and
// biased forms, ModernBERT's GeGLU on Split halves (erf and tanh Gelu), numerically on the
// reference executor (1e-5: kiln.Glu rounds once from double where the decomposed graph
// rounds after each f32 op; values are O(1)); the near-misses with their reasons; the
// graphs left alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/text.h"
#include "kiln/passes/fusion_report.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Edit;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-glu";

// x [2, 3, 4] -> gate, up [2, 3, 2] -> silu(gate) · up.
constexpr char kSwiGlu[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<f32[4,2]>[0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8]} : f32[4,2] "wg"
  %2 = Constant() {value=tensor<f32[4,2]>[0.5, 0.25, -0.75, 1.0, 0.125, -0.5, 0.3, 0.2]} : f32[4,2] "wu"
  %3 = MatMul(%0, %1) : f32[2,3,2] "gate" @ "gate_proj"
  %4 = Sigmoid(%3) : f32[2,3,2] @ "sigmoid"
  %5 = Mul(%3, %4) : f32[2,3,2] @ "silu"
  %6 = MatMul(%0, %2) : f32[2,3,2] @ "up_proj"
  %7 = Mul(%5, %6) : f32[2,3,2] "y" @ "mul"
  return "y": %7
})";

constexpr char kSwiGluFused[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<f32[4,4]>[0.1, -0.2, 0.5, 0.25, 0.3, 0.4, -0.75, 1.0, -0.5, 0.6, 0.125, -0.5, 0.7, -0.8, 0.3, 0.2]} : f32[4,4] "gate/gate_up_weight"
  %2 = kiln.Linear(%0, %1) {activation="none", trans_w=0} : f32[2,3,4] "gate/gate_up" @ "gate_proj", "up_proj"
  %3 = kiln.Glu(%2) {activation="silu"} : f32[2,3,2] "y" @ "gate_proj", "sigmoid", "silu", "up_proj", "mul"
  return "y": %3
})";

TEST(FuseGlu, SwiGluBecomesOneLinearAndGlu) {
  ExpectRewrite(kPass, kSwiGlu, kSwiGluFused);
  ExpectNumericallyEquivalent(kPass, kSwiGlu);
  const testing::FusionRun r = RunWithReport({kPass}, kSwiGlu);
  EXPECT_EQ(r.report.kinds().at("glu").fused, 1);
  EXPECT_EQ(r.counters.at("swiglu"), 1);
}

// Sigmoid first in the SiLU Mul, the product commuted, and projections with a bias
// (MatMul + Add, bias first) as Qwen2's MLP does not have but BERT-style exports do.
TEST(FuseGlu, CommutedAndBiased) {
  std::string t = Edit(kSwiGlu, "%5 = Mul(%3, %4)", "%5 = Mul(%4, %3)");
  t = Edit(t, "%7 = Mul(%5, %6)", "%7 = Mul(%6, %5)");
  ExpectNumericallyEquivalent(kPass, t);
  EXPECT_EQ(RunWithReport({kPass}, t).report.kinds().at("glu").fused, 1);

  std::string b = Edit(kSwiGlu, "%3 = MatMul(%0, %1) : f32[2,3,2] \"gate\" @ \"gate_proj\"",
                       "%8 = MatMul(%0, %1) : f32[2,3,2]\n"
                       "  %9 = Constant() {value=tensor<f32[2]>[0.5, -1.0]} : f32[2]\n"
                       "  %3 = Add(%9, %8) : f32[2,3,2] \"gate\" @ \"gate_proj\"");
  b = Edit(b, "%6 = MatMul(%0, %2) : f32[2,3,2] @ \"up_proj\"",
           "%10 = MatMul(%0, %2) : f32[2,3,2]\n"
           "  %11 = Constant() {value=tensor<f32[2]>[0.25, 2.0]} : f32[2]\n"
           "  %6 = Add(%10, %11) : f32[2,3,2] @ \"up_proj\"");
  ExpectNumericallyEquivalent(kPass, b);
  const testing::FusionRun r = RunWithReport({kPass}, b);
  EXPECT_EQ(r.report.kinds().at("glu").fused, 1);
  EXPECT_THAT(PrintGraph(*r.graph), ::testing::HasSubstr("kiln.Linear(%0, %1, %2)"));
}

// ModernBERT: Wi(x) -> Split in two -> Gelu(first) · second.
constexpr char kGeGlu[] = R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "p"
  %1, %2 = Split(%0) {axis=-1, num_outputs=2} : f32[2,3,4], f32[2,3,4] @ "chunk"
  %3 = Gelu(%1) {approximate="none"} : f32[2,3,4] @ "act"
  %4 = Mul(%3, %2) : f32[2,3,4] "y" @ "mul"
  return "y": %4
})";

TEST(FuseGlu, GeGluOnSplitHalves) {
  for (const char* approx : {"none", "tanh"}) {
    const std::string t =
        Edit(kGeGlu, "{approximate=\"none\"}", absl::StrCat("{approximate=\"", approx, "\"}"));
    ExpectRewrite(kPass, t,
                  absl::StrCat(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "p"
  %1 = kiln.Glu(%0) {activation=")",
                               std::string(approx) == "tanh" ? "gelu_tanh" : "gelu",
                               R"("} : f32[2,3,4] "y" @ "chunk", "act", "mul"
  return "y": %1
})"));
    ExpectNumericallyEquivalent(kPass, t);
  }
}

// The TorchScript ModernBERT export cuts the halves with two Slices (bounds folded to
// constants under static shapes).
constexpr char kGeGluSlices[] = R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "p"
  %1 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %2 = Constant() {value=tensor<i64[1]>[4]} : i64[1]
  %3 = Constant() {value=tensor<i64[1]>[8]} : i64[1]
  %4 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %5 = Slice(%0, %1, %2, %4) : f32[2,3,4] @ "lo"
  %6 = Slice(%0, %2, %3, %4) : f32[2,3,4] @ "hi"
  %7 = Gelu(%5) {approximate="none"} : f32[2,3,4] @ "act"
  %8 = Mul(%7, %6) : f32[2,3,4] "y" @ "mul"
  return "y": %8
})";

TEST(FuseGlu, GeGluOnSlicedHalves) {
  const testing::FusionRun r = RunWithReport({kPass}, kGeGluSlices);
  EXPECT_EQ(r.report.kinds().at("glu").fused, 1);
  EXPECT_EQ(r.counters.at("glu of sliced halves"), 1);
  EXPECT_THAT(PrintGraph(*r.graph), ::testing::HasSubstr("kiln.Glu(%0) {activation=\"gelu\"}"));
  ExpectNumericallyEquivalent(kPass, kGeGluSlices);
  // The activation on the second half.
  testing::ExpectOneMiss(kPass,
                         Edit(Edit(kGeGluSlices, "%7 = Gelu(%5)", "%7 = Gelu(%6)"),
                              "%8 = Mul(%7, %6)", "%8 = Mul(%7, %5)"),
                         "glu",
                         "'hi' and 'lo' are not the halves [0, F) (activated) and [F, 2F) of "
                         "the last axis of f32[2,3,8] (constant bounds, step 1)");
}

void ExpectMiss(const std::string& text, const std::string& reason) {
  testing::ExpectOneMiss(kPass, text, "glu", reason);
}

TEST(FuseGlu, NearMisses) {
  // up projects another input.
  std::string other = Edit(kSwiGlu, "%6 = MatMul(%0, %2)", "%6 = MatMul(%8, %2)");
  other = Edit(other, "%1 = Constant()", "%8 = Input() : f32[2,3,4] \"x2\"\n  %1 = Constant()");
  ExpectMiss(other, "gate and up projections read different inputs");
  // The gate is also a graph output.
  ExpectMiss(Edit(kSwiGlu, "return \"y\": %7", "return \"y\": %7, \"g\": %3"),
             "interior value of 'gate_proj' (MatMul) is a graph output");
  // Unequal halves.
  std::string uneq = Edit(kGeGlu, "%1, %2 = Split(%0) {axis=-1, num_outputs=2} : f32[2,3,4]",
                          "%9 = Constant() {value=tensor<i64[2]>[3, 5]} : i64[2]\n"
                          "  %1, %2 = Split(%0, %9) {axis=-1} : f32[2,3,3]");
  uneq = Edit(uneq, "%3 = Gelu(%1) {approximate=\"none\"} : f32[2,3,4]",
              "%3 = Gelu(%1) {approximate=\"none\"} : f32[2,3,3]");
  uneq = Edit(uneq, ", f32[2,3,4] @ \"chunk\"", ", f32[2,3,5] @ \"chunk\"");
  uneq = Edit(uneq, "%4 = Mul(%3, %2) : f32[2,3,4]", "%4 = Mul(%3, %2) : f32[2,3,5]");
  ExpectMiss(uneq, "'chunk' splits into unequal parts");
  // A non-constant weight.
  std::string w = Edit(kSwiGlu,
                       "%2 = Constant() {value=tensor<f32[4,2]>[0.5, 0.25, -0.75, 1.0, "
                       "0.125, -0.5, 0.3, 0.2]} : f32[4,2] \"wu\"",
                       "%2 = Input() : f32[4,2] \"wu\"");
  ExpectMiss(w, "the up projection's weight is not a constant float matrix");
}

TEST(FuseGlu, LeavesOtherMulsAlone) {
  // Another activation than SiLU's Sigmoid.
  ExpectNoChange(kPass, Edit(kSwiGlu, "%4 = Sigmoid(%3)", "%4 = Tanh(%3)"));
  // Gelu of a Split output times something that is not the other half.
  ExpectNoChange(kPass, Edit(kGeGlu, "%4 = Mul(%3, %2)", "%4 = Mul(%3, %1)"));
  // A plain product of two projections, no activation.
  ExpectNoChange(kPass, Edit(kSwiGlu, "%7 = Mul(%5, %6)", "%7 = Mul(%3, %6)"));
}

// Int4 projections (MatMulNBits files): gate and up as kiln.BlockQuantLinear, one with zero
// points and one without, merge into one BlockQuantLinear (codes, scales and zero points
// stacked by output channel, the missing zero points written out as 8) read by kiln.Glu.
constexpr char kInt4SwiGlu[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,32] "x"
  %1 = Constant() {value=tensor<u4[2,32]>[7, 4, 11, 15, 2, 0, 15, 8, 7, 6, 15, 15, 12, 4, 7, 4, 12, 0, 2, 5, 1, 9, 0, 8, 15, 12, 13, 12, 14, 4, 11, 3, 1, 4, 15, 6, 8, 13, 9, 13, 12, 11, 13, 7, 10, 0, 8, 5, 10, 3, 6, 8, 9, 3, 2, 15, 15, 2, 11, 2, 13, 4, 0, 9]} : u4[2,32] "wg"
  %2 = Constant() {value=tensor<f32[2,2]>[0.091, 0.089, 0.033, 0.125]} : f32[2,2] "sg"
  %3 = Constant() {value=tensor<u4[2,2]>[1, 12, 10, 8]} : u4[2,2] "zg"
  %4 = Constant() {value=tensor<u4[2,32]>[7, 1, 9, 0, 2, 3, 1, 6, 13, 9, 8, 4, 1, 10, 10, 11, 4, 12, 12, 14, 12, 3, 8, 13, 7, 9, 13, 8, 9, 10, 0, 13, 10, 0, 12, 4, 1, 10, 14, 11, 11, 8, 15, 0, 1, 0, 11, 8, 14, 9, 10, 5, 11, 5, 10, 11, 8, 9, 12, 3, 0, 4, 9, 7]} : u4[2,32] "wu"
  %5 = Constant() {value=tensor<f32[2,2]>[0.134, 0.061, 0.072, 0.139]} : f32[2,2] "su"
  %6 = kiln.BlockQuantLinear(%0, %1, %2, %3) {block_size=16} : f32[2,3,2] "gate" @ "gate_proj"
  %7 = Sigmoid(%6) : f32[2,3,2] @ "sigmoid"
  %8 = Mul(%6, %7) : f32[2,3,2] @ "silu"
  %9 = kiln.BlockQuantLinear(%0, %4, %5) {block_size=16} : f32[2,3,2] @ "up_proj"
  %10 = Mul(%8, %9) : f32[2,3,2] "y" @ "mul"
  return "y": %10
})";

TEST(FuseGlu, Int4ProjectionsMergeIntoOneBlockQuantLinear) {
  ExpectNumericallyEquivalent(kPass, kInt4SwiGlu);
  const testing::FusionRun r = RunWithReport({kPass}, kInt4SwiGlu);
  EXPECT_EQ(r.report.kinds().at("glu").fused, 1);
  const std::string text = PrintGraph(*r.graph);
  EXPECT_THAT(text, ::testing::HasSubstr("kiln.BlockQuantLinear(%0, "));
  EXPECT_THAT(text, ::testing::HasSubstr("{activation=\"none\", block_size=16} : f32[2,3,4]"));
  EXPECT_THAT(text, ::testing::HasSubstr(": u4[4,2] \"gate/gate_up_zero_points\""));
  EXPECT_THAT(text, ::testing::HasSubstr("kiln.Glu("));
  // Different block sizes do not merge, and say why.
  const std::string mixed =
      Edit(Edit(kInt4SwiGlu, "%9 = kiln.BlockQuantLinear(%0, %4, %5) {block_size=16}",
                "%9 = kiln.BlockQuantLinear(%0, %4, %11) {block_size=32}"),
           "  %6 = kiln.BlockQuantLinear",
           "  %11 = Constant() {value=tensor<f32[2,1]>[0.1, 0.2]} : f32[2,1] \"s32\"\n  %6 = "
           "kiln.BlockQuantLinear");
  const testing::FusionRun m = RunWithReport({kPass}, mixed);
  ASSERT_EQ(m.report.kinds().at("glu").missed.size(), 1u);
  EXPECT_THAT(m.report.kinds().at("glu").missed[0].reason, ::testing::HasSubstr("block size"));
}

}  // namespace
}  // namespace kiln
