// Tests for fuse-rotary: the rotate-half RoPE as the HF exporters write it (operands in
// either order, symbolic leading dims, a batch-shaped table) as Before/Expected IR (run
// twice by ExpectRewrite) and numerically on the reference executor (1e-5: kiln.Rotary
// rounds once from double, the decomposed graph after each of its f32 ops — ~1e-7 for O(1)
// values); the near-misses with their reasons; the graphs left alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/passes/fusion_report.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Edit;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-rotary";

// q [B, N, S, D] = [2, 2, 5, 8], cos/sin [1, 1, S, D]: q·cos + rotate_half(q)·sin.
constexpr char kRope[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,2,5,8] "q"
  %1 = Input() : f32[1,1,5,8] "cos"
  %2 = Input() : f32[1,1,5,8] "sin"
  %3 = Constant() {value=tensor<i64[1]>[0]} : i64[1] "zero"
  %4 = Constant() {value=tensor<i64[1]>[4]} : i64[1] "half"
  %5 = Constant() {value=tensor<i64[1]>[3]} : i64[1] "axis"
  %6 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "one"
  %7 = Constant() {value=tensor<i64[1]>[9223372036854775807]} : i64[1] "end"
  %8 = Slice(%0, %3, %4, %5, %6) : f32[2,2,5,4] @ "lo"
  %9 = Slice(%0, %4, %7, %5, %6) : f32[2,2,5,4] @ "hi"
  %10 = Neg(%9) : f32[2,2,5,4] @ "neg"
  %11 = Concat(%10, %8) {axis=-1} : f32[2,2,5,8] @ "rotate_half"
  %12 = Mul(%11, %2) : f32[2,2,5,8] @ "mul_sin"
  %13 = Mul(%0, %1) : f32[2,2,5,8] @ "mul_cos"
  %14 = Add(%13, %12) : f32[2,2,5,8] "y" @ "add"
  return "y": %14
})";

constexpr char kRopeFused[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,2,5,8] "q"
  %1 = Input() : f32[1,1,5,8] "cos"
  %2 = Input() : f32[1,1,5,8] "sin"
  %3 = kiln.Rotary(%0, %1, %2) : f32[2,2,5,8] "y" @ "lo", "hi", "neg", "rotate_half", "mul_sin", "mul_cos", "add"
  return "y": %3
})";

TEST(FuseRotary, RotateHalfBecomesRotary) {
  ExpectRewrite(kPass, kRope, kRopeFused);
  ExpectNumericallyEquivalent(kPass, kRope);
  const FusionReport r = RunWithReport({kPass}, kRope).report;
  EXPECT_EQ(r.kinds().at("rotary").fused, 1);
}

// The same with every commutative operand swapped, a negative axis, ends given as D and a
// batch-shaped table [B, 1, S, D] (position ids per row).
TEST(FuseRotary, CommutedOperandsAndBatchTables) {
  std::string t = kRope;
  t = Edit(t, "%12 = Mul(%11, %2)", "%12 = Mul(%2, %11)");
  t = Edit(t, "%13 = Mul(%0, %1)", "%13 = Mul(%1, %0)");
  t = Edit(t, "%14 = Add(%13, %12)", "%14 = Add(%12, %13)");
  t = Edit(t, "tensor<i64[1]>[3]} : i64[1] \"axis\"", "tensor<i64[1]>[-1]} : i64[1] \"axis\"");
  t = Edit(t, "tensor<i64[1]>[9223372036854775807]", "tensor<i64[1]>[8]");
  t = Edit(t, "%1 = Input() : f32[1,1,5,8] \"cos\"", "%1 = Input() : f32[2,1,5,8] \"cos\"");
  t = Edit(t, "%2 = Input() : f32[1,1,5,8] \"sin\"", "%2 = Input() : f32[2,1,5,8] \"sin\"");
  const FusionReport r = RunWithReport({kPass}, t).report;
  EXPECT_EQ(r.kinds().at("rotary").fused, 1);
  EXPECT_TRUE(r.kinds().at("rotary").missed.empty());
  ExpectNumericallyEquivalent(kPass, t);
}

