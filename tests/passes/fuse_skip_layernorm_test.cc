// Tests for fuse-skip-layernorm: post-LN (BERT) and pre-LN (residual sum read later)
// forms, both bias placements, a broadcast skip, the kiln.RMSNorm root (SkipRMSNorm), as
// Before/Expected IR (run twice by ExpectRewrite) and numerically on the reference executor (1e-5:
// SkipLayerNorm sums in double, Add + LayerNormalization round the sum to f32 first — ~1e-7 after
// normalization); the near-misses with their reasons; the graphs left alone.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/text.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/fusion_report.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/pass_manager.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-skip-layernorm";

// The one skip_layernorm near-miss of `text`, naming the LayerNormalization and the Add.
void ExpectMiss(const std::string& text, const std::string& reason) {
  EXPECT_EQ(testing::ExpectOneMiss(kPass, text, "skip_layernorm", reason).nodes,
            (std::vector<std::string>{"ln", "residual"}));
}

// BERT: LayerNorm(attention output + previous LayerNorm output); the sum is read only by
// the LayerNormalization.
constexpr char kPostLn[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "attn"
  %1 = Input() : f32[2,3,4] "prev"
  %2 = Add(%0, %1) : f32[2,3,4] @ "residual"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = Constant() {value=tensor<f32[4]>[0, 0.1, 0.2, 0.3]} : f32[4] "beta"
  %5 = LayerNormalization(%2, %3, %4) {axis=-1, epsilon=1e-12} : f32[2,3,4] "y" @ "ln"
  return "y": %5
})";

TEST(FuseSkipLayerNorm, PostLayerNormResidual) {
  ExpectRewrite(kPass, kPostLn, R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "attn"
  %1 = Input() : f32[2,3,4] "prev"
  %2 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %3 = Constant() {value=tensor<f32[4]>[0, 0.1, 0.2, 0.3]} : f32[4] "beta"
  %4 = kiln.SkipLayerNorm(%0, %1, %2, %3) {epsilon=1e-12} : f32[2,3,4] "y" @ "residual", "ln"
  return "y": %4
})");
  ExpectNumericallyEquivalent(kPass, kPostLn);
  const FusionReport r = RunWithReport({kPass}, kPostLn).report;
  EXPECT_EQ(r.kinds().at("skip_layernorm").fused, 1);
}

// Pre-LN decoder: h = x + attn is normalized and also read by the next residual Add —
// one of whose readers comes before the LayerNormalization in node order.
constexpr char kPreLn[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "attn"
  %2 = Add(%0, %1) : f32[2,4] "h" @ "residual"
  %3 = Relu(%2) : f32[2,4] "early" @ "early_reader"
  %4 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %5 = LayerNormalization(%2, %4) {epsilon=1e-05} : f32[2,4] "n" @ "ln"
  %6 = Add(%5, %2) : f32[2,4] "y" @ "next_residual"
  %7 = Add(%6, %3) : f32[2,4] "z" @ "sum"
  return "z": %7
})";

TEST(FuseSkipLayerNorm, PreLayerNormExposesTheSum) {
  ExpectRewrite(kPass, kPreLn, R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "attn"
  %2 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %3, %4 = kiln.SkipLayerNorm(%0, %1, %2) {epsilon=1e-05} : f32[2,4] "n", f32[2,4] "h" @ "residual", "ln"
  %5 = Relu(%4) : f32[2,4] "early" @ "early_reader"
  %6 = Add(%3, %4) : f32[2,4] "y" @ "next_residual"
  %7 = Add(%6, %5) : f32[2,4] "z" @ "sum"
  return "z": %7
})");
  ExpectNumericallyEquivalent(kPass, kPreLn);
}

// Bias inside one addend: Add(Add(x, b), skip), b as [1,1,4]; skip [3,4] broadcasts and
// is the first operand, so X is the second.
constexpr char kInnerBias[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[3,4] "skip"
  %2 = Constant() {value=tensor<f32[1,1,4]>[0.5, -0.5, 1, 0]} : f32[1,1,4] "b"
  %3 = Add(%0, %2) : f32[2,3,4] @ "bias"
  %4 = Add(%1, %3) : f32[2,3,4] @ "residual"
  %5 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %6 = LayerNormalization(%4, %5) {epsilon=1e-05} : f32[2,3,4] "y" @ "ln"
  return "y": %6
})";

