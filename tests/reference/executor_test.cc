// The reference executor's graph walker: input binding checks (missing, extra, dtype,
// rank, known dims, symbolic dims), dispatch errors (unknown op, kernel errors prefixed
// with the node), multi-output nodes, values used many times while intermediates are
// freed, constants and graph inputs as outputs, EvaluateNode and HasReferenceKernel.
#include "kiln/reference/executor.h"

#include <gtest/gtest.h>

#include "kiln/ir/graph.h"
#include "kiln/ir/ops.h"
#include "tests/reference/reference_test_util.h"

namespace kiln {
namespace {

using testing::Contains;
using testing::Floats;

Type Sym(DType dt, std::vector<Dim> dims) {
  Type t;
  t.dtype = dt;
  t.shape = std::move(dims);
  return t;
}

// y = (x + c) * x ; z = Neg(x + c) ; both reuse x and x + c.
class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g.set_opset(17);
    x = g.AddInput("x", Sym(DType::kF32, {Dim::Symbol("batch"), Dim::Known(2)}));
    Node* c = g.AddConstant("c", Tensor::FromF32({2}, {1, 10}));
    add = g.AddNode("Add", {x->output(), c->output()}, 1);
    add->add_provenance("the_add");
    Node* mul = g.AddNode("Mul", {add->output(), x->output()}, 1);
    Node* neg = g.AddNode("Neg", {add->output()}, 1);
    g.AddOutput("y", mul->output());
    g.AddOutput("z", neg->output());
  }
  Graph g;
  Node* x = nullptr;
  Node* add = nullptr;
};

TEST_F(ChainTest, RunsAndReusesValues) {
  auto r = RunReference(g, {{"x", Tensor::FromF32({2, 2}, {1, 2, 3, 4})}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{2, 24, 12, 56}));
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{-2, -12, -4, -14}));
}

TEST_F(ChainTest, InputBindingErrorsNameTheInput) {
  auto r = RunReference(g, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status(), "'x'")) << r.status();
  r = RunReference(g,
                   {{"x", Tensor::FromF32({1, 2}, {1, 2})}, {"extra", Tensor::FromF32({1}, {1})}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status(), "'extra'")) << r.status();
  r = RunReference(g, {{"x", Tensor::FromI64({1, 2}, {1, 2})}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status(), "dtype")) << r.status();
  r = RunReference(g, {{"x", Tensor::FromF32({2}, {1, 2})}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status(), "rank")) << r.status();
  r = RunReference(g, {{"x", Tensor::FromF32({1, 3}, {1, 2, 3})}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status(), "dim 1")) << r.status();
}

TEST(ExecutorTest, SymbolicDimsBindConsistently) {
  Graph g;
  Node* a = g.AddInput("a", Sym(DType::kF32, {Dim::Symbol("n")}));
  Node* b = g.AddInput("b", Sym(DType::kF32, {Dim::Symbol("n")}));
  Node* add = g.AddNode("Add", {a->output(), b->output()}, 1);
  g.AddOutput("y", add->output());
  auto ok =
      RunReference(g, {{"a", Tensor::FromF32({2}, {1, 2})}, {"b", Tensor::FromF32({2}, {3, 4})}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(Floats((*ok)[0]), (std::vector<float>{4, 6}));
  auto bad =
      RunReference(g, {{"a", Tensor::FromF32({2}, {1, 2})}, {"b", Tensor::FromF32({1}, {3})}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status(), "'b'")) << bad.status();
  EXPECT_TRUE(Contains(bad.status(), "'n'")) << bad.status();
}

TEST(ExecutorTest, UnknownOpIsUnimplementedAndNamesTheNode) {
  Graph g;
  g.set_opset(21);
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {1}));
  Node* n = g.AddNode("FrobnicateNonexistent", {x->output()}, 1);
  n->add_provenance("frob_1");
  g.AddOutput("y", n->output());
  auto r = RunReference(g, {{"x", Tensor::FromF32({1}, {1})}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(r.status(), "frob_1")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "FrobnicateNonexistent")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "opset 21")) << r.status();
}

TEST(ExecutorTest, KernelErrorsKeepTheirCodeAndGainTheNode) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kI64, {1}));
  Node* n = g.AddNode("Sqrt", {x->output()}, 1);
  n->add_provenance("sq");
  g.AddOutput("y", n->output());
  auto r = RunReference(g, {{"x", Tensor::FromI64({1}, {4})}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(r.status(), "node 'sq' (Sqrt")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "i64")) << r.status();
}