// GPT-NeoX's partial rotary (rotary_pct = 0.5): the first R = 4 of D = 8 elements rotated,
// the rest passed through and concatenated back: one kiln.Rotary of q with [.., 4] tables.
constexpr char kPartial[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,2,5,8] "q"
  %1 = Input() : f32[1,1,5,4] "cos"
  %2 = Input() : f32[1,1,5,4] "sin"
  %3 = Constant() {value=tensor<i64[1]>[0]} : i64[1] "zero"
  %4 = Constant() {value=tensor<i64[1]>[2]} : i64[1] "half"
  %5 = Constant() {value=tensor<i64[1]>[3]} : i64[1] "axis"
  %6 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "one"
  %7 = Constant() {value=tensor<i64[1]>[9223372036854775807]} : i64[1] "end"
  %15 = Constant() {value=tensor<i64[1]>[4]} : i64[1] "rdim"
  %16 = Slice(%0, %3, %15, %5, %6) : f32[2,2,5,4] @ "q_rot"
  %17 = Slice(%0, %15, %7, %5, %6) : f32[2,2,5,4] @ "q_pass"
  %8 = Slice(%16, %3, %4, %5, %6) : f32[2,2,5,2] @ "lo"
  %9 = Slice(%16, %4, %7, %5, %6) : f32[2,2,5,2] @ "hi"
  %10 = Neg(%9) : f32[2,2,5,2] @ "neg"
  %11 = Concat(%10, %8) {axis=-1} : f32[2,2,5,4] @ "rotate_half"
  %12 = Mul(%11, %2) : f32[2,2,5,4] @ "mul_sin"
  %13 = Mul(%16, %1) : f32[2,2,5,4] @ "mul_cos"
  %14 = Add(%13, %12) : f32[2,2,5,4] @ "add"
  %18 = Concat(%14, %17) {axis=-1} : f32[2,2,5,8] "y" @ "merge"
  return "y": %18
})";

TEST(FuseRotary, PartialRotaryBecomesOneRotaryOfQ) {
  ExpectRewrite(kPass, kPartial, R"(graph g opset=17 {
  %0 = Input() : f32[2,2,5,8] "q"
  %1 = Input() : f32[1,1,5,4] "cos"
  %2 = Input() : f32[1,1,5,4] "sin"
  %3 = kiln.Rotary(%0, %1, %2) : f32[2,2,5,8] "y" @ "q_rot", "q_pass", "lo", "hi", "neg", "rotate_half", "mul_sin", "mul_cos", "add", "merge"
  return "y": %3
})");
  ExpectNumericallyEquivalent(kPass, kPartial);
  const testing::FusionRun r = RunWithReport({kPass}, kPartial);
  EXPECT_EQ(r.counters.at("partial rotary"), 1);
  // The pass-through part read elsewhere too: only the rotated part fuses.
  const std::string t = Edit(kPartial, "return \"y\": %18", "return \"y\": %18, \"p\": %17");
  const testing::FusionRun r2 = RunWithReport({kPass}, t);
  EXPECT_EQ(r2.counters.at("rotary"), 1);
  EXPECT_EQ(r2.counters.count("partial rotary"), 0u);
  ExpectNumericallyEquivalent(kPass, t);
}

// GPT-J's rotate_every_two on q [B, S, N, D] = [2, 5, 2, 8] with [1, S, 1, D] tables:
// q·cos + flatten(stack(-q[..., 1::2], q[..., 0::2]))·sin, the flatten's target computed
// from Shape of the stack as the TorchScript export does.
constexpr char kEveryTwo[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,5,2,8] "q"
  %1 = Input() : f32[1,5,1,8] "cos"
  %2 = Input() : f32[1,5,1,8] "sin"
  %3 = Constant() {value=tensor<i64[1]>[0]} : i64[1] "zero"
  %4 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "one"
  %5 = Constant() {value=tensor<i64[1]>[3]} : i64[1] "axis"
  %6 = Constant() {value=tensor<i64[1]>[2]} : i64[1] "two"
  %7 = Constant() {value=tensor<i64[1]>[9223372036854775807]} : i64[1] "end"
  %8 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "last"
  %9 = Slice(%0, %3, %7, %5, %6) : f32[2,5,2,4] @ "even"
  %10 = Slice(%0, %4, %7, %5, %6) : f32[2,5,2,4] @ "odd"
  %11 = Neg(%10) : f32[2,5,2,4] @ "neg"
  %12 = Unsqueeze(%11, %8) : f32[2,5,2,4,1] @ "unsq_neg"
  %13 = Unsqueeze(%9, %8) : f32[2,5,2,4,1] @ "unsq_even"
  %14 = Concat(%12, %13) {axis=-1} : f32[2,5,2,4,2] @ "stack"
  %15 = Shape(%14) : i64[5] @ "shape"
  %16 = Constant() {value=tensor<i64[1]>[-2]} : i64[1] "minus_two"
  %17 = Slice(%15, %3, %16, %3) : i64[3] @ "lead"
  %18 = Concat(%17, %8) {axis=0} : i64[4] @ "target"
  %19 = Reshape(%14, %18) : f32[2,5,2,8] @ "flatten"
  %20 = Mul(%19, %2) : f32[2,5,2,8] @ "mul_sin"
  %21 = Mul(%0, %1) : f32[2,5,2,8] @ "mul_cos"
  %22 = Add(%21, %20) : f32[2,5,2,8] "y" @ "add"
  return "y": %22
})";

TEST(FuseRotary, RotateEveryTwoBecomesInterleavedRotary) {
  const testing::FusionRun r = RunWithReport({kPass}, kEveryTwo);
  ASSERT_TRUE(r.graph);
  std::vector<const Node*> rot;
  for (const auto& n : r.graph->nodes())
    if (n->domain() == "kiln" && n->op() == "Rotary") rot.push_back(n.get());
  ASSERT_EQ(rot.size(), 1u);
  EXPECT_EQ(rot[0]->attr_int_or("interleaved", 0), 1);
  EXPECT_EQ(rot[0]->input(0).name(), "q");
  EXPECT_EQ(r.counters.at("interleaved"), 1);
  for (const char* gone : {"Neg", "Unsqueeze", "Shape", "Reshape", "Mul"})
    for (const auto& n : r.graph->nodes()) EXPECT_NE(n->op(), gone);
  ExpectNumericallyEquivalent(kPass, kEveryTwo);
}

