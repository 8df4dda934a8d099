// Tests for the constant-folding pass: Before/Expected IR, "does nothing", idempotence
// (ExpectRewrite runs the pass twice), numeric equivalence on the reference executor,
// Shape folding with static vs symbolic shapes, the size cap, kernel errors, and a
// BERT-like position-id / attention-mask chain.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kiln/ir/ops.h"
#include "kiln/ir/text.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/pass_manager.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Counter;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;
using testing::PassRun;
using testing::RunPassOnce;

constexpr char kPass[] = "constant-folding";

TEST(ConstantFolding, FoldsArithmeticOnConstantsAndDropsUnusedInputs) {
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2] "a"
  %2 = Constant() {value=tensor<f32[2]>[10, 20]} : f32[2] "b"
  %3 = Add(%1, %2) : f32[2] "ab" @ "add0"
  %4 = Mul(%0, %3) : f32[2] "y"
  return "y": %4
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Constant() {value=tensor<f32[2]>[11, 22]} : f32[2] "ab" @ "add0"
  %2 = Mul(%0, %1) : f32[2] "y"
  return "y": %2
})");
}

TEST(ConstantFolding, CascadesInOneRunAndKeepsGraphOutputName) {
  // Neg then Relu fold in the same run; the graph output keeps its name "out" and the
  // Constant takes the Relu's tensor name. A Constant still used elsewhere stays.
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Constant() {value=tensor<f32[3]>[1, -2, 3]} : f32[3] "c"
  %2 = Neg(%1) : f32[3] "neg" @ "n"
  %3 = Relu(%2) @ "r"
  %4 = Add(%0, %1) : f32[3] "sum"
  return "out": %3, "sum": %4
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Constant() {value=tensor<f32[3]>[1, -2, 3]} : f32[3] "c"
  %2 = Constant() {value=tensor<f32[3]>[0, 2, 0]} : f32[3] @ "r"
  %3 = Add(%0, %1) : f32[3] "sum"
  return "out": %2, "sum": %3
})");
}

TEST(ConstantFolding, FoldsMultiOutputSplitAndOmittedOptionalInputs) {
  // Split with its optional `split` input omitted; Clip with min omitted and max given.
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Constant() {value=tensor<f32[4]>[1, 2, 3, 4]} : f32[4]
  %1 = Constant() {value=tensor<f32[]>[2.5]} : f32[]
  %2, %3 = Split(%0) {axis=0} : f32[2] "lo", f32[2] "hi"
  %4 = Clip(%3, _, %1) : f32[2] "clipped"
  return "lo": %2, "clipped": %4
})",
                R"(
graph g opset=21 {
  %0 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2] "lo"
  %1 = Constant() {value=tensor<f32[2]>[2.5, 2.5]} : f32[2] "clipped"
  return "lo": %0, "clipped": %1
})");
}

TEST(ConstantFolding, DoesNothingWithoutConstantInputs) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2] "a"
  %2 = Add(%0, %1) : f32[2] "y"
  return "y": %2
})");
}

TEST(ConstantFolding, LeavesOpsOutsideTheCatalogueAlone) {
  // Not in the op catalogue, so not known to be pure: never evaluated.
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2] "a"
  %1 = com.example.Custom(%0) : f32[2] "y"
  return "y": %1
})");
}

TEST(ConstantFolding, FoldsShapeOfStaticTypeWithoutEvaluatingTheInput) {
  // x is a graph input: only its static type is known. The whole Shape -> Gather ->
  // Unsqueeze -> Concat chain folds, leaving Reshape(x, constant).
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Shape(%0) : i64[3] "s" @ "shape"
  %2 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %3 = Gather(%1, %2) {axis=0} : i64[]
  %4 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %5 = Unsqueeze(%3, %4) : i64[1]
  %6 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %7 = Concat(%5, %6) {axis=0} : i64[2] "target" @ "concat"
  %8 = Reshape(%0, %7) : f32[2,12] "y"
  return "y": %8
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[2, -1]} : i64[2] "target" @ "concat"
  %2 = Reshape(%0, %1) : f32[2,12] "y"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, before);
  auto g = Parse(before);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_EQ(Counter(o.counters, "folded Shape"), 1);
  EXPECT_EQ(Counter(o.counters, "folded nodes"), 4);  // Shape, Gather, Unsqueeze, Concat
}

