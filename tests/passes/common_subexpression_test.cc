// Tests for the cse pass: merging equal pure nodes (cascading in one run, commutative
// operands, attributes by bit pattern), weight dedup of equal initializers, multi-output
// nodes, graph outputs keeping their names, the cases that must not merge, a per-layer
// attention mask rebuilt twice, idempotence and numeric equivalence.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/str_replace.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;
using testing::PassRun;
using testing::RunPassOnce;

constexpr char kPass[] = "cse";

TEST(Cse, MergesEqualNodesAndCascadesInOneRun) {
  // The two Adds merge (operands swapped: Add is commutative), which makes the two Muls
  // equal, which makes the two Sigmoids equal. The survivor keeps its names and gains
  // the merged nodes' provenance.
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[3] "y"
  %2 = Add(%0, %1) : f32[2,3] "a1" @ "add_1"
  %3 = Add(%1, %0) : f32[2,3] "a2" @ "add_2"
  %4 = Mul(%2, %1) : f32[2,3] "m1"
  %5 = Mul(%3, %1) : f32[2,3] "m2"
  %6 = Sigmoid(%4) : f32[2,3] "s1"
  %7 = Sigmoid(%5) : f32[2,3] "s2"
  %8 = Sub(%6, %7) : f32[2,3] "d"
  return "d": %8
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[3] "y"
  %2 = Add(%0, %1) : f32[2,3] "a1" @ "add_1", "add_2"
  %3 = Mul(%2, %1) : f32[2,3] "m1"
  %4 = Sigmoid(%3) : f32[2,3] "s1"
  %5 = Sub(%4, %4) : f32[2,3] "d"
  return "d": %5
})");
  ExpectNumericallyEquivalent(kPass, before);
  auto g = Parse(before);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_EQ(o.counters["merged nodes"], 3);
}

TEST(Cse, DoesNothingWhenNothingRepeats) {
  // Sub is not commutative; Softmax axes differ; LeakyRelu alphas differ by sign of
  // zero only (bit patterns differ); a Reshape's shape input differs.
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[2,3] "y"
  %2 = Sub(%0, %1) : f32[2,3] "a"
  %3 = Sub(%1, %0) : f32[2,3] "b"
  %4 = Softmax(%0) {axis=-1} : f32[2,3] "c"
  %5 = Softmax(%0) {axis=0} : f32[2,3] "d"
  %6 = LeakyRelu(%0) {alpha=0.0} : f32[2,3] "e"
  %7 = LeakyRelu(%0) {alpha=-0.0} : f32[2,3] "f"
  %8 = Constant() {value=tensor<i64[2]>[3, 2]} : i64[2]
  %9 = Constant() {value=tensor<i64[2]>[6, 1]} : i64[2]
  %10 = Reshape(%0, %8) : f32[3,2] "g"
  %11 = Reshape(%0, %9) : f32[6,1] "h"
  return "a": %2, "b": %3, "c": %4, "d": %5, "e": %6, "f": %7, "g": %10, "h": %11
})");
}

TEST(Cse, EqualFloatAttributesMerge) {
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = LeakyRelu(%0) {alpha=0.1} : f32[4] "a"
  %2 = LeakyRelu(%0) {alpha=0.1} : f32[4] "b"
  return "a": %1, "b": %2
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = LeakyRelu(%0) {alpha=0.1} : f32[4] "a"
  return "a": %1, "b": %1
})");
}

TEST(Cse, DeduplicatesEqualInitializersWithDifferentNames) {
  // Two 4x4 weights with the same bytes under different names (tied weights exported
  // twice): one survives under its own name, then the two MatMuls become one.
  std::string w = "[";
  for (int i = 0; i < 16; ++i) w += (i ? ", " : "") + std::to_string(i * 0.25);
  w += "]";
  const std::string before = absl::StrReplaceAll(R"(
graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[4,4]>$W} : f32[4,4] "encoder.w"
  %2 = Constant() {value=tensor<f32[4,4]>$W} : f32[4,4] "decoder.w"
  %3 = MatMul(%0, %1) : f32[2,4] "p"
  %4 = MatMul(%0, %2) : f32[2,4] "q"
  %5 = Add(%3, %4) : f32[2,4] "y"
  return "y": %5
})",
                                                 {{"$W", w}});
  const std::string expected = absl::StrReplaceAll(R"(
graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[4,4]>$W} : f32[4,4] "encoder.w"
  %2 = MatMul(%0, %1) : f32[2,4] "p"
  %3 = Add(%2, %2) : f32[2,4] "y"
  return "y": %3
})",
                                                   {{"$W", w}});
  ExpectRewrite(kPass, before, expected);
  ExpectNumericallyEquivalent(kPass, before);
  auto g = Parse(before);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_EQ(o.counters["deduplicated constants"], 1);
  EXPECT_EQ(o.counters["deduplicated bytes"], 64);
  EXPECT_EQ(o.counters["merged nodes"], 1);
}

