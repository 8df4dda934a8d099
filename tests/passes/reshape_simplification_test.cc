// Tests for reshape-simplification: one Before/Expected case per rule (each also run
// twice by ExpectRewrite, and checked numerically on the reference executor), the cases
// the pass must leave alone, and its counters.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kiln/ir/graph.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::CountersOf;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::Parse;

constexpr char kPass[] = "reshape-simplification";

constexpr char kReshapeChain[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[6, 4]} : i64[2]
  %2 = Reshape(%0, %1) : f32[6,4] @ "r1"
  %3 = Constant() {value=tensor<i64[2]>[4, -1]} : i64[2]
  %4 = Reshape(%2, %3) : f32[4,6] "out" @ "r2"
  return "y": %4
})";

TEST(ReshapeSimplificationTest, ComposesReshapesWithConstantShape) {
  ExpectRewrite(kPass, kReshapeChain, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[4, -1]} : i64[2]
  %2 = Reshape(%0, %1) : f32[4,6] "out" @ "r2", "r1"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kReshapeChain);
  EXPECT_EQ(CountersOf(kPass, kReshapeChain), (PassCounters{{"composed reshapes", 1}}));
}

// The outer shape copies a dim (0) of the intermediate, so it cannot be reused; the
// static output type gives the new shape.
constexpr char kCopyingChain[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[2, 12]} : i64[2]
  %2 = Reshape(%0, %1) : f32[2,12]
  %3 = Constant() {value=tensor<i64[3]>[0, 4, 3]} : i64[3]
  %4 = Reshape(%2, %3) : f32[2,4,3]
  return "y": %4
})";

TEST(ReshapeSimplificationTest, ComposesThroughStaticOutputType) {
  ExpectRewrite(kPass, kCopyingChain, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[3]>[2, 4, 3]} : i64[3]
  %2 = Reshape(%0, %1) : f32[2,4,3]
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kCopyingChain);
}

// BERT's head split and merge with symbolic batch/seq: the merged shape copies them (0).
constexpr char kSymbolicChain[] = R"(graph main opset=17 {
  %0 = Input() : f32[batch,seq,384] "x"
  %1 = Constant() {value=tensor<i64[4]>[0, 0, 12, 32]} : i64[4]
  %2 = Reshape(%0, %1) : f32[batch,seq,12,32]
  %3 = Constant() {value=tensor<i64[3]>[0, 0, -1]} : i64[3]
  %4 = Reshape(%2, %3) : f32[batch,seq,384]
  %5 = Constant() {value=tensor<i64[2]>[0, -1]} : i64[2]
  %6 = Reshape(%4, %5) : f32[batch,?]
  return "y": %6
})";

TEST(ReshapeSimplificationTest, ComposesWithSymbolicDimsAsCopies) {
  // %2 -> %4 composes to Reshape(x, [0, 0, 384]); %6 then composes with that and reads
  // x directly with its own shape [0, -1] (a copy of batch, the rest inferred).
  ExpectRewrite(kPass, kSymbolicChain, R"(graph main opset=17 {
  %0 = Input() : f32[batch,seq,384] "x"
  %1 = Constant() {value=tensor<i64[2]>[0, -1]} : i64[2]
  %2 = Reshape(%0, %1) : f32[batch,?]
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kSymbolicChain, {}, {{"batch", 2}, {"seq", 3}});
}

constexpr char kUnsqueezeChain[] = R"(graph main opset=17 {
  %0 = Input() : f32[batch,8] "mask"
  %1 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %2 = Unsqueeze(%0, %1) : f32[batch,1,8] @ "u1"
  %3 = Constant() {value=tensor<i64[1]>[2]} : i64[1]
  %4 = Unsqueeze(%2, %3) : f32[batch,1,1,8] "m4" @ "u2"
  return "y": %4
})";

TEST(ReshapeSimplificationTest, ConvertsUnsqueezePairToReshape) {
  ExpectRewrite(kPass, kUnsqueezeChain, R"(graph main opset=17 {
  %0 = Input() : f32[batch,8] "mask"
  %1 = Constant() {value=tensor<i64[4]>[0, 1, 1, 8]} : i64[4]
  %2 = Reshape(%0, %1) : f32[batch,1,1,8] "m4" @ "u2", "u1"
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kUnsqueezeChain, {}, {{"batch", 3}});
  EXPECT_EQ(CountersOf(kPass, kUnsqueezeChain),
            (PassCounters{{"composed reshapes", 1}, {"converted to Reshape", 2}}));
}

// Dims derived from constants alone (no stored types on the intermediates).
constexpr char kFlattenSqueeze[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,1,3,4] "x"
  %1 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %2 = Squeeze(%0, %1)
  %3 = Flatten(%2) {axis=2}
  return "y": %3
})";