TEST(FuseSkipLayerNorm, InnerBiasAndBroadcastSkip) {
  ExpectRewrite(kPass, kInnerBias, R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[3,4] "skip"
  %2 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %3 = Constant() {value=tensor<f32[4]>[0.5, -0.5, 1, 0]} : f32[4] "b_vector"
  %4 = kiln.SkipLayerNorm(%0, %1, %2, _, %3) {epsilon=1e-05} : f32[2,3,4] "y" @ "bias", "residual", "ln"
  return "y": %4
})");
  ExpectNumericallyEquivalent(kPass, kInnerBias);
}

// Bias outermost: Add(Add(x, skip), b).
constexpr char kOuterBias[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "skip"
  %2 = Add(%0, %1) : f32[2,4] @ "residual"
  %3 = Constant() {value=tensor<f32[4]>[0.5, -0.5, 1, 0]} : f32[4] "b"
  %4 = Add(%2, %3) : f32[2,4] @ "bias"
  %5 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %6 = Constant() {value=tensor<f32[4]>[0, 0, 1, 1]} : f32[4] "beta"
  %7 = LayerNormalization(%4, %5, %6) {epsilon=1e-05} : f32[2,4] "y" @ "ln"
  return "y": %7
})";

TEST(FuseSkipLayerNorm, OuterBias) {
  ExpectRewrite(kPass, kOuterBias, R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "skip"
  %2 = Constant() {value=tensor<f32[4]>[0.5, -0.5, 1, 0]} : f32[4] "b"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = Constant() {value=tensor<f32[4]>[0, 0, 1, 1]} : f32[4] "beta"
  %5 = kiln.SkipLayerNorm(%0, %1, %3, %4, %2) {epsilon=1e-05} : f32[2,4] "y" @ "bias", "residual", "ln"
  return "y": %5
})");
  ExpectNumericallyEquivalent(kPass, kOuterBias);
}

// Pre-norm decoder (LLaMA): h = x + attn is RMS-normalized and read by the next residual;
// the RMSNorm root becomes kiln.SkipRMSNorm with the Sum output, its epsilon carried.
constexpr char kPreRms[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[2,3,4] "attn"
  %2 = Add(%0, %1) : f32[2,3,4] "h" @ "residual"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = kiln.RMSNorm(%2, %3) {epsilon=1e-05} : f32[2,3,4] "n" @ "ln"
  %5 = Add(%4, %2) : f32[2,3,4] "y" @ "next_residual"
  return "y": %5
})";

TEST(FuseSkipLayerNorm, RmsNormRootBecomesSkipRmsNormWithTheSum) {
  ExpectRewrite(kPass, kPreRms, R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[2,3,4] "attn"
  %2 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %3, %4 = kiln.SkipRMSNorm(%0, %1, %2) {epsilon=1e-05} : f32[2,3,4] "n", f32[2,3,4] "h" @ "residual", "ln"
  %5 = Add(%3, %4) : f32[2,3,4] "y" @ "next_residual"
  return "y": %5
})");
  ExpectNumericallyEquivalent(kPass, kPreRms);
  const FusionReport r = RunWithReport({kPass}, kPreRms).report;
  EXPECT_EQ(r.kinds().at("skip_layernorm").fused, 1);
}

// A bias inside one addend goes to SkipRMSNorm's fourth operand (it has no beta).
constexpr char kRmsBias[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "skip"
  %2 = Constant() {value=tensor<f32[4]>[0.5, -0.5, 1, 0]} : f32[4] "b"
  %3 = Add(%0, %2) : f32[2,4] @ "bias"
  %4 = Add(%3, %1) : f32[2,4] @ "residual"
  %5 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %6 = kiln.RMSNorm(%4, %5) : f32[2,4] "y" @ "ln"
  return "y": %6
})";

