// Tests for fuse-qkv: three Q/K/V projections of one attention block become one packed
// kiln.Linear + Split (Before/Expected IR, also run twice), for kiln.Linear and MatMul + Add
// projections and for projections emitted out of order; unrelated Linears sharing an input
// are left alone; near-misses are reported with their reason; every rewrite is checked
// numerically on the reference executor (1e-5: the packed Linear computes each output
// column exactly as the separate one did, in double, so only f32 rounding remains).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/text.h"
#include "tests/passes/attention_test_graphs.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using namespace attention_test;  // NOLINT: the test graph vocabulary
using testing::ExpectNoChange;
using testing::ExpectRewrite;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-qkv";

Spec Projections(Proj p) {
  Spec s;
  s.proj = p;
  s.scale = Scale::kDiv;
  s.mask = MaskStyle::kAdditive;
  return s;
}

// What the pass produces from three projections: the packed form, with the replaced
// nodes' provenance on the Linear and the Split.
std::string PackedExpected(const std::string& prov) {
  Spec s = Projections(Proj::kPacked);
  s.packed_prov = prov;
  s.split_prov = prov;
  return AttentionGraph(s);
}

TEST(FuseQkvTest, MergesLinearProjections) {
  const std::string text = AttentionGraph(Projections(Proj::kLinear));
  ExpectRewrite(kPass, text, PackedExpected(R"("q_proj", "k_proj", "v_proj")"));
  EXPECT_LE(MaxDiffAfter({kPass}, text), 1e-5);
  const testing::FusionRun r = RunWithReport({kPass}, text);
  EXPECT_EQ(r.report.kinds().at("qkv").fused, 1);
  EXPECT_TRUE(r.report.kinds().at("qkv").missed.empty());
}

TEST(FuseQkvTest, MergesMatMulAddProjections) {
  const std::string text = AttentionGraph(Projections(Proj::kMatMulAdd));
  ExpectRewrite(kPass, text,
                PackedExpected(R"("q_matmul", "q_add", "k_matmul", "k_add", "v_matmul", "v_add")"));
  EXPECT_LE(MaxDiffAfter({kPass}, text), 1e-5);
}

// Projections emitted V, Q, K: the packed weight is still [Wq | Wk | Wv], the order in
// which the attention uses them (Q left of Q·Kᵀ, K right, V in P·V).
TEST(FuseQkvTest, ConcatenatesInAttentionOrder) {
  Spec s = Projections(Proj::kLinear);
  s.order = {2, 0, 1};
  const std::string text = AttentionGraph(s);
  ExpectRewrite(kPass, text, PackedExpected(R"("q_proj", "k_proj", "v_proj")"));
  EXPECT_LE(MaxDiffAfter({kPass}, text), 1e-5);
}

// Then fuse-attention takes the packed Linear's output as qkv and the Split dies.
TEST(FuseQkvTest, FeedsFuseAttentionWithoutSplit) {
  const std::string text = AttentionGraph(Projections(Proj::kLinear));
  const testing::FusionRun r = RunWithReport({kPass, "fuse-attention"}, text);
  ASSERT_TRUE(r.graph);
  std::vector<const Node*> mha = NodesOf(*r.graph, "kiln", "MultiHeadAttention");
  ASSERT_EQ(mha.size(), 1u);
  EXPECT_EQ(mha[0]->input(0).node->op(), "Linear");
  EXPECT_TRUE(NodesOf(*r.graph, "", "Split").empty());
  EXPECT_EQ(NodesOf(*r.graph, "kiln", "Linear").size(), 1u);
  EXPECT_LE(MaxDiffAfter({kPass, "fuse-attention"}, text), 1e-5);
}

TEST(FuseQkvTest, LeavesPackedProjectionAlone) {
  ExpectNoChange(kPass, AttentionGraph(Projections(Proj::kPacked)));
}

// GPT-2's c_attn is packed by the model itself (Linear on [B·S, H], Reshape to
// [B, S, 3H], Split into 3): nothing to merge, nothing to report.
TEST(FuseQkvTest, LeavesGpt2Conv1dPackedProjectionAlone) {
  Spec s = Projections(Proj::kPacked);
  s.conv1d_qkv = true;
  const std::string text = AttentionGraph(s);
  ExpectNoChange(kPass, text);
  const testing::FusionRun r = RunWithReport({kPass}, text);
  EXPECT_EQ(r.report.total_missed(), 0);
  EXPECT_EQ(r.report.total_fused(), 0);
}

// The dynamo SDPA export (Kᵀ built with heads folded into the batch, symbolic dims read
// from another input) is recognized as one attention's Q, K, V.
TEST(FuseQkvTest, MergesDynamoSdpaProjections) {
  Spec s = Projections(Proj::kLinear);
  s.dims = Dims::kSymbolicOtherInput;
  s.batched_k = true;
  s.scale = Scale::kOnQK;
  s.guard = true;
  const std::string text = AttentionGraph(s);
  s.proj = Proj::kPacked;
  s.packed_prov = s.split_prov = R"("q_proj", "k_proj", "v_proj")";
  ExpectRewrite(kPass, text, AttentionGraph(s));
  EXPECT_LE(MaxDiffAfter({kPass}, text), 1e-5);
}

// Three Linears of one input that feed no attention (e.g. GPT-2's MLP next to attention)
// are not merged, and nothing is reported.
TEST(FuseQkvTest, LeavesUnrelatedLinearsAlone) {
  Emitter e;
  const std::string x = e.Node("Input()", kT3, "", "x");
  std::string sum;
  for (int p = 0; p < 3; ++p) {
    const std::string w = e.Const(WeightLiteral(p), "f32[8,8]");
    const std::string b = e.Const(BiasLiteral(p), "f32[8]");
    const std::string l = e.Node(
        absl::StrCat("kiln.Linear(", x, ", ", w, ", ", b, ") {activation=\"none\", trans_w=0}"),
        kT3);
    sum = sum.empty() ? l : e.Node(absl::StrCat("Add(", sum, ", ", l, ")"), kT3);
  }
  const std::string text = e.Finish({{"y", sum}});
  ExpectNoChange(kPass, text);
  const testing::FusionRun r = RunWithReport({kPass}, text);
  EXPECT_EQ(r.report.total_missed(), 0);
}

void ExpectMiss(const Spec& s, const std::string& reason) {
  const std::string text = AttentionGraph(s);
  ExpectNoChange(kPass, text);
  const testing::FusionRun r = RunWithReport({kPass}, text);
  const FusionKindReport& k = r.report.kinds().at("qkv");
  EXPECT_EQ(k.fused, 0);
  ASSERT_EQ(k.missed.size(), 1u);
  EXPECT_EQ(k.missed[0].reason, reason);
  EXPECT_EQ(k.missed[0].nodes, (std::vector<std::string>{"k_proj", "q_proj", "v_proj"}));
}

TEST(FuseQkvTest, MissesProjectionWithActivation) {
  Spec s = Projections(Proj::kLinear);
  s.activation_q = "gelu";
  ExpectMiss(s, "the Q projection has a fused activation (gelu)");
}

TEST(FuseQkvTest, MissesCrossAttention) {
  Spec s = Projections(Proj::kLinear);
  s.cross = true;
  ExpectMiss(s, "cross-attention (K/V from a different input than Q) is not merged");
}

}  // namespace
}  // namespace kiln
