// No-op forms through the standard pipelines: every form has one owner pass
// (docs/passes.md, "No-op forms and their owners"), and the pipeline removes them all —
// -O1 the single-node forms (DCE: passes/no_ops.h; reshape-simplification: the
// derivable reshapes), -O2 also canonicalize's (Pow(x, 1), lossless Cast pairs).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kiln/passes/pass_manager.h"
#include "passes/no_ops.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectSameOutputs;
using testing::Parse;

// One of each no-op form, chained: each forwards its input unchanged.
constexpr char kEveryNoOp[] = R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Identity(%0)
  %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %3 = Dropout(%1, %2)
  %4 = Cast(%3) {to=1}
  %5 = CastLike(%4, %0)
  %6 = Constant() {value=tensor<i64[2]>[2, 3]} : i64[2]
  %7 = Reshape(%5, %6)
  %8 = Expand(%7, %6)
  %9 = Constant() {value=tensor<i64[2]>[0, 0]} : i64[2]
  %10 = Slice(%8, %9, %6)
  %11 = Transpose(%10) {perm=[0, 1]}
  %12 = Flatten(%11) {axis=1}
  %13 = Constant() {value=tensor<f32[]>[1]} : f32[]
  %14 = Pow(%12, %13)
  %15 = Cast(%14) {to=11}
  %16 = Cast(%15) {to=1}
  %17 = Relu(%16) : f32[2,3] "y"
  return "y": %17
})";

std::set<std::string> OpsOf(const Graph& g) {
  std::set<std::string> ops;
  for (const auto& n : g.nodes()) ops.insert(n->op());
  return ops;
}

std::unique_ptr<Graph> Optimized(int level) {
  std::unique_ptr<Graph> g = Parse(kEveryNoOp);
  if (!g) return nullptr;
  absl::StatusOr<Pipeline> p = StandardPipeline(level);
  EXPECT_TRUE(p.ok()) << p.status();
  PassContext ctx;
  ctx.verify_each = true;
  PassManager pm;
  absl::Status s = pm.Run(*p, *g, ctx);
  EXPECT_TRUE(s.ok()) << s;
  return g;
}

TEST(NoOpsTest, O1RemovesEverySingleNodeForm) {
  std::unique_ptr<Graph> g = Optimized(1);
  ASSERT_NE(g, nullptr);
  // What is left is canonicalize's (-O2): Pow(x, 1) and the f32 -> f64 -> f32 Cast pair.
  EXPECT_EQ(OpsOf(*g), (std::set<std::string>{"Input", "Constant", "Pow", "Cast", "Relu"}));
  ExpectSameOutputs(*Parse(kEveryNoOp), *g);
}

TEST(NoOpsTest, O2RemovesEveryForm) {
  std::unique_ptr<Graph> g = Optimized(2);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(OpsOf(*g), (std::set<std::string>{"Input", "Relu"}));
  ExpectSameOutputs(*Parse(kEveryNoOp), *g);
}

// The shared Transpose rules: no perm reverses the dims; a perm must fit the input rank.
TEST(NoOpsTest, TransposePermRules) {
  std::unique_ptr<Graph> g = Parse(R"(
graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[4] "v"
  %2 = Transpose(%0)
  %3 = Transpose(%1)
  %4 = Transpose(%0) {perm=[0, 1, 2]}
  %5 = Transpose(%0) {perm=[1, 0]}
  return "a": %2, "b": %3, "c": %4, "d": %5
})");
  ASSERT_NE(g, nullptr);
  std::vector<const Node*> nodes;
  for (const auto& n : g->nodes()) nodes.push_back(n.get());
  auto node = [&](int i) -> const Node& { return *nodes[i]; };
  EXPECT_EQ(noop::TransposePerm(node(2)), (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(noop::IsIdentityTranspose(node(2)));
  EXPECT_TRUE(noop::IsIdentityTranspose(node(3)));  // rank 1, no perm
  EXPECT_EQ(noop::TransposePerm(node(4)), std::nullopt);
  EXPECT_FALSE(noop::IsIdentityTranspose(node(4)));
  EXPECT_FALSE(noop::IsIdentityTranspose(node(5)));
}

}  // namespace
}  // namespace kiln