TEST(FuseSkipLayerNorm, RmsNormWithBias) {
  ExpectRewrite(kPass, kRmsBias, R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "skip"
  %2 = Constant() {value=tensor<f32[4]>[0.5, -0.5, 1, 0]} : f32[4] "b"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = kiln.SkipRMSNorm(%0, %1, %3, %2) {epsilon=1e-06} : f32[2,4] "y" @ "bias", "residual", "ln"
  return "y": %4
})");
  ExpectNumericallyEquivalent(kPass, kRmsBias);
}

TEST(FuseSkipLayerNorm, RmsNormNearMissNeitherAddendHasTheSumShape) {
  ExpectMiss(R"(graph g opset=17 {
  %0 = Input() : f32[2,1,4] "x"
  %1 = Input() : f32[1,3,4] "skip"
  %2 = Add(%0, %1) : f32[2,3,4] @ "residual"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = kiln.RMSNorm(%2, %3) : f32[2,3,4] "y" @ "ln"
  return "y": %4
})",
             "neither addend (f32[2,1,4], f32[1,3,4]) has the sum's shape f32[2,3,4]");
}

TEST(FuseSkipLayerNorm, NearMissNeitherAddendHasTheSumShape) {
  ExpectMiss(R"(graph g opset=17 {
  %0 = Input() : f32[2,1,4] "x"
  %1 = Input() : f32[1,3,4] "skip"
  %2 = Add(%0, %1) : f32[2,3,4] @ "residual"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = LayerNormalization(%2, %3) : f32[2,3,4] "y" @ "ln"
  return "y": %4
})",
             "neither addend (f32[2,1,4], f32[1,3,4]) has the sum's shape f32[2,3,4]");
}

TEST(FuseSkipLayerNorm, NearMissNormalizingTwoAxes) {
  ExpectMiss(R"(graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[2,3,4] "skip"
  %2 = Add(%0, %1) : f32[2,3,4] @ "residual"
  %3 = Constant() {value=tensor<f32[3,4]>[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]} : f32[3,4] "gamma"
  %4 = LayerNormalization(%2, %3) {axis=1} : f32[2,3,4] "y" @ "ln"
  return "y": %4
})",
             "LayerNormalization 'ln' normalizes from axis 1 of a rank-3 input; SkipLayerNorm "
             "normalizes the last axis only");
}

TEST(FuseSkipLayerNorm, NearMissStatisticsOutputsRead) {
  ExpectMiss(R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Input() : f32[2,4] "skip"
  %2 = Add(%0, %1) : f32[2,4] @ "residual"
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4, %5 = LayerNormalization(%2, %3) : f32[2,4] "y", f32[2,1] "mean" @ "ln"
  return "y": %4, "mean": %5
})",
             "LayerNormalization 'ln' has its Mean/InvStdDev outputs read");
}

TEST(FuseSkipLayerNorm, LeavesEmbeddingSumsConstantsAndPlainLayerNorms) {
  // Embedding sum: left to fuse-embed-layernorm, not reported.
  const std::string embeddings = R"(graph g opset=17 {
  %0 = Input() : i64[2,3] "ids"
  %1 = Input() : i64[2,3] "types"
  %2 = Constant() {value=tensor<f32[5,4]>#0000803f0000004000004040000080400000a0400000c0400000e0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000a041} : f32[5,4] "word"
  %3 = Constant() {value=tensor<f32[2,4]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[2,4] "type_emb"
  %4 = Gather(%2, %0) : f32[2,3,4] @ "g1"
  %5 = Gather(%3, %1) : f32[2,3,4] @ "g2"
  %6 = Add(%4, %5) : f32[2,3,4] @ "add"
  %7 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %8 = LayerNormalization(%6, %7) : f32[2,3,4] "y" @ "ln"
  return "y": %8
})";
  ExpectNoChange(kPass, embeddings);
  EXPECT_EQ(RunWithReport({kPass}, embeddings).report.total_missed(), 0);
  // A constant addend (position embeddings folded under static shapes).
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[2,4]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[2,4] "pos"
  %2 = Add(%0, %1) : f32[2,4]
  %3 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %4 = LayerNormalization(%2, %3) : f32[2,4] "y"
  return "y": %4
})");
  // No Add in front.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %2 = LayerNormalization(%0, %1) : f32[2,4] "y"
  return "y": %2
})");
}

