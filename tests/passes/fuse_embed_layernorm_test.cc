// Tests for fuse-embed-layernorm: one Before/Expected case per exporter variant (BERT with
// folded positions, symbolic BERT with sliced positions, RoBERTa's computed positions,
// DistilBERT's Range positions read through Shape, a SkipLayerNorm root, constant non-range
// positions, a folded token-type row), each run twice by ExpectRewrite and checked
// numerically on the reference executor; the cases the pass must leave alone; and the
// near-misses with their reported reasons.
#include <gtest/gtest.h>

#include <algorithm>
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

constexpr char kPass[] = "fuse-embed-layernorm";

// Tables: word [6,4], position [5,4], token type [4,4]; LayerNorm gamma/beta [4].
#define WORD                                                                              \
  "  %0 = Constant() {value=tensor<f32[6,4]>[0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, " \
  "0.9, 1.0, -1.1, 1.2, 0.13, 0.14, -0.15, 0.16, -0.17, 0.18, 0.19, 0.2, 0.21, -0.22, "   \
  "0.23, 0.24]} : f32[6,4] \"word\"\n"
#define POS                                                                             \
  "  %1 = Constant() {value=tensor<f32[5,4]>[0.5, 0.25, -0.125, 1.5, -0.75, 0.3, 0.2, " \
  "0.1, 0.05, -0.6, 0.7, 0.8, -0.9, 0.35, 0.45, 0.55, 0.65, -0.15, 0.25, 0.05]} : "     \
  "f32[5,4] \"pos\"\n"
#define TYPE                                                                               \
  "  %2 = Constant() {value=tensor<f32[4,4]>[0.01, 0.02, -0.03, 0.04, -0.05, 0.06, 0.07, " \
  "-0.08, 0.09, -0.1, 0.11, 0.12, -0.13, 0.14, 0.15, 0.16]} : f32[4,4] \"type\"\n"
#define NORM                                                                          \
  "  %3 = Constant() {value=tensor<f32[4]>[1.0, 0.9, 1.1, 1.2]} : f32[4] \"gamma\"\n" \
  "  %4 = Constant() {value=tensor<f32[4]>[0.1, -0.1, 0.2, 0.0]} : f32[4] \"beta\"\n"
#define TABLES WORD POS TYPE NORM

// Static BERT after -O1: the position lookup is folded to a constant [1,3,4] (rows 0..2 of
// the position table), the token types are an input.
constexpr char kBertStatic[] = "graph g opset=17 {\n" WORD TYPE NORM R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Input() : i64[2,3] "token_type_ids"
  %7 = Gather(%0, %5) : f32[2,3,4] @ "word_gather"
  %8 = Gather(%2, %6) : f32[2,3,4] @ "type_gather"
  %9 = Add(%7, %8) : f32[2,3,4] @ "add0"
  %10 = Constant() {value=tensor<f32[1,3,4]>[0.5, 0.25, -0.125, 1.5, -0.75, 0.3, 0.2, 0.1, 0.05, -0.6, 0.7, 0.8]} : f32[1,3,4] @ "pos_gather"
  %11 = Add(%9, %10) : f32[2,3,4] @ "add1"
  %12 = LayerNormalization(%11, %3, %4) {axis=-1, epsilon=1e-12} : f32[2,3,4] "emb" @ "ln"
  %13 = Relu(%12) : f32[2,3,4]
  return "y": %13
})";

TEST(FuseEmbedLayerNormTest, BertStaticFoldedPositions) {
  ExpectRewrite(kPass, kBertStatic, "graph g opset=17 {\n" WORD TYPE NORM R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Input() : i64[2,3] "token_type_ids"
  %7 = Constant() {value=tensor<f32[3,4]>[0.5, 0.25, -0.125, 1.5, -0.75, 0.3, 0.2, 0.1, 0.05, -0.6, 0.7, 0.8]} : f32[3,4] "emb/position_table"
  %8 = kiln.EmbedLayerNorm(%5, %6, _, %0, %7, %2, %3, %4) {epsilon=1e-12} : f32[2,3,4] "emb" @ "ln", "add1", "add0", "word_gather", "type_gather", "pos_gather"
  %9 = Relu(%8) : f32[2,3,4]
  return "y": %9
})");
  ExpectNumericallyEquivalent(kPass, kBertStatic);
  const testing::FusionRun run = RunWithReport({kPass}, kBertStatic);
  EXPECT_TRUE(run.changed);
  const FusionReport& r = run.report;
  EXPECT_EQ(r.kinds().at("embed_layernorm").fused, 1);
  EXPECT_TRUE(r.kinds().at("embed_layernorm").missed.empty());
}

