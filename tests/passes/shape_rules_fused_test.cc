// Shape rules of kiln's fused ops (passes/shape_rules_fused.cc) through the shape-inference
// pass: static and symbolic outputs per op, --shape specialization of a graph holding fused
// ops, a fully typed graph left unchanged, contract violations reported as errors naming
// the node, and every inferred static type equal to what the reference kernel produces.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "passes/shape_inference_internal.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectRewrite;
using testing::OutType;
using testing::Parse;
using testing::RandomInputs;

constexpr char kPass[] = "shape-inference";

TEST(ShapeRulesFusedTest, EveryKilnCatalogueOpHasARule) {
  int kiln_ops = 0;
  for (const OpInfo& op : AllOps()) {
    if (op.domain != "kiln") continue;
    ++kiln_ops;
    EXPECT_NE(shape_inference::FindFusedRule(op.name), nullptr)
        << "no shape rule for kiln." << op.name;
  }
  EXPECT_EQ(kiln_ops, 18);
}

TEST(ShapeRulesFusedTest, SymbolicShapesForEveryOp) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,36] "x"
  %1 = Input() : f32[36,108] "c36_108"
  %2 = Input() : f32[108] "c108"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu"}
  %4 = kiln.MultiHeadAttention(%3) {num_heads=3, scale=0.25}
  %5 = Input() : f32[36] "c36"
  %6, %7 = kiln.SkipLayerNorm(%4, %0, %5, %5, %5)
  %8 = kiln.RMSNorm(%7, %5)
  %9 = Input() : i64[batch,seq] "mask"
  %10 = kiln.Pool(%8, %9) {mode="mean"}
  %11 = Input() : f32[36,108] "tied"
  %12 = kiln.Linear(%3, %11) {trans_w=1}
  %13, %14 = kiln.SkipRMSNorm(%8, %0, %5, %5)
  return "y": %10, "z": %6, "w": %12, "r": %13, "rs": %14
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,36] "x"
  %1 = Input() : f32[36,108] "c36_108"
  %2 = Input() : f32[108] "c108"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu"} : f32[batch,seq,108]
  %4 = kiln.MultiHeadAttention(%3) {num_heads=3, scale=0.25} : f32[batch,seq,36]
  %5 = Input() : f32[36] "c36"
  %6, %7 = kiln.SkipLayerNorm(%4, %0, %5, %5, %5) : f32[batch,seq,36], f32[batch,seq,36]
  %8 = kiln.RMSNorm(%7, %5) : f32[batch,seq,36]
  %9 = Input() : i64[batch,seq] "mask"
  %10 = kiln.Pool(%8, %9) {mode="mean"} : f32[batch,36]
  %11 = Input() : f32[36,108] "tied"
  %12 = kiln.Linear(%3, %11) {trans_w=1} : f32[batch,seq,36]
  %13, %14 = kiln.SkipRMSNorm(%8, %0, %5, %5) : f32[batch,seq,36], f32[batch,seq,36]
  return "y": %10, "z": %6, "w": %12, "r": %13, "rs": %14
})");
}

TEST(ShapeRulesFusedTest, BlockQuantLinearMapsKToN) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,40] "x"
  %1 = Input() : u4[6,40] "w"
  %2 = Input() : f32[6,3] "s"
  %3 = Input() : u4[6,3] "z"
  %4 = Input() : f32[6] "b"
  %5 = kiln.BlockQuantLinear(%0, %1, %2, %3, %4) {block_size=16}
  return "y": %5
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,40] "x"
  %1 = Input() : u4[6,40] "w"
  %2 = Input() : f32[6,3] "s"
  %3 = Input() : u4[6,3] "z"
  %4 = Input() : f32[6] "b"
  %5 = kiln.BlockQuantLinear(%0, %1, %2, %3, %4) {block_size=16} : f32[batch,seq,6]
  return "y": %5
})");
}

TEST(ShapeRulesFusedTest, BlockQuantGatherAppendsKToTheIndices) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : u8[6,40] "w"
  %1 = Input() : i64[batch,seq] "ids"
  %2 = Input() : f32[6,3] "s"
  %3 = kiln.BlockQuantGather(%0, %1, %2) {block_size=16}
  return "y": %3
})",
                R"(graph g opset=21 {
  %0 = Input() : u8[6,40] "w"
  %1 = Input() : i64[batch,seq] "ids"
  %2 = Input() : f32[6,3] "s"
  %3 = kiln.BlockQuantGather(%0, %1, %2) {block_size=16} : f32[batch,seq,40]
  return "y": %3
})");
}

