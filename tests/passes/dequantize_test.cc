// Tests for dequantize: quantize_dynamic's MatMulInteger chain (weights per column, zero
// points), a quantized table behind its Gather, a static QDQ pair on an activation, as
// Before/Expected IR (run twice by ExpectRewrite; the dequantized constants hand-computed:
// (q - zp) * scale); the chains left alone with their reason; and that the rewritten MatMul
// is what the integer chain computes up to the activation's rounding (one quantization
// step of X times the largest weight per term).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/precision_report.h"
#include "kiln/reference/executor.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectRewrite;
using testing::Parse;
using testing::RunPass;

constexpr char kPass[] = "dequantize";

// W = (Wq - Wzp) * ws per column: [[(130-128)*0.5, (126-130)*0.25], [0, (140-130)*0.25]].
constexpr char kDynamic[] = R"(graph g opset=17 {
  %0 = Input() : f32[3,2] "x"
  %1, %2, %3 = DynamicQuantizeLinear(%0) : u8[3,2] "xq", f32[] "xs", u8[] "xzp" @ "dql"
  %4 = Constant() {value=tensor<u8[2,2]>[130, 126, 128, 140]} : u8[2,2] "Wq"
  %5 = Constant() {value=tensor<u8[2]>[128, 130]} : u8[2] "Wzp"
  %6 = MatMulInteger(%1, %4, %3, %5) : i32[3,2] "mm" @ "mmi"
  %7 = Cast(%6) {to=1} : f32[3,2] "mmf" @ "cast"
  %8 = Constant() {value=tensor<f32[2]>[0.5, 0.25]} : f32[2] "ws"
  %9 = Mul(%2, %8) : f32[2] "s" @ "scale_mul"
  %10 = Mul(%7, %9) : f32[3,2] "y" @ "mul"
  return "y": %10
})";

TEST(Dequantize, MatMulIntegerChainBecomesAFloatMatMul) {
  ExpectRewrite(kPass, kDynamic, R"(graph g opset=17 {
  %0 = Input() : f32[3,2] "x"
  %1 = Constant() {value=tensor<f32[2,2]>[1, -1, 0, 2.5]} : f32[2,2] "Wq_dequantized"
  %2 = MatMul(%0, %1) : f32[3,2] "y" @ "mmi", "cast", "mul"
  return "y": %2
})");
}

TEST(Dequantize, Fp32PlansNoteEachRewrittenMatMulInteger) {
  auto g = Parse(kDynamic);
  ASSERT_TRUE(g);
  PrecisionReport report;
  PassContext ctx;
  ctx.precision_report = &report;
  EXPECT_TRUE(RunPass(kPass, *g, ctx));
  ASSERT_EQ(report.notes().size(), 1u);
  EXPECT_EQ(report.notes()[0].op, "MatMul");
  EXPECT_EQ(report.notes()[0].precision, "fp32");
  EXPECT_NE(report.notes()[0].reason.find("MatMulInteger"), std::string::npos);
  // An int8 compile quantizes the MatMul itself later (gemm-precision): no note here.
  auto g8 = Parse(kDynamic);
  PrecisionReport report8;
  ctx.precision_report = &report8;
  ctx.precision = Precision::kInt8;
  EXPECT_TRUE(RunPass(kPass, *g8, ctx));
  EXPECT_TRUE(report8.notes().empty());
}

TEST(Dequantize, TheMatMulDiffersFromTheChainOnlyByTheActivationRounding) {
  auto chain = Parse(kDynamic);
  ASSERT_TRUE(chain);
  auto rewritten = chain->Clone();
  ASSERT_TRUE(RunPass(kPass, *rewritten));
  Tensor x(DType::kF32, {3, 2});
  const float xs[] = {0.3f, -1.7f, 2.0f, 0.05f, -0.4f, 1.1f};
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = xs[i];
  auto a = RunReference(*chain, {{"x", x}});
  auto b = RunReference(*rewritten, {{"x", x}});
  ASSERT_TRUE(a.ok() && b.ok());
  // X's step: (2.0 - -1.7) / 255; each output sums 2 terms, |W| <= 2.5, error <= step/2.
  const double bound = 2 * 2.5 * (3.7 / 255) / 2 + 1e-6;
  for (int i = 0; i < 6; ++i) {
    const double got = (*b)[0].data<float>()[i], want = (*a)[0].data<float>()[i];
    EXPECT_LE(std::fabs(got - want), bound) << i;
  }
}

