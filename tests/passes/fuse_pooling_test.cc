// Tests for fuse-pooling: sentence-transformers mean pooling (+ F.normalize) as the
// TorchScript exporter writes it, a static-shape variant (Reshape for the Unsqueeze, Max for
// the clamps, no Expand), CLS + normalization; each Before/Expected, run twice by
// ExpectRewrite and checked numerically on the reference executor; what must stay (a BERT
// pooler's CLS Gather -> Gemm -> Tanh); and near-misses with their reported reasons.
#include <gtest/gtest.h>

#include <string>

#include "kiln/passes/fusion_report.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;
using testing::RunPass;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-pooling";

// sentence-transformers Pooling(mean) + Normalize, symbolic shapes, as exported.
constexpr char kMeanNormalize[] = R"(graph g opset=17 {
  %0 = Input() : f32[batch,seq,4] "hidden"
  %1 = Input() : i64[batch,seq] "attention_mask"
  %2 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %3 = Unsqueeze(%1, %2) : i64[batch,seq,1] @ "unsq"
  %4 = Shape(%0) : i64[3] @ "shape"
  %5 = Expand(%3, %4) : i64[batch,seq,4] @ "expand"
  %6 = Cast(%5) {to=1} : f32[batch,seq,4] @ "cast"
  %7 = Mul(%0, %6) : f32[batch,seq,4] @ "mul"
  %8 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %9 = ReduceSum(%7, %8) {keepdims=0} : f32[batch,4] @ "sum"
  %10 = ReduceSum(%6, %8) {keepdims=0} : f32[batch,4] @ "count"
  %11 = Constant() {value=tensor<f32[]>[1e-09]} : f32[]
  %12 = Clip(%10, %11, _) : f32[batch,4] @ "clamp"
  %13 = Div(%9, %12) : f32[batch,4] @ "mean"
  %14 = ReduceL2(%13, %8) {keepdims=1} : f32[batch,1] @ "norm"
  %15 = Constant() {value=tensor<f32[]>[1e-12]} : f32[]
  %16 = Clip(%14, %15, _) : f32[batch,1] @ "clamp_min"
  %17 = Shape(%13) : i64[2] @ "shape_x"
  %18 = Expand(%16, %17) : f32[batch,4] @ "expand_as"
  %19 = Div(%13, %18) : f32[batch,4] "sentence_embedding" @ "normalize"
  return "sentence_embedding": %19
})";

TEST(FusePoolingTest, MeanPoolingWithNormalize) {
  ExpectRewrite(kPass, kMeanNormalize, R"(graph g opset=17 {
  %0 = Input() : f32[batch,seq,4] "hidden"
  %1 = Input() : i64[batch,seq] "attention_mask"
  %2 = kiln.Pool(%0, %1) {mode="mean", normalize=1} : f32[batch,4] "sentence_embedding" @ "mean", "sum", "mul", "clamp", "count", "normalize", "expand_as", "shape_x", "clamp_min", "norm", "cast", "expand", "unsq"
  return "sentence_embedding": %2
})");
  ExpectNumericallyEquivalent(kPass, kMeanNormalize, {}, {{"batch", 3}, {"seq", 5}});
  const FusionReport r = RunWithReport({kPass}, kMeanNormalize).report;
  EXPECT_EQ(r.kinds().at("pooling").fused, 1);
  EXPECT_TRUE(r.kinds().at("pooling").missed.empty());
}

// Static shapes after -O1: the Unsqueeze became a Reshape, no Expand (Mul broadcasts),
// Max instead of Clip; the mask is f32 already and the pooled value is also a graph output,
// so no normalization follows.
constexpr char kMeanStatic[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Input() : i64[2,3] "attention_mask"
  %2 = Constant() {value=tensor<i64[3]>[2, 3, 1]} : i64[3]
  %3 = Reshape(%1, %2) : i64[2,3,1]
  %4 = Cast(%3) {to=1} : f32[2,3,1]
  %5 = Mul(%4, %0) : f32[2,3,4]
  %6 = Constant() {value=tensor<i64[1]>[-2]} : i64[1]
  %7 = ReduceSum(%5, %6) {keepdims=0} : f32[2,4]
  %8 = ReduceSum(%4, %6) {keepdims=0} : f32[2,1]
  %9 = Constant() {value=tensor<f32[]>[1e-09]} : f32[]
  %10 = Max(%9, %8) : f32[2,1]
  %11 = Div(%7, %10) : f32[2,4] "pooled"
  return "pooled": %11
})";

TEST(FusePoolingTest, MeanPoolingStaticShapes) {
  ExpectRewrite(kPass, kMeanStatic, R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Input() : i64[2,3] "attention_mask"
  %2 = kiln.Pool(%0, %1) {mode="mean", normalize=0} : f32[2,4] "pooled"
  return "pooled": %2
})");
  ExpectNumericallyEquivalent(kPass, kMeanStatic);
}

