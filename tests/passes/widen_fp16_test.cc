// widen-fp16 (passes/widen_fp16.cc): an fp16 graph computes in f32 on the cpu. A plain
// compile keeps the f16 interface behind Casts at the edges; a generation compile
// (PassContext::kv_cache_f32) widens the graph's inputs and outputs themselves, so the
// cache a decoder appends to is an f32 input/output pair the generation program can page.
// (Numerics end to end: tests/e2e/test_fp16_export.py, test_genai_fixtures.py.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/text.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

constexpr char kPass[] = "widen-fp16";

// A cache append: present = Concat(past, x · 2) on axis 2.
constexpr char kAppend[] = R"(graph g opset=21 {
  %0 = Input() : f16[1,2,3,4] "past"
  %1 = Input() : f16[1,2,1,4] "x"
  %2 = Constant() {value=tensor<f16[1]>[2]} : f16[1] "two"
  %3 = Mul(%1, %2) : f16[1,2,1,4] @ "mul"
  %4 = Concat(%0, %3) {axis=2} : f16[1,2,4,4] @ "concat"
  return "present": %4
})";

PassContext Cpu(bool generation) {
  PassContext ctx;
  ctx.target = PlanTarget::kCpu;
  ctx.kv_cache_f32 = generation;
  return ctx;
}

TEST(WidenFp16, APlainCompileKeepsTheF16EdgesBehindCasts) {
  auto g = testing::Parse(kAppend);
  ASSERT_TRUE(g);
  ASSERT_TRUE(testing::RunPass(kPass, *g, Cpu(false)));
  for (const Node* in : g->inputs()) {
    EXPECT_EQ(in->output_info(0).type.dtype, DType::kF16) << in->output_info(0).name;
    ASSERT_EQ(in->output_info(0).uses.size(), 1u);
    EXPECT_EQ(in->output_info(0).uses[0].user->op(), "Cast");
  }
  const Value out = g->outputs()[0].value;
  EXPECT_EQ(out.type().dtype, DType::kF16);
  EXPECT_EQ(out.node->op(), "Cast");
  EXPECT_EQ(out.node->input(0).node->op(), "Concat");
  EXPECT_FALSE(testing::RunPass(kPass, *g, Cpu(false))) << "second run changed the graph";
}

TEST(WidenFp16, AGenerationCompileWidensTheCacheItself) {
  auto g = testing::Parse(kAppend);
  ASSERT_TRUE(g);
  ASSERT_TRUE(testing::RunPass(kPass, *g, Cpu(true)));
  for (const Node* in : g->inputs()) {
    EXPECT_EQ(in->output_info(0).type.dtype, DType::kF32) << in->output_info(0).name;
    EXPECT_EQ(in->output_info(0).type.ToString(),
              in->output_info(0).name == "past" ? "f32[1,2,3,4]" : "f32[1,2,1,4]");
    for (const Use& u : in->output_info(0).uses) EXPECT_NE(u.user->op(), "Cast");
  }
  // present is the Concat of the past input itself: the pair a decode program pages.
  const Value out = g->outputs()[0].value;
  ASSERT_EQ(out.node->op(), "Concat");
  EXPECT_TRUE(out.node->input(0).node->is_input());
  EXPECT_NE(out.type().dtype, DType::kF16);
  EXPECT_FALSE(testing::RunPass(kPass, *g, Cpu(true))) << "second run changed the graph";
}

}  // namespace
}  // namespace kiln
