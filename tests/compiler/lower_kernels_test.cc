// Kernel choice (src/compiler/lower_kernels.cc): which nodes meet an optimized kernel's
// rule in docs/plan-kernels.md, with which parameters, and which fall back to "ref"; and
// the ref step's IR text.
#include <optional>
#include <string>
#include <vector>

#include "compiler/lower.h"
#include "gtest/gtest.h"
#include "kiln/ir/text.h"

namespace kiln::compiler {
namespace {

// Parses `ir` and returns the kernel chosen for its last compute node.
struct Chosen {
  std::unique_ptr<Graph> graph;
  const Node* node = nullptr;
  std::optional<KernelChoice> choice;
};

Chosen Choose(const std::string& ir) {
  Chosen c;
  auto g = ParseGraph(ir);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return c;
  c.graph = *std::move(g);
  for (const auto& n : c.graph->nodes())
    if (!n->is_input() && !n->is_constant()) c.node = n.get();
  if (c.node) c.choice = ChooseKernel(*c.node);
  return c;
}

std::vector<PlanParam> Params(const Chosen& c) {
  return c.choice ? c.choice->params : std::vector<PlanParam>{};
}

TEST(ChooseKernel, LinearNeedsConstantWeights) {
  Chosen c = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Constant() {value=tensor<f32[5,4]>#0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000} : f32[5,4] "w"
    %2 = kiln.Linear(%0, %1) {activation="relu", trans_w=1} : f32[2,3,5] "y"
    return "y": %2
  })");
  ASSERT_TRUE(c.choice.has_value());
  EXPECT_EQ(c.choice->kernel, "linear");
  EXPECT_EQ(c.choice->num_inputs, 3);  // bias omitted -> -1 in the step
  EXPECT_EQ(Params(c), (std::vector<PlanParam>{{"m", int64_t{6}},
                                               {"k", int64_t{4}},
                                               {"n", int64_t{5}},
                                               {"trans_w", int64_t{1}},
                                               {"activation", std::string("relu")}}));
  // The same with a run-time weight: the executor prepacks weights only, so ref.
  Chosen r = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Input() : f32[5,4] "w"
    %2 = kiln.Linear(%0, %1) {trans_w=1} : f32[2,3,5] "y"
    return "y": %2
  })");
  EXPECT_FALSE(r.choice.has_value());
}

TEST(ChooseKernel, SkipLayerNormBroadcastRows) {
  Chosen c = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Input() : f32[3,4] "skip"
    %2 = Input() : f32[4] "gamma"
    %3, %4 = kiln.SkipLayerNorm(%0, %1, %2) {epsilon=0.5} : f32[2,3,4] "y", f32[2,3,4] "sum"
    return "y": %3, "sum": %4
  })");
  ASSERT_TRUE(c.choice.has_value());
  EXPECT_EQ(c.choice->kernel, "skip_layer_norm");
  EXPECT_TRUE(c.choice->inplace_ok);
  EXPECT_EQ(
      Params(c),
      (std::vector<PlanParam>{
          {"rows", int64_t{6}}, {"h", int64_t{4}}, {"skip_rows", int64_t{3}}, {"epsilon", 0.5}}));
  // [2,1,4] broadcasts along the middle axis: not whole rows repeated -> ref.
  Chosen r = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Input() : f32[2,1,4] "skip"
    %2 = Input() : f32[4] "gamma"
    %3 = kiln.SkipLayerNorm(%0, %1, %2) : f32[2,3,4] "y"
    return "y": %3
  })");
  EXPECT_FALSE(r.choice.has_value());
}

TEST(ChooseKernel, AttentionMaskMustBroadcast) {
  const std::string head = R"(graph g opset=21 {
    %0 = Input() : f32[2,5,24] "qkv"
  )";
  Chosen ok = Choose(head + R"(
    %1 = Input() : bool[2,1,1,5] "mask"
    %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=2, scale=0.5} : f32[2,5,8] "y"
    return "y": %2
  })");
  ASSERT_TRUE(ok.choice.has_value());
  EXPECT_EQ(Params(ok), (std::vector<PlanParam>{{"batch", int64_t{2}},
                                                {"seq", int64_t{5}},
                                                {"num_heads", int64_t{2}},
                                                {"head_size", int64_t{4}},
                                                {"scale", 0.5},
                                                {"causal", int64_t{0}}}));
  Chosen bad = Choose(head + R"(
    %1 = Input() : f32[2,1,1,4] "mask"
    %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=2, scale=0.5} : f32[2,5,8] "y"
    return "y": %2
  })");
  EXPECT_FALSE(bad.choice.has_value());
  Chosen i64 = Choose(head + R"(
    %1 = Input() : i64[2,5] "mask"
    %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=2, scale=0.5} : f32[2,5,8] "y"
    return "y": %2
  })");
  EXPECT_FALSE(i64.choice.has_value());
}

