// Tests for VerifyGraph: a valid graph passes, and each check fails on a graph broken in
// exactly that way, with an error that names the node (Node::Describe()). Most breakages
// are built through the public Graph API. Use lists cannot be corrupted through the API
// (that is its point), so those cases edit them through a const_cast, standing in for a
// pass that edits them by hand. An operand with an out-of-range output index cannot be
// built at all without undefined behaviour (the API would index past the producer's
// outputs), so that check is only exercised for graph outputs.
#include "kiln/ir/verifier.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/graph.h"
#include "kiln/ir/text.h"

namespace kiln {
namespace {

std::vector<Use>& MutableUses(Node* n, int i) {
  return const_cast<NodeOutput&>(n->output_info(i)).uses;
}

void ExpectFails(const Graph& g, const std::string& part1, const std::string& part2 = "") {
  absl::Status s = VerifyGraph(g);
  ASSERT_FALSE(s.ok()) << "expected failure mentioning: " << part1;
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find(part1), std::string::npos) << s;
  EXPECT_NE(s.message().find(part2), std::string::npos) << s;
}

// x -> Neg -> Split(2) -> Add(split0, const) ; outputs "y" and "z".
struct Small {
  Graph g;
  Node* x;
  Node* c;
  Node* neg;
  Node* split;
  Node* add;
  Small() {
    g.set_opset(17);
    x = g.AddInput("x", Type::Static(DType::kF32, {2}));
    c = g.AddConstant("c", Tensor::FromF32({1}, {1.f}));
    neg = g.AddNode("Neg", {x->output()}, 1);
    neg->add_provenance("neg_0");
    split = g.AddNode("Split", {neg->output(), Value{}}, 2);
    split->add_provenance("split_0");
    add = g.AddNode("Add", {split->output(0), c->output()}, 1);
    add->add_provenance("add_0");
    g.AddOutput("y", add->output());
    g.AddOutput("z", split->output(1));
  }
};

TEST(VerifierTest, ValidGraphsPass) {
  Small s;
  EXPECT_TRUE(VerifyGraph(s.g).ok()) << VerifyGraph(s.g);
  Graph empty;
  EXPECT_TRUE(VerifyGraph(empty).ok());
  auto parsed = ParseGraph(R"(graph g opset=17 {
  %0 = Input() : f32[batch,4] "x"
  %1 = Constant() {value=tensor<i64[2]>[4, -1]} : i64[2] "shape"
  %2 = Reshape(%0, %1) : f32[*]
  %3, %4 = Split(%2, _) {axis=0}
  %5 = Add(%3, %3)
  return "a": %5, "b": %4, "c": %5
})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(VerifyGraph(**parsed).ok()) << VerifyGraph(**parsed);
}

TEST(VerifierTest, OperandFromAnotherGraph) {
  Small s;
  Graph other;
  Node* foreign = other.AddInput("f", Type::Static(DType::kF32, {2}));
  s.g.SetInput(s.add, 1, foreign->output());
  ExpectFails(s.g, s.add->Describe() + " operand 1 refers to a node not owned by this graph");
  // Seen from the other graph, the edge is a use by a node it does not own.
  ExpectFails(other, foreign->Describe() + " output 0 records a use by a node not in this graph");
}

TEST(VerifierTest, UserBeforeProducer) {
  Small s;
  Node* early = s.g.InsertNodeBefore(s.neg, "Relu", {s.add->output()}, 1);
  ExpectFails(s.g, early->Describe() + " operand 0 is defined by " + s.add->Describe(),
              "not topologically ordered");
  ASSERT_TRUE(s.g.TopoSort().ok());
  EXPECT_TRUE(VerifyGraph(s.g).ok()) << VerifyGraph(s.g);
}

TEST(VerifierTest, CycleThroughItself) {
  Small s;
  s.g.SetInput(s.split, 1, s.split->output(1));
  ExpectFails(s.g, s.split->Describe() + " operand 1 is defined by " + s.split->Describe(),
              "itself");
}

TEST(VerifierTest, CycleThroughTwoNodes) {
  Small s;
  s.g.SetInput(s.neg, 0, s.add->output());
  ExpectFails(s.g, s.neg->Describe() + " operand 0 is defined by " + s.add->Describe());
}

