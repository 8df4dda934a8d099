// Tests for canonicalize: one Before/Expected case per rule (ExpectRewrite also checks
// that a second run changes nothing), numeric equivalence on the reference executor, the
// forms that must stay (inexact Cast pairs, Div by zero, non-constant operands) and the
// counters.
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
using testing::RunPass;

constexpr char kPass[] = "canonicalize";

PassCounters CountersOf(const std::string& text) {
  auto g = Parse(text);
  if (!g) return {};
  std::unique_ptr<Pass> pass = CreatePass(kPass);
  PassContext ctx;
  ctx.verify_each = true;
  absl::StatusOr<bool> changed = pass->Run(*g, ctx);
  EXPECT_TRUE(changed.ok()) << changed.status();
  return pass->counters();
}

constexpr char kCommuted[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<f32[3]>[1, 2, 3]} : f32[3] "b"
  %2 = Add(%1, %0) : f32[2,3] "s" @ "add"
  %3 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "h"
  %4 = Mul(%3, %2) : f32[2,3] "y" @ "mul"
  return "y": %4
})";

TEST(Canonicalize, PutsConstantOperandsSecond) {
  ExpectRewrite(kPass, kCommuted, R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<f32[3]>[1, 2, 3]} : f32[3] "b"
  %2 = Add(%0, %1) : f32[2,3] "s" @ "add"
  %3 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "h"
  %4 = Mul(%2, %3) : f32[2,3] "y" @ "mul"
  return "y": %4
})");
  ExpectNumericallyEquivalent(kPass, kCommuted);
  EXPECT_EQ(CountersOf(kCommuted), (PassCounters{{"commuted constant operand second", 2}}));
}

// CastLike to a value of known dtype is that Cast (no target has a CastLike kernel).
TEST(Canonicalize, CastLikeOfAKnownDtypeBecomesCast) {
  const char* before = R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f16[2,3] "like"
  %2 = CastLike(%0, %1) : f16[2,3] "c" @ "castlike"
  %3 = Add(%2, %1) : f16[2,3] "y" @ "add"
  return "y": %3
})";
  ExpectRewrite(kPass, before, R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f16[2,3] "like"
  %2 = Cast(%0) {to=10} : f16[2,3] "c" @ "castlike"
  %3 = Add(%2, %1) : f16[2,3] "y" @ "add"
  return "y": %3
})");
  EXPECT_EQ(CountersOf(before), (PassCounters{{"CastLike made a Cast", 1}}));
}

constexpr char kAddNeg[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[2,3] "y"
  %2 = Neg(%1) : f32[2,3] @ "neg"
  %3 = Add(%2, %0) : f32[2,3] "d" @ "add"
  return "d": %3
})";

TEST(Canonicalize, AddOfNegBecomesSub) {
  ExpectRewrite(kPass, kAddNeg, R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[2,3] "y"
  %2 = Sub(%0, %1) : f32[2,3] "d" @ "add", "neg"
  return "d": %2
})");
  ExpectNumericallyEquivalent(kPass, kAddNeg);
}

// The Neg has another reader: it stays, the Add still becomes a Sub.
TEST(Canonicalize, AddOfSharedNegKeepsTheNeg) {
  ExpectRewrite(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Input() : f32[4] "y"
  %2 = Neg(%1) : f32[4] "n" @ "neg"
  %3 = Add(%0, %2) : f32[4] "d" @ "add"
  return "d": %3, "n": %2
})",
                R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Input() : f32[4] "y"
  %2 = Neg(%1) : f32[4] "n" @ "neg"
  %3 = Sub(%0, %1) : f32[4] "d" @ "add", "neg"
  return "d": %3, "n": %2
})");
}

constexpr char kDivByConstant[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[]>[4]} : f32[] "c"
  %2 = Div(%0, %1) : f32[2,4] "a" @ "div1"
  %3 = Div(%2, %1) : f32[2,4] "b" @ "div2"
  return "b": %3
})";

// A shared divisor gets one reciprocal constant; the divisor itself goes when unused.
TEST(Canonicalize, DivByConstantBecomesMulByReciprocal) {
  ExpectRewrite(kPass, kDivByConstant, R"(graph g opset=17 {
  %0 = Input() : f32[2,4] "x"
  %1 = Constant() {value=tensor<f32[]>[0.25]} : f32[] "c_reciprocal"
  %2 = Mul(%0, %1) : f32[2,4] "a" @ "div1"
  %3 = Mul(%2, %1) : f32[2,4] "b" @ "div2"
  return "b": %3
})");
  ExpectNumericallyEquivalent(kPass, kDivByConstant);
  EXPECT_EQ(CountersOf(kDivByConstant),
            (PassCounters{{"Div by constant -> Mul by reciprocal", 2}}));
}

