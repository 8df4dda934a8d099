// Tests for the gemm-precision pass (cpu bf16 / int8 plans): bf16 weights and the s8
// per-output-channel quantization of kiln.Linear (Before/Expected IR, the quantized values
// checked against the formula), what stays fp32 and the reason noted for it (output heads,
// weights that are not constants, the other compute ops), fp32 / cuda 16-bit graphs left
// alone, cuda int8's multiples of 4,
// idempotence, and numbers: fixtures after -O2 on the reference executor against fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/reference/executor.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectRewrite;
using testing::Parse;
using testing::RandomInputs;

constexpr char kPass[] = "gemm-precision";

PassContext At(Precision p, PrecisionReport* report = nullptr,
               PlanTarget target = PlanTarget::kCpu) {
  PassContext ctx;
  ctx.precision = p;
  ctx.target = target;
  ctx.precision_report = report;
  return ctx;
}

// Linear -> LayerNorm -> Linear (the head: its result is the graph output).
constexpr char kTwoLinears[] = R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<f32[3,4]>[1,2,3,4,5,6,7,8,9,10,11,12]} : f32[3,4] "w1"
  %2 = Constant() {value=tensor<f32[4]>[0.5,0.25,0.125,1]} : f32[4] "b1"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu"} : f32[2,4] "h"
  %4 = Constant() {value=tensor<f32[4]>[1,1,1,1]} : f32[4] "gamma"
  %5 = LayerNormalization(%3, %4) {axis=-1} : f32[2,4] "n"
  %6 = Constant() {value=tensor<f32[2,4]>[1,-2,3,-4,0.5,0.5,0.5,0.5]} : f32[2,4] "w2"
  %7 = kiln.Linear(%5, %6) {trans_w=1} : f32[2,2] "logits"
  return "logits": %7
})";

TEST(GemmPrecision, Bf16StoresTheWeightsInBf16AndKeepsTheHead) {
  PrecisionReport report;
  ExpectRewrite(kPass, kTwoLinears, R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<bf16[3,4]>[1,2,3,4,5,6,7,8,9,10,11,12]} : bf16[3,4] "w1"
  %2 = Constant() {value=tensor<f32[4]>[0.5,0.25,0.125,1]} : f32[4] "b1"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu"} : f32[2,4] "h"
  %4 = Constant() {value=tensor<f32[4]>[1,1,1,1]} : f32[4] "gamma"
  %5 = LayerNormalization(%3, %4) {axis=-1} : f32[2,4] "n"
  %6 = Constant() {value=tensor<f32[2,4]>[1,-2,3,-4,0.5,0.5,0.5,0.5]} : f32[2,4] "w2"
  %7 = kiln.Linear(%5, %6) {trans_w=1} : f32[2,2] "logits"
  return "logits": %7
})",
                At(Precision::kBf16, &report));
  ASSERT_EQ(report.notes().size(), 3u);
  EXPECT_EQ(report.notes()[0].op, "kiln.Linear");
  EXPECT_EQ(report.notes()[0].precision, "bf16");
  EXPECT_EQ(report.notes()[0].reason, "");
  EXPECT_EQ(report.notes()[1].op, "LayerNormalization");
  EXPECT_EQ(report.notes()[1].precision, "fp32");
  EXPECT_TRUE(absl::StrContains(report.notes()[1].reason, "normalization"))
      << report.notes()[1].reason;
  EXPECT_EQ(report.notes()[2].precision, "fp32");
  EXPECT_TRUE(absl::StartsWith(report.notes()[2].reason, "output head"))
      << report.notes()[2].reason;
}

