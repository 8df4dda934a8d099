// Tests for the lower-precision pass: Before/Expected IR for each rule (a lowered op with
// converted weights and a cast input, a follow op, the f32 mask of attention, a kept-f32
// op, a constant fp16 cannot hold, graph outputs cast back), fp32 and already-lowered
// graphs left alone, and numbers: real fixtures after -O2 at fp16 and bf16 on the
// reference executor against their fp32 graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

constexpr char kPass[] = "lower-precision";

PassContext At(Precision p) {
  PassContext ctx;
  ctx.precision = p;
  return ctx;
}

TEST(LowerPrecision, LinearLowersFollowersFollowOutputsComeBack) {
  // Linear (kLower): weights converted, x cast down; Add (follow) takes the 16-bit value and
  // its f32 graph-input operand is cast down too; the graph output is cast back to f32. At
  // fp16 each run-time value cast down saturates first (one pair of ±65504 bounds).
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[2,4] "r"
  %2 = Constant() {value=tensor<f32[3,4]>[1,2,3,4,5,6,7,8,9,10,11,12]} : f32[3,4] "w"
  %3 = Constant() {value=tensor<f32[4]>[0.5,0.25,0.125,1]} : f32[4] "b"
  %4 = kiln.Linear(%0, %2, %3) : f32[2,4] "y"
  %5 = Add(%4, %1) : f32[2,4] "z"
  return "z": %5
})",
                R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[2,4] "r"
  %2 = Constant() {value=tensor<f16[3,4]>[1,2,3,4,5,6,7,8,9,10,11,12]} : f16[3,4] "w"
  %3 = Constant() {value=tensor<f16[4]>[0.5,0.25,0.125,1]} : f16[4] "b"
  %4 = Constant() {value=tensor<f32[]>[65504]} : f32[] "kiln_fp16_max"
  %5 = Constant() {value=tensor<f32[]>[-65504]} : f32[] "kiln_fp16_lowest"
  %6 = Clip(%0, %5, %4) : f32[2,3] "x_sat"
  %7 = Cast(%6) {to=10} : f16[2,3] "x_f16"
  %8 = kiln.Linear(%7, %2, %3) : f16[2,4] "y"
  %9 = Clip(%1, %5, %4) : f32[2,4] "r_sat"
  %10 = Cast(%9) {to=10} : f16[2,4] "r_f16"
  %11 = Add(%8, %10) : f16[2,4] "z"
  %12 = Cast(%11) {to=1} : f32[2,4] "z"
  return "z": %12
})",
                At(Precision::kFp16));
}

TEST(LowerPrecision, AttentionMaskChainStaysF32) {
  // The mask chain starts from an integer input: nothing pulls it down, and attention's
  // mask operand is one the op keeps in f32.
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Input() : f32[1,4,6] "qkv"
  %1 = Input() : i64[1,1,1,4] "mask"
  %2 = Cast(%1) {to=1} : f32[1,1,1,4]
  %3 = Constant() {value=tensor<f32[]>[-3.4e+38]} : f32[] "big"
  %4 = Mul(%2, %3) : f32[1,1,1,4]
  %5 = kiln.MultiHeadAttention(%0, %4) {num_heads=1, scale=0.5} : f32[1,4,2] "y"
  return "y": %5
})",
                R"(
graph g opset=21 {
  %0 = Input() : f32[1,4,6] "qkv"
  %1 = Input() : i64[1,1,1,4] "mask"
  %2 = Cast(%1) {to=1} : f32[1,1,1,4]
  %3 = Constant() {value=tensor<f32[]>[-3.4e+38]} : f32[] "big"
  %4 = Mul(%2, %3) : f32[1,1,1,4]
  %5 = Cast(%0) {to=16} : bf16[1,4,6] "qkv_bf16"
  %6 = kiln.MultiHeadAttention(%5, %4) {num_heads=1, scale=0.5} : bf16[1,4,2] "y"
  %7 = Cast(%6) {to=1} : f32[1,4,2] "y"
  return "y": %7
})",
                At(Precision::kBf16));
}

TEST(LowerPrecision, KeptF32OpsAndUnrepresentableConstantsCastUp) {
  // Exp stays f32 (range); Mul by 1e5 stays f32 at fp16 (65504 is fp16's largest), so both
  // read the Softmax result cast back up. The output is already f32: no cast at the end.
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Input() : f32[2,8] "x"
  %1 = Softmax(%0) : f32[2,8] "p"
  %2 = Exp(%1) : f32[2,8] "e"
  %3 = Constant() {value=tensor<f32[]>[100000]} : f32[] "k"
  %4 = Mul(%1, %3) : f32[2,8] "m"
  %5 = Add(%2, %4) : f32[2,8] "y"
  return "y": %5
})",
                R"(
