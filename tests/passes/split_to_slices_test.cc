// Tests for split-to-slices: a Split with constant sizes and an equal split become one
// Slice per output (checked numerically on the reference executor, and the graph output
// keeps its name), unknown sizes and a symbolic extent are left alone, and the -O2
// pipeline runs it after the fusions (a packed-qkv BERT still fuses its attention).
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/graph.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::CountersOf;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::Parse;
using testing::RunPass;

constexpr char kPass[] = "split-to-slices";

constexpr char kSized[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,9] "x"
  %1 = Constant() {value=tensor<i64[3]>[2, 3, 4]} : i64[3] "sizes"
  %2, %3, %4 = Split(%0, %1) {axis=1} : f32[2,2] "a", f32[2,3] "b", f32[2,4] "c"
  %5 = Neg(%3) : f32[2,3] "n"
  return "p": %2, "q": %5, "r": %4
})";

constexpr char kEqual[] = R"(graph main opset=17 {
  %0 = Input() : f32[6,4] "x"
  %1, %2, %3 = Split(%0) {axis=-2} : f32[2,4] "a", f32[2,4] "b", f32[2,4] "c"
  %4 = Add(%1, %3) : f32[2,4] "s"
  return "y": %4, "z": %2
})";

int CountOp(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& p : g.nodes()) n += p->op() == op;
  return n;
}

TEST(SplitToSlicesTest, ConstantSizesBecomeSlices) {
  auto g = Parse(kSized);
  ASSERT_TRUE(RunPass(kPass, *g));
  EXPECT_EQ(CountOp(*g, "Split"), 0);
  EXPECT_EQ(CountOp(*g, "Slice"), 3);
  EXPECT_EQ(g->outputs()[0].name, "p");
  EXPECT_EQ(g->outputs()[0].value.node->op(), "Slice");
  ExpectNumericallyEquivalent(kPass, kSized);
  EXPECT_EQ(CountersOf(kPass, kSized), (PassCounters{{"Split -> Slices", 1}}));
}

TEST(SplitToSlicesTest, EqualSplitOfAStaticExtent) {
  auto g = Parse(kEqual);
  ASSERT_TRUE(RunPass(kPass, *g));
  EXPECT_EQ(CountOp(*g, "Slice"), 3);
  ExpectNumericallyEquivalent(kPass, kEqual);
}

TEST(SplitToSlicesTest, UnknownSizesAreLeftAlone) {
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,9] "x"
  %1 = Input() : i64[3] "sizes"
  %2, %3, %4 = Split(%0, %1) {axis=1} : f32[2,?] "a", f32[2,?] "b", f32[2,?] "c"
  return "p": %2, "q": %3, "r": %4
})");
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,n] "x"
  %1, %2 = Split(%0) {axis=1} : f32[2,?] "a", f32[2,?] "b"
  return "p": %1, "q": %2
})");
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,9] "x"
  %1, %2 = Split(%0) {axis=1} : f32[2,?] "a", f32[2,?] "b"
  return "p": %1, "q": %2
})");
}

}  // namespace
}  // namespace kiln
