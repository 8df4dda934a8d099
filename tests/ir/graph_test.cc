#include "kiln/ir/graph.h"

#include <gtest/gtest.h>

#include "kiln/ir/ops.h"

namespace kiln {
namespace {

TEST(GraphTest, UseListsFollowSetInputAndReplace) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {2}));
  Node* c = g.AddConstant("c", Tensor::FromF32({2}, {1.f, 2.f}));
  Node* add = g.AddNode("Add", {x->output(), c->output()}, 1);
  g.AddOutput("y", add->output());
  EXPECT_EQ(x->output_info(0).uses.size(), 1u);
  EXPECT_EQ(c->output_info(0).uses.size(), 1u);
  Node* neg = g.AddNode("Neg", {x->output()}, 1);
  g.ReplaceAllUsesWith(add->output(), neg->output());
  EXPECT_TRUE(add->output_info(0).uses.empty());
  EXPECT_EQ(g.outputs()[0].value, neg->output());
  EXPECT_EQ(g.RemoveDeadNodes(), 2);  // add and the constant only it used
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(x->output_info(0).uses.size(), 1u);
}

TEST(GraphTest, RemoveNodeRefusesLiveNode) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {2}));
  Node* n = g.AddNode("Neg", {x->output()}, 1);
  g.AddOutput("y", n->output());
  EXPECT_FALSE(g.RemoveNode(x).ok());
  EXPECT_FALSE(g.RemoveNode(n).ok());
}

TEST(GraphTest, TopoSortDetectsCycle) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {2}));
  Node* a = g.AddNode("Add", {x->output(), Value{}}, 1);
  Node* b = g.AddNode("Neg", {a->output()}, 1);
  g.SetInput(a, 1, b->output());
  g.AddOutput("y", b->output());
  absl::Status s = g.TopoSort();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cycle"), std::string::npos);
}

TEST(GraphTest, TopoSortOrdersAndCloneIsDeep) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {2}));
  Node* a = g.AddNode("Neg", {Value{}}, 1);
  Node* b = g.AddNode("Abs", {x->output()}, 1);
  g.SetInput(a, 0, b->output());
  g.AddOutput("y", a->output());
  ASSERT_TRUE(g.TopoSort().ok());
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op());
  EXPECT_EQ(ops, (std::vector<std::string>{"Input", "Abs", "Neg"}));
  auto c = g.Clone();
  EXPECT_EQ(c->num_nodes(), 3);
  EXPECT_EQ(c->outputs()[0].value.node->op(), "Neg");
  EXPECT_NE(c->outputs()[0].value.node, a);
}

TEST(TensorTest, HalfConversionsRoundTrip) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.5f)), 1.5f);
  EXPECT_FALSE(CheckedNumElements({int64_t{1} << 40, int64_t{1} << 40}).ok());
  EXPECT_FALSE(CheckedNumElements({-1}).ok());
}

TEST(OpsTest, CatalogueKnowsTraits) {
  EXPECT_TRUE(HasTrait(FindOp("", "Add"), kCommutative));
  EXPECT_TRUE(HasTrait(FindOp("", "Transpose"), kLayoutOnly));
  EXPECT_EQ(FindOp("", "NoSuchOp"), nullptr);
}

}  // namespace
}  // namespace kiln