graph g opset=21 {
  %0 = Input() : f32[2,8] "x"
  %1 = Constant() {value=tensor<f32[]>[65504]} : f32[] "kiln_fp16_max"
  %2 = Constant() {value=tensor<f32[]>[-65504]} : f32[] "kiln_fp16_lowest"
  %3 = Clip(%0, %2, %1) : f32[2,8] "x_sat"
  %4 = Cast(%3) {to=10} : f16[2,8] "x_f16"
  %5 = Softmax(%4) : f16[2,8] "p"
  %6 = Cast(%5) {to=1} : f32[2,8] "p_f32"
  %7 = Exp(%6) : f32[2,8] "e"
  %8 = Constant() {value=tensor<f32[]>[100000]} : f32[] "k"
  %9 = Mul(%6, %8) : f32[2,8] "m"
  %10 = Add(%7, %9) : f32[2,8] "y"
  return "y": %10
})",
                At(Precision::kFp16));
}

TEST(LowerPrecision, Fp16MaskSaturatesSoAFullyMaskedRowStaysFinite) {
  // An attention left unfused: fp16 scores plus the f32 mask chain's -3.4e38 ("minus
  // infinity"). Cast straight to fp16 that is -inf, and a row whose keys are all masked
  // gives NaN from Softmax (then spreads through the next GEMM); saturated it is -65504 and
  // the row is uniform, as in f32. Batch item 1 has every key masked.
  auto g = Parse(R"(
graph g opset=21 {
  %0 = Input() : f32[2,3,4] "h"
  %1 = Input() : i64[2,1,4] "mask"
  %2 = Constant() {value=tensor<f32[4,4]>[0.5,-1,0.25,2,1,0.5,-0.5,0.125,-2,1,1,0.5,0.25,0.75,-1,1]} : f32[4,4] "w"
  %3 = kiln.Linear(%0, %2) : f32[2,3,4] "scores"
  %4 = Cast(%1) {to=1} : f32[2,1,4] "m"
  %5 = Constant() {value=tensor<f32[]>[1]} : f32[] "one"
  %6 = Sub(%5, %4) : f32[2,1,4] "inv"
  %7 = Constant() {value=tensor<f32[]>[-3.4e+38]} : f32[] "big"
  %8 = Mul(%6, %7) : f32[2,1,4] "add_mask"
  %9 = Add(%3, %8) : f32[2,3,4] "masked"
  %10 = Softmax(%9) : f32[2,3,4] "p"
  return "p": %10
})");
  auto lowered = g->Clone();
  ASSERT_TRUE(testing::RunPass(kPass, *lowered, At(Precision::kFp16)));
  absl::flat_hash_map<std::string, Tensor> feeds;
  std::vector<float> h(24);
  for (size_t i = 0; i < h.size(); ++i) h[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  feeds["h"] = Tensor::FromF32({2, 3, 4}, h);
  feeds["mask"] = Tensor::FromI64({2, 1, 4}, {1, 1, 0, 1, 0, 0, 0, 0});
  auto want = RunReference(*g, feeds);
  auto got = RunReference(*lowered, feeds);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << " " << got.status();
  const Tensor &a = (*want)[0], &b = (*got)[0];
  ASSERT_EQ(a.NumElements(), b.NumElements());
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    ASSERT_TRUE(std::isfinite(b.GetAsDouble(i))) << "element " << i;
    // fp16 probabilities: 11 significant bits, so within 2^-10 of f32's.
    EXPECT_NEAR(b.GetAsDouble(i), a.GetAsDouble(i), 1e-3) << "element " << i;
  }
  for (int64_t i = 12; i < 24; ++i) EXPECT_NEAR(b.GetAsDouble(i), 0.25, 1e-3);  // uniform
}

TEST(LowerPrecision, AGatherFromAConstantTableRunsLow) {
  // Gather's only f32 operand is the embedding table: the table is stored at 16 bits and
  // the gather moves 16-bit rows (no f32 table, no cast of its output into the next op).
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Input() : i64[2] "ids"
  %1 = Constant() {value=tensor<f32[3,2]>[1,2,3,4,5,6]} : f32[3,2] "table"
  %2 = Gather(%1, %0) {axis=0} : f32[2,2] "rows"
  return "rows": %2
})",
                R"(