TEST(Dequantize, QuantizedTableIsDequantizedBeforeItsGather) {
  ExpectRewrite(kPass, R"(graph g opset=17 {
  %0 = Input() : i64[3] "ids"
  %1 = Constant() {value=tensor<u8[2,2]>[0, 255, 128, 130]} : u8[2,2] "Tq"
  %2 = Gather(%1, %0) : u8[3,2] "g" @ "gather"
  %3 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "s"
  %4 = Constant() {value=tensor<u8[]>[128]} : u8[] "z"
  %5 = DequantizeLinear(%2, %3, %4) : f32[3,2] "y" @ "dq"
  return "y": %5
})",
                R"(graph g opset=17 {
  %0 = Input() : i64[3] "ids"
  %1 = Constant() {value=tensor<f32[2,2]>[-64, 63.5, 0, 1]} : f32[2,2] "Tq_dequantized"
  %2 = Gather(%1, %0) : f32[3,2] "y" @ "gather", "dq"
  return "y": %2
})");
}

TEST(Dequantize, StaticQdqPairOnAnActivationIsDropped) {
  ExpectRewrite(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Constant() {value=tensor<f32[]>[0.1]} : f32[] "s"
  %2 = Constant() {value=tensor<u8[]>[128]} : u8[] "z"
  %3 = QuantizeLinear(%0, %1, %2) : u8[4] "q"
  %4 = DequantizeLinear(%3, %1, %2) : f32[4] "dq"
  %5 = Relu(%4) : f32[4] "y"
  return "y": %5
})",
                R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Relu(%0) : f32[4] "y"
  return "y": %1
})");
}

// A pair whose zero point is u8's minimum saturates negatives to 0: onnxruntime's QDQ
// quantizer removed a Relu there, so the pair becomes Clip(x, 0, 255·s) — unless x cannot be
// negative (a Relu or Softmax still in the graph), where it is dropped.
TEST(Dequantize, QdqPairAtZeroKeepsItsLowerBound) {
  ExpectRewrite(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "s"
  %2 = Constant() {value=tensor<u8[]>[0]} : u8[] "z"
  %3 = QuantizeLinear(%0, %1, %2) : u8[4] "q" @ "q"
  %4 = DequantizeLinear(%3, %1, %2) : f32[4] "dq" @ "dq"
  %5 = Neg(%4) : f32[4] "y"
  return "y": %5
})",
                R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Constant() {value=tensor<f32[]>[0]} : f32[] "dq_clip_lo"
  %2 = Constant() {value=tensor<f32[]>[127.5]} : f32[] "dq_clip_hi"
  %3 = Clip(%0, %1, %2) : f32[4] "dq" @ "q", "dq"
  %4 = Neg(%3) : f32[4] "y"
  return "y": %4
})");
  ExpectRewrite(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Relu(%0) : f32[4] "r"
  %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "s"
  %3 = Constant() {value=tensor<u8[]>[0]} : u8[] "z"
  %4 = QuantizeLinear(%1, %2, %3) : u8[4] "q"
  %5 = DequantizeLinear(%4, %2, %3) : f32[4] "dq"
  %6 = Neg(%5) : f32[4] "y"
  return "y": %6
})",
                R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Relu(%0) : f32[4] "r"
  %2 = Neg(%1) : f32[4] "y"
  return "y": %2
})");
}

