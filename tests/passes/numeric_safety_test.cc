// Tests for the numeric-safety pass (fp16 plans): a model built to overflow fp16 in its
// residual stream — a "massive activation" of 2e5 in one channel, as real Transformers carry —
// comes out right at fp16 with the pass and measurably wrong without it (the proof the pass
// matters); the ops it keeps fp32 are noted with their measured range; it does nothing
// without calibration inputs, at bf16, or on a model whose values stay in range; a cuda int8
// plan's fp16 rest obeys it too.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/reference/executor.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Parse;
using testing::RandomInputs;

// x -> Linear -> + a constant with 4e4 in channel 3 (the residual stream's outlier, which
// fp16 still holds) -> x 2 (a residual scale: 8e4) -> LayerNorm -> Linear -> y. In fp16 the
// scale overflows to inf, and the LayerNorm makes the whole row NaN.
constexpr char kOutlier[] = R"(
graph g opset=21 {
  %0 = Input() : f32[4,8] "x"
  %1 = Constant() {value=tensor<f32[8,8]>[0.3,-0.2,0.1,0.4,-0.3,0.2,0.1,-0.1,0.2,0.1,-0.4,0.3,0.1,-0.2,0.3,0.2,-0.1,0.3,0.2,-0.3,0.4,0.1,-0.2,0.1,0.4,0.2,0.1,-0.1,0.3,-0.3,0.2,0.2,0.1,-0.4,0.3,0.2,-0.2,0.1,0.4,0.3,-0.3,0.2,-0.1,0.1,0.2,0.4,-0.2,0.1,0.2,0.1,0.3,-0.2,0.1,0.3,0.2,-0.4,0.1,0.3,-0.1,0.2,-0.3,0.1,0.2,0.3]} : f32[8,8] "w1"
  %2 = kiln.Linear(%0, %1) : f32[4,8] "h"
  %3 = Constant() {value=tensor<f32[8]>[0.5,-1,2,40000,1,-0.5,0.25,1.5]} : f32[8] "outlier"
  %4 = Add(%2, %3) : f32[4,8] "sum"
  %5 = Constant() {value=tensor<f32[]>[2]} : f32[] "two"
  %6 = Mul(%4, %5) : f32[4,8] "residual"
  %7 = Constant() {value=tensor<f32[8]>[1,1,1,1,1,1,1,1]} : f32[8] "gamma"
  %8 = Constant() {value=tensor<f32[8]>[0,0,0,0,0,0,0,0]} : f32[8] "beta"
  %9 = LayerNormalization(%6, %7, %8) {axis=-1, epsilon=1e-05} : f32[4,8] "n"
  %10 = Constant() {value=tensor<f32[8,4]>[0.5,-0.25,0.125,1,-0.5,0.75,0.25,-1,0.25,0.5,-0.75,0.125,1,-0.125,0.5,0.25,-0.25,1,0.125,-0.5,0.75,0.25,-1,0.5,0.125,-0.5,1,0.25,-0.75,0.5,0.25,0.125]} : f32[8,4] "w2"
  %11 = kiln.Linear(%9, %10) : f32[4,4] "y"
  return "y": %11
})";

struct Lowered {
  std::unique_ptr<Graph> graph;
  PrecisionReport report;
};

