// Tests for transpose-elimination: one Before/Expected case per rule (each also run twice
// by ExpectRewrite, and checked numerically on the reference executor), the cases the
// pass must leave alone, and its counters.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::CountersOf;
using testing::ExpectNoChange;
using testing::ExpectNumericallyEquivalent;
using testing::ExpectRewrite;
using testing::ExpectSameOutputs;
using testing::Parse;
using testing::RunPass;

constexpr char kPass[] = "transpose-elimination";

constexpr char kInversePair[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[0, 2, 1]} : f32[2,4,3] @ "t1"
  %2 = Transpose(%1) {perm=[0, 2, 1]} : f32[2,3,4] @ "t2"
  %3 = Relu(%2) : f32[2,3,4] @ "relu"
  return "y": %3
})";

TEST(TransposeEliminationTest, CancelsInversePair) {
  ExpectRewrite(kPass, kInversePair, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Relu(%0) : f32[2,3,4] @ "relu"
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, kInversePair);
  EXPECT_EQ(CountersOf(kPass, kInversePair), (PassCounters{{"cancelled pairs", 1}}));
}

// A non-trivial inverse pair (p = [1,2,0], q = p^-1 = [2,0,1]) whose outer transpose is a
// graph output: the output keeps its name and now reads x.
constexpr char kInversePairAsOutput[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 2, 0]} : f32[3,4,2]
  %2 = Neg(%1) : f32[3,4,2] "n"
  %3 = Transpose(%1) {perm=[2, 0, 1]} : f32[2,3,4] "t"
  return "y": %3, "z": %2
})";

TEST(TransposeEliminationTest, CancelsPairWhoseInnerHasOtherUsers) {
  ExpectRewrite(kPass, kInversePairAsOutput, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 2, 0]} : f32[3,4,2]
  %2 = Neg(%1) : f32[3,4,2] "n"
  return "y": %0, "z": %2
})");
  ExpectNumericallyEquivalent(kPass, kInversePairAsOutput);
}

constexpr char kComposable[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 0, 2]} : f32[3,2,4] @ "t1"
  %2 = Transpose(%1) {perm=[0, 2, 1]} : f32[3,4,2] "t" @ "t2"
  return "y": %2
})";

TEST(TransposeEliminationTest, ComposesConsecutiveTransposes) {
  // out.dim[j] = x.dim[p[q[j]]]: p = [1,0,2], q = [0,2,1] -> [1,2,0].
  ExpectRewrite(kPass, kComposable, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 2, 0]} : f32[3,4,2] "t" @ "t2", "t1"
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, kComposable);
  EXPECT_EQ(CountersOf(kPass, kComposable), (PassCounters{{"composed", 1}}));
}

TEST(TransposeEliminationTest, ComposesDefaultPermutation) {
  // No perm = reversed dims: [2,1,0] then [1,0,2] -> [p[1], p[0], p[2]] = [1,2,0].
  constexpr char kText[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) : f32[4,3,2]
  %2 = Transpose(%1) {perm=[1, 0, 2]} : f32[3,4,2]
  return "y": %2
})";
  ExpectRewrite(kPass, kText, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 2, 0]} : f32[3,4,2]
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, kText);
}

TEST(TransposeEliminationTest, DoesNotComposeWhenInnerHasTwoUsers) {
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 0, 2]} : f32[3,2,4]
  %2 = Transpose(%1) {perm=[0, 2, 1]} : f32[3,4,2]
  %3 = Relu(%1) : f32[3,2,4]
  return "y": %2, "z": %3
})");
}

TEST(TransposeEliminationTest, DoesNothingWithoutTransposes) {
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Relu(%0) : f32[2,3]
  return "y": %1
})");
}

constexpr char kIdentity[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Transpose(%0) {perm=[0, 1]} : f32[2,3]
  %2 = Exp(%1) : f32[2,3]
  return "y": %2
})";

TEST(TransposeEliminationTest, RemovesIdentityPermutation) {
  ExpectRewrite(kPass, kIdentity, R"(graph main opset=17 {
  %0 = Input() : f32[2,3] "x"
  %1 = Exp(%0) : f32[2,3]
  return "y": %1
})");
  ExpectNumericallyEquivalent(kPass, kIdentity);
  EXPECT_EQ(CountersOf(kPass, kIdentity), (PassCounters{{"removed identity transposes", 1}}));
}

// A MatMul weight stored transposed.
constexpr char kConstantWeight[] = R"(graph main opset=17 {
  %0 = Input() : f32[4,3] "x"
  %1 = Constant() {value=tensor<f32[2,3]>[1, 2, 3, 4, 5, 6]} : f32[2,3] "w" @ "w_init"
  %2 = Transpose(%1) {perm=[1, 0]} : f32[3,2] "wt" @ "tw"
  %3 = MatMul(%0, %2) : f32[4,2]
  return "y": %3
})";