// Symbolic BERT: positions Slice [0:S] of the arange buffer, S read from Shape(input_ids);
// the Slice's own type does not know its length, the ends input proves it. Embedding sum
// in another association: word + (pos + type).
constexpr char kBertSymbolic[] = "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : i64[batch,seq] "input_ids"
  %6 = Input() : i64[batch,seq] "token_type_ids"
  %7 = Constant() {value=tensor<i64[1,5]>[0, 1, 2, 3, 4]} : i64[1,5] "position_ids"
  %8 = Shape(%5) : i64[2]
  %9 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %10 = Gather(%8, %9) {axis=0} : i64[]
  %11 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %12 = Unsqueeze(%10, %11) : i64[1]
  %13 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %14 = Slice(%7, %11, %12, %13, %13) : i64[1,?]
  %15 = Gather(%1, %14) : f32[1,?,4]
  %16 = Gather(%2, %6) : f32[batch,seq,4]
  %17 = Add(%15, %16) : f32[batch,seq,4]
  %18 = Gather(%0, %5) : f32[batch,seq,4]
  %19 = Add(%18, %17) : f32[batch,seq,4]
  %20 = LayerNormalization(%19, %3, %4) {epsilon=1e-12} : f32[batch,seq,4] "emb"
  return "y": %20
})";

TEST(FuseEmbedLayerNormTest, BertSymbolicSlicedPositionsAreImplicit) {
  ExpectRewrite(kPass, kBertSymbolic, "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : i64[batch,seq] "input_ids"
  %6 = Input() : i64[batch,seq] "token_type_ids"
  %7 = kiln.EmbedLayerNorm(%5, %6, _, %0, %1, %2, %3, %4) {epsilon=1e-12} : f32[batch,seq,4] "emb"
  return "y": %7
})");
  ExpectNumericallyEquivalent(kPass, kBertSymbolic, {}, {{"batch", 2}, {"seq", 4}});
}

// RoBERTa: position ids = CumSum(ids != 1) * mask + 1, computed at run time; that value
// feeds position_ids and the computation stays.
constexpr char kRoberta[] = "graph g opset=17 {\n" WORD POS NORM R"(
  %5 = Input() : i64[batch,seq] "input_ids"
  %6 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %7 = Equal(%5, %6) : bool[batch,seq]
  %8 = Not(%7) : bool[batch,seq]
  %9 = Cast(%8) {to=6} : i32[batch,seq]
  %10 = CumSum(%9, %6) : i32[batch,seq]
  %11 = Mul(%10, %9) : i32[batch,seq]
  %12 = Cast(%11) {to=7} : i64[batch,seq]
  %13 = Add(%12, %6) : i64[batch,seq] "position_ids"
  %14 = Gather(%0, %5) : f32[batch,seq,4]
  %15 = Gather(%1, %13) : f32[batch,seq,4]
  %16 = Add(%14, %15) : f32[batch,seq,4]
  %17 = LayerNormalization(%16, %3, %4) {epsilon=1e-05} : f32[batch,seq,4] "emb"
  return "y": %17
})";

TEST(FuseEmbedLayerNormTest, RobertaComputedPositionsFeedPositionIds) {
  ExpectRewrite(kPass, kRoberta, "graph g opset=17 {\n" WORD POS NORM R"(
  %5 = Input() : i64[batch,seq] "input_ids"
  %6 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %7 = Equal(%5, %6) : bool[batch,seq]
  %8 = Not(%7) : bool[batch,seq]
  %9 = Cast(%8) {to=6} : i32[batch,seq]
  %10 = CumSum(%9, %6) : i32[batch,seq]
  %11 = Mul(%10, %9) : i32[batch,seq]
  %12 = Cast(%11) {to=7} : i64[batch,seq]
  %13 = Add(%12, %6) : i64[batch,seq] "position_ids"
  %14 = kiln.EmbedLayerNorm(%5, _, %13, %0, %1, _, %3, %4) {epsilon=1e-05} : f32[batch,seq,4] "emb"
  return "y": %14
})");
  // ids in [0, 4): CumSum positions reach seq + 1 = 4 < 5 table rows.
  ExpectNumericallyEquivalent(kPass, kRoberta, {}, {{"batch", 2}, {"seq", 3}});
}