// 1/sqrt(2) is not exact in f32: the reciprocal is the f32 rounding of 1/1.4142135
// (0.70710677), within the stated 1-ulp bound of the Div (checked numerically at 1e-5,
// far above 1 ulp of |x/c| <= 0.71).
constexpr char kDivBySqrt2[] = R"(graph g opset=17 {
  %0 = Input() : f32[3,5] "x"
  %1 = Constant() {value=tensor<f32[]>[1.4142135]} : f32[] "sqrt2"
  %2 = Div(%0, %1) : f32[3,5] "y" @ "div"
  return "y": %2
})";

TEST(Canonicalize, DivBySqrt2RoundsTheReciprocalOnce) {
  auto g = Parse(kDivBySqrt2);
  ASSERT_TRUE(g);
  ASSERT_TRUE(testing::RunPass(kPass, *g));
  const std::string text = PrintGraph(*g);
  EXPECT_NE(text.find("Mul(%0, %1)"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<f32[]>[0.70710677]"), std::string::npos) << text;
  ExpectNumericallyEquivalent(kPass, kDivBySqrt2);
}

TEST(Canonicalize, LeavesDivByZeroIntegersAndSubnormalReciprocals) {
  // 1/0 is inf: x/0 and x*inf agree except that 0/0 and 0*inf are both NaN, but the rule
  // demands a finite normal reciprocal, so nothing happens.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Constant() {value=tensor<f32[]>[0.0]} : f32[]
  %2 = Div(%0, %1) : f32[2] "y"
  return "y": %2
})");
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : i64[2] "x"
  %1 = Constant() {value=tensor<i64[]>[3]} : i64[]
  %2 = Div(%0, %1) : i64[2] "y"
  return "y": %2
})");
  // 1/1e38 = 1e-38 is below FLT_MIN (1.18e-38): subnormal, precision lost.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Constant() {value=tensor<f32[]>[1e+38]} : f32[]
  %2 = Div(%0, %1) : f32[2] "y"
  return "y": %2
})");
  // A non-constant divisor.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2] "x"
  %1 = Input() : f32[2] "z"
  %2 = Div(%0, %1) : f32[2] "y"
  return "y": %2
})");
}

constexpr char kPowForms[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Abs(%0) : f32[2,3] "ax"
  %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "half"
  %3 = Pow(%1, %2) : f32[2,3] "s" @ "pow_half"
  %4 = Constant() {value=tensor<f32[]>[-0.5]} : f32[] "mhalf"
  %5 = Pow(%1, %4) : f32[2,3] "rs" @ "pow_mhalf"
  %6 = Constant() {value=tensor<f32[]>[-1]} : f32[] "mone"
  %7 = Pow(%3, %6) : f32[2,3] "r" @ "pow_mone"
  %8 = Constant() {value=tensor<f32[]>[1]} : f32[] "one"
  %9 = Pow(%5, %8) : f32[2,3] "same" @ "pow_one"
  %10 = Add(%7, %9) : f32[2,3] "y" @ "add"
  return "y": %10
})";

TEST(Canonicalize, PowFormsBecomeSqrtAndReciprocal) {
  ExpectRewrite(kPass, kPowForms, R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Abs(%0) : f32[2,3] "ax"
  %2 = Sqrt(%1) : f32[2,3] "s" @ "pow_half"
  %3 = Sqrt(%1) : f32[2,3] @ "pow_mhalf"
  %4 = Reciprocal(%3) : f32[2,3] "rs" @ "pow_mhalf"
  %5 = Reciprocal(%2) : f32[2,3] "r" @ "pow_mone"
  %6 = Add(%5, %4) : f32[2,3] "y" @ "add"
  return "y": %6
})");
  ExpectNumericallyEquivalent(kPass, kPowForms);
  EXPECT_EQ(CountersOf(kPowForms), (PassCounters{{"Pow(x, 0.5) -> Sqrt", 1},
                                                 {"Pow(x, -0.5) -> Reciprocal(Sqrt)", 1},
                                                 {"Pow(x, -1) -> Reciprocal", 1},
                                                 {"Pow(x, 1) -> x", 1}}));
}