TEST(Cse, ConstantsDifferingInDtypeShapeOrOneBitStay) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2] "a"
  %1 = Constant() {value=tensor<f32[2]>[1, 2.0000002]} : f32[2] "b"
  %2 = Constant() {value=tensor<f32[2,1]>[1, 2]} : f32[2,1] "c"
  %3 = Constant() {value=tensor<i32[2]>[1, 2]} : i32[2] "d"
  %4 = Constant() {value=tensor<f32[1]>[0]} : f32[1] "e"
  %5 = Constant() {value=tensor<f32[1]>[-0]} : f32[1] "f"
  return "a": %0, "b": %1, "c": %2, "d": %3, "e": %4, "f": %5
})");
}

TEST(Cse, SharedStorageConstantsMergeWithoutCountingBytes) {
  Graph g;
  g.set_opset(17);
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {3}));
  Tensor t = Tensor::FromF32({3}, {1, 2, 3});
  Node* a = g.AddConstant("a", t);
  Node* b = g.AddConstant("b", t);  // same Storage
  Node* s1 = g.AddNode("Add", {x->output(), a->output()}, 1);
  Node* s2 = g.AddNode("Add", {x->output(), b->output()}, 1);
  g.AddOutput("y1", s1->output());
  g.AddOutput("y2", s2->output());
  PassRun o = RunPassOnce(kPass, g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_TRUE(*o.changed);
  EXPECT_EQ(o.counters["deduplicated constants"], 1);
  EXPECT_EQ(o.counters["deduplicated bytes"], 0);
  EXPECT_EQ(o.counters["merged nodes"], 1);
  EXPECT_EQ(g.num_nodes(), 3);
  EXPECT_EQ(g.outputs()[0].value, g.outputs()[1].value);
  EXPECT_EQ(g.outputs()[1].name, "y2");
}

TEST(Cse, MultiOutputNodesMergeOnlyWhenAllOutputsMatch) {
  // The two 2-way Splits merge (graph outputs keep their names); the 3-way Split has a
  // different output count and stays.
  const std::string before = R"(
graph g opset=18 {
  %0 = Input() : f32[6] "x"
  %1, %2 = Split(%0) {axis=0} : f32[3] "a", f32[3] "b"
  %3, %4 = Split(%0) {axis=0} : f32[3] "c", f32[3] "d"
  %5, %6, %7 = Split(%0) {axis=0} : f32[2] "e", f32[2] "f", f32[2] "g"
  %8 = Add(%1, %4) : f32[3] "s"
  return "s": %8, "c": %3, "e": %5
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=18 {
  %0 = Input() : f32[6] "x"
  %1, %2 = Split(%0) {axis=0} : f32[3] "a", f32[3] "b"
  %3, %4, %5 = Split(%0) {axis=0} : f32[2] "e", f32[2] "f", f32[2] "g"
  %6 = Add(%1, %2) : f32[3] "s"
  return "s": %6, "c": %1, "e": %3
})");
  ExpectNumericallyEquivalent(kPass, before);
}

TEST(Cse, KnownTypeFillsAnUnknownOneConflictingTypesStay) {
  // The survivor (first) takes the known type but keeps its own (empty) name.
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Relu(%0)
  %2 = Relu(%0) : f32[4] "r2"
  %3 = Add(%1, %2) : f32[4] "y"
  return "y": %3
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Relu(%0) : f32[4]
  %2 = Add(%1, %1) : f32[4] "y"
  return "y": %2
})");
  // Two stored types that disagree mean one of them is wrong: leave both alone.
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Relu(%0) : f32[4] "a"
  %2 = Relu(%0) : f32[2,2] "b"
  return "a": %1, "b": %2
})");
}