TEST(ExecutorTest, WrongOutputCountIsRejected) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {1}));
  Node* n = g.AddNode("Neg", {x->output()}, 2);
  g.AddOutput("y", n->output(0));
  auto r = RunReference(g, {{"x", Tensor::FromF32({1}, {1})}});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "outputs")) << r.status();
}

TEST(ExecutorTest, MultiOutputNodeAndReusedOutputs) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {1, 2}));
  Node* s = g.AddConstant("s", Tensor::FromF32({2}, {1, 1}));
  Node* ln = g.AddNode("LayerNormalization", {x->output(), s->output()}, 3);
  ln->set_attr("epsilon", 0.f);
  // Mean (output 1) is used twice, once after a graph output refers to it.
  Node* twice = g.AddNode("Add", {ln->output(1), ln->output(1)}, 1);
  Node* later = g.AddNode("Mul", {twice->output(), ln->output(1)}, 1);
  g.AddOutput("mean", ln->output(1));
  g.AddOutput("y", ln->output(0));
  g.AddOutput("later", later->output());
  g.AddOutput("mean_again", ln->output(1));
  g.AddOutput("x_passthrough", x->output());
  g.AddOutput("const", s->output());
  auto r = RunReference(g, {{"x", Tensor::FromF32({1, 2}, {1, 3})}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{2}));
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{-1, 1}));
  EXPECT_EQ(Floats((*r)[2]), (std::vector<float>{8}));  // (2 + 2) * 2
  EXPECT_EQ(Floats((*r)[3]), (std::vector<float>{2}));
  EXPECT_EQ(Floats((*r)[4]), (std::vector<float>{1, 3}));
  EXPECT_EQ(Floats((*r)[5]), (std::vector<float>{1, 1}));
}

TEST(ExecutorTest, OmittedOptionalInputsArePassedAsNull) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {3}));
  Node* hi = g.AddConstant("hi", Tensor::ScalarF32(0.5f));
  Node* clip = g.AddNode("Clip", {x->output(), Value{}, hi->output()}, 1);
  g.AddOutput("y", clip->output());
  auto r = RunReference(g, {{"x", Tensor::FromF32({3}, {-7, 0.25f, 9})}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{-7, 0.25f, 0.5f}));
}

TEST(ExecutorTest, EvaluateNodeAndKernelQuery) {
  Graph g;
  Node* c = g.AddConstant("c", Tensor::FromF32({2}, {1, 2}));
  auto cv = EvaluateNode(*c, {});
  ASSERT_TRUE(cv.ok()) << cv.status();
  EXPECT_EQ(Floats((*cv)[0]), (std::vector<float>{1, 2}));
  Node* add = g.AddNode("Add", {c->output(), c->output()}, 1);
  const Tensor a = Tensor::FromF32({2}, {1, 2});
  const Tensor b = Tensor::FromF32({1}, {10});
  const Tensor* args[] = {&a, &b};
  auto out = EvaluateNode(*add, args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{11, 12}));
  const Tensor* missing[] = {&a, nullptr};
  EXPECT_EQ(EvaluateNode(*add, missing).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasReferenceKernel("", "Add"));
  EXPECT_TRUE(HasReferenceKernel("", "MatMul"));
  EXPECT_TRUE(HasReferenceKernel("", "Constant"));
  EXPECT_FALSE(HasReferenceKernel("", "NoSuchOp"));
  EXPECT_FALSE(HasReferenceKernel("com.example", "Add"));
}

// Every op of the catalogue (include/kiln/ir/ops.h) has a reference kernel, so everything
// the importer accepts runs on `kiln run` and compiles to a plan (its shape rule is checked
// by ShapeInferenceTest.EveryCatalogueOpHasARule and ShapeRulesFusedTest). Adding an op:
// add its kernel too.
TEST(ReferenceExecutorTest, EveryCatalogueOpHasAKernel) {
  int ops = 0;
  for (const OpInfo& op : AllOps()) {
    if (op.domain.empty() && op.name == "Input") continue;  // fed, not computed
    ++ops;
    EXPECT_TRUE(HasReferenceKernel(op.domain, op.name))
        << "no reference kernel for " << (op.domain.empty() ? "" : std::string(op.domain) + ".")
        << op.name;
  }
  EXPECT_GT(ops, 100);
}

}  // namespace
}  // namespace kiln