TEST(ConstantFolding, SymbolicShapeDoesNotFold) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[batch,3] "x"
  %1 = Shape(%0) : i64[2] "s"
  %2 = Shape(%0) {end=1} : i64[1] "first"
  %3 = Input() : f32[*] "unranked"
  %4 = Shape(%3) {start=1} : i64[?] "rest"
  return "s": %1, "first": %2, "rest": %4
})");
}

TEST(ConstantFolding, ShapeWithStartEndFoldsWhenTheSelectedDimsAreKnown) {
  // batch is symbolic but start=1 selects only known dims; negative end counts from the
  // back; an empty range gives an empty i64[0].
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[batch,3,5] "x"
  %1 = Shape(%0) {start=1} : i64[2] "tail"
  %2 = Shape(%0) {start=-2, end=-1} : i64[1] "mid"
  %3 = Shape(%0) {start=2, end=1} : i64[0] "none"
  return "tail": %1, "mid": %2, "none": %3
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[batch,3,5] "x"
  %1 = Constant() {value=tensor<i64[2]>[3, 5]} : i64[2] "tail"
  %2 = Constant() {value=tensor<i64[1]>[3]} : i64[1] "mid"
  %3 = Constant() {value=tensor<i64[0]>[]} : i64[0] "none"
  return "tail": %1, "mid": %2, "none": %3
})");
  ExpectNumericallyEquivalent(kPass, before, {}, {{"batch", 2}});
}

TEST(ConstantFolding, GatherOfShapeFoldsKnownDimsOfASymbolicShape) {
  // x: [batch, seq, 384]: the hidden size is known even though the shape is not; the
  // Gather of the symbolic batch dim stays.
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[batch,seq,384] "x"
  %1 = Shape(%0) : i64[3] "s"
  %2 = Constant() {value=tensor<i64[]>[-1]} : i64[]
  %3 = Gather(%1, %2) {axis=0} : i64[] "hidden" @ "gather_hidden"
  %4 = Constant() {value=tensor<i64[2]>[2, 2]} : i64[2]
  %5 = Gather(%1, %4) {axis=0} : i64[2] "twice"
  %6 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %7 = Gather(%1, %6) {axis=0} : i64[] "batch"
  return "hidden": %3, "twice": %5, "batch": %7
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[batch,seq,384] "x"
  %1 = Shape(%0) : i64[3] "s"
  %2 = Constant() {value=tensor<i64[]>[384]} : i64[] "hidden" @ "gather_hidden"
  %3 = Constant() {value=tensor<i64[2]>[384, 384]} : i64[2] "twice"
  %4 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %5 = Gather(%1, %4) {axis=0} : i64[] "batch"
  return "hidden": %2, "twice": %3, "batch": %5
})");
  ExpectNumericallyEquivalent(kPass, before, {}, {{"batch", 2}, {"seq", 3}});
}

TEST(ConstantFolding, SkipsOutputsOverTheSizeLimitWithoutEvaluating) {
  // Output type f32[1000] = 4000 bytes > 1000. Evaluating would fail (3 does not
  // broadcast to 1000), so a clean skip shows the check happens before evaluation.
  const std::string text = R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[3]>[1, 2, 3]} : f32[3]
  %1 = Constant() {value=tensor<i64[1]>[1000]} : i64[1]
  %2 = Expand(%0, %1) : f32[1000] "big"
  return "big": %2
})";
  PassContext ctx;
  ctx.fold_limit_bytes = 1000;
  ExpectNoChange(kPass, text, ctx);
  auto g = Parse(text);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g, ctx);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_FALSE(*o.changed);
  EXPECT_EQ(Counter(o.counters, "skipped: over size limit"), 1);
  EXPECT_EQ(Counter(o.counters, "folded nodes"), 0);

  // Under the default limit the same node is evaluated and its error surfaces.
  auto g2 = Parse(text);
  ASSERT_TRUE(g2);
  PassRun o2 = RunPassOnce(kPass, *g2);
  EXPECT_EQ(o2.changed.status().code(), absl::StatusCode::kInvalidArgument) << o2.changed.status();
}