// RoBERTa with static shapes: the buffered zero token types fold to a constant [2,3,4]
// whose rows all equal type[0]; that row is added into the position table.
constexpr char kRobertaStaticTypes[] = "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Input() : i64[2,3] "position_ids"
  %7 = Gather(%0, %5) : f32[2,3,4]
  %8 = Constant() {value=tensor<f32[2,3,4]>[0.01, 0.02, -0.03, 0.04, 0.01, 0.02, -0.03, 0.04, 0.01, 0.02, -0.03, 0.04, 0.01, 0.02, -0.03, 0.04, 0.01, 0.02, -0.03, 0.04, 0.01, 0.02, -0.03, 0.04]} : f32[2,3,4]
  %9 = Add(%7, %8) : f32[2,3,4]
  %10 = Gather(%1, %6) : f32[2,3,4]
  %11 = Add(%9, %10) : f32[2,3,4]
  %12 = LayerNormalization(%11, %3, %4) {epsilon=1e-05} : f32[2,3,4] "emb"
  return "y": %12
})";

TEST(FuseEmbedLayerNormTest, RowConstantFoldsIntoPositionTable) {
  auto g = Parse(kRobertaStaticTypes);
  ASSERT_TRUE(g);
  ASSERT_TRUE(RunPass(kPass, *g));
  const Node* fused = nullptr;
  for (const auto& n : g->nodes())
    if (n->op() == "EmbedLayerNorm") fused = n.get();
  ASSERT_NE(fused, nullptr) << PrintGraph(*g);
  EXPECT_FALSE(fused->input(1));                      // no token-type ids
  EXPECT_EQ(fused->input(2).name(), "position_ids");  // explicit positions
  const Tensor* table = fused->input(4).node->constant_value();
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->dims(), (std::vector<int64_t>{5, 4}));
  const float type0[4] = {0.01f, 0.02f, -0.03f, 0.04f};
  const float pos1[4] = {-0.75f, 0.3f, 0.2f, 0.1f};  // row 1 of the position table
  for (int j = 0; j < 4; ++j) EXPECT_FLOAT_EQ(table->data<float>()[4 + j], pos1[j] + type0[j]) << j;
  ExpectNumericallyEquivalent(kPass, kRobertaStaticTypes);
}

// DistilBERT (symbolic): no token types; positions Range(0, S, 1) -> Unsqueeze -> Expand,
// with S read from Shape(word embeddings): that Shape is answered from input_ids.
constexpr char kDistil[] = "graph g opset=17 {\n" WORD POS NORM R"(
  %5 = Input() : i64[batch,seq] "input_ids"
  %6 = Gather(%0, %5) : f32[batch,seq,4] "words"
  %7 = Shape(%6) : i64[3] "words_shape"
  %8 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %9 = Gather(%7, %8) {axis=0} : i64[]
  %10 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %11 = Range(%10, %9, %8) : i64[seq]
  %12 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %13 = Unsqueeze(%11, %12) : i64[1,seq]
  %14 = Shape(%5) : i64[2]
  %15 = Expand(%13, %14) : i64[batch,seq]
  %16 = Gather(%1, %15) : f32[batch,seq,4]
  %17 = Add(%6, %16) : f32[batch,seq,4]
  %18 = LayerNormalization(%17, %3, %4) {epsilon=1e-12} : f32[batch,seq,4] "emb"
  %19 = Cast(%9) {to=1} : f32[]
  return "y": %18, "len": %19
})";

TEST(FuseEmbedLayerNormTest, DistilBertRangePositionsAndShapeOfWords) {
  ExpectRewrite(kPass, kDistil, "graph g opset=17 {\n" WORD POS NORM R"(
  %5 = Input() : i64[batch,seq] "input_ids"
  %6 = Shape(%5) : i64[2]
  %7 = Constant() {value=tensor<i64[1]>[4]} : i64[1] "emb/hidden_size"
  %8 = Concat(%6, %7) {axis=0} : i64[3] "words_shape"
  %9 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %10 = Gather(%8, %9) {axis=0} : i64[]
  %11 = kiln.EmbedLayerNorm(%5, _, _, %0, %1, _, %3, %4) {epsilon=1e-12} : f32[batch,seq,4] "emb"
  %12 = Cast(%10) {to=1} : f32[]
  return "y": %11, "len": %12
})");
  ExpectNumericallyEquivalent(kPass, kDistil, {}, {{"batch", 2}, {"seq", 5}});
}