// GPT-2's layer 0: the attention output is added to the embedding sum (wte + wpe), which
// ln_1 also reads. One addend is an embedding sum, the other is not: a residual Add, fused
// with its Sum exposed (the next residual reads it). The embedding Add stays for
// fuse-embed-layernorm.
constexpr char kGpt2Layer0[] = R"(graph g opset=17 {
  %0 = Input() : i64[2,3] "ids"
  %1 = Constant() {value=tensor<f32[5,4]>[0.5, 0.25, -0.125, 1.5, -0.75, 0.3, 0.2, 0.1, 0.05, -0.6, 0.7, 0.8, -0.9, 0.35, 0.45, 0.55, 0.65, -0.15, 0.25, 0.05]} : f32[5,4] "wte"
  %2 = Gather(%1, %0) : f32[2,3,4] @ "wte_gather"
  %3 = Constant() {value=tensor<f32[1,3,4]>[0.1, 0.2, 0.3, 0.4, -0.1, -0.2, -0.3, -0.4, 0.5, 0.0, 0.25, 0.125]} : f32[1,3,4] "wpe"
  %4 = Add(%2, %3) : f32[2,3,4] "embeds" @ "embed_add"
  %5 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %6 = Constant() {value=tensor<f32[4]>[0, 0.1, 0.2, 0.3]} : f32[4] "beta"
  %7 = LayerNormalization(%4, %5, %6) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_1"
  %8 = Relu(%7) : f32[2,3,4] @ "attn"
  %9 = Add(%8, %4) : f32[2,3,4] "h" @ "residual"
  %10 = LayerNormalization(%9, %5, %6) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_2"
  %11 = Relu(%10) : f32[2,3,4] @ "mlp"
  %12 = Add(%11, %9) : f32[2,3,4] "y" @ "residual_2"
  return "y": %12
})";

TEST(FuseSkipLayerNorm, Gpt2ResidualOntoEmbeddingSum) {
  ExpectRewrite(kPass, kGpt2Layer0, R"(graph g opset=17 {
  %0 = Input() : i64[2,3] "ids"
  %1 = Constant() {value=tensor<f32[5,4]>#0000003f0000803e000000be0000c03f000040bf9a99993ecdcc4c3ecdcccc3dcdcc4c3d9a9919bf3333333fcdcc4c3f666666bf3333b33e6666e63ecdcc0c3f6666263f9a9919be0000803ecdcc4c3d} : f32[5,4] "wte"
  %2 = Gather(%1, %0) : f32[2,3,4] @ "wte_gather"
  %3 = Constant() {value=tensor<f32[1,3,4]>[0.1, 0.2, 0.3, 0.4, -0.1, -0.2, -0.3, -0.4, 0.5, 0, 0.25, 0.125]} : f32[1,3,4] "wpe"
  %4 = Add(%2, %3) : f32[2,3,4] "embeds" @ "embed_add"
  %5 = Constant() {value=tensor<f32[4]>[1, 2, 0.5, -1]} : f32[4] "gamma"
  %6 = Constant() {value=tensor<f32[4]>[0, 0.1, 0.2, 0.3]} : f32[4] "beta"
  %7 = LayerNormalization(%4, %5, %6) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_1"
  %8 = Relu(%7) : f32[2,3,4] @ "attn"
  %9, %10 = kiln.SkipLayerNorm(%8, %4, %5, %6) {epsilon=1e-05} : f32[2,3,4], f32[2,3,4] "h" @ "residual", "ln_2"
  %11 = Relu(%9) : f32[2,3,4] @ "mlp"
  %12 = Add(%11, %10) : f32[2,3,4] "y" @ "residual_2"
  return "y": %12
})");
  ExpectNumericallyEquivalent(kPass, kGpt2Layer0);
  EXPECT_EQ(RunWithReport({kPass}, kGpt2Layer0).report.total_missed(), 0);
}

// ---------------------------------------------------------------------------------------
// The whole chain on a real export: models/fixtures/bert_tiny_opset14_none.onnx (2 layers,
// H=64, decomposed LayerNorm and erf GELU) after -O1 with batch=1, sequence=16, then
// canonicalize, fuse-layernorm, fuse-gelu, fuse-linear, fuse-skip-layernorm.

