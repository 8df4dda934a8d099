// Tests for block-quant-weights: MatMul(x, DequantizeLinear(4-bit constant [K, N])) ->
// kiln.BlockQuantLinear in its three forms (blocked on K with uint4 zero points, int4 per
// output channel, int4 per tensor), checked numerically on the reference executor (1e-5:
// the same f32 weights, sums in double on both sides; values O(1)), the operands' layout
// ([N, K] codes, signed codes shifted by 8), and the graphs left alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/text.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Edit;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::RunWithReport;

constexpr char kPass[] = "block-quant-weights";

// x [2, 3, 40] · DQ(W u4 [40, 6], scale [3, 6], zp [3, 6]){axis=0, block_size=16}.
constexpr char kBlocked[] = R"(graph g opset=21 {
  %0 = Input() : f32[2,3,40] "x"
  %1 = Constant() {value=tensor<u4[40,6]>[14, 14, 14, 6, 5, 15, 5, 3, 14, 9, 4, 2, 1, 12, 14, 5, 0, 2, 1, 1, 6, 7, 0, 14, 10, 14, 6, 7, 9, 15, 0, 2, 14, 8, 13, 2, 8, 10, 7, 9, 0, 2, 3, 12, 3, 9, 12, 2, 0, 0, 6, 6, 1, 15, 12, 12, 13, 2, 6, 8, 10, 2, 9, 10, 0, 13, 3, 4, 7, 3, 0, 1, 14, 15, 5, 6, 14, 6, 4, 13, 12, 3, 12, 13, 6, 0, 8, 9, 0, 6, 5, 12, 3, 1, 4, 6, 14, 8, 0, 10, 9, 12, 2, 2, 2, 6, 7, 0, 11, 11, 14, 4, 15, 4, 12, 5, 4, 9, 7, 7, 6, 5, 6, 12, 15, 2, 13, 1, 3, 3, 1, 8, 7, 12, 8, 13, 15, 9, 5, 2, 4, 7, 15, 2, 8, 6, 6, 0, 2, 8, 13, 14, 7, 1, 1, 5, 9, 11, 4, 2, 11, 4, 14, 10, 4, 1, 0, 15, 11, 9, 1, 0, 2, 15, 2, 9, 10, 4, 2, 2, 14, 11, 1, 4, 10, 11, 2, 15, 2, 13, 0, 15, 0, 12, 12, 0, 2, 2, 2, 3, 8, 13, 10, 12, 14, 14, 14, 2, 0, 9, 2, 15, 0, 7, 3, 15, 15, 8, 0, 11, 9, 4, 6, 5, 10, 14, 15, 7, 10, 12, 8, 6, 13, 6, 6, 12, 7, 10, 6, 4]} : u4[40,6] "w"
  %2 = Constant() {value=tensor<f32[3,6]>[0.036, 0.077, 0.180, 0.018, 0.022, 0.196, 0.166, 0.031, 0.100, 0.186, 0.168, 0.083, 0.109, 0.138, 0.146, 0.170, 0.129, 0.071]} : f32[3,6] "s"
  %3 = Constant() {value=tensor<u4[3,6]>[1, 8, 1, 8, 11, 9, 0, 4, 12, 14, 6, 0, 8, 7, 4, 1, 3, 14]} : u4[3,6] "z"
  %4 = DequantizeLinear(%1, %2, %3) {axis=0, block_size=16} : f32[40,6] "wf" @ "dq"
  %5 = MatMul(%0, %4) : f32[2,3,6] "y" @ "mm"
  return "y": %5
})";