TEST(GemmPrecision, Int8QuantizesPerOutputChannel) {
  auto g = Parse(kTwoLinears);
  ASSERT_TRUE(g);
  PrecisionReport report;
  ASSERT_TRUE(testing::RunPass(kPass, *g, At(Precision::kInt8, &report)));
  const std::string text = PrintGraph(*g);
  EXPECT_TRUE(absl::StrContains(
      text,
      R"(kiln.QuantLinear(%0, %2, %3, %1) {activation="gelu", x_quant="dynamic_row"} : f32[2,4] "h")"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "\"w1\"")) << "the f32 weights are gone:\n" << text;
  EXPECT_TRUE(absl::StrContains(text, R"(kiln.Linear(%6, %7) {trans_w=1} : f32[2,2] "logits")"))
      << "the head stays f32:\n"
      << text;
  // W [K=3, N=4] as [N, K] s8: q = rne(w · 127 / max|column|), scale = max / 127.
  const Tensor* q = nullptr;
  const Tensor* scale = nullptr;
  for (const auto& n : g->nodes()) {
    if (!n->is_constant()) continue;
    if (n->output_info(0).name == "w1_s8") q = n->constant_value();
    if (n->output_info(0).name == "w1_scale") scale = n->constant_value();
  }
  ASSERT_TRUE(q && scale) << text;
  ASSERT_EQ(q->dtype(), DType::kI8);
  ASSERT_EQ(q->dims(), (std::vector<int64_t>{4, 3}));
  const float w[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
  for (int n = 0; n < 4; ++n) {
    const float a = w[2][n];  // the largest of each column
    EXPECT_FLOAT_EQ(scale->data<float>()[n], a / 127.0f);
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(q->data<int8_t>()[n * 3 + k],
                static_cast<int>(std::nearbyint(w[k][n] * (127.0f / a))))
          << "n=" << n << " k=" << k;
  }
  ASSERT_EQ(report.notes().size(), 3u);
  EXPECT_EQ(report.notes()[0].op, "kiln.QuantLinear");
  EXPECT_EQ(report.notes()[0].precision, "int8");
  EXPECT_FALSE(testing::RunPass(kPass, *g, At(Precision::kInt8))) << "second run changed it";
}

// --head-precision: the head (trans_w=1, as a tied LM head) goes to int8 too, with its own
// note; bf16 in an int8 plan; and an explicit fp32 keeps it with that reason.
TEST(GemmPrecision, HeadPrecisionLowersTheOutputHeadOnRequest) {
  for (Precision head : {Precision::kInt8, Precision::kBf16, Precision::kFp32}) {
    SCOPED_TRACE(std::string(PrecisionName(head)));
    auto g = Parse(kTwoLinears);
    ASSERT_TRUE(g);
    PrecisionReport report;
    PassContext ctx = At(Precision::kInt8, &report);
    ctx.head_precision = head;
    ASSERT_TRUE(testing::RunPass(kPass, *g, ctx));
    const std::string text = PrintGraph(*g);
    ASSERT_EQ(report.notes().size(), 3u);
    EXPECT_EQ(report.notes()[2].precision, std::string(PrecisionName(head)));
    EXPECT_EQ(report.notes()[2].reason,
              absl::StrCat("--head-precision ", std::string(PrecisionName(head)),
                           ": an output head, at this precision on "
                           "request"));
    if (head == Precision::kInt8) {
      EXPECT_TRUE(absl::StrContains(text, "{x_quant=\"dynamic_row\"} : f32[2,2] \"logits\""))
          << text;
      EXPECT_FALSE(absl::StrContains(text, "kiln.Linear(")) << text;
    } else if (head == Precision::kBf16) {
      EXPECT_TRUE(absl::StrContains(text, "bf16[2,4] \"w2\"")) << text;
    } else {
      EXPECT_TRUE(absl::StrContains(text, R"(kiln.Linear(%6, %7) {trans_w=1} : f32[2,2] "logits")"))
          << text;
    }
    EXPECT_FALSE(testing::RunPass(kPass, *g, ctx)) << "second run changed it";
  }
}

// A KV decoder's present = Concat(past, this step's V projection) is a cache, not a head:
// the projection is quantized like any other (before, V projections stayed fp32 as
// "output heads" while K, behind its rotary, went int8).
TEST(GemmPrecision, ACacheConcatIsNotAnOutputHead) {
  auto g = Parse(R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[5,4] "past"
  %2 = Constant() {value=tensor<f32[3,4]>[1,2,3,4,5,6,7,8,9,10,11,12]} : f32[3,4] "wv"
  %3 = kiln.Linear(%0, %2) : f32[2,4] "v"
  %4 = Concat(%1, %3) {axis=0} : f32[7,4] "present"
  return "present": %4
})");
  ASSERT_TRUE(g);
  PrecisionReport report;
  ASSERT_TRUE(testing::RunPass(kPass, *g, At(Precision::kInt8, &report)));
  EXPECT_TRUE(absl::StrContains(PrintGraph(*g), "kiln.QuantLinear(")) << PrintGraph(*g);
  ASSERT_EQ(report.notes().size(), 1u);
  EXPECT_EQ(report.notes()[0].precision, "int8");
}