// CLS token + normalization through Sqrt(ReduceSum(Pow(x, 2))) and Max.
constexpr char kClsNormalize[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %2 = Gather(%0, %1) {axis=1} : f32[2,4] @ "cls"
  %3 = Constant() {value=tensor<f32[]>[2]} : f32[]
  %4 = Pow(%2, %3) : f32[2,4] @ "sq"
  %5 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %6 = ReduceSum(%4, %5) {keepdims=1} : f32[2,1] @ "ss"
  %7 = Sqrt(%6) : f32[2,1] @ "sqrt"
  %8 = Constant() {value=tensor<f32[]>[1e-12]} : f32[]
  %9 = Max(%7, %8) : f32[2,1] @ "max"
  %10 = Div(%2, %9) : f32[2,4] "emb" @ "div"
  return "emb": %10
})";

TEST(FusePoolingTest, ClsPoolingWithNormalize) {
  ExpectRewrite(kPass, kClsNormalize, R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = kiln.Pool(%0) {mode="cls", normalize=1} : f32[2,4] "emb" @ "div", "max", "sqrt", "ss", "sq", "cls"
  return "emb": %1
})");
  ExpectNumericallyEquivalent(kPass, kClsNormalize);
}

// A BERT pooler: CLS Gather -> Gemm -> Tanh. Already minimal; not pooling's to fuse.
constexpr char kBertPooler[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %2 = Gather(%0, %1) {axis=1} : f32[2,4]
  %3 = Constant() {value=tensor<f32[4,4]>[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]} : f32[4,4]
  %4 = Constant() {value=tensor<f32[4]>[0.1, 0.2, 0.3, 0.4]} : f32[4]
  %5 = Gemm(%2, %3, %4) {transB=1} : f32[2,4]
  %6 = Tanh(%5) : f32[2,4]
  return "pooler_output": %6
})";

TEST(FusePoolingTest, LeavesBertPoolerAlone) {
  ExpectNoChange(kPass, kBertPooler);
  const FusionReport r = RunWithReport({kPass}, kBertPooler).report;
  EXPECT_EQ(r.total_fused(), 0);
  EXPECT_EQ(r.total_missed(), 0);
}

// kMeanStatic summing over the hidden axis (2) instead of the sequence axis.
constexpr char kMeanOverHidden[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Input() : i64[2,3] "attention_mask"
  %2 = Constant() {value=tensor<i64[3]>[2, 3, 1]} : i64[3]
  %3 = Reshape(%1, %2) : i64[2,3,1]
  %4 = Cast(%3) {to=1} : f32[2,3,1]
  %5 = Mul(%4, %0) : f32[2,3,4]
  %6 = Constant() {value=tensor<i64[1]>[2]} : i64[1]
  %7 = ReduceSum(%5, %6) {keepdims=0} : f32[2,4]
  %8 = ReduceSum(%4, %6) {keepdims=0} : f32[2,1]
  %9 = Constant() {value=tensor<f32[]>[1e-09]} : f32[]
  %10 = Max(%9, %8) : f32[2,1]
  %11 = Div(%7, %10) : f32[2,4] "pooled"
  return "pooled": %11
})";

// kClsNormalize clamping the norm at another epsilon.
constexpr char kClsOtherEpsilon[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %2 = Gather(%0, %1) {axis=1} : f32[2,4] @ "cls"
  %3 = Constant() {value=tensor<f32[]>[2]} : f32[]
  %4 = Pow(%2, %3) : f32[2,4] @ "sq"
  %5 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %6 = ReduceSum(%4, %5) {keepdims=1} : f32[2,1] @ "ss"
  %7 = Sqrt(%6) : f32[2,1] @ "sqrt"
  %8 = Constant() {value=tensor<f32[]>[1e-06]} : f32[]
  %9 = Max(%7, %8) : f32[2,1] @ "max"
  %10 = Div(%2, %9) : f32[2,4] "emb" @ "div"
  return "emb": %10
})";

// kMeanStatic with the masked sum also a graph output.
constexpr char kMeanSumReadElsewhere[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "hidden"
  %1 = Input() : i64[2,3] "attention_mask"
  %2 = Constant() {value=tensor<i64[3]>[2, 3, 1]} : i64[3]
  %3 = Reshape(%1, %2) : i64[2,3,1]
  %4 = Cast(%3) {to=1} : f32[2,3,1]
  %5 = Mul(%4, %0) : f32[2,3,4]
  %6 = Constant() {value=tensor<i64[1]>[-2]} : i64[1]
  %7 = ReduceSum(%5, %6) {keepdims=0} : f32[2,4]
  %8 = ReduceSum(%4, %6) {keepdims=0} : f32[2,1]
  %9 = Constant() {value=tensor<f32[]>[1e-09]} : f32[]
  %10 = Max(%9, %8) : f32[2,1]
  %11 = Div(%7, %10) : f32[2,4] "pooled"
  return "pooled": %11, "sum": %7
})";

TEST(FusePoolingTest, NearMissesAreReportedWithReasons) {
  testing::ExpectOneMiss(kPass, kMeanOverHidden, "pooling",
                         "the masked sum reduces axes [2], not the sequence axis 1");
  testing::ExpectOneMiss(kPass, kClsOtherEpsilon, "pooling",
                         "the normalization clamps the norm at 1e-06; kiln.Pool uses 1e-12");
  testing::ExpectOneMiss(
      kPass, kMeanSumReadElsewhere, "pooling",
      "interior value node '#7' (ReduceSum, opset 17) is also read outside the mean pooling");
}

}  // namespace
}  // namespace kiln