TEST(ConstantFolding, SizeLimitWithUnknownOutputTypeIsBoundedFromInputs) {
  // No stored output type: the size is bounded from the constant shape input
  // (2^40 f32 elements), so the 4 TiB tensor is never allocated.
  const std::string text = R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<i64[2]>[1048576, 1048576]} : i64[2]
  %1 = ConstantOfShape(%0)
  %2 = Constant() {value=tensor<i64[2]>[4, 3]} : i64[2]
  %3 = ConstantOfShape(%2) {value=tensor<f32[1]>[7]}
  return "huge": %1, "small": %3
})";
  auto g = Parse(text);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_TRUE(*o.changed);
  EXPECT_EQ(Counter(o.counters, "skipped: over size limit"), 1);
  EXPECT_EQ(Counter(o.counters, "folded ConstantOfShape"), 1);
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(g->outputs()[0].value.node->op(), "ConstantOfShape");
  const Tensor* small = g->outputs()[1].value.node->constant_value();
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->dims(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(small->GetAsDouble(11), 7.0);

  // A limit just at the size folds (the cap is "larger than"): 12 floats = 48 bytes.
  constexpr char kSmall[] = R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<i64[2]>[4, 3]} : i64[2]
  %1 = ConstantOfShape(%0) {value=tensor<f32[1]>[7]} : f32[4,3]
  return "small": %1
})";
  for (int64_t limit : {48, 47}) {
    auto small_graph = Parse(kSmall);
    ASSERT_TRUE(small_graph);
    PassContext ctx;
    ctx.fold_limit_bytes = limit;
    PassRun r = RunPassOnce(kPass, *small_graph, ctx);
    ASSERT_TRUE(r.changed.ok()) << r.changed.status();
    EXPECT_EQ(*r.changed, limit == 48) << "limit " << limit;
  }
}

// Ops whose output outgrows their inputs are bounded from the constant inputs before
// evaluation (no stored output type here), so an output over the limit is skipped (not
// "too large" from the kernel) and the graph is left exactly as it was.
void ExpectSkippedOverLimit(const std::string& text) {
  auto g = Parse(text);
  ASSERT_TRUE(g);
  const std::string before = PrintGraph(*g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_FALSE(*o.changed);
  EXPECT_EQ(Counter(o.counters, "skipped: over size limit"), 1);
  EXPECT_EQ(Counter(o.counters, "folded nodes"), 0);
  EXPECT_EQ(PrintGraph(*g), before);
}

TEST(ConstantFolding, TileOverTheLimitIsSkipped) {
  // 4 elements tiled 2^39 times: 2^41 elements.
  ExpectSkippedOverLimit(R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2]
  %1 = Constant() {value=tensor<i64[2]>[549755813888, 1]} : i64[2]
  %2 = Tile(%0, %1)
  return "y": %2
})");
}

TEST(ConstantFolding, PadOverTheLimitIsSkipped) {
  // Axis 1 grows by 2^40 at its start: [2, 2^40 + 2].
  ExpectSkippedOverLimit(R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2]
  %1 = Constant() {value=tensor<i64[4]>[0, 1099511627776, 0, 0]} : i64[4]
  %2 = Pad(%0, %1)
  return "y": %2
})");
  // The same growth through the axes input, with a negative axis.
  ExpectSkippedOverLimit(R"(
graph g opset=18 {
  %0 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2]
  %1 = Constant() {value=tensor<i64[2]>[0, 1099511627776]} : i64[2]
  %2 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %3 = Pad(%0, %1, _, %2)
  return "y": %3
})");
}

