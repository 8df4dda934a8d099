// Tests for the dce pass: dead nodes and constants, no-op removal (Identity, inference
// Dropout, same-dtype Cast, no-op Reshape/Expand/Slice, identity Transpose), the cases
// that must stay, keep_outputs, graph inputs kept, idempotence and numeric equivalence.
#include <gtest/gtest.h>

#include <string>

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

constexpr char kPass[] = "dce";

TEST(Dce, RemovesDeadNodesIdentityAndInferenceDropout) {
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Identity(%0) : f32[2,3] "id"
  %2 = Constant() {value=tensor<f32[]>[0.1]} : f32[]
  %3 = Dropout(%1, %2) : f32[2,3] "drop"
  %4 = Relu(%3) : f32[2,3] "y"
  %5 = Neg(%0) : f32[2,3] "unused"
  %6 = Constant() {value=tensor<f32[]>[7]} : f32[] "dead_const"
  return "y": %4
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Relu(%0) : f32[2,3] "y"
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, before);
  auto g = Parse(before);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_EQ(o.counters["removed Identity"], 1);
  EXPECT_EQ(o.counters["removed Dropout"], 1);
  // Identity, Dropout, its ratio, Neg and the dead constant.
  EXPECT_EQ(o.counters["removed nodes"], 5);
}

TEST(Dce, IdentityFromGraphInputToGraphOutputKeepsTheOutputName) {
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Identity(%0) : f32[4] "y_internal"
  %2 = Identity(%1) : f32[4] "y_internal2"
  return "y": %2
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[4] "x"
  return "y": %0
})");
}

TEST(Dce, DoesNothingOnALiveGraphAndKeepsUnusedGraphInputs) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Input() : f32[2] "unused_input"
  %2 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2]
  %3 = Add(%0, %2) : f32[2] "y"
  return "y": %3
})");
}

TEST(Dce, KeepsDropoutThatIsNotANoOp) {
  // Mask used; training_mode not a constant; training_mode constant true with ratio 0.5.
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Input() : bool[] "training"
  %2, %3 = Dropout(%0) : f32[3] "d", bool[3] "mask"
  %4 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %5 = Dropout(%0, %4, %1) : f32[3] "e"
  %6 = Constant() {value=tensor<bool[]>[true]} : bool[]
  %7 = Dropout(%0, %4, %6) : f32[3] "f"
  return "d": %2, "mask": %3, "e": %5, "f": %7
})");
}

TEST(Dce, RemovesDropoutWithConstantFalseTrainingOrZeroRatio) {
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %2 = Constant() {value=tensor<bool[]>[false]} : bool[]
  %3, %4 = Dropout(%0, %1, %2) : f32[3] "a", bool[3] "unused_mask"
  %5 = Constant() {value=tensor<f32[]>[0]} : f32[]
  %6 = Constant() {value=tensor<bool[]>[true]} : bool[]
  %7 = Dropout(%3, %5, %6) : f32[3] "b"
  return "b": %7
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  return "b": %0
})");
}

TEST(Dce, CastToTheSameDtypeGoesOtherCastsStay) {
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Cast(%0) {to=1} : f32[3] "same"
  %2 = Cast(%1) {to=10} : f16[3] "half"
  %3 = Cast(%2) {to=1} : f32[3] "back"
  %4 = CastLike(%3, %0) : f32[3] "like"
  return "y": %4
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Cast(%0) {to=10} : f16[3] "half"
  %2 = Cast(%1) {to=1} : f32[3] "back"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, before);
}

TEST(Dce, CastWithUnknownInputTypeStays) {
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = com.example.Opaque(%0)
  %2 = Cast(%1) {to=1} : f32[3] "y"
  return "y": %2
})");
}

TEST(Dce, RemovesNoOpReshapeExpandSliceTranspose) {
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<i64[2]>[2, 3]} : i64[2]
  %2 = Reshape(%0, %1) : f32[2,3]
  %3 = Expand(%2, %1) : f32[2,3]
  %4 = Constant() {value=tensor<i64[2]>[0, -100]} : i64[2]
  %5 = Constant() {value=tensor<i64[2]>[9223372036854775807, 3]} : i64[2]
  %6 = Constant() {value=tensor<i64[2]>[0, 1]} : i64[2]
  %7 = Constant() {value=tensor<i64[2]>[1, 1]} : i64[2]
  %8 = Slice(%3, %4, %5, %6, %7) : f32[2,3]
  %9 = Transpose(%8) {perm=[0, 1]} : f32[2,3]
  %10 = Relu(%9) : f32[2,3] "y"
  return "y": %10
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Relu(%0) : f32[2,3] "y"
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, before);
}