// fuse-skip-layernorm ran first and took the last Add: the root is a SkipLayerNorm whose
// inputs are the embedding sum's two halves. Constant positions that are not 0..S-1 (a
// left-aligned offset of 1) go to position_ids.
constexpr char kSkipRoot[] = "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Input() : i64[2,3] "token_type_ids"
  %7 = Gather(%0, %5) : f32[2,3,4] @ "w"
  %8 = Gather(%2, %6) : f32[2,3,4] @ "t"
  %9 = Add(%7, %8) : f32[2,3,4] @ "a"
  %10 = Constant() {value=tensor<i64[1,3]>[1, 2, 3]} : i64[1,3] "pos_ids"
  %11 = Gather(%1, %10) : f32[1,3,4] @ "p"
  %12 = kiln.SkipLayerNorm(%9, %11, %3, %4) {epsilon=1e-12} : f32[2,3,4] "emb" @ "sln"
  return "y": %12
})";

TEST(FuseEmbedLayerNormTest, SkipLayerNormRootAndConstantNonRangePositions) {
  ExpectRewrite(kPass, kSkipRoot, "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Input() : i64[2,3] "token_type_ids"
  %7 = Constant() {value=tensor<i64[1,3]>[1, 2, 3]} : i64[1,3] "pos_ids"
  %8 = kiln.EmbedLayerNorm(%5, %6, %7, %0, %1, %2, %3, %4) {epsilon=1e-12} : f32[2,3,4] "emb" @ "sln", "a", "w", "t", "p"
  return "y": %8
})");
  ExpectNumericallyEquivalent(kPass, kSkipRoot);
}

// The SkipLayerNorm root's Sum output is read (a pre-LN decoder's first residual): it
// becomes the EmbedLayerNorm's Sum output.
TEST(FuseEmbedLayerNormTest, SkipLayerNormRootSumOutputCarriesOver) {
  std::string text = kSkipRoot;
  auto sub = [&text](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  sub("%12 = kiln.SkipLayerNorm", "%12, %13 = kiln.SkipLayerNorm");
  sub("f32[2,3,4] \"emb\" @", "f32[2,3,4] \"emb\", f32[2,3,4] \"sum\" @");
  sub("return \"y\": %12", "return \"y\": %12, \"s\": %13");
  ExpectRewrite(kPass, text, "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Input() : i64[2,3] "token_type_ids"
  %7 = Constant() {value=tensor<i64[1,3]>[1, 2, 3]} : i64[1,3] "pos_ids"
  %8, %9 = kiln.EmbedLayerNorm(%5, %6, %7, %0, %1, %2, %3, %4) {epsilon=1e-12} : f32[2,3,4] "emb", f32[2,3,4] "sum" @ "sln", "a", "w", "t", "p"
  return "y": %8, "s": %9
})");
  ExpectNumericallyEquivalent(kPass, text);
}

// Constant positions equal to 0..S-1 (unfolded lookup) are implicit.
TEST(FuseEmbedLayerNormTest, ConstantRangePositionsAreImplicit) {
  std::string text = kSkipRoot;
  text.replace(text.find("[1, 2, 3]"), 9, "[0, 1, 2]");
  auto g = Parse(text);
  ASSERT_TRUE(g);
  ASSERT_TRUE(RunPass(kPass, *g));
  const Node* fused = nullptr;
  for (const auto& n : g->nodes())
    if (n->op() == "EmbedLayerNorm") fused = n.get();
  ASSERT_NE(fused, nullptr);
  EXPECT_FALSE(fused->input(2)) << PrintGraph(*g);
  EXPECT_EQ(fused->input(4).name(), "pos");
  ExpectNumericallyEquivalent(kPass, text);
}

// An encoder LayerNorm (residual of a MatMul) is not an embedding block: no change, no
// report.
constexpr char kEncoderLayerNorm[] = "graph g opset=17 {\n" TABLES R"(
  %5 = Input() : f32[2,3,4] "h"
  %6 = MatMul(%5, %0) : f32[2,3,6]
  %7 = Constant() {value=tensor<f32[6,4]>[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]} : f32[6,4]
  %8 = MatMul(%6, %7) : f32[2,3,4]
  %9 = Add(%8, %5) : f32[2,3,4]
  %10 = LayerNormalization(%9, %3, %4) : f32[2,3,4]
  return "y": %10
})";