TEST(Canonicalize, LeavesPowThatWouldBroadcastAndOtherExponents) {
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[3] "x"
  %1 = Constant() {value=tensor<f32[1,1]>[0.5]} : f32[1,1]
  %2 = Pow(%0, %1) : f32[1,3] "y"
  %3 = Constant() {value=tensor<f32[]>[2]} : f32[]
  %4 = Pow(%0, %3) : f32[3] "z"
  return "y": %2, "z": %4
})");
}

constexpr char kDivOne[] = R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<f32[1]>[1]} : f32[1] "one"
  %2 = Div(%1, %0) : f32[2,3] "y" @ "div"
  return "y": %2
})";

TEST(Canonicalize, DivOfOneBecomesReciprocal) {
  ExpectRewrite(kPass, kDivOne, R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Reciprocal(%0) : f32[2,3] "y" @ "div"
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, kDivOne);
}

constexpr char kCastPairs[] = R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Cast(%0) {to=11} : f64[4] "wide" @ "c1"
  %2 = Cast(%1) {to=1} : f32[4] "back" @ "c2"
  %3 = Input() : i32[4] "i"
  %4 = Cast(%3) {to=7} : i64[4] "i64" @ "c3"
  %5 = Cast(%4) {to=1} : f32[4] "fi" @ "c4"
  %6 = Add(%2, %5) : f32[4] "y" @ "add"
  return "y": %6
})";

TEST(Canonicalize, LosslessCastPairsAreRemovedOrShortened) {
  ExpectRewrite(kPass, kCastPairs, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Input() : i32[4] "i"
  %2 = Cast(%1) {to=1} : f32[4] "fi" @ "c4", "c3"
  %3 = Add(%0, %2) : f32[4] "y" @ "add"
  return "y": %3
})");
  ExpectNumericallyEquivalent(kPass, kCastPairs);
  EXPECT_EQ(CountersOf(kCastPairs),
            (PassCounters{{"Cast pair removed", 1}, {"Cast pair shortened", 1}}));
}

TEST(Canonicalize, LeavesRoundingCastPairs) {
  // f32 -> f16 -> f32 rounds to half precision: not a no-op.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Cast(%0) {to=10} : f16[4]
  %2 = Cast(%1) {to=1} : f32[4] "y"
  return "y": %2
})");
  // f32 -> i32 -> f32 truncates.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[4] "x"
  %1 = Cast(%0) {to=6} : i32[4]
  %2 = Cast(%1) {to=1} : f32[4] "y"
  return "y": %2
})");
}

// The reference Cast saturates float -> integer but wraps integer -> integer, so an
// integer routed through a float into a narrower integer must keep both Casts:
// u8 200 -> f32 -> i8 is 127, u8 200 -> i8 would be -56.
constexpr char kU8ThroughF32ToI8[] = R"(graph g opset=17 {
  %0 = Input() : u8[2] "x"
  %1 = Cast(%0) {to=1} : f32[2]
  %2 = Cast(%1) {to=3} : i8[2] "y"
  return "y": %2
})";

TEST(Canonicalize, LeavesIntegerThroughFloatToNarrowerInteger) {
  ExpectNoChange(kPass, kU8ThroughF32ToI8);
  // i8 -> f32 -> u8: -1 saturates to 0 but would wrap to 255.
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : i8[4] "x"
  %1 = Cast(%0) {to=1} : f32[4]
  %2 = Cast(%1) {to=2} : u8[4] "y"
  return "y": %2
})");
  // Exact values: the graph gives 127 for both inputs before and after the pass.
  auto g = Parse(kU8ThroughF32ToI8);
  ASSERT_TRUE(g);
  Tensor x(DType::kU8, {2});
  x.SetFromDouble(0, 200);
  x.SetFromDouble(1, 255);
  for (int run = 0; run < 2; ++run) {
    if (run == 1) testing::RunPass(kPass, *g);
    auto y = RunReference(*g, {{"x", x}});
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->size(), 1u);
    ASSERT_EQ((*y)[0].dtype(), DType::kI8);
    ASSERT_EQ((*y)[0].NumElements(), 2);
    EXPECT_EQ((*y)[0].GetAsInt64(0), 127) << "run " << run;
    EXPECT_EQ((*y)[0].GetAsInt64(1), 127) << "run " << run;
  }
}