TEST(FuseRotary, NearMissEveryTwoWithStepOne) {
  // Slices of step 1 are not the even/odd split.
  std::string t = Edit(kEveryTwo, "%9 = Slice(%0, %3, %7, %5, %6) : f32[2,5,2,4]",
                       "%9 = Slice(%0, %3, %7, %5, %4) : f32[2,5,2,4]");
  const FusionReport r = RunWithReport({kPass}, t).report;
  const auto& k = r.kinds().at("rotary");
  EXPECT_EQ(k.fused, 0);
  ASSERT_EQ(k.missed.size(), 1u);
  EXPECT_THAT(k.missed[0].reason, ::testing::HasSubstr("is not the even/odd Slices (step 2)"));
}

// Exactly one rotary near-miss, its reason containing `reason`; the graph unchanged.
void ExpectMiss(const std::string& text, const std::string& reason) {
  ExpectNoChange(kPass, text);
  const FusionReport r = RunWithReport({kPass}, text).report;
  ASSERT_TRUE(r.kinds().count("rotary"));
  const auto& k = r.kinds().at("rotary");
  EXPECT_EQ(k.fused, 0);
  ASSERT_EQ(k.missed.size(), 1u);
  EXPECT_THAT(k.missed[0].reason, ::testing::HasSubstr(reason));
}

TEST(FuseRotary, NearMissSlicesNotAtHalf) {
  std::string t =
      Edit(kRope, "tensor<i64[1]>[4]} : i64[1] \"half\"", "tensor<i64[1]>[2]} : i64[1] \"half\"");
  t = testing::ReplaceAll(t, "5,4]", "5,2]");
  t = Edit(t, "%9 = Slice(%0, %4, %7, %5, %6) : f32[2,2,5,2]",
           "%9 = Slice(%0, %4, %7, %5, %6) : f32[2,2,5,6]");
  t = Edit(t, "%10 = Neg(%9) : f32[2,2,5,2]", "%10 = Neg(%9) : f32[2,2,5,6]");
  ExpectMiss(t, "do not split the last axis of f32[2,2,5,8] at 4");
}

TEST(FuseRotary, NearMissTableGrowsX) {
  // Tables [2, 1, 5, 8] against q [1, 2, 5, 8]: the products are [2, 2, 5, 8], not q's.
  std::string t = testing::ReplaceAll(kRope, "f32[2,2,5,", "f32[1,2,5,");
  t = testing::ReplaceAll(t, "f32[1,1,5,8] \"", "f32[2,1,5,8] \"");
  t = Edit(t, "%12 = Mul(%11, %2) : f32[1,2,5,8]", "%12 = Mul(%11, %2) : f32[2,2,5,8]");
  t = Edit(t, "%13 = Mul(%0, %1) : f32[1,2,5,8]", "%13 = Mul(%0, %1) : f32[2,2,5,8]");
  t = Edit(t, "%14 = Add(%13, %12) : f32[1,2,5,8]", "%14 = Add(%13, %12) : f32[2,2,5,8]");
  ExpectMiss(t, "the tables broadcast f32[1,2,5,8] to f32[2,2,5,8]");
}

// The same pattern with symbolic batch and sequence dims fuses too (the head size is
// what must be static).
TEST(FuseRotary, SymbolicLeadingDims) {
  std::string t = testing::ReplaceAll(kRope, "f32[2,2,5,", "f32[batch,2,seq,");
  t = testing::ReplaceAll(t, "f32[1,1,5,8]", "f32[1,1,seq,8]");
  const FusionReport r = RunWithReport({kPass}, t).report;
  EXPECT_EQ(r.kinds().at("rotary").fused, 1);
}

TEST(FuseRotary, NearMissInteriorReadElsewhere) {
  std::string t = Edit(kRope, "return \"y\": %14", "return \"y\": %14, \"rh\": %11");
  ExpectMiss(t, "interior value of 'rotate_half' (Concat) is a graph output");
}

TEST(FuseRotary, LeavesOtherAddsAlone) {
  // Same shape of graph, but the Concat is not rotate_half (no Neg).
  ExpectNoChange(kPass, Edit(kRope, "%10 = Neg(%9)", "%10 = Relu(%9)"));
  // x·cos + y·sin with another tensor in the rotated Mul.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2,8] "a"
  %1 = Input() : f32[2,8] "b"
  %2 = Mul(%0, %1) : f32[2,8]
  %3 = Mul(%1, %1) : f32[2,8]
  %4 = Add(%2, %3) : f32[2,8] "y"
  return "y": %4
})");
}

}  // namespace
}  // namespace kiln