constexpr char kEmbed[] = R"(graph g opset=21 {
  %0 = Input() : i32[batch,seq] "ids"
  %1 = Input() : i32[batch,seq] "seg"
  %3 = Input() : f16[30,8] "word"
  %4 = Input() : f16[16,8] "pemb"
  %5 = Input() : f16[2,8] "semb"
  %6 = Input() : f16[8] "gamma"
  %7 = Input() : f16[8] "beta"
  %10 = kiln.EmbedLayerNorm(%0, %1, _, %3, %4, %5, %6, %7)
  %11 = kiln.EmbedLayerNorm(%0, _, _, %3, %4, _, %6, %7)
  return "y": %10, "z": %11
})";

TEST(ShapeRulesFusedTest, EmbedLayerNormTakesBatchAndSequenceFromIds) {
  EXPECT_EQ(OutType(kEmbed, "y"), "f16[batch,seq,8]");
  EXPECT_EQ(OutType(kEmbed, "z"), "f16[batch,seq,8]");
  PassContext ctx;
  ctx.input_shapes["ids"] = {2, 7};
  EXPECT_EQ(OutType(kEmbed, "z", ctx), "f16[2,7,8]");
}

TEST(ShapeRulesFusedTest, MultiHeadAttentionSymbolicPackedDim) {
  // 3H symbolic: H = 3H/3 as a DimExpr quotient; specialization makes it concrete.
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : bf16[b,s,h3] "qkv"
  %1 = Input() : bool[b,1,s,s] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=2, scale=0.5, causal=1}
  return "y": %2
})";
  EXPECT_EQ(OutType(text, "y"), "bf16[b,s,h3/3]");
  PassContext ctx;
  ctx.symbol_values["h3"] = 48;
  ctx.symbol_values["s"] = 9;
  EXPECT_EQ(OutType(text, "y", ctx), "bf16[b,9,16]");
}

TEST(ShapeRulesFusedTest, AttentionTakesBatchAndQueriesFromQ) {
  // S query rows over L = past + S keys: [B, S, N·D], whatever L is.
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : f32[b,8,s,16] "q"
  %1 = Input() : f32[b,2,"past+s",16] "k"
  %2 = Input() : f32[b,1,s,"past+s"] "mask"
  %3 = kiln.Attention(%0, %1, %1, %2) {scale=0.25, causal=1}
  return "y": %3
})";
  EXPECT_EQ(OutType(text, "y"), "f32[b,s,128]");
  PassContext ctx;
  ctx.symbol_values["s"] = 1;
  EXPECT_EQ(OutType(text, "y", ctx), "f32[b,1,128]");
}

TEST(ShapeRulesFusedTest, UnknownInputsStayUnknown) {
  EXPECT_EQ(OutType(R"(graph g opset=21 {
  %0 = Input() : f32[*] "x"
  %1 = Input() : f32[*] "w"
  %2 = kiln.Linear(%0, %1)
  return "y": %2
})",
                    "y"),
            "f32[*]");
  EXPECT_EQ(OutType(R"(graph g opset=21 {
  %0 = Input() : f32[b,s,?] "x"
  %1 = Input() : f32[?,?] "w"
  %2 = kiln.Linear(%0, %1)
  %3 = kiln.Pool(%0) {mode="cls"}
  return "y": %2, "p": %3
})",
                    "y"),
            "f32[b,s,?]");
}

TEST(ShapeRulesFusedTest, FullyTypedGraphIsUnchanged) {
  ExpectNoChange(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,4] "x"
  %1 = Constant() {value=tensor<f32[4]>[1, 2, 3, 4]} : f32[4]
  %2 = kiln.RMSNorm(%0, %1) : f32[batch,4]
  %3 = Constant() {value=tensor<f32[4,2]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[4,2]
  %4 = kiln.Linear(%2, %3) : f32[batch,2]
  return "y": %4
})");
}