TEST(Canonicalize, ShortensIntegerThroughFloatIntoWiderInteger) {
  // u8 -> f32 -> i32: every u8 value fits i32, so saturation and wrapping agree.
  constexpr char kWiden[] = R"(graph g opset=17 {
  %0 = Input() : u8[4] "x"
  %1 = Cast(%0) {to=1} : f32[4] @ "c1"
  %2 = Cast(%1) {to=6} : i32[4] "y" @ "c2"
  return "y": %2
})";
  ExpectRewrite(kPass, kWiden, R"(graph g opset=17 {
  %0 = Input() : u8[4] "x"
  %1 = Cast(%0) {to=6} : i32[4] "y" @ "c2", "c1"
  return "y": %1
})");
}

// RotaryEmbedding with position ids on a 4-D input (halves) and a 3-D one (GPT-J pairs):
// kiln.Rotary on the gathered, widened caches, the same numbers.
constexpr char kRotary4[] = R"(graph g opset=23 {
  %0 = Input() : f32[2,2,3,4] "x"
  %1 = Constant() {value=tensor<f32[4,2]>[1, 0.5, 0, -0.5, 0.25, 1, -1, 0]} : f32[4,2] "cos"
  %2 = Constant() {value=tensor<f32[4,2]>[0, 0.5, 1, 0.75, -1, 0, 0.5, 1]} : f32[4,2] "sin"
  %3 = Constant() {value=tensor<i64[2,3]>[0, 1, 2, 3, 2, 1]} : i64[2,3] "pos"
  %4 = RotaryEmbedding(%0, %1, %2, %3) : f32[2,2,3,4] "y" @ "rope"
  return "y": %4
})";
constexpr char kRotary3[] = R"(graph g opset=23 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Constant() {value=tensor<f32[4,2]>[1, 0.5, 0, -0.5, 0.25, 1, -1, 0]} : f32[4,2] "cos"
  %2 = Constant() {value=tensor<f32[4,2]>[0, 0.5, 1, 0.75, -1, 0, 0.5, 1]} : f32[4,2] "sin"
  %3 = Constant() {value=tensor<i64[2,3]>[0, 1, 2, 3, 2, 1]} : i64[2,3] "pos"
  %4 = RotaryEmbedding(%0, %1, %2, %3) {interleaved=1, num_heads=2} : f32[2,3,8] "y" @ "rope"
  return "y": %4
})";

TEST(Canonicalize, RotaryEmbeddingBecomesKilnRotary) {
  for (const char* text : {kRotary4, kRotary3}) {
    ExpectNumericallyEquivalent(kPass, text);
    auto g = Parse(text);
    ASSERT_TRUE(g);
    RunPass(kPass, *g);
    int rotary = 0, onnx_rotary = 0;
    for (const auto& n : g->nodes()) {
      rotary += n->domain() == "kiln" && n->op() == "Rotary";
      onnx_rotary += n->domain().empty() && n->op() == "RotaryEmbedding";
    }
    EXPECT_EQ(rotary, 1);
    EXPECT_EQ(onnx_rotary, 0);
    EXPECT_EQ(CountersOf(text), (PassCounters{{"RotaryEmbedding -> kiln.Rotary", 1}}));
  }
  // A rotary width that is not twice the cache's: left for the kernel to refuse.
  ExpectNoChange(kPass, R"(graph g opset=23 {
  %0 = Input() : f32[2,2,3,4] "x"
  %1 = Constant() {value=tensor<f32[4,2]>[1, 0.5, 0, -0.5, 0.25, 1, -1, 0]} : f32[4,2] "cos"
  %2 = Constant() {value=tensor<f32[4,2]>[0, 0.5, 1, 0.75, -1, 0, 0.5, 1]} : f32[4,2] "sin"
  %3 = Constant() {value=tensor<i64[2,3]>[0, 1, 2, 3, 2, 1]} : i64[2,3] "pos"
  %4 = RotaryEmbedding(%0, %1, %2, %3) {rotary_embedding_dim=2} : f32[2,2,3,4] "y" @ "rope"
  return "y": %4
})");
}

TEST(Canonicalize, DoesNothingOnCanonicalGraph) {
  ExpectNoChange(kPass, R"(graph g opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[2,3] "z"
  %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %3 = Mul(%0, %2) : f32[2,3]
  %4 = Add(%1, %3) : f32[2,3]
  %5 = Sub(%4, %0) : f32[2,3]
  %6 = Sqrt(%5) : f32[2,3] "y"
  return "y": %6
})");
}

}  // namespace
}  // namespace kiln