TEST(ConstantFolding, OneHotOverTheLimitIsSkipped) {
  // 4 indices x depth 2^39.
  ExpectSkippedOverLimit(R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<i64[4]>[0, 1, 2, 3]} : i64[4]
  %1 = Constant() {value=tensor<i64[]>[549755813888]} : i64[]
  %2 = Constant() {value=tensor<f32[2]>[0, 1]} : f32[2]
  %3 = OneHot(%0, %1, %2)
  return "y": %3
})");
}

TEST(ConstantFolding, PadBoundIsTheExactPaddedSize) {
  // [2,2] padded by one column at the end: 6 elements, counted at 8 bytes each when the
  // output dtype is not stored, so 48 bytes folds and 47 does not.
  constexpr char kPad[] = R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2]
  %1 = Constant() {value=tensor<i64[4]>[0, 0, 0, 1]} : i64[4]
  %2 = Pad(%0, %1)
  return "y": %2
})";
  for (int64_t limit : {48, 47}) {
    auto g = Parse(kPad);
    ASSERT_TRUE(g);
    PassContext ctx;
    ctx.fold_limit_bytes = limit;
    PassRun r = RunPassOnce(kPass, *g, ctx);
    ASSERT_TRUE(r.changed.ok()) << r.changed.status();
    EXPECT_EQ(*r.changed, limit == 48) << "limit " << limit;
    EXPECT_EQ(Counter(r.counters, "skipped: over size limit"), limit == 48 ? 0 : 1);
  }
}

TEST(ConstantFolding, KernelErrorOnConstantsIsReturned) {
  auto g = Parse(R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[6]>[1, 2, 3, 4, 5, 6]} : f32[6]
  %1 = Constant() {value=tensor<i64[1]>[4]} : i64[1]
  %2 = Reshape(%0, %1) @ "bad_reshape"
  return "y": %2
})");
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_FALSE(o.changed.ok());
  EXPECT_EQ(o.changed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.changed.status().message().find("bad_reshape"), std::string::npos)
      << o.changed.status();
}

TEST(ConstantFolding, UnimplementedKernelSkipsTheNode) {
  // Training-mode Dropout with ratio 0.5 is random: the reference kernel says
  // Unimplemented, so the node stays; inference Dropout on a constant folds.
  const std::string text = R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2]
  %1 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %2 = Constant() {value=tensor<bool[]>[true]} : bool[]
  %3 = Dropout(%0, %1, %2) : f32[2] "train"
  %4 = Constant() {value=tensor<bool[]>[false]} : bool[]
  %5 = Dropout(%0, %1, %4) : f32[2] "infer"
  return "train": %3, "infer": %5
})";
  ExpectRewrite(kPass, text, R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2]
  %1 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %2 = Constant() {value=tensor<bool[]>[true]} : bool[]
  %3 = Dropout(%0, %1, %2) : f32[2] "train"
  %4 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2] "infer"
  return "train": %3, "infer": %4
})");
  auto g = Parse(text);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok());
  EXPECT_EQ(Counter(o.counters, "skipped: unimplemented"), 1);
  EXPECT_EQ(Counter(o.counters, "folded Dropout"), 1);
}