TEST(VerifierTest, StaleUseWithWrongOperand) {
  Small s;
  MutableUses(s.x, 0).push_back(Use{s.add, 1});  // add's operand 1 is the constant
  ExpectFails(s.g, s.x->Describe() + " output 0 records a use as operand 1 of " + s.add->Describe(),
              "stale use");
}

TEST(VerifierTest, StaleUseOutOfRange) {
  Small s;
  MutableUses(s.x, 0).push_back(Use{s.neg, 7});
  ExpectFails(s.g, "records a use as operand 7 of " + s.neg->Describe());
}

TEST(VerifierTest, DuplicateUse) {
  Small s;
  MutableUses(s.neg, 0).push_back(Use{s.split, 0});
  ExpectFails(s.g, s.neg->Describe() + " output 0 records its use as operand 0 of " +
                       s.split->Describe() + " more than once");
}

TEST(VerifierTest, MissingUse) {
  Small s;
  MutableUses(s.split, 0).clear();
  ExpectFails(
      s.g, s.add->Describe() + " operand 0 is missing from the use list of " + s.split->Describe());
}

TEST(VerifierTest, InputNodeNotAGraphInput) {
  Small s;
  Node* stray = s.g.AddNode("Input", {}, 1);
  stray->set_output_type(0, Type::Static(DType::kF32, {1}));
  ExpectFails(s.g, stray->Describe() + " is an Input node but not one of the graph's inputs");
}

TEST(VerifierTest, InputWithoutDtype) {
  Small s;
  Node* in = s.g.AddInput("untyped", Type{});
  ExpectFails(s.g, in->Describe() + " is a graph input without a dtype");
}

TEST(VerifierTest, ConstantTypeMismatch) {
  Small s;
  s.c->set_output_type(0, Type::Static(DType::kF32, {3}));
  ExpectFails(s.g, s.c->Describe() + " stores output type f32[3] but its value is f32[1]");
  s.c->set_output_type(0, Type::Static(DType::kF16, {1}));
  ExpectFails(s.g, "stores output type f16[1] but its value is f32[1]");
}

TEST(VerifierTest, ConstantWithoutTensorValue) {
  Small s;
  Node* bare = s.g.AddNode("Constant", {}, 1);
  ExpectFails(s.g, bare->Describe() + " is a Constant without a tensor 'value' attribute");
  bare->set_attr("value", int64_t{3});
  ExpectFails(s.g, bare->Describe() + " is a Constant without a tensor 'value' attribute");
}

TEST(VerifierTest, ConstantWithShortStorage) {
  Small s;
  Node* c = s.g.AddConstant("short", Tensor(DType::kF32, {4}, Storage::Allocate(4)));
  ExpectFails(s.g,
              c->Describe() + " is a Constant whose value needs 16 bytes but its storage holds 4");
}

TEST(VerifierTest, ConstantWithOperands) {
  Small s;
  Node* c = s.g.AddNode("Constant", {s.x->output()}, 1);
  c->set_attr("value", Tensor::ScalarF32(1.f));
  c->set_output_type(0, Type::Static(DType::kF32, {}));
  ExpectFails(s.g, c->Describe() + " is a Constant with 1 operands");
}

TEST(VerifierTest, GraphOutputProblems) {
  {
    Small s;
    s.g.AddOutput("null", Value{});
    ExpectFails(s.g, "graph output 2 'null' has no value");
  }
  {
    Small s;
    Graph other;
    Node* f = other.AddInput("f", Type::Static(DType::kF32, {2}));
    s.g.AddOutput("foreign", f->output());
    ExpectFails(s.g, "graph output 2 'foreign' refers to a node not owned by this graph");
  }
  {
    Small s;
    s.g.AddOutput("bad_index", Value{s.split, 2});
    ExpectFails(s.g, "graph output 2 'bad_index' refers to output 2 of " + s.split->Describe(),
                "which has 2 outputs");
  }
  {
    Small s;
    s.g.AddOutput("y", s.neg->output());
    ExpectFails(s.g, "graph output 2 'y' repeats an earlier output's name");
  }
}

TEST(VerifierTest, ErrorsNameTheNodeByProvenance) {
  Small s;
  s.g.SetInput(s.neg, 0, s.add->output());
  absl::Status st = VerifyGraph(s.g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node 'neg_0' (Neg, opset 17)"), std::string::npos) << st;
}

}  // namespace
}  // namespace kiln