graph g opset=21 {
  %0 = Input() : i64[2] "ids"
  %1 = Constant() {value=tensor<f16[3,2]>[1,2,3,4,5,6]} : f16[3,2] "table"
  %2 = Gather(%1, %0) {axis=0} : f16[2,2] "rows"
  %3 = Cast(%2) {to=1} : f32[2,2] "rows"
  return "rows": %3
})",
                At(Precision::kFp16));
}

TEST(LowerPrecision, AGenerationCompileKeepsTheKvCacheF32) {
  // PassContext::kv_cache_f32 (--decode-context): the Concat appending this step's rows to
  // a past input as a graph output, and the attention reading it, stay f32 — only the new
  // rows and the queries are cast up — so the decode program's pools never convert.
  const std::string before = R"(
graph g opset=21 {
  %0 = Input() : f32[1,2,3,4] "past"
  %1 = Input() : f32[1,2,1,4] "x"
  %2 = Constant() {value=tensor<f32[4,4]>[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]} : f32[4,4] "w"
  %3 = kiln.Linear(%1, %2) : f32[1,2,1,4] "new"
  %4 = Concat(%0, %3) {axis=2} : f32[1,2,4,4] "present"
  %5 = kiln.Attention(%3, %4, %4) {scale=0.5} : f32[1,1,8] "y"
  return "present": %4, "y": %5
})";
  PassContext ctx = At(Precision::kBf16);
  ctx.kv_cache_f32 = true;
  ExpectRewrite(kPass, before, R"(
graph g opset=21 {
  %0 = Input() : f32[1,2,3,4] "past"
  %1 = Input() : f32[1,2,1,4] "x"
  %2 = Constant() {value=tensor<bf16[4,4]>[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]} : bf16[4,4] "w"
  %3 = Cast(%1) {to=16} : bf16[1,2,1,4] "x_bf16"
  %4 = kiln.Linear(%3, %2) : bf16[1,2,1,4] "new"
  %5 = Cast(%4) {to=1} : f32[1,2,1,4] "new_f32"
  %6 = Concat(%0, %5) {axis=2} : f32[1,2,4,4] "present"
  %7 = kiln.Attention(%5, %6, %6) {scale=0.5} : f32[1,1,8] "y"
  return "present": %6, "y": %7
})",
                ctx);
  // Without the flag the cache follows its 16-bit rows down (and comes back up as an output).
  auto g = Parse(before);
  ASSERT_TRUE(g);
  EXPECT_TRUE(testing::RunPass(kPass, *g, At(Precision::kBf16)));
  for (const auto& n : g->nodes())
    if (n->op() == "Concat") EXPECT_EQ(n->output_info(0).type.dtype, DType::kBF16);
}

TEST(LowerPrecision, AMaskLoweredBeforeItsAttentionExistedComesBackUp) {
  // A fusion that only a bucket's shapes allow (genai's GroupQueryAttention) makes the
  // attention after the symbolic graph's run has lowered its mask: the per-bucket run casts
  // the 16-bit mask back to f32, as the kernels take it.
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Input() : f16[1,2,3,4] "q"
  %1 = Input() : f16[1,2,5,4] "k"
  %2 = Input() : f16[1,1,3,5] "mask"
  %3 = kiln.Attention(%0, %1, %1, %2) {scale=0.5} : f16[1,3,8] "y"
  return "y": %3
})",
                R"(
graph g opset=21 {
  %0 = Input() : f16[1,2,3,4] "q"
  %1 = Input() : f16[1,2,5,4] "k"
  %2 = Input() : f16[1,1,3,5] "mask"
  %3 = Cast(%2) {to=1} : f32[1,1,3,5] "mask_f32"
  %4 = kiln.Attention(%0, %1, %1, %3) {scale=0.5} : f16[1,3,8] "y"
  return "y": %4
})",
                At(Precision::kFp16));
}

TEST(LowerPrecision, Fp32AndIntegerGraphsUnchanged) {
  const std::string g = R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Softmax(%0) : f32[2,3] "y"
  return "y": %1
})";
  ExpectNoChange(kPass, g, At(Precision::kFp32));
  ExpectNoChange(kPass, R"(
graph g opset=21 {
  %0 = Input() : i64[4] "ids"
  %1 = Add(%0, %0) : i64[4] "y"
  return "y": %1
})",
                 At(Precision::kFp16));
}

TEST(LowerPrecision, ModelsOwn16BitValuesAreLeftAlone) {
  // An fp16 graph: Exp (kept f32) still reads f16 — the pass moves only f32 values.
  ExpectNoChange(kPass, R"(
graph g opset=21 {
  %0 = Input() : f16[4] "x"
  %1 = Exp(%0) : f16[4] "e"
  %2 = Softmax(%1) : f16[4] "y"
  return "y": %2
})",
                 At(Precision::kFp16));
}