TEST(TransposeEliminationTest, FoldsTransposeOfConstant) {
  ExpectRewrite(kPass, kConstantWeight, R"(graph main opset=17 {
  %0 = Input() : f32[4,3] "x"
  %1 = Constant() {value=tensor<f32[3,2]>[1, 4, 2, 5, 3, 6]} : f32[3,2] "wt" @ "w_init", "tw"
  %2 = MatMul(%0, %1) : f32[4,2]
  return "y": %2
})");
  ExpectNumericallyEquivalent(kPass, kConstantWeight);
  EXPECT_EQ(CountersOf(kPass, kConstantWeight), (PassCounters{{"folded into constants", 1}}));
}

TEST(TransposeEliminationTest, FoldsSmallSharedConstantAndKeepsTheOriginal) {
  constexpr char kText[] = R"(graph main opset=17 {
  %0 = Input() : f32[4,3] "x"
  %1 = Constant() {value=tensor<f32[2,3]>[1, 2, 3, 4, 5, 6]} : f32[2,3] "w"
  %2 = Transpose(%1) {perm=[1, 0]} : f32[3,2]
  %3 = MatMul(%0, %2) : f32[4,2]
  %4 = Add(%1, %1) : f32[2,3]
  return "y": %3, "z": %4
})";
  ExpectRewrite(kPass, kText, R"(graph main opset=17 {
  %0 = Input() : f32[4,3] "x"
  %1 = Constant() {value=tensor<f32[2,3]>[1, 2, 3, 4, 5, 6]} : f32[2,3] "w"
  %2 = Constant() {value=tensor<f32[3,2]>[1, 4, 2, 5, 3, 6]} : f32[3,2]
  %3 = MatMul(%0, %2) : f32[4,2]
  %4 = Add(%1, %1) : f32[2,3]
  return "y": %3, "z": %4
})");
  ExpectNumericallyEquivalent(kPass, kText);
}

// A 4224-byte weight (over the 4 KiB limit) read by the transpose and by another node
// is not duplicated; with the transpose as its only user it is folded.
std::unique_ptr<Graph> BigWeightGraph(bool shared) {
  auto g = std::make_unique<Graph>();
  g->set_opset(17);
  Node* x = g->AddInput("x", Type::Static(DType::kF32, {2, 32}));
  std::vector<float> w(32 * 33);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3;
  Node* c = g->AddConstant("w", Tensor::FromF32({33, 32}, w));
  Node* t = g->AddNode("Transpose", {c->output()}, 1);
  t->set_attr("perm", std::vector<int64_t>{1, 0});
  t->set_output_type(0, Type::Static(DType::kF32, {32, 33}));
  Node* mm = g->AddNode("MatMul", {x->output(), t->output()}, 1);
  mm->set_output_type(0, Type::Static(DType::kF32, {2, 33}));
  g->AddOutput("y", mm->output());
  if (shared) g->AddOutput("w_out", c->output());
  return g;
}

TEST(TransposeEliminationTest, DoesNotDuplicateBigSharedWeight) {
  auto g = BigWeightGraph(/*shared=*/true);
  ExpectNoChange(kPass, *g);
}

TEST(TransposeEliminationTest, FoldsBigWeightWithSingleUse) {
  auto g = BigWeightGraph(/*shared=*/false);
  auto original = g->Clone();
  EXPECT_TRUE(RunPass(kPass, *g));
  int constants = 0;
  for (const auto& n : g->nodes()) {
    EXPECT_NE(n->op(), "Transpose");
    if (n->is_constant()) {
      ++constants;
      EXPECT_EQ(n->constant_value()->dims(), (std::vector<int64_t>{32, 33}));
    }
  }
  EXPECT_EQ(constants, 1);
  ExpectSameOutputs(*original, *g);
}

// T1 sinks through Relu, Add(scalar) and Mul(rank-2 constant) and cancels with T2; the
// Mul constant [4,1] is padded to [1,4,1] and permuted by p^-1 = [0,2,1] to [1,1,4].
constexpr char kSinkAndCancel[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[0, 2, 1]} : f32[2,4,3]
  %2 = Relu(%1) : f32[2,4,3] @ "relu"
  %3 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "half"
  %4 = Add(%2, %3) : f32[2,4,3]
  %5 = Constant() {value=tensor<f32[4,1]>[1, 2, 3, 4]} : f32[4,1] "scale"
  %6 = Mul(%5, %4) : f32[2,4,3]
  %7 = Transpose(%6) {perm=[0, 2, 1]} : f32[2,3,4] "out"
  return "y": %7
})";

TEST(TransposeEliminationTest, SinksThroughElementwiseToCancel) {
  ExpectRewrite(kPass, kSinkAndCancel, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Relu(%0) : f32[2,3,4] @ "relu"
  %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "half"
  %3 = Add(%1, %2) : f32[2,3,4]
  %4 = Constant() {value=tensor<f32[1,1,4]>[1, 2, 3, 4]} : f32[1,1,4] "scale"
  %5 = Mul(%4, %3) : f32[2,3,4]
  return "y": %5
})");
  ExpectNumericallyEquivalent(kPass, kSinkAndCancel);
  EXPECT_EQ(CountersOf(kPass, kSinkAndCancel),
            (PassCounters{{"cancelled pairs", 1}, {"moved through elementwise", 3}}));
}