TEST(ReshapeSimplificationTest, DerivesShapesFromConstants) {
  ExpectRewrite(kPass, kFlattenSqueeze, R"(graph main opset=17 {
  %0 = Input() : f32[2,1,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[6, 4]} : i64[2]
  %2 = Reshape(%0, %1) : f32[6,4]
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kFlattenSqueeze);
}

constexpr char kFlattenThenReshape[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Flatten(%0) {axis=1} : f32[2,12]
  %2 = Constant() {value=tensor<i64[2]>[3, 8]} : i64[2]
  %3 = Reshape(%1, %2) : f32[3,8]
  return "y": %3
})";

TEST(ReshapeSimplificationTest, AbsorbsFlattenIntoReshape) {
  ExpectRewrite(kPass, kFlattenThenReshape, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[3, 8]} : i64[2]
  %2 = Reshape(%0, %1) : f32[3,8]
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kFlattenThenReshape);
  EXPECT_EQ(CountersOf(kPass, kFlattenThenReshape),
            (PassCounters{{"composed reshapes", 1}, {"converted to Reshape", 1}}));
}

constexpr char kUnsqueezeSqueeze[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %2 = Unsqueeze(%0, %1) : f32[1,2,3]
  %3 = Squeeze(%2, %1) : f32[2,3]
  %4 = Relu(%3) : f32[2,3]
  return "y": %4
})";

TEST(ReshapeSimplificationTest, UnsqueezeThenSqueezeDisappears) {
  ExpectRewrite(kPass, kUnsqueezeSqueeze, R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Relu(%0) : f32[2,3]
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, kUnsqueezeSqueeze);
  EXPECT_EQ(CountersOf(kPass, kUnsqueezeSqueeze), (PassCounters{{"composed reshapes", 1},
                                                                {"converted to Reshape", 2},
                                                                {"removed no-op reshapes", 1}}));
}

// No-op reshapes: a static one, and a symbolic one whose -1 must be the input's dim.
constexpr char kNoOps[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Constant() {value=tensor<i64[2]>[2, 3]} : i64[2]
  %2 = Reshape(%0, %1) : f32[2,3]
  %3 = Input() : f32[batch,384] "h"
  %4 = Constant() {value=tensor<i64[2]>[-1, 384]} : i64[2]
  %5 = Reshape(%3, %4)
  return "y": %2, "z": %5
})";

TEST(ReshapeSimplificationTest, RemovesNoOpReshapes) {
  // Both graph outputs keep their names and now read the inputs.
  ExpectRewrite(kPass, kNoOps, R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[batch,384] "h"
  return "y": %0, "z": %1
})");
  ExpectNumericallyEquivalent(kPass, kNoOps, {}, {{"batch", 2}});
  EXPECT_EQ(CountersOf(kPass, kNoOps), (PassCounters{{"removed no-op reshapes", 2}}));
}

TEST(ReshapeSimplificationTest, DoesNothingThroughUnresolvableDims) {
  // The outer shape is computed at run time and the output has two unknown dims.
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[batch,seq,384] "x"
  %1 = Input() : i64[3] "shape"
  %2 = Constant() {value=tensor<i64[2]>[-1, 384]} : i64[2]
  %3 = Reshape(%0, %2) : f32[?,384]
  %4 = Reshape(%3, %1) : f32[?,?,384]
  return "y": %4
})");
  // Copies (0) of dims that are unknown, not symbols: two -1 would be needed.
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[?,?,384] "x"
  %1 = Constant() {value=tensor<i64[4]>[0, 0, 12, 32]} : i64[4]
  %2 = Reshape(%0, %1) : f32[?,?,12,32]
  %3 = Constant() {value=tensor<i64[3]>[0, 0, 384]} : i64[3]
  %4 = Reshape(%2, %3) : f32[?,?,384]
  return "y": %4
})");
}

TEST(ReshapeSimplificationTest, DoesNothingToLoneOrSharedOps) {
  // A lone Unsqueeze is not converted; a Reshape with two users is not composed.
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %2 = Unsqueeze(%0, %1) : f32[1,2,3,4]
  %3 = Constant() {value=tensor<i64[2]>[6, 4]} : i64[2]
  %4 = Reshape(%0, %3) : f32[6,4]
  %5 = Constant() {value=tensor<i64[2]>[4, 6]} : i64[2]
  %6 = Reshape(%4, %5) : f32[4,6]
  %7 = Relu(%4) : f32[6,4]
  return "y": %2, "z": %6, "w": %7
})");
}

}  // namespace
}  // namespace kiln