TEST(FuseEmbedLayerNormTest, LeavesEncoderLayerNormAlone) {
  ExpectNoChange(kPass, kEncoderLayerNorm);
  const FusionReport r = RunWithReport({kPass}, kEncoderLayerNorm).report;
  EXPECT_EQ(r.total_missed(), 0);
  EXPECT_EQ(r.total_fused(), 0);
}

// GPT-2 (pre-LN): the embedding sum feeds ln_1 and is also the residual, so every later
// LayerNorm's input descends from the word lookup through Adds. Only ln_1 is a near-miss
// (its sum is read elsewhere); ln_2 and ln_f normalize the residual stream, whose
// lookups all sit below the shared sum, and are not reported. (Relu stands in for the
// attention and MLP blocks.)
constexpr char kGpt2Residual[] = "graph g opset=17 {\n" WORD POS NORM R"(
  %5 = Input() : i64[2,3] "input_ids"
  %6 = Constant() {value=tensor<i64[1,3]>[0, 1, 2]} : i64[1,3]
  %7 = Gather(%0, %5) : f32[2,3,4] @ "wte"
  %8 = Gather(%1, %6) : f32[1,3,4] @ "wpe"
  %9 = Add(%7, %8) : f32[2,3,4] "embeds" @ "embed_add"
  %10 = LayerNormalization(%9, %3, %4) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_1"
  %11 = Relu(%10) : f32[2,3,4] @ "attn"
  %12 = Add(%11, %9) : f32[2,3,4] @ "residual_1"
  %13 = LayerNormalization(%12, %3, %4) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_2"
  %14 = Relu(%13) : f32[2,3,4] @ "mlp"
  %15 = Add(%14, %12) : f32[2,3,4] @ "residual_2"
  %16 = LayerNormalization(%15, %3, %4) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_f"
  return "y": %16
})";