std::map<std::string, int> OpCounts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const auto& n : g.nodes())
    if (!n->is_constant() && !n->is_input())
      counts[n->domain().empty() ? n->op() : n->domain() + "." + n->op()]++;
  return counts;
}

TEST(FusionChain, BertTinyOpset14EveryNormGeluAndProjectionFused) {
  auto original =
      ImportOnnxFile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/bert_tiny_opset14_none.onnx");
  ASSERT_TRUE(original.ok()) << original.status();
  std::unique_ptr<Graph> g = (*original)->Clone();
  FusionReport report;
  PassContext ctx;
  ctx.verify_each = true;
  ctx.symbol_values = {{"batch", 1}, {"sequence", 16}};
  ctx.fusion_report = &report;
  PassManager pm;
  absl::StatusOr<Pipeline> o1 = StandardPipeline(1);
  ASSERT_TRUE(o1.ok());
  ASSERT_TRUE(pm.Run(*o1, *g, ctx).ok());
  absl::StatusOr<Pipeline> mine = CustomPipeline(
      {"canonicalize", "fuse-layernorm", "fuse-gelu", "fuse-linear", "fuse-skip-layernorm"});
  ASSERT_TRUE(mine.ok());
  absl::Status s = pm.Run(*mine, *g, ctx);
  ASSERT_TRUE(s.ok()) << s;

  std::map<std::string, int> ops = OpCounts(*g);
  // 5 LayerNorms: the embeddings' stays a LayerNormalization (fuse-embed-layernorm's),
  // the 4 after residual Adds become SkipLayerNorm. 2 layers x 6 projections are Linear,
  // the 2 FFN-in ones with the GELU absorbed.
  EXPECT_EQ(ops["LayerNormalization"], 1);
  EXPECT_EQ(ops["kiln.SkipLayerNorm"], 4);
  EXPECT_EQ(ops["kiln.Linear"], 12);
  for (const char* gone : {"ReduceMean", "Pow", "Sqrt", "Erf", "Gelu", "Div"})
    EXPECT_EQ(ops.count(gone), 0u) << gone;
  int gelu_linears = 0;
  for (const auto& n : g->nodes())
    if (n->op() == "Linear" && n->attr_string("activation") &&
        *n->attr_string("activation") == "gelu")
      ++gelu_linears;
  EXPECT_EQ(gelu_linears, 2);
  // The attention MatMuls (Q·Kᵀ, P·V) are all that is left of MatMul.
  EXPECT_EQ(ops["MatMul"], 4);
  for (const char* kind : {"linear", "gelu", "layernorm", "skip_layernorm"})
    EXPECT_TRUE(report.kinds().at(kind).missed.empty()) << kind;
  EXPECT_EQ(report.kinds().at("layernorm").fused, 5);
  EXPECT_EQ(report.kinds().at("gelu").fused, 2);
  EXPECT_EQ(report.kinds().at("linear").fused, 12);
  EXPECT_EQ(report.kinds().at("skip_layernorm").fused, 4);

  // Numbers: ids in [0, 4), token types 0/1, the last 5 positions masked. The fused
  // kernels compute in double where the decomposed graph rounds every op to f32; over two
  // layers of O(1) LayerNorm outputs that moves results by ~1e-6, within 1e-5.
  absl::flat_hash_map<std::string, Tensor> feeds;
  std::vector<int64_t> ids(16), mask(16), types(16);
  for (int i = 0; i < 16; ++i) {
    ids[i] = (i * 7 + 3) % 4;
    mask[i] = i < 11 ? 1 : 0;
    types[i] = i < 8 ? 0 : 1;
  }
  feeds["input_ids"] = Tensor::FromI64({1, 16}, ids);
  feeds["attention_mask"] = Tensor::FromI64({1, 16}, mask);
  feeds["token_type_ids"] = Tensor::FromI64({1, 16}, types);
  const double err = testing::MaxAbsDiff(**original, *g, feeds);
  EXPECT_LE(err, 1e-5);
}

}  // namespace
}  // namespace kiln
