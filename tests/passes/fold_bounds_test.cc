// Constant folding's output-size bounds (passes/fold_bounds.h): the catalogue's `grows`
// flag and the bound rules agree op by op, and on ops that do grow their output the bound
// covers what the reference kernel really produces (where the default bound, the sum of
// the inputs' elements, would not).
#include "passes/fold_bounds.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/ops.h"
#include "kiln/ir/text.h"
#include "kiln/reference/executor.h"

namespace kiln {
namespace {

std::string OpName(const OpInfo& op) {
  return op.domain.empty() ? std::string(op.name)
                           : std::string(op.domain) + "." + std::string(op.name);
}

TEST(FoldBoundsTest, EveryGrowingOpHasABoundRuleAndNoOtherDoes) {
  int growing = 0;
  for (const OpInfo& op : AllOps()) {
    growing += op.grows;
    EXPECT_EQ(fold::HasBoundRule(op.domain, op.name), op.grows)
        << OpName(op)
        << (op.grows ? " grows but has no bound rule in passes/fold_bounds.cc"
                     : " has a bound rule but the catalogue says it never grows");
    EXPECT_FALSE(op.grows && HasTrait(&op, kBroadcasting))
        << OpName(op) << ": broadcasting ops are bounded by their broadcast, not a rule";
  }
  EXPECT_GT(growing, 20);
}

// Parses `text` (Constants feeding the last node), bounds the last node's largest output
// from its constant inputs and evaluates it on the reference kernel.
void ExpectBoundCovers(const std::string& text) {
  auto g = ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  const Node& n = *(*g)->nodes().back();
  std::vector<const Tensor*> ins;
  int64_t input_elements = 0;
  for (const Value& v : n.inputs()) {
    ins.push_back(v ? v.node->constant_value() : nullptr);
    if (ins.back() != nullptr) input_elements += std::max<int64_t>(ins.back()->NumElements(), 1);
  }
  const int64_t bound = fold::BoundOutputBytes(n, FindOp(n.domain(), n.op()), ins);
  auto outs = EvaluateNode(n, ins);
  ASSERT_TRUE(outs.ok()) << n.op() << ": " << outs.status();
  int64_t largest = 0;
  for (const Tensor& t : *outs) largest = std::max<int64_t>(largest, t.NumBytes());
  EXPECT_GE(bound, largest) << n.op();
  // The case really grows: the default bound (8 bytes per input element) would be short.
  EXPECT_GT(largest, input_elements * 8) << n.op() << ": pick a case that grows";
}

TEST(FoldBoundsTest, GrowingOpsAreBoundedAboveTheirOutput) {
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<f32[2,3]>[1, 2, 3, 4, 5, 6]} : f32[2,3]
  %1 = Constant() {value=tensor<i64[2]>[8, 9]} : i64[2]
  %2 = Tile(%0, %1)
  return "y": %2
})");
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<f32[1,3]>[1, 2, 3]} : f32[1,3]
  %1 = Constant() {value=tensor<i64[2]>[64, 3]} : i64[2]
  %2 = Expand(%0, %1)
  return "y": %2
})");
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<i64[2]>[16, 16]} : i64[2]
  %1 = ConstantOfShape(%0) {value=tensor<f32[1]>[0.5]}
  return "y": %1
})");
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<f32[]>[0]} : f32[]
  %1 = Constant() {value=tensor<f32[]>[100]} : f32[]
  %2 = Constant() {value=tensor<f32[]>[1]} : f32[]
  %3 = Range(%0, %1, %2)
  return "y": %3
})");
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<f32[2,2]>[1, 2, 3, 4]} : f32[2,2]
  %1 = Constant() {value=tensor<i64[4]>[3, 3, 4, 4]} : i64[4]
  %2 = Pad(%0, %1)
  return "y": %2
})");
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<i64[3]>[0, 5, 9]} : i64[3]
  %1 = Constant() {value=tensor<i64[]>[40]} : i64[]
  %2 = Constant() {value=tensor<f32[2]>[0, 1]} : f32[2]
  %3 = OneHot(%0, %1, %2)
  return "y": %3
})");
  ExpectBoundCovers(R"(graph g opset=21 {
  %0 = Constant() {value=tensor<f32[8,1]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[8,1]
  %1 = Constant() {value=tensor<f32[1,8]>[1, 2, 3, 4, 5, 6, 7, 8]} : f32[1,8]
  %2 = MatMul(%0, %1)
  return "y": %2
})");
}

}  // namespace
}  // namespace kiln