// The fp16 cuda pipeline's precision stages on `text`, calibrated with two random sets.
std::unique_ptr<Lowered> LowerFp16(const std::string& text, bool with_pass,
                                   Precision precision = Precision::kFp16) {
  auto out = std::make_unique<Lowered>();
  out->graph = Parse(text);
  EXPECT_TRUE(out->graph);
  std::vector<absl::flat_hash_map<std::string, Tensor>> calibration = {
      RandomInputs(*out->graph, 11), RandomInputs(*out->graph, 12)};
  PassManagerOptions pmo;
  if (!with_pass) pmo.disabled = {"numeric-safety"};
  PassManager pm(pmo);
  PassContext ctx;
  ctx.verify_each = true;
  ctx.target = PlanTarget::kCuda;
  ctx.precision = precision;
  ctx.precision_report = &out->report;
  ctx.calibration_inputs = &calibration;
  auto pipeline = StandardPipeline(1, PlanTarget::kCuda, precision);
  EXPECT_TRUE(pipeline.ok());
  const absl::Status s = pm.Run(*pipeline, *out->graph, ctx);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// max |y - y_fp32| / max |y_fp32| on fresh inputs (inf/NaN: infinity).
double RelativeError(const std::string& text, const Graph& lowered) {
  auto original = Parse(text);
  double worst = 0;
  for (uint64_t seed : {21u, 22u}) {
    auto feeds = RandomInputs(*original, seed);
    auto want = RunReference(*original, feeds);
    auto got = RunReference(lowered, feeds);
    EXPECT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    if (!want.ok() || !got.ok()) return INFINITY;
    double err = 0, scale = 0;
    for (int64_t i = 0; i < (*want)[0].NumElements(); ++i) {
      const double w = (*want)[0].GetAsDouble(i), g = (*got)[0].GetAsDouble(i);
      if (!std::isfinite(g)) return INFINITY;
      err = std::max(err, std::fabs(g - w));
      scale = std::max(scale, std::fabs(w));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

TEST(NumericSafety, ThePassMattersForAnOutlierInTheResidualStream) {
  auto safe = LowerFp16(kOutlier, /*with_pass=*/true);
  auto unsafe = LowerFp16(kOutlier, /*with_pass=*/false);
  const double with = RelativeError(kOutlier, *safe->graph);
  const double without = RelativeError(kOutlier, *unsafe->graph);
  std::printf("fp16 relative error: with numeric-safety %.3g, without %.3g\n", with, without);
  // With it: the add, the scale and the LayerNorm stay f32; the fp16 Linears contribute
  // the rest (fp16's 11 bits over a few products and sums: 4.6e-4 measured, and the same
  // everywhere, since the reference executor is deterministic). Without it the scale
  // overflows to inf and the LayerNorm's rows are NaN.
  EXPECT_LT(with, 1e-3);
  EXPECT_GT(without, 0.1);
  // The verdicts, with the measured range, in the precision notes.
  int kept = 0;
  for (const PrecisionNote& n : safe->report.notes())
    if (absl::StartsWith(n.reason, "numeric-safety: ")) {
      ++kept;
      EXPECT_EQ(n.precision, "fp32");
      EXPECT_TRUE(absl::StrContains(n.reason, "|x| = 8e+04")) << n.reason;
    }
  EXPECT_EQ(kept, 1) << "the LayerNorm (the Add and Mul are elementwise: kept, not noted)";
  EXPECT_EQ(safe->report.num_forced(), 3) << "the Add, the Mul and the LayerNorm";
  const std::string text = PrintGraph(*safe->graph);
  EXPECT_TRUE(absl::StrContains(text, R"(LayerNormalization(%)")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(: f32[4,8] "n")")) << "LayerNorm stays f32\n" << text;
  EXPECT_TRUE(absl::StrContains(text, R"(: f16[4,4] "y")")) << "the last Linear is fp16\n" << text;
}

TEST(NumericSafety, NothingToDoInRangeAtBf16OrUncalibrated) {
  // In range: the outlier at 2, every op goes to fp16.
  const std::string tame = testing::Edit(kOutlier, "40000", "2");
  auto lowered = LowerFp16(tame, true);
  EXPECT_EQ(lowered->report.num_forced(), 0);
  EXPECT_LT(RelativeError(tame, *lowered->graph), 1e-2);
  // bf16 has f32's range: the pass does not run, and bf16 handles the outlier.
  auto bf16 = LowerFp16(kOutlier, true, Precision::kBf16);
  EXPECT_EQ(bf16->report.num_forced(), 0);
  EXPECT_LT(RelativeError(kOutlier, *bf16->graph), 5e-2);
  // Without calibration inputs the pass reports no change and decides nothing.
  auto g = Parse(kOutlier);
  PrecisionReport report;
  PassContext ctx;
  ctx.precision = Precision::kFp16;
  ctx.precision_report = &report;
  EXPECT_FALSE(testing::RunPass("numeric-safety", *g, ctx));
  EXPECT_EQ(report.num_forced(), 0);
}

// A cuda int8 plan (numeric-safety, gemm-precision, lower-precision at fp16): the first
// Linear becomes a kiln.QuantLinear reading and writing fp16, the head stays a 16-bit
// Linear (noted with its reason), and the outlier's Add, Mul and LayerNorm stay f32 as in
// an fp16 plan. With the first Linear's own output out of fp16's range (a weight of 3e4),
// numeric-safety's verdict passes to its QuantLinear: X and Y stay f32 around the int8
// GEMM, and the note says why.
TEST(NumericSafety, CudaInt8KeepsItsVerdictsAroundTheInt8Gemms) {
  auto int8 = LowerFp16(kOutlier, /*with_pass=*/true, Precision::kInt8);
  const std::string text = PrintGraph(*int8->graph);
  EXPECT_TRUE(absl::StrContains(text, R"(kiln.QuantLinear(%)")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(: f16[4,8] "h")")) << "QuantLinear writes fp16\n" << text;
  EXPECT_TRUE(absl::StrContains(text, R"(: f32[4,8] "n")")) << "LayerNorm stays f32\n" << text;
  EXPECT_TRUE(absl::StrContains(text, R"(kiln.Linear(%)")) << "the head stays a Linear\n" << text;
  EXPECT_TRUE(absl::StrContains(text, R"(: f16[4,4] "y")")) << text;
  // int8 on the first GEMM (per-row scales, 8 terms) and fp16 on the head: measured
  // 4.6e-4 here (the reference executor is deterministic); the bound leaves 10x.
  const double err = RelativeError(kOutlier, *int8->graph);
  std::printf("cuda int8 relative error: %.3g\n", err);
  EXPECT_LT(err, 5e-3);
  std::map<std::string, std::string> by_op;
  for (const PrecisionNote& n : int8->report.notes()) by_op[n.op] = n.precision + " " + n.reason;
  EXPECT_EQ(by_op["kiln.QuantLinear"], "int8 ");
  EXPECT_TRUE(absl::StartsWith(by_op["kiln.Linear"], "fp16 output head")) << by_op["kiln.Linear"];
  EXPECT_TRUE(absl::StartsWith(by_op["LayerNormalization"], "fp32 numeric-safety"))
      << by_op["LayerNormalization"];

  const std::string hot = testing::Edit(kOutlier, "[0.3,-0.2,0.1,0.4,", "[30000,-0.2,0.1,0.4,");
  auto forced = LowerFp16(hot, /*with_pass=*/true, Precision::kInt8);
  const std::string forced_text = PrintGraph(*forced->graph);
  EXPECT_TRUE(absl::StrContains(forced_text, R"(kiln.QuantLinear(%0,)"))
      << "X read as f32, no cast\n"
      << forced_text;
  EXPECT_TRUE(absl::StrContains(forced_text, R"(: f32[4,8] "h")")) << forced_text;
  bool noted = false;
  for (const PrecisionNote& n : forced->report.notes())
    if (n.op == "kiln.QuantLinear") {
      noted = true;
      EXPECT_EQ(n.precision, "int8");
      EXPECT_TRUE(absl::StartsWith(n.reason, "X and Y fp32: numeric-safety")) << n.reason;
    }
  EXPECT_TRUE(noted);
}

TEST(NumericSafety, BertFixtureStaysInRange) {
  auto model = ImportOnnxFile(std::string(KILN_SOURCE_DIR) +
                              "/models/fixtures/bert_tiny_opset17_classifier.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<absl::flat_hash_map<std::string, Tensor>> calibration = {
      RandomInputs(**model, 1, {{"batch", 2}, {"sequence", 16}}, /*int_high=*/2)};
  PrecisionReport report;
  PassContext ctx;
  ctx.target = PlanTarget::kCuda;
  ctx.precision = Precision::kFp16;
  ctx.precision_report = &report;
  ctx.calibration_inputs = &calibration;
  PassManager pm;
  ASSERT_TRUE(pm.Run(*StandardPipeline(2, PlanTarget::kCuda, Precision::kFp16), **model, ctx).ok());
  // The mask chain's -3.4e38 is out of range but stays f32 anyway (it starts from an integer
  // input, and attention keeps its mask operand f32): no compute op is kept for range.
  EXPECT_FALSE(report.notes().empty()) << "lower-precision notes the compute ops";
  for (const PrecisionNote& n : report.notes()) {
    EXPECT_FALSE(absl::StartsWith(n.reason, "numeric-safety")) << n.op << ": " << n.reason;
    EXPECT_EQ(n.precision, "fp16") << n.op << ": " << n.reason;
  }
}

}  // namespace
}  // namespace kiln
