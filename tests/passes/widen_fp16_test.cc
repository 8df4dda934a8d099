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

// A bf16 graph widens the same way (bf16 ⊂ f32): its constant exactly, its edges kept bf16
// behind Casts, the output cast back to bf16; a graph holding both widths keeps each edge's.
TEST(WidenFp16, Bf16AndMixedWidthsKeepTheirOwnEdges) {
  std::string bf16 = kAppend;
  for (size_t at = bf16.find("f16"); at != std::string::npos; at = bf16.find("f16", at + 4))
    bf16.replace(at, 3, "bf16");
  auto g = testing::Parse(bf16);
  ASSERT_TRUE(g);
  ASSERT_TRUE(testing::RunPass(kPass, *g, Cpu(false)));
  for (const Node* in : g->inputs()) {
    EXPECT_EQ(in->output_info(0).type.dtype, DType::kBF16) << in->output_info(0).name;
    ASSERT_EQ(in->output_info(0).uses.size(), 1u);
    EXPECT_EQ(in->output_info(0).uses[0].user->op(), "Cast");
  }
  const Value out = g->outputs()[0].value;
  EXPECT_EQ(out.type().dtype, DType::kBF16);
  EXPECT_EQ(out.node->op(), "Cast");
  EXPECT_THAT(PrintGraph(*g), ::testing::HasSubstr("tensor<f32[1]>[2]"));
  EXPECT_FALSE(testing::RunPass(kPass, *g, Cpu(false))) << "second run changed the graph";

  // Both widths in one graph: each input and output keeps its own.
  auto m = testing::Parse(R"(graph g opset=21 {
  %0 = Input() : bf16[2] "a"
  %1 = Input() : f16[2] "b"
  %2 = Cast(%1) {to=16} : bf16[2] "b16"
  %3 = Add(%0, %2) : bf16[2] "sum"
  %4 = Cast(%0) {to=10} : f16[2] "a_half"
  return "sum": %3, "a_half": %4
})");
  ASSERT_TRUE(m);
  ASSERT_TRUE(testing::RunPass(kPass, *m, Cpu(false)));
  EXPECT_EQ(m->inputs()[0]->output_info(0).type.dtype, DType::kBF16);
  EXPECT_EQ(m->inputs()[1]->output_info(0).type.dtype, DType::kF16);
  EXPECT_EQ(m->outputs()[0].value.type().dtype, DType::kBF16);
  EXPECT_EQ(m->outputs()[1].value.type().dtype, DType::kF16);
  EXPECT_THAT(PrintGraph(*m), ::testing::HasSubstr("Add(")) << PrintGraph(*m);
  for (const auto& n : m->nodes())
    if (n->op() == "Add") EXPECT_EQ(n->output_info(0).type.dtype, DType::kF32);
}

}  // namespace
}  // namespace kiln