// GPT-2: the embedding sum is ln_1's input and the first residual. It becomes the
// EmbedLayerNorm's Sum output (readers re-sorted after it); the later LayerNorms reach the
// lookups only through that shared sum (a residual stream) and are not candidates.
TEST(FuseEmbedLayerNormTest, Gpt2EmbeddingSumBecomesSumOutput) {
  ExpectRewrite(kPass, kGpt2Residual, R"(graph g opset=17 {
  %0 = Constant() {value=tensor<f32[6,4]>#cdcccc3dcdcc4cbe9a99993ecdcccc3e000000bf9a99193f3333333fcdcc4cbf6666663f0000803fcdcc8cbf9a99993fb81e053e295c0f3e9a9919be0ad7233e7b142ebeec51383e5c8f423ecdcc4c3e3d0a573eae4761be1f856b3e8fc2753e} : f32[6,4] "word"
  %1 = Constant() {value=tensor<f32[5,4]>#0000003f0000803e000000be0000c03f000040bf9a99993ecdcc4c3ecdcccc3dcdcc4c3d9a9919bf3333333fcdcc4c3f666666bf3333b33e6666e63ecdcc0c3f6666263f9a9919be0000803ecdcc4c3d} : f32[5,4] "pos"
  %2 = Constant() {value=tensor<f32[4]>[1, 0.9, 1.1, 1.2]} : f32[4] "gamma"
  %3 = Constant() {value=tensor<f32[4]>[0.1, -0.1, 0.2, 0]} : f32[4] "beta"
  %4 = Input() : i64[2,3] "input_ids"
  %5, %6 = kiln.EmbedLayerNorm(%4, _, _, %0, %1, _, %2, %3) {epsilon=1e-05} : f32[2,3,4], f32[2,3,4] "embeds" @ "ln_1", "embed_add", "wte", "wpe"
  %7 = Relu(%5) : f32[2,3,4] @ "attn"
  %8 = Add(%7, %6) : f32[2,3,4] @ "residual_1"
  %9 = LayerNormalization(%8, %2, %3) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_2"
  %10 = Relu(%9) : f32[2,3,4] @ "mlp"
  %11 = Add(%10, %8) : f32[2,3,4] @ "residual_2"
  %12 = LayerNormalization(%11, %2, %3) {axis=-1, epsilon=1e-05} : f32[2,3,4] @ "ln_f"
  return "y": %12
})");
  ExpectNumericallyEquivalent(kPass, kGpt2Residual);
  const FusionReport r = RunWithReport({kPass}, kGpt2Residual).report;
  const auto& k = r.kinds().at("embed_layernorm");
  EXPECT_EQ(k.fused, 1);
  EXPECT_TRUE(k.missed.empty());
}

// After fuse-skip-layernorm took layer 0's residual Add onto the embedding sum, that
// kiln.SkipLayerNorm (Sum output read by the next residual) reads the shared sum: it is
// the residual stream, not a candidate; ln_1 fuses with the Sum output, which the
// SkipLayerNorm then reads.
TEST(FuseEmbedLayerNormTest, Gpt2AfterSkipLayerNormFusesOnlyLn1) {
  auto g = Parse(kGpt2Residual);
  ASSERT_TRUE(g);
  ASSERT_TRUE(RunPass("fuse-skip-layernorm", *g));
  FusionReport report;
  PassContext ctx;
  ctx.fusion_report = &report;
  EXPECT_TRUE(RunPass(kPass, *g, ctx));
  const auto& k = report.kinds().at("embed_layernorm");
  EXPECT_EQ(k.fused, 1);
  EXPECT_TRUE(k.missed.empty());
  const Node* embed = nullptr;
  int skips = 0;
  for (const auto& n : g->nodes()) {
    if (n->op() == "EmbedLayerNorm") embed = n.get();
    skips += n->op() == "SkipLayerNorm" ? 1 : 0;
  }
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(skips, 2);
  ASSERT_EQ(embed->num_outputs(), 2);
  ASSERT_EQ(embed->output_info(1).uses.size(), 1u);
  EXPECT_EQ(embed->output_info(1).uses[0].user->op(), "SkipLayerNorm");
}

// Near-misses: each is recognizably an embedding block, left alone with a reason.
struct NearMiss {
  const char* name;
  std::string text;
  std::string reason;
};

TEST(FuseEmbedLayerNormTest, NearMissesAreReportedWithReasons) {
  const std::string head = std::string("graph g opset=17 {\n") + TABLES +
                           "  %5 = Input() : i64[batch,seq] \"input_ids\"\n"
                           "  %6 = Gather(%0, %5) : f32[batch,seq,4] \"words\"\n";
  const NearMiss cases[] = {
      {"sinusoidal positions computed at run time (neither a table lookup nor a constant)",
       head + R"(  %7 = Cast(%5) {to=1} : f32[batch,seq]
  %8 = Sin(%7) : f32[batch,seq]
  %9 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %10 = Unsqueeze(%8, %9) : f32[batch,seq,1] "sinusoid"
  %11 = Add(%6, %10) : f32[batch,seq,4]
  %12 = LayerNormalization(%11, %3, %4) : f32[batch,seq,4]
  return "y": %12
})",
       "addend 'sinusoid' (Unsqueeze) is neither an embedding Gather on axis 0 with integer "
       "ids nor a constant"},
      {"a partial embedding sum is also a graph output",
       head + R"(  %7 = Gather(%1, %5) : f32[batch,seq,4]
  %8 = Add(%6, %7) : f32[batch,seq,4] "partial"
  %9 = Gather(%2, %5) : f32[batch,seq,4]
  %10 = Add(%8, %9) : f32[batch,seq,4]
  %11 = LayerNormalization(%10, %3, %4) : f32[batch,seq,4]
  return "y": %11, "s": %8
})",
       "interior value 'partial' (Add) is also read outside the embedding sum"},
      {"LayerNorm over the last two axes", head + R"(  %7 = Gather(%1, %5) : f32[batch,seq,4]
  %8 = Add(%6, %7) : f32[batch,seq,4]
  %9 = LayerNormalization(%8, %3, %4) {axis=1} : f32[batch,seq,4]
  return "y": %9
})",
       "LayerNormalization normalizes from axis 1, not over the last axis only"},
      {"a position constant with a symbolic sequence length",
       head + R"(  %7 = Constant() {value=tensor<f32[1,2,4]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[1,2,4]
  %8 = Add(%6, %7) : f32[batch,seq,4]
  %9 = LayerNormalization(%8, %3, %4) : f32[batch,seq,4]
  return "y": %9
})",
       "a constant addend varies along a sequence of 2 but the sequence length is not known "
       "(use --shape)"},
  };
  for (const NearMiss& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string& text = c.text;
    ExpectNoChange(kPass, text);
    const FusionReport r = RunWithReport({kPass}, text).report;
    const auto& missed = r.kinds().at("embed_layernorm").missed;
    ASSERT_EQ(missed.size(), 1u);
    EXPECT_EQ(missed[0].reason, c.reason);
  }
}

}  // namespace
}  // namespace kiln