// int4 codes, one scale per output channel (no zero point: 0).
constexpr char kPerChannel[] = R"(graph g opset=21 {
  %0 = Input() : f32[2,3,40] "x"
  %1 = Constant() {value=tensor<i4[40,6]>[-5, 3, -6, -2, -2, 7, 0, -3, -8, 7, -7, -3, -1, 0, 3, -3, 4, -1, -6, 5, 4, -4, 6, 6, -2, -8, 4, 2, 6, 2, -2, -5, -5, -2, -1, 4, -6, 1, 2, 0, -8, 3, -6, -7, 6, 2, 5, 0, 7, -8, -2, -6, 5, -7, -3, 2, -4, 7, -4, 6, 7, -6, -1, 6, 1, -3, 0, 1, 4, -2, 1, -4, 0, 7, -2, 5, -5, -8, 4, -8, -7, 4, -5, 7, -6, -3, -6, 6, 5, 4, 0, -1, 7, 7, -4, 2, 5, 7, 2, -5, -2, 5, -8, 0, -4, -8, -7, -2, -4, -1, -8, 1, 2, 3, -1, 7, -5, 7, -5, 0, -2, 5, -8, 4, 5, -3, -2, -2, -2, -4, -1, 3, -3, 2, 2, -2, -2, -2, -5, -4, -1, -4, -6, 0, 4, -5, 5, 5, -4, -2, 4, -8, -5, -2, 3, 3, -5, 2, -2, -6, 7, -5, -8, -7, 7, -4, -2, -3, -5, -2, -3, -3, 1, -5, -7, -4, 6, -6, -5, 2, 4, 6, 5, 3, 5, -2, 3, -8, -7, -2, -3, 5, 6, 3, 3, 4, -2, -3, -5, -8, 2, -6, 4, -2, 2, 0, 0, -5, -3, 4, -4, 2, 3, 5, -3, 4, -2, -3, -6, 2, 1, 7, -5, -8, 3, -7, -1, 0, 1, 2, -2, 4, -3, -6, 4, 7, -2, -5, 4, -8]} : i4[40,6] "w"
  %2 = Constant() {value=tensor<f32[6]>[0.032, 0.031, 0.055, 0.094, 0.106, 0.155]} : f32[6] "s"
  %4 = DequantizeLinear(%1, %2) {axis=1} : f32[40,6] "wf" @ "dq"
  %5 = MatMul(%0, %4) : f32[2,3,6] "y" @ "mm"
  return "y": %5
})";

TEST(BlockQuantWeights, BlockedUint4WithZeroPoints) {
  ExpectNumericallyEquivalent(kPass, kBlocked);
  const testing::FusionRun r = RunWithReport({kPass}, kBlocked);
  const std::string text = PrintGraph(*r.graph);
  EXPECT_THAT(text, ::testing::HasSubstr("kiln.BlockQuantLinear(%0, "));
  EXPECT_THAT(text, ::testing::HasSubstr("{block_size=16} : f32[2,3,6] \"y\""));
  EXPECT_THAT(text, ::testing::HasSubstr(": u4[6,40] \"wf/codes\""));
  EXPECT_THAT(text, ::testing::HasSubstr(": f32[6,3] \"wf/scales\""));
  EXPECT_EQ(r.counters.at("MatMul of int4 weights"), 1);
}

TEST(BlockQuantWeights, Int4PerChannelAndPerTensor) {
  ExpectNumericallyEquivalent(kPass, kPerChannel);
  const testing::FusionRun r = RunWithReport({kPass}, kPerChannel);
  // One block of 64 >= K per channel; zero points 0 + 8 for the signed codes.
  EXPECT_THAT(PrintGraph(*r.graph), ::testing::HasSubstr("{block_size=64} : f32[2,3,6] \"y\""));
  // One scale for the whole tensor.
  std::string per_tensor = kPerChannel;
  const size_t a = per_tensor.find("%2 = Constant()"), b = per_tensor.find('\n', a);
  per_tensor.replace(a, b - a, "%2 = Constant() {value=tensor<f32[]>[0.05]} : f32[] \"s\"");
  per_tensor = Edit(per_tensor, " {axis=1}", "");
  ExpectNumericallyEquivalent(kPass, per_tensor);
  EXPECT_THAT(PrintGraph(*RunWithReport({kPass}, per_tensor).graph),
              ::testing::HasSubstr("kiln.BlockQuantLinear("));
}

TEST(BlockQuantWeights, LeavesOtherWeightsAlone) {
  // 8-bit codes: constant folding's (the int8 GEMMs requantize them).
  ExpectNoChange(kPass, Edit(Edit(kPerChannel, "i4[40,6]", "i8[40,6]"), "i4[40,6]", "i8[40,6]"));
  // Blocked along N: not a block of K.
  ExpectNoChange(kPass, Edit(kBlocked, "{axis=0, block_size=16}", "{axis=1, block_size=16}"));
  // The weight on the left (x · W needs it on the right).
  std::string left =
      Edit(kBlocked, "%5 = MatMul(%0, %4) : f32[2,3,6]", "%5 = MatMul(%4, %6) : f32[40,2]");
  left = Edit(left, "  %4 = DequantizeLinear",
              "  %6 = Input() : f32[6,2] \"r\"\n  %4 = DequantizeLinear");
  ExpectNoChange(kPass, left);
}

}  // namespace
}  // namespace kiln