// A BERT-like embedding + attention-mask prologue with static input shapes, as an
// exporter writes it when no attention_mask input is given: the mask is built from
// ConstantOfShape(Shape(input_ids)), position ids are Slice(position_ids, 0, seq_len).
constexpr char kBertPrologue[] = R"(
graph bert opset=14 {
  %0 = Input() : i64[1,8] "input_ids"
  %1 = Input() : f32[1,2,8,8] "scores"
  %2 = Constant() {value=tensor<f32[10,2]>[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
      1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0]} : f32[10,2] "word_embeddings"
  %3 = Constant() {value=tensor<f32[16,2]>[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
      15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]} : f32[16,2] "pos_emb"
  %4 = Constant() {value=tensor<i64[1,16]>[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
      15]} : i64[1,16] "position_ids"
  %5 = Shape(%0) : i64[2] @ "Shape_1"
  %6 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %7 = Gather(%5, %6) {axis=0} : i64[] @ "Gather_1"
  %8 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %9 = Unsqueeze(%7, %8) : i64[1] @ "Unsqueeze_1"
  %10 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %11 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %12 = Slice(%4, %10, %9, %11) @ "Slice_pos"
  %13 = Gather(%2, %0) {axis=0} : f32[1,8,2] @ "Gather_word"
  %14 = Gather(%3, %12) {axis=0} @ "Gather_pos"
  %15 = Add(%13, %14) : f32[1,8,2] "embeddings"
  %16 = Shape(%0) : i64[2] @ "Shape_2"
  %17 = ConstantOfShape(%16) {value=tensor<i64[1]>[1]} @ "ConstantOfShape"
  %18 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %19 = Unsqueeze(%17, %18) @ "Unsqueeze_2"
  %20 = Constant() {value=tensor<i64[1]>[2]} : i64[1]
  %21 = Unsqueeze(%19, %20) @ "Unsqueeze_3"
  %22 = Cast(%21) {to=1} @ "Cast"
  %23 = Constant() {value=tensor<f32[]>[1]} : f32[]
  %24 = Sub(%23, %22) @ "Sub"
  %25 = Constant() {value=tensor<f32[]>[-10000]} : f32[]
  %26 = Mul(%24, %25) @ "Mul_mask"
  %27 = Add(%1, %26) : f32[1,2,8,8] @ "Add_mask"
  %28 = Softmax(%27) {axis=-1} : f32[1,2,8,8] "probs"
  return "embeddings": %15, "probs": %28
})";

TEST(ConstantFolding, BertMaskAndPositionChainsFoldAway) {
  auto g = Parse(kBertPrologue);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_TRUE(*o.changed);
  std::map<std::string, int> ops;
  for (const auto& n : g->nodes())
    if (!n->is_input() && !n->is_constant()) ++ops[n->op()];
  // Only what depends on input values stays: word Gather, the two Adds, Softmax.
  EXPECT_EQ(ops, (std::map<std::string, int>{{"Add", 2}, {"Gather", 1}, {"Softmax", 1}}))
      << PrintGraph(*g);
  EXPECT_EQ(Counter(o.counters, "folded Shape"), 2);
  EXPECT_EQ(Counter(o.counters, "folded Slice"), 1);
  EXPECT_EQ(Counter(o.counters, "folded nodes"), 12);
  // The folded mask is the constant 0 * -10000 over [1,1,1,8].
  const Node* add_mask = nullptr;
  for (const auto& n : g->nodes())
    if (!n->provenance().empty() && n->provenance()[0] == "Add_mask") add_mask = n.get();
  ASSERT_NE(add_mask, nullptr);
  const Tensor* mask = add_mask->input(1).node->constant_value();
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->dims(), (std::vector<int64_t>{1, 1, 1, 8}));
  for (int64_t i = 0; i < mask->NumElements(); ++i) EXPECT_EQ(mask->GetAsDouble(i), 0.0);
  ExpectNumericallyEquivalent(kPass, kBertPrologue);
  // Second run: nothing left to fold.
  PassRun again = RunPassOnce(kPass, *g);
  ASSERT_TRUE(again.changed.ok());
  EXPECT_FALSE(*again.changed);
}

TEST(ConstantFolding, NumericallyEquivalentOnMixedGraph) {
  ExpectNumericallyEquivalent(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<f32[3,2]>[1, 2, 3, 4, 5, 6]} : f32[3,2]
  %2 = Transpose(%1) {perm=[1, 0]} : f32[2,3]
  %3 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %4 = Mul(%2, %3) : f32[2,3]
  %5 = Sqrt(%4) : f32[2,3]
  %6 = Add(%0, %5) : f32[2,3] "y"
  %7 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %8 = Constant() {value=tensor<i64[]>[6]} : i64[]
  %9 = Constant() {value=tensor<i64[]>[2]} : i64[]
  %10 = Range(%7, %8, %9) : i64[3]
  %11 = Cast(%10) {to=1} : f32[3]
  %12 = Add(%6, %11) : f32[2,3] "z"
  return "y": %6, "z": %12
})");
}

}  // namespace
}  // namespace kiln