TEST(ShapeRulesFusedTest, ContractViolationsAreErrorsNamingTheNode) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(%0 = Input() : f32[2,5,36] "x"
  %1 = kiln.MultiHeadAttention(%0) {num_heads=5, scale=0.5} @ "n")",
       "qkv last dim 36 is not divisible by num_heads + 2 * num_kv_heads = 15"},
      {R"(%0 = Input() : f32[2,36] "x"
  %1 = kiln.MultiHeadAttention(%0) {num_heads=3, scale=0.5} @ "n")",
       "qkv must have rank 3"},
      {R"(%0 = Input() : f32[2,6,5,4] "q"
  %2 = Input() : f32[2,4,7,4] "k"
  %1 = kiln.Attention(%0, %2, %2) {scale=0.5} @ "n")",
       "k has 4 heads, which does not divide q's 6"},
      {R"(%0 = Input() : f32[2,6,5,4] "q"
  %2 = Input() : f32[2,3,7,4] "k"
  %3 = Input() : f32[2,3,8,4] "v"
  %1 = kiln.Attention(%0, %2, %3) {scale=0.5} @ "n")",
       "k and v differ: 7 vs 8"},
      {R"(%0 = Input() : f32[2,6,5,4] "q"
  %2 = Input() : f32[2,3,7,8] "k"
  %1 = kiln.Attention(%0, %2, %2) {scale=0.5} @ "n")",
       "q and k differ in head size: 4 vs 8"},
      {R"(%0 = Input() : f32[2,5,4] "x"
  %2 = Input() : f32[5,4] "w"
  %1 = kiln.Linear(%0, %2) @ "n")",
       "X and W disagree on K: 4 vs 5"},
      {R"(%0 = Input() : f32[2,5,4] "x"
  %2 = Input() : f32[4,3] "w"
  %3 = Input() : f32[4] "b"
  %1 = kiln.Linear(%0, %2, %3) @ "n")",
       "B length differs from the hidden size: 4 vs 3"},
      {R"(%0 = Input() : f32[2,40] "x"
  %2 = Input() : u4[6,40] "w"
  %3 = Input() : f32[6,2] "s"
  %1 = kiln.BlockQuantLinear(%0, %2, %3) {block_size=16} @ "n")",
       "scales' blocks differ from K: 2 vs 3"},
      {R"(%0 = Input() : u4[6,40] "w"
  %2 = Input() : i64[3] "ids"
  %3 = Input() : f32[5,3] "s"
  %1 = kiln.BlockQuantGather(%0, %2, %3) {block_size=16} @ "n")",
       "W and its scales disagree on rows: 5 vs 6"},
      {R"(%0 = Input() : u4[6,40] "w"
  %2 = Input() : f32[3] "ids"
  %3 = Input() : f32[6,3] "s"
  %1 = kiln.BlockQuantGather(%0, %2, %3) {block_size=16} @ "n")",
       "indices must be int32 or int64, got f32[3]"},
      {R"(%0 = Input() : f32[2,40] "x"
  %2 = Input() : u4[6,32] "w"
  %3 = Input() : f32[6,2] "s"
  %1 = kiln.BlockQuantLinear(%0, %2, %3) {block_size=16} @ "n")",
       "X and W disagree on K: 40 vs 32"},
      {R"(%0 = Input() : f32[2,40] "x"
  %2 = Input() : u4[6,40] "w"
  %3 = Input() : f32[6,3] "s"
  %4 = Input() : u4[5,3] "z"
  %1 = kiln.BlockQuantLinear(%0, %2, %3, %4) {block_size=16} @ "n")",
       "W and its scales disagree on N: 5 vs 6"},
      {R"(%0 = Input() : f32[2,40] "x"
  %2 = Input() : u4[6,40] "w"
  %3 = Input() : f32[6,3] "s"
  %1 = kiln.BlockQuantLinear(%0, %2, %3) {block_size=24} @ "n")",
       "block_size must be a power of two >= 16, got 24"},
      {R"(%0 = Input() : f32[2,40] "x"
  %2 = Input() : i8[6,40] "w"
  %3 = Input() : f32[6,3] "s"
  %1 = kiln.BlockQuantLinear(%0, %2, %3) {block_size=16} @ "n")",
       "W must be uint4 or uint8"},
      {R"(%0 = Input() : f32[2,40] "x"
  %2 = Input() : u8[6,40] "w"
  %3 = Input() : f32[6,3] "s"
  %4 = Input() : u4[6,3] "z"
  %1 = kiln.BlockQuantLinear(%0, %2, %3, %4) {block_size=16} @ "n")",
       "zero_points must have W's dtype u8 or be f32"},
      {R"(%0 = Input() : f32[2,5,4] "x"
  %2 = Input() : f32[5] "g"
  %1 = kiln.SkipLayerNorm(%0, %0, %2) @ "n")",
       "gamma length differs from the hidden size: 5 vs 4"},
      {R"(%0 = Input() : f32[2,5,4] "x"
  %2 = Input() : f32[3,4] "skip"
  %3 = Input() : f32[4] "g"
  %1 = kiln.SkipLayerNorm(%0, %2, %3) @ "n")",
       "does not broadcast to X"},
      {R"(%0 = Input() : f32[2,5,4] "x"
  %2 = Input() : f32[1,4] "g"
  %1 = kiln.RMSNorm(%0, %2) @ "n")",
       "gamma must be a vector"},
      {R"(%0 = Input() : f32[2,5] "x"
  %1 = kiln.Pool(%0) {mode="cls"} @ "n")",
       "hidden must have rank 3"},
      {R"(%0 = Input() : f32[2,5,4] "x"
  %2 = Input() : i64[2,6] "m"
  %1 = kiln.Pool(%0, %2) {mode="mean"} @ "n")",
       "mask and hidden disagree on the sequence: 6 vs 5"},
      {R"(%0 = Input() : i64[2,5] "ids"
  %3 = Input() : f32[30,8] "word"
  %4 = Input() : f32[16,4] "pemb"
  %6 = Input() : f32[8] "gamma"
  %1 = kiln.EmbedLayerNorm(%0, _, _, %3, %4, _, %6, %6) @ "n")",
       "embedding tables disagree on the hidden size: 4 vs 8"},
      {R"(%0 = Input() : i64[2,5] "ids"
  %3 = Input() : f32[30,8] "word"
  %6 = Input() : f32[8] "gamma"
  %1 = kiln.EmbedLayerNorm(%0, %0, _, %3, %3, _, %6, %6) @ "n")",
       "segment_ids and segment_emb must be given together"},
  };
  for (const auto& [body, message] : cases) {
    const std::string text =
        absl::StrCat("graph g opset=21 {\n  ", body, "\n  return \"y\": %1\n}");
    const std::string got = OutType(text, "y");
    EXPECT_NE(got.find("error: node 'n' (kiln."), std::string::npos) << got;
    EXPECT_NE(got.find(message), std::string::npos) << got << "\nexpected: " << message;
  }
}