TEST(GemmPrecision, WeightsThatAreNotConstantsStayF32) {
  PrecisionReport report;
  const std::string text = R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[3,4] "w"
  %2 = kiln.Linear(%0, %1) : f32[2,4] "h"
  %3 = Constant() {value=tensor<f32[4]>[1,1,1,1]} : f32[4] "gamma"
  %4 = LayerNormalization(%2, %3) {axis=-1} : f32[2,4] "y"
  return "y": %4
})";
  ExpectNoChange(kPass, text, At(Precision::kInt8, &report));
  ASSERT_FALSE(report.notes().empty());
  EXPECT_EQ(report.notes()[0].reason, "W is not a constant");
}

TEST(GemmPrecision, Fp32AndCudaGraphsUnchanged) {
  ExpectNoChange(kPass, kTwoLinears, At(Precision::kFp32));
  ExpectNoChange(kPass, kTwoLinears, At(Precision::kBf16, nullptr, PlanTarget::kCuda));
  ExpectNoChange(kPass, kTwoLinears, At(Precision::kFp16));
}

// cuda int8: cuBLASLt's int8 GEMMs take K and N multiples of 4, so kTwoLinears' first Linear
// (K 3) stays for lower-precision (noted at fp16, with the reason), as does the head; the
// LayerNorm is left to lower-precision's note. A K 4 Linear is quantized as on the cpu.
TEST(GemmPrecision, CudaInt8NeedsMultiplesOfFour) {
  PrecisionReport report;
  ExpectNoChange(kPass, kTwoLinears, At(Precision::kInt8, &report, PlanTarget::kCuda));
  ASSERT_EQ(report.notes().size(), 2u);
  EXPECT_EQ(report.notes()[0].precision, "fp16");
  EXPECT_EQ(report.notes()[0].reason, "K 3 and N 4: cuBLASLt's int8 GEMMs take multiples of 4");
  EXPECT_EQ(report.notes()[1].precision, "fp16");
  EXPECT_TRUE(absl::StartsWith(report.notes()[1].reason, "output head"))
      << report.notes()[1].reason;
  const std::string four =
      testing::Edit(testing::Edit(testing::Edit(kTwoLinears, "f32[2,3] \"x\"", "f32[2,4] \"x\""),
                                  "tensor<f32[3,4]>[1,2,3,4,5,6,7,8,9,10,11,12]",
                                  "tensor<f32[4,4]>[1,2,3,4,5,6,7,8,9,10,11,12,1,1,1,1]"),
                    ": f32[3,4] \"w1\"", ": f32[4,4] \"w1\"");
  auto g = Parse(four);
  PrecisionReport r4;
  ASSERT_TRUE(testing::RunPass(kPass, *g, At(Precision::kInt8, &r4, PlanTarget::kCuda)));
  EXPECT_TRUE(absl::StrContains(PrintGraph(*g), "kiln.QuantLinear(%0,")) << PrintGraph(*g);
  EXPECT_EQ(r4.notes()[0].op, "kiln.QuantLinear");
  EXPECT_EQ(r4.notes()[0].precision, "int8");
}