// One quantized table read by two Gathers, the later Gather's DequantizeLinear first in
// the graph: the dequantized table goes before the quantized one (before both readers);
// the same table with another zero point is another dequantized table.
TEST(Dequantize, SharedTablesStayInOrderAndKeyedByZeroPoint) {
  auto g = Parse(R"(graph g opset=17 {
  %0 = Input() : i64[3] "ids"
  %1 = Constant() {value=tensor<u8[2,2]>[0, 255, 128, 130]} : u8[2,2] "Tq"
  %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "s"
  %3 = Constant() {value=tensor<u8[]>[128]} : u8[] "z"
  %4 = Constant() {value=tensor<u8[]>[0]} : u8[] "z0"
  %5 = Gather(%1, %0) : u8[3,2] "g1"
  %6 = Gather(%1, %0) : u8[3,2] "g2"
  %7 = DequantizeLinear(%6, %2, %3) : f32[3,2] "y2"
  %8 = DequantizeLinear(%5, %2, %4) : f32[3,2] "y1"
  %9 = Add(%7, %8) : f32[3,2] "y"
  return "y": %9
})");
  ASSERT_TRUE(g);
  auto original = g->Clone();
  EXPECT_TRUE(RunPass(kPass, *g));  // verifies the graph (topological order included)
  int tables = 0;
  for (const auto& n : g->nodes()) {
    EXPECT_NE(n->op(), "DequantizeLinear");
    const Tensor* t = n->constant_value();
    tables += t != nullptr && t->dtype() == DType::kF32 && t->NumElements() == 4;
  }
  EXPECT_EQ(tables, 2);
  Tensor ids(DType::kI64, {3});
  for (int i = 0; i < 3; ++i) ids.data<int64_t>()[i] = i % 2;
  auto want = RunReference(*original, {{"ids", ids}});
  auto got = RunReference(*g, {{"ids", ids}});
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ((*got)[0].NumElements(), 6);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ((*got)[0].data<float>()[i], (*want)[0].data<float>()[i]) << i;
}

// x -> DynamicQuantizeLinear -> MatMulInteger(·, %1) -> Cast -> Mul by X's scale alone (no
// weight scale), %1 declared by `weight`.
std::string ChainWithWeight(const std::string& weight) {
  return absl::StrCat(R"(graph g opset=17 {
  %0 = Input() : f32[3,2] "x"
  )",
                      weight, R"(
  %2, %3, %4 = DynamicQuantizeLinear(%0) : u8[3,2] "xq", f32[] "xs", u8[] "xzp"
  %5 = MatMulInteger(%2, %1, %4) : i32[3,2] "mm"
  %6 = Cast(%5) {to=1} : f32[3,2] "mmf"
  %7 = Mul(%6, %3) : f32[3,2] "y"
  return "y": %7
})");
}

TEST(Dequantize, ChainsItCannotProveStay) {
  // Weights not constant; constant weights but the scale product is not Mul(X's scale,
  // constant).
  ExpectNoChange(kPass, ChainWithWeight(R"(%1 = Input() : u8[2,2] "Wq")"));
  ExpectNoChange(
      kPass,
      ChainWithWeight(R"(%1 = Constant() {value=tensor<u8[2,2]>[1, 2, 3, 4]} : u8[2,2] "Wq")"));
  // A QDQ pair whose halves have different scales; a per-axis table scale.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Constant() {value=tensor<f32[]>[0.1]} : f32[] "s"
  %2 = Constant() {value=tensor<f32[]>[0.2]} : f32[] "s2"
  %3 = QuantizeLinear(%0, %1) : u8[4] "q"
  %4 = DequantizeLinear(%3, %2) : f32[4] "y"
  return "y": %4
})");
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : i64[3] "ids"
  %1 = Constant() {value=tensor<u8[2,2]>[0, 255, 128, 130]} : u8[2,2] "Tq"
  %2 = Gather(%1, %0) : u8[3,2] "g"
  %3 = Constant() {value=tensor<f32[2]>[0.5, 1]} : f32[2] "s"
  %4 = DequantizeLinear(%2, %3) : f32[3,2] "y"
  return "y": %4
})");
}

}  // namespace
}  // namespace kiln