// Every inferred static type equals what the reference kernel produces.
TEST(ShapeRulesFusedTest, InferredTypesMatchExecution) {
  auto g = Parse(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,12] "x"
  %1 = Input() : f32[12,36] "w"
  %2 = Input() : f32[36] "b"
  %3 = kiln.Linear(%0, %1, %2) {activation="relu"}
  %4 = Input() : f32[2,1,1,3] "mask"
  %5 = kiln.MultiHeadAttention(%3, %4) {num_heads=2, scale=0.3}
  %6 = Input() : f32[12] "gamma"
  %7, %8 = kiln.SkipLayerNorm(%5, %0, %6, _, %6)
  %9 = kiln.RMSNorm(%8, %6)
  %10 = Input() : i64[2,3] "ids"
  %11 = Input() : f32[4,12] "word"
  %12 = kiln.EmbedLayerNorm(%10, %10, %10, %11, %11, %11, %6, %6)
  %13 = kiln.Pool(%12, %10) {mode="cls", normalize=1}
  return "a": %3, "b": %5, "c": %7, "d": %8, "e": %9, "f": %12, "g": %13
})");
  ASSERT_TRUE(g);
  ASSERT_TRUE(testing::RunPass(kPass, *g));
  auto feeds = RandomInputs(*g, 7);
  auto results = RunReference(*g, feeds);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), g->outputs().size());
  for (size_t i = 0; i < results->size(); ++i) {
    const Type& t = g->outputs()[i].value.type();
    EXPECT_TRUE(t.is_static()) << g->outputs()[i].name << " " << t.ToString();
    EXPECT_EQ(t, Type::Of((*results)[i])) << g->outputs()[i].name;
  }
}

}  // namespace
}  // namespace kiln