// A LayerNorm whose gain has one outlier channel (x40, as trained Transformers' LayerNorms
// do) feeding a Linear whose weights for that channel are small (as trained weights for
// outlier channels are): per-row int8 quantization spends its 255 levels on the channel.
// With calibration inputs the pass smooths the Linear (x_mul = 1 / s, W times s): the error
// against fp32 must fall, measurably.
std::string OutlierText(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  // n values: 40 at `outlier_at` and 1 elsewhere (a gain), or uniform ones whose
  // `small_row` (of rows of `cols`) is 40x smaller (a weight).
  auto values = [&](int n, int outlier_at = -1, int small_row = -1, int cols = 1) {
    std::string v;
    for (int i = 0; i < n; ++i) {
      float x = outlier_at >= 0 ? (i == outlier_at ? 40.0f : 1.0f) : u(gen);
      if (small_row >= 0 && i / cols == small_row) x /= 40;
      absl::StrAppend(&v, i ? "," : "", x);
    }
    return v;
  };
  return absl::StrCat(R"(graph g opset=21 {
  %0 = Input() : f32[16,64] "x"
  %1 = Constant() {value=tensor<f32[64]>[)",
                      values(64, 5), R"(]} : f32[64] "gamma"
  %2 = LayerNormalization(%0, %1) {axis=-1} : f32[16,64] "n"
  %3 = Constant() {value=tensor<f32[64,32]>[)",
                      values(64 * 32, -1, 5, 32), R"(]} : f32[64,32] "w"
  %4 = kiln.Linear(%2, %3) : f32[16,32] "h"
  %5 = Constant() {value=tensor<f32[32]>[)",
                      values(32, 31), R"(]} : f32[32] "g2"
  %6 = LayerNormalization(%4, %5) {axis=-1} : f32[16,32] "y"
  return "y": %6
})");
}

TEST(GemmPrecision, Int8SmoothingWithCalibrationInputs) {
  const std::string text = OutlierText(3);
  auto reference = Parse(text);
  std::vector<absl::flat_hash_map<std::string, Tensor>> calibration = {RandomInputs(*reference, 1),
                                                                       RandomInputs(*reference, 2)};
  auto error = [&](bool calibrated) {
    auto g = Parse(text);
    PassContext ctx = At(Precision::kInt8);
    if (calibrated) ctx.calibration_inputs = &calibration;
    EXPECT_TRUE(testing::RunPass(kPass, *g, ctx));
    const std::string printed = PrintGraph(*g);
    EXPECT_EQ(absl::StrContains(printed, "\"w_x_mul\""), calibrated) << printed;
    double worst = 0;
    for (uint64_t seed : {7u, 8u}) {  // held out: not the calibration's seeds
      auto feeds = RandomInputs(*reference, seed);
      auto want = RunReference(*reference, feeds);
      auto got = RunReference(*g, feeds);
      EXPECT_TRUE(want.ok() && got.ok());
      for (int64_t i = 0; i < (*want)[0].NumElements(); ++i)
        worst = std::max(worst, std::fabs((*want)[0].GetAsDouble(i) - (*got)[0].GetAsDouble(i)));
    }
    return worst;
  };
  const double plain = error(false), smoothed = error(true);
  std::printf("int8 max |err| vs fp32: per-row only %.3g, smoothed %.3g\n", plain, smoothed);
  EXPECT_LT(smoothed, 0.5 * plain);
}

// Static activations: the QuantLinear keeps one range, x_absmax; with the minmax observer
// it is exactly the calibration runs' largest |X ⊙ x_mul| (x_mul: the smoothing, read back
// from the graph), the precision note carries it, and the reference executor quantizes
// every row with it (other inputs than the calibration's clamp, still close to fp32).
TEST(GemmPrecision, StaticActivationsKeepTheCalibratedRange) {
  const std::string text = OutlierText(3);
  auto reference = Parse(text);
  std::vector<absl::flat_hash_map<std::string, Tensor>> calibration = {RandomInputs(*reference, 1),
                                                                       RandomInputs(*reference, 2)};
  for (const char* observer : {"minmax", "percentile", "entropy"}) {
    auto g = Parse(text);
    PrecisionReport report;
    PassContext ctx = At(Precision::kInt8, &report);
    ctx.calibration_inputs = &calibration;
    ctx.static_activations.enabled = true;
    ctx.static_activations.observer = observer;
    ASSERT_TRUE(testing::RunPass(kPass, *g, ctx));
    const Node* ql = nullptr;
    for (const auto& n : g->nodes())
      if (n->op() == "QuantLinear") ql = n.get();
    ASSERT_NE(ql, nullptr);
    ASSERT_NE(ql->attr_string("x_quant"), nullptr);
    EXPECT_EQ(*ql->attr_string("x_quant"), "static") << observer;
    const float range = ql->attr_float_or("x_absmax", 0);
    ASSERT_EQ(report.notes().size(), 3u);  // the QuantLinear and the two LayerNorms
    for (const PrecisionNote& n : report.notes())
      EXPECT_EQ(n.x_absmax, n.op == "kiln.QuantLinear" ? range : 0.0) << observer;
    // The largest |X ⊙ x_mul| of the calibration runs (X: the LayerNorm's output).
    const Tensor* x_mul = ql->input(4).node->constant_value();
    ASSERT_NE(x_mul, nullptr);
    float top = 0;
    for (const auto& feeds : calibration) {
      auto run = RunReference(*reference, feeds, [&](const Node& n, int, const Tensor& t) {
        if (n.output_info(0).name != "n") return;
        for (int64_t i = 0; i < t.NumElements(); ++i)
          top = std::max(top, std::fabs(t.data<float>()[i] * x_mul->data<float>()[i % 64]));
      });
      ASSERT_TRUE(run.ok()) << run.status();
    }
    if (std::string(observer) == "minmax") {
      EXPECT_EQ(range, top);
    } else {
      EXPECT_GT(range, 0.0f) << observer;
      EXPECT_LE(range, top) << observer;
    }
    // Against dynamic per-row quantization (smoothed the same way) on held-out inputs: a
    // per-tensor range is coarser for rows with small values, but not by much here.
    auto dynamic = Parse(text);
    PassContext dctx = At(Precision::kInt8);
    dctx.calibration_inputs = &calibration;
    ASSERT_TRUE(testing::RunPass(kPass, *dynamic, dctx));
    auto feeds = RandomInputs(*reference, 9);
    auto want = RunReference(*reference, feeds);
    auto got = RunReference(*g, feeds);
    auto dyn = RunReference(*dynamic, feeds);
    ASSERT_TRUE(want.ok() && got.ok() && dyn.ok());
    double worst = 0, worst_dynamic = 0;
    for (int64_t i = 0; i < (*want)[0].NumElements(); ++i) {
      const double w = (*want)[0].GetAsDouble(i);
      worst = std::max(worst, std::fabs(w - (*got)[0].GetAsDouble(i)));
      worst_dynamic = std::max(worst_dynamic, std::fabs(w - (*dyn)[0].GetAsDouble(i)));
    }
    std::printf("static int8 (%s, |x| <= %.4g): max |err| vs fp32 %.3g (dynamic per row %.3g)\n",
                observer, range, worst, worst_dynamic);
    EXPECT_LT(worst, 2 * worst_dynamic) << observer;
  }
}

// --precision auto's fallback: the attention GEMMs (Q/K/V and output projections) at bf16,
// the FFN's at int8, each noted.
TEST(GemmPrecision, AttentionGroupAtBf16InAnInt8Plan) {
  auto model = ImportOnnxFile(std::string(KILN_SOURCE_DIR) +
                              "/models/fixtures/bert_tiny_opset17_classifier.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  PrecisionReport report;
  PassContext ctx;
  ctx.precision = Precision::kInt8;
  ctx.precision_report = &report;
  ctx.gemm_group_precision = {{"attention", Precision::kBf16}};
  PassManager pm;
  ASSERT_TRUE(pm.Run(*StandardPipeline(2, PlanTarget::kCpu, Precision::kInt8), **model, ctx).ok());
  int int8 = 0, bf16 = 0;
  for (const PrecisionNote& n : report.notes()) {
    if (n.precision == "int8") ++int8;
    if (n.precision == "bf16") {
      ++bf16;
      EXPECT_EQ(n.reason, "--precision auto: the attention GEMMs at bf16");
      EXPECT_TRUE(absl::StrContains(absl::StrJoin(n.nodes, " "), "attention")) << n.nodes[0];
    }
  }
  // 2 layers: Q/K/V (merged) and output projection each at bf16; FFN up and down, and the
  // pooler, at int8.
  EXPECT_EQ(bf16, 4);
  EXPECT_EQ(int8, 5);
}

// ---------------------------------------------------------------------------------------
// Numbers: fixtures through -O2 for cpu at fp32 and at bf16 / int8, both on the reference
// executor, on the same seeded inputs (integer inputs 0/1, batch 8). The figure is each
// output's max |Δ| over its scale: max |fp32 value| for vectors, and for scores (last dim
// < 8: a classifier's [batch, 1] logits) their spread over the batch, max − min, which is
// what ranking them needs. Random weights, so these are sanity bounds on the rewrite (a
// wrong layout or scale is off by ~1), not the accuracy gates of real models.

double WorstRelativeError(const std::string& fixture, Precision p) {
  auto model = ImportOnnxFile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/" + fixture);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return INFINITY;
  auto lowered = (*model)->Clone();
  PassManager pm;
  PassContext ctx;
  ctx.verify_each = true;
  ctx.symbol_values = {{"batch", 8}, {"sequence", 16}};
  EXPECT_TRUE(pm.Run(*StandardPipeline(2), **model, ctx).ok());
  ctx.precision = p;
  absl::Status s = pm.Run(*StandardPipeline(2, PlanTarget::kCpu, p), *lowered, ctx);
  EXPECT_TRUE(s.ok()) << s;
  double worst = 0;
  for (uint64_t seed : {1u, 2u}) {
    auto feeds = RandomInputs(**model, seed, {}, /*int_high=*/2);
    auto ra = RunReference(**model, feeds);
    auto rb = RunReference(*lowered, feeds);
    EXPECT_TRUE(ra.ok() && rb.ok()) << ra.status() << " " << rb.status();
    if (!ra.ok() || !rb.ok()) return INFINITY;
    for (size_t o = 0; o < ra->size(); ++o) {
      const Tensor &x = (*ra)[o], &y = (*rb)[o];
      EXPECT_EQ(y.dtype(), x.dtype()) << fixture << " output " << o;
      if (x.dims() != y.dims() || !IsFloat(x.dtype())) continue;
      const bool scores = x.rank() > 0 && x.dims().back() < 8;
      double err = 0, big = 0, lo = INFINITY, hi = -INFINITY;
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        const double v = x.GetAsDouble(i);
        err = std::max(err, std::fabs(v - y.GetAsDouble(i)));
        big = std::max(big, std::fabs(v));
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      worst = std::max(worst, err / (scores ? hi - lo : big));
    }
  }
  return worst;
}

TEST(GemmPrecision, FixturesStayCloseToFp32) {
  for (const char* f : {"bert_tiny_opset14_pooler.onnx", "bert_tiny_opset17_classifier.onnx",
                        "variants/roberta_tiny_opset17.onnx", "variants/st_mean_tiny_opset14.onnx",
                        "decoder/llama_tiny_opset17.onnx"}) {
    SCOPED_TRACE(f);
    const double bf16 = WorstRelativeError(f, Precision::kBf16);
    const double int8 = WorstRelativeError(f, Precision::kInt8);
    std::printf("%s: max |err| / scale: bf16 %.2e int8 %.2e\n", f, bf16, int8);
    // Measured (2026-12-05): bf16 1.4e-4 .. 4.9e-3, int8 5.7e-4 .. 2.7e-2 (the classifier's
    // logits and the decoder's logits are the worst: a head sums many quantized terms).
    EXPECT_LE(bf16, 1e-2);  // bf16: 8 significant bits, ~4e-3 per rounding
    EXPECT_LE(int8, 5e-2);
  }
}

}  // namespace
}  // namespace kiln