TEST(Dce, SymbolicNoOpsGoWhenTypesMatch) {
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[batch,3] "x"
  %1 = Constant() {value=tensor<i64[2]>[-1, 3]} : i64[2]
  %2 = Reshape(%0, %1) : f32[batch,3]
  %3 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %4 = Constant() {value=tensor<i64[1]>[9223372036854775807]} : i64[1]
  %5 = Slice(%2, %3, %4) : f32[batch,3]
  return "y": %5
})";
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[batch,3] "x"
  return "y": %0
})");
  ExpectNumericallyEquivalent(kPass, before, {}, {{"batch", 3}});
}

TEST(Dce, KeepsMovementThatChangesSomething) {
  // Reshape to another shape; Reshape with an unknown dim; a partial Slice (same type
  // claimed but the params say otherwise); a Slice with step 2 on a size-1 axis; a
  // Slice on a symbolic dim whose end is not "to the end"; a real Transpose; Transpose
  // without perm on a rank-2 input (reverses).
  ExpectNoChange(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<i64[2]>[3, 2]} : i64[2]
  %2 = Reshape(%0, %1) : f32[3,2] "r1"
  %3 = Constant() {value=tensor<i64[2]>[2, -1]} : i64[2]
  %4 = Reshape(%0, %3) : f32[2,?] "r2"
  %5 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %6 = Constant() {value=tensor<i64[1]>[3]} : i64[1]
  %7 = Slice(%0, %5, %6) : f32[2,3] "s1"
  %8 = Input() : f32[1,3] "z"
  %9 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %10 = Constant() {value=tensor<i64[1]>[2]} : i64[1]
  %11 = Slice(%8, %9, %6, %9, %10) : f32[1,3] "s2"
  %12 = Input() : f32[n] "v"
  %13 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %14 = Slice(%12, %9, %13) : f32[n] "s3"
  %15 = Transpose(%0) {perm=[1, 0]} : f32[3,2] "t1"
  %16 = Transpose(%0) : f32[3,2] "t2"
  return "r1": %2, "r2": %4, "s1": %7, "s2": %11, "s3": %14, "t1": %15, "t2": %16
})");
}

TEST(Dce, KeepOutputsDropsTheOthersAndWhatOnlyFedThem) {
  const std::string before = R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Input() : f32[2] "w"
  %2 = Relu(%0) : f32[2] "shared"
  %3 = Neg(%2) : f32[2] "a"
  %4 = Exp(%2) : f32[2] "b_inner"
  %5 = Mul(%4, %1) : f32[2] "b"
  return "a": %3, "b": %5
})";
  PassContext ctx;
  ctx.keep_outputs = {"a"};
  ExpectRewrite(kPass, before, R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Input() : f32[2] "w"
  %2 = Relu(%0) : f32[2] "shared"
  %3 = Neg(%2) : f32[2] "a"
  return "a": %3
})",
                ctx);
  auto g = Parse(before);
  ASSERT_TRUE(g);
  PassRun o = RunPassOnce(kPass, *g, ctx);
  ASSERT_TRUE(o.changed.ok()) << o.changed.status();
  EXPECT_EQ(o.counters["removed outputs"], 1);
  EXPECT_EQ(o.counters["removed nodes"], 2);

  // Keeping every output (in another order) changes nothing; the order stays the graph's.
  PassContext all;
  all.keep_outputs = {"b", "a"};
  ExpectNoChange(kPass, before, all);
}

TEST(Dce, KeepOutputsRejectsUnknownNames) {
  auto g = Parse(R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Neg(%0) : f32[2] "a"
  return "a": %1
})");
  ASSERT_TRUE(g);
  PassContext ctx;
  ctx.keep_outputs = {"a", "logits"};
  PassRun o = RunPassOnce(kPass, *g, ctx);
  ASSERT_FALSE(o.changed.ok());
  EXPECT_EQ(o.changed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.changed.status().message().find("'logits'"), std::string::npos);
  EXPECT_EQ(g->outputs().size(), 1u);
}

TEST(Dce, TwoOutputsMayEndUpOnTheSameValue) {
  ExpectRewrite(kPass, R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Relu(%0) : f32[2] "r"
  %2 = Identity(%1) : f32[2] "copy"
  return "r": %1, "copy": %2
})",
                R"(
graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Relu(%0) : f32[2] "r"
  return "r": %1, "copy": %1
})");
}

}  // namespace
}  // namespace kiln