constexpr char kSinkAndCompose[] = R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[1, 0, 2]} : f32[3,2,4] @ "t1"
  %2 = Cast(%1) {to=11} : f64[3,2,4]
  %3 = Constant() {value=tensor<f64[]>[-0.5]} : f64[]
  %4 = Constant() {value=tensor<f64[]>[0.25]} : f64[]
  %5 = Clip(%2, %3, %4) : f64[3,2,4]
  %6 = Transpose(%5) {perm=[0, 2, 1]} : f64[3,4,2] @ "t2"
  return "y": %6
})";

TEST(TransposeEliminationTest, SinksThroughElementwiseToCompose) {
  ExpectRewrite(kPass, kSinkAndCompose, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Cast(%0) {to=11} : f64[2,3,4]
  %2 = Constant() {value=tensor<f64[]>[-0.5]} : f64[]
  %3 = Constant() {value=tensor<f64[]>[0.25]} : f64[]
  %4 = Clip(%1, %2, %3) : f64[2,3,4]
  %5 = Transpose(%4) {perm=[1, 2, 0]} : f64[3,4,2] @ "t2", "t1"
  return "y": %5
})");
  ExpectNumericallyEquivalent(kPass, kSinkAndCompose);
  EXPECT_EQ(CountersOf(kPass, kSinkAndCompose),
            (PassCounters{{"composed", 1}, {"moved through elementwise", 2}}));
}

// Sinking would need a permuted copy of a 4224-byte constant that another node also
// reads: not done. With the Mul as its only user the constant is replaced instead.
std::unique_ptr<Graph> BigOperandGraph(bool shared) {
  auto g = std::make_unique<Graph>();
  g->set_opset(17);
  Node* x = g->AddInput("x", Type::Static(DType::kF32, {32, 33}));
  std::vector<float> w(32 * 33);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) - 2;
  Node* c = g->AddConstant("c", Tensor::FromF32({33, 32}, w));
  Node* t1 = g->AddNode("Transpose", {x->output()}, 1);
  t1->set_attr("perm", std::vector<int64_t>{1, 0});
  t1->set_output_type(0, Type::Static(DType::kF32, {33, 32}));
  Node* mul = g->AddNode("Mul", {t1->output(), c->output()}, 1);
  mul->set_output_type(0, Type::Static(DType::kF32, {33, 32}));
  Node* t2 = g->AddNode("Transpose", {mul->output()}, 1);
  t2->set_attr("perm", std::vector<int64_t>{1, 0});
  t2->set_output_type(0, Type::Static(DType::kF32, {32, 33}));
  g->AddOutput("y", t2->output());
  if (shared) g->AddOutput("c_out", c->output());
  return g;
}

TEST(TransposeEliminationTest, DoesNotCopyBigSharedOperandWhenSinking) {
  auto g = BigOperandGraph(/*shared=*/true);
  ExpectNoChange(kPass, *g);
}

TEST(TransposeEliminationTest, SinksPastBigSingleUseOperand) {
  auto g = BigOperandGraph(/*shared=*/false);
  auto original = g->Clone();
  EXPECT_TRUE(RunPass(kPass, *g));
  std::vector<std::string> ops;
  for (const auto& n : g->nodes()) ops.push_back(n->op());
  EXPECT_EQ(ops, (std::vector<std::string>{"Input", "Constant", "Mul"}));
  ExpectSameOutputs(*original, *g);
}

TEST(TransposeEliminationTest, DoesNotMoveWithoutAPartner) {
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[0, 2, 1]} : f32[2,4,3]
  %2 = Relu(%1) : f32[2,4,3]
  %3 = Tanh(%2) : f32[2,4,3]
  return "y": %3
})");
}

TEST(TransposeEliminationTest, DoesNotMoveThroughFanOut) {
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Transpose(%0) {perm=[0, 2, 1]} : f32[2,4,3]
  %2 = Relu(%1) : f32[2,4,3]
  %3 = Transpose(%2) {perm=[0, 2, 1]} : f32[2,3,4]
  return "y": %3, "r": %2
})");
}

TEST(TransposeEliminationTest, DoesNotMoveThroughNonElementwiseOrTwoVariableOperands) {
  ExpectNoChange(kPass, R"(graph main opset=17 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[2,4,3] "b"
  %2 = Transpose(%0) {perm=[0, 2, 1]} : f32[2,4,3]
  %3 = Add(%2, %1) : f32[2,4,3]
  %4 = Transpose(%3) {perm=[0, 2, 1]} : f32[2,3,4]
  %5 = Transpose(%0) {perm=[0, 2, 1]} : f32[2,4,3]
  %6 = Softmax(%5) {axis=-1} : f32[2,4,3]
  %7 = Transpose(%6) {perm=[0, 2, 1]} : f32[2,3,4]
  return "y": %4, "z": %7
})");
}

}  // namespace
}  // namespace kiln