TEST(ChooseKernel, OnlyLastAxisAndF32) {
  EXPECT_FALSE(Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Input() : f32[3,4] "g"
    %2 = LayerNormalization(%0, %1) {axis=1} : f32[2,3,4] "y"
    return "y": %2
  })")
                   .choice.has_value());
  EXPECT_FALSE(Choose(R"(graph g opset=21 {
    %0 = Input() : f16[2,3,4] "x"
    %1 = Softmax(%0) : f16[2,3,4] "y"
    return "y": %1
  })")
                   .choice.has_value());
  Chosen ln = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Input() : f32[4] "g"
    %2 = LayerNormalization(%0, %1) {axis=2} : f32[2,3,4] "y"
    return "y": %2
  })");
  ASSERT_TRUE(ln.choice.has_value());
  EXPECT_EQ(ln.choice->kernel, "layer_norm");
  EXPECT_EQ(Params(ln), (std::vector<PlanParam>{
                            {"rows", int64_t{6}}, {"h", int64_t{4}}, {"epsilon", double{1e-5f}}}));
  EXPECT_FALSE(Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3,4] "x"
    %1 = Input() : f32[4] "g"
    %2, %3 = LayerNormalization(%0, %1) : f32[2,3,4] "y", f32[2,3,1] "mean"
    return "y": %2, "mean": %3
  })")
                   .choice.has_value());
}

TEST(ChooseKernel, PoolModes) {
  Chosen mean = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,5,8] "h"
    %1 = Input() : i64[2,5] "mask"
    %2 = kiln.Pool(%0, %1) {mode="mean", normalize=1} : f32[2,8] "y"
    return "y": %2
  })");
  ASSERT_TRUE(mean.choice.has_value());
  EXPECT_EQ(Params(mean), (std::vector<PlanParam>{{"batch", int64_t{2}},
                                                  {"seq", int64_t{5}},
                                                  {"hidden", int64_t{8}},
                                                  {"mode", std::string("mean")},
                                                  {"normalize", int64_t{1}}}));
  // A bool mask is not one of the kernel's mask dtypes.
  EXPECT_FALSE(Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,5,8] "h"
    %1 = Input() : bool[2,5] "mask"
    %2 = kiln.Pool(%0, %1) {mode="mean"} : f32[2,8] "y"
    return "y": %2
  })")
                   .choice.has_value());
}

TEST(RefNodeText, RoundTripsWithStaticInputs) {
  Chosen c = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[2,3] "x"
    %1 = Input() : i64[2] "starts"
    %2 = Slice(%0, %1, %1, _, _) : f32[?,?] "y" @ "my_slice"
    return "y": %2
  })");
  ASSERT_NE(c.node, nullptr);
  // The Slice output type is not static here: RefNodeText copies types as given, so set it.
  const_cast<Node*>(c.node)->set_output_type(0, Type::Static(DType::kF32, {0, 0}));
  absl::StatusOr<std::string> text = RefNodeText(*c.node);
  ASSERT_TRUE(text.ok()) << text.status();
  auto g = ParseGraph(*text);
  ASSERT_TRUE(g.ok()) << g.status() << "\n" << *text;
  EXPECT_EQ(PrintGraph(**g), *text);
  // One Input per present operand (the repeated %1 twice), the node, its return.
  ASSERT_EQ((*g)->inputs().size(), 3u);
  EXPECT_EQ((*g)->inputs()[1]->output_info(0).type.ToString(), "i64[2]");
  EXPECT_NE(text->find("Slice(%0, %1, %2, _, _)"), std::string::npos) << *text;
  EXPECT_NE(text->find("@ \"my_slice\""), std::string::npos) << *text;
}

}  // namespace
}  // namespace kiln::compiler