TEST(Cse, TrainingDropoutDoesNotMergeInferenceDropoutDoes) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Input() : bool[] "training"
  %2 = Dropout(%0, _, %1) : f32[4] "a"
  %3 = Dropout(%0, _, %1) : f32[4] "b"
  return "a": %2, "b": %3
})");
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Dropout(%0) : f32[4] "a"
  %2 = Dropout(%0) : f32[4] "b"
  return "a": %1, "b": %2
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Dropout(%0) : f32[4] "a"
  return "a": %1, "b": %1
})");
}

TEST(Cse, OpsOutsideTheCatalogueDoNotMerge) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = com.example.Random(%0) : f32[4] "a"
  %2 = com.example.Random(%0) : f32[4] "b"
  return "a": %1, "b": %2
})");
}

// Two encoder layers that each rebuild the extended attention mask from the same
// attention_mask input, with their own copies of the constants (as exporters emit).
constexpr char kTwoLayerMask[] = R"(
graph bert opset=14 {
  %0 = Input() : i64[1,4] "attention_mask"
  %1 = Input() : f32[1,2,4,4] "scores"
  %2 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "l0_axes1"
  %3 = Unsqueeze(%0, %2) : i64[1,1,4] @ "l0_unsq1"
  %4 = Constant() {value=tensor<i64[1]>[2]} : i64[1] "l0_axes2"
  %5 = Unsqueeze(%3, %4) : i64[1,1,1,4] @ "l0_unsq2"
  %6 = Cast(%5) {to=1} : f32[1,1,1,4] @ "l0_cast"
  %7 = Constant() {value=tensor<f32[]>[1]} : f32[] "l0_one"
  %8 = Sub(%7, %6) : f32[1,1,1,4] @ "l0_sub"
  %9 = Constant() {value=tensor<f32[]>[-10000]} : f32[] "l0_big"
  %10 = Mul(%8, %9) : f32[1,1,1,4] @ "l0_mul"
  %11 = Add(%1, %10) : f32[1,2,4,4] @ "l0_add"
  %12 = Softmax(%11) {axis=-1} : f32[1,2,4,4] @ "l0_softmax"
  %13 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "l1_axes1"
  %14 = Unsqueeze(%0, %13) : i64[1,1,4] @ "l1_unsq1"
  %15 = Constant() {value=tensor<i64[1]>[2]} : i64[1] "l1_axes2"
  %16 = Unsqueeze(%14, %15) : i64[1,1,1,4] @ "l1_unsq2"
  %17 = Cast(%16) {to=1} : f32[1,1,1,4] @ "l1_cast"
  %18 = Constant() {value=tensor<f32[]>[1]} : f32[] "l1_one"
  %19 = Sub(%18, %17) : f32[1,1,1,4] @ "l1_sub"
  %20 = Constant() {value=tensor<f32[]>[-10000]} : f32[] "l1_big"
  %21 = Mul(%19, %20) : f32[1,1,1,4] @ "l1_mul"
  %22 = Add(%12, %21) : f32[1,2,4,4] @ "l1_add"
  %23 = Softmax(%22) {axis=-1} : f32[1,2,4,4] "probs" @ "l1_softmax"
  return "probs": %23
})";

TEST(Cse, PerLayerAttentionMaskBecomesOneComputation) {
  auto g = Parse(kTwoLayerMask);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_TRUE(*o.changed);
  EXPECT_EQ(o.counters["deduplicated constants"], 4);
  EXPECT_EQ(o.counters["merged nodes"], 5);  // unsq1, unsq2, cast, sub, mul
  std::map<std::string, int> ops;
  for (const auto& n : g->nodes()) ++ops[n->op()];
  EXPECT_EQ(ops, (std::map<std::string, int>{{"Add", 2},
                                             {"Cast", 1},
                                             {"Constant", 4},
                                             {"Input", 2},
                                             {"Mul", 1},
                                             {"Softmax", 2},
                                             {"Sub", 1},
                                             {"Unsqueeze", 2}}))
      << PrintGraph(*g);
  ExpectNumericallyEquivalent(kPass, kTwoLayerMask);
  PassRun again = RunPassOnce(kPass, *g);
  ASSERT_TRUE(again.changed.ok());
  EXPECT_FALSE(*again.changed);
}

}  // namespace
}  // namespace kiln