// ---------------------------------------------------------------------------------------
// Numbers: fixtures through -O2 at fp32 and at 16 bits, both on the reference executor
// (which computes each op in double and rounds once to its dtype), on the same seeded
// inputs (integer inputs 0/1: token ids, type ids and attention masks).

struct Agreement {
  double max_abs = 0, min_cosine = 1;
};

Agreement Compare(const std::string& fixture, Precision p) {
  auto model = ImportOnnxFile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/" + fixture);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {INFINITY, -1};
  auto lowered = (*model)->Clone();
  PassManager pm;
  PassContext ctx;
  ctx.verify_each = true;
  ctx.symbol_values = {{"batch", 2}, {"sequence", 16}};
  EXPECT_TRUE(pm.Run(*StandardPipeline(2), **model, ctx).ok());
  ctx.precision = p;
  absl::Status s = pm.Run(*StandardPipeline(2, PlanTarget::kCuda, p), *lowered, ctx);
  EXPECT_TRUE(s.ok()) << s;
  Agreement a;
  for (uint64_t seed : {1u, 2u}) {
    auto feeds = RandomInputs(**model, seed, {}, /*int_high=*/2);
    auto ra = RunReference(**model, feeds);
    auto rb = RunReference(*lowered, feeds);
    EXPECT_TRUE(ra.ok() && rb.ok()) << ra.status() << " " << rb.status();
    if (!ra.ok() || !rb.ok()) return {INFINITY, -1};
    for (size_t o = 0; o < ra->size(); ++o) {
      const Tensor &x = (*ra)[o], &y = (*rb)[o];
      EXPECT_EQ(y.dtype(), x.dtype()) << fixture << " output " << o << ": the caller's dtype";
      if (x.dims() != y.dims() || !IsFloat(x.dtype())) continue;
      double dot = 0, nx = 0, ny = 0;
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        const double u = x.GetAsDouble(i), v = y.GetAsDouble(i);
        a.max_abs = std::max(a.max_abs, std::fabs(u - v));
        dot += u * v;
        nx += u * u;
        ny += v * v;
      }
      a.min_cosine = std::min(a.min_cosine, dot / std::sqrt(nx * ny));
    }
  }
  return a;
}

// Bounds: fp16 rounds each op's operands to 11 significant bits (relative 2^-11 = 4.9e-4),
// bf16 to 8 (3.9e-3); through two layers of width 32-64 with O(1) activations that
// compounds to a few 1e-3 (fp16) and a few 1e-2 (bf16) absolute on hidden states and
// logits. Measured worst cases (this test prints them): fp16 4.6e-3 and cosine 0.9999995,
// bf16 3.3e-2 and 0.99997. The bounds are ~3x those, so a conversion bug (a weight in the
// wrong 16-bit format, a value left in f32 where its consumer reads 16 bits, a constant
// rounded twice) — which moves outputs by O(1e-1) or more — fails them.
TEST(LowerPrecisionNumbers, EncodersAndDecoderAtFp16AndBf16) {
  struct Case {
    const char* fixture;
    Precision p;
    double max_abs, min_cosine;
  };
  const Case cases[] = {
      {"default.onnx", Precision::kFp16, 1.5e-2, 0.99999},
      {"default.onnx", Precision::kBf16, 1e-1, 0.9999},
      {"variants/st_mean_tiny_opset14.onnx", Precision::kFp16, 1.5e-2, 0.99999},
      {"variants/roberta_tiny_opset17.onnx", Precision::kBf16, 1e-1, 0.9999},
      {"torch/distilbert_dynamo_sdpa.onnx", Precision::kFp16, 1.5e-2, 0.99999},
      {"torch/gpt2_torchscript_eager.onnx", Precision::kFp16, 1.5e-2, 0.99999},
      {"decoder/llama_tiny_opset17.onnx", Precision::kFp16, 1.5e-2, 0.99999},
      {"decoder/llama_tiny_opset17.onnx", Precision::kBf16, 1e-1, 0.9999},
  };
  for (const Case& c : cases) {
    const Agreement a = Compare(c.fixture, c.p);
    EXPECT_LE(a.max_abs, c.max_abs) << c.fixture << " " << PrecisionName(c.p);
    EXPECT_GE(a.min_cosine, c.min_cosine) << c.fixture << " " << PrecisionName(c.p);
    std::printf("%-40s %s: max |diff| %.3g, min cosine %.7f\n", c.fixture,
                std::string(PrecisionName(c.p)).c_str(), a.max_abs, a.min_cosine);
  }
}

}  // namespace
}  // namespace kiln
