// Tests for fuse-attention: the BERT TorchScript form as Before/Expected IR text (also run
// twice), one test per exporter variant (structure of the fused op, the report, a second
// run changing nothing, and numeric equivalence on the reference executor), the
// near-misses with their exact reasons, and a graph the pass must leave alone.
// Tolerance 1e-5: the fused kernel accumulates in double where the unfused graph rounds
// each op to f32; scores here are O(1), so the difference is a few f32 ulps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/text.h"
#include "passes/rewrite_util.h"
#include "tests/passes/attention_test_graphs.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using namespace attention_test;  // NOLINT: the test graph vocabulary
using testing::ExpectRewrite;
using testing::Parse;
using testing::RunWithReport;

constexpr char kPass[] = "fuse-attention";

// The single fused op of `g` (test fails unless there is exactly one and no Softmax).
const Node* OnlyAttention(const Graph& g) {
  EXPECT_TRUE(NodesOf(g, "", "Softmax").empty());
  std::vector<const Node*> mha = NodesOf(g, "kiln", "MultiHeadAttention");
  EXPECT_EQ(mha.size(), 1u);
  return mha.size() == 1 ? mha[0] : nullptr;
}

TEST(FuseAttentionTest, BertTorchScriptForm) {
  Spec s;
  s.proj = Proj::kPacked;
  s.scale = Scale::kDiv;
  s.mask = MaskStyle::kAttentionChain;
  Emitter e;
  const std::string x = e.Node("Input()", kT3, "", "x");
  const MaskValues mv = EmitMaskInputs(e, s.mask);
  const std::string w = e.Const(PackedWeightLiteral(), "f32[8,24]");
  const std::string b = e.Const(PackedBiasLiteral(), "f32[24]");
  const std::string lin = e.Node(
      absl::StrCat("kiln.Linear(", x, ", ", w, ", ", b, ") {activation=\"none\", trans_w=0}"),
      "f32[2,4,24]", "qkv_proj");
  const std::string mha = e.Node(absl::StrCat("kiln.MultiHeadAttention(", lin, ", ", mv.additive,
                                              ") {causal=0, num_heads=2, scale=0.5}"),
                                 kT3, "\"qk\", \"softmax\", \"pv\", \"merge\"", "attn");
  ExpectRewrite(kPass, AttentionGraph(s), e.Finish({{"y", mha}}));
  EXPECT_LE(MaxDiffAfter({kPass}, AttentionGraph(s)), 1e-5);
  const testing::FusionRun r = RunWithReport({kPass}, AttentionGraph(s));
  EXPECT_EQ(r.report.kinds().at("attention").fused, 1);
  EXPECT_TRUE(r.report.kinds().at("attention").missed.empty());
}

struct Variant {
  const char* name;
  Spec spec;
  bool with_qkv;          // run fuse-qkv first
  const char* qkv_from;   // op producing the fused op's qkv: "Linear" or "Concat"
  const char* mask_from;  // "" (no mask), "Input", "Mul", "Not", "Where"
  int64_t causal;
  float scale;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

Spec Make(Proj p, Scale sc, MaskStyle m) {
  Spec s;
  s.proj = p;
  s.scale = sc;
  s.mask = m;
  return s;
}

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back({"BertLinearProjectionsWithQkv",
               Make(Proj::kLinear, Scale::kDiv, MaskStyle::kAttentionChain), true, "Linear", "Mul",
               0, 0.5f});
  v.push_back({"BertLinearProjectionsConcat",
               Make(Proj::kLinear, Scale::kDiv, MaskStyle::kAttentionChain), false, "Concat", "Mul",
               0, 0.5f});
  v.push_back({"MatMulAddProjections", Make(Proj::kMatMulAdd, Scale::kDiv, MaskStyle::kAdditive),
               false, "Concat", "Input", 0, 0.5f});
  Spec two = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kAdditive);
  two.k_two_transposes = true;
  v.push_back({"SeparateKTranspose", two, false, "Linear", "Input", 0, 0.5f});
  v.push_back({"MulScale", Make(Proj::kPacked, Scale::kMul, MaskStyle::kAdditive), false, "Linear",
               "Input", 0, 0.5f});
  v.push_back({"ScaleFoldedIntoQ", Make(Proj::kPacked, Scale::kOnQ, MaskStyle::kNone), false,
               "Linear", "", 0, 0.5f});
  Spec sdpa = Make(Proj::kPacked, Scale::kOnQK, MaskStyle::kBoolKeep);
  sdpa.guard = true;
  v.push_back({"SdpaSqrtScaleOnQAndKWithGuard", sdpa, false, "Linear", "Input", 0,
               static_cast<float>(0.70710677f * static_cast<double>(0.70710677f))});
  Spec guard = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kBoolKeep);
  guard.guard = true;
  v.push_back({"BoolWhereMaskWithIsNaNGuard", guard, false, "Linear", "Input", 0, 0.5f});
  Spec drop = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kBoolDrop);
  drop.guard = true;
  v.push_back({"BoolWhereMaskedWhenTrue", drop, false, "Linear", "Not", 0, 0.5f});
  v.push_back({"CausalTrilu", Make(Proj::kPacked, Scale::kDiv, MaskStyle::kCausal), false, "Linear",
               "", 1, 0.5f});
  v.push_back({"CausalPlusPaddingMask",
               Make(Proj::kPacked, Scale::kDiv, MaskStyle::kCausalAdditive), false, "Linear",
               "Input", 1, 0.5f});
  v.push_back(
      {"NoMask", Make(Proj::kPacked, Scale::kDiv, MaskStyle::kNone), false, "Linear", "", 0, 0.5f});
  v.push_back({"NoScale", Make(Proj::kPacked, Scale::kNone, MaskStyle::kNone), false, "Linear", "",
               0, 1.0f});
  // The real torch.onnx exports (models/fixtures/torch/).
  Spec gpt2 = Make(Proj::kPacked, Scale::kMul, MaskStyle::kBoolToAdditive);
  gpt2.conv1d_qkv = true;
  gpt2.flat_merge = true;
  v.push_back({"Gpt2Conv1dQkvAndFlatHeadMerge", gpt2, false, "Reshape", "Where", 0, 0.5f});
  Spec dyn = Make(Proj::kLinear, Scale::kMul, MaskStyle::kBoolToAdditive);
  dyn.split_allowzero = true;
  v.push_back({"DynamoEagerAllowZeroSplit", dyn, true, "Linear", "Where", 0, 0.5f});
  Spec dsdpa = Make(Proj::kLinear, Scale::kOnQK, MaskStyle::kBoolToAdditive);
  dsdpa.split_allowzero = true;
  dsdpa.batched_k = true;
  dsdpa.guard = true;
  const float sqrt_scale = static_cast<float>(0.70710677f * static_cast<double>(0.70710677f));
  v.push_back({"DynamoSdpaBatchedKTranspose", dsdpa, true, "Linear", "Where", 0, sqrt_scale});
  Spec tsdpa = Make(Proj::kPacked, Scale::kOnQK, MaskStyle::kBoolToAdditive);
  tsdpa.context_reshape = true;
  tsdpa.guard = true;
  v.push_back({"TorchScriptSdpaContextReshape", tsdpa, false, "Linear", "Where", 0, sqrt_scale});
  Spec sym = dsdpa;
  sym.dims = Dims::kSymbolicOtherInput;
  sym.context_reshape = true;
  v.push_back({"SymbolicDimsFromOtherInput", sym, true, "Linear", "Where", 0, sqrt_scale});
  Spec unk = Make(Proj::kLinear, Scale::kDiv, MaskStyle::kAttentionChain);
  unk.dims = Dims::kSymbolicUnknownSeq;
  unk.context_reshape = true;
  v.push_back({"SymbolicUnknownSequenceDim", unk, true, "Linear", "Mul", 0, 0.5f});
  return v;
}

class FuseAttentionVariantTest : public ::testing::TestWithParam<Variant> {};

TEST_P(FuseAttentionVariantTest, FusesAndMatchesNumerically) {
  const Variant& v = GetParam();
  const std::string text = AttentionGraph(v.spec);
  std::vector<std::string> passes = {kPass};
  if (v.with_qkv) passes.insert(passes.begin(), "fuse-qkv");
  const testing::FusionRun r = RunWithReport(passes, text);
  ASSERT_TRUE(r.graph);
  EXPECT_TRUE(r.changed);
  const Node* mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->attr_int("num_heads"), kN);
  EXPECT_EQ(mha->attr_float("scale"), v.scale);
  EXPECT_EQ(mha->attr_int("causal"), v.causal);
  EXPECT_EQ(mha->input(0).node->op(), v.qkv_from);
  EXPECT_TRUE(NodesOf(*r.graph, "", "Split").empty());
  const std::string mask_from = v.mask_from;
  if (mask_from.empty()) {
    EXPECT_EQ(mha->num_inputs(), 1);
  } else {
    ASSERT_EQ(mha->num_inputs(), 2);
    EXPECT_EQ(mha->input(1).node->op(), mask_from);
  }
  EXPECT_EQ(r.report.kinds().at("attention").fused, 1);
  EXPECT_TRUE(r.report.kinds().at("attention").missed.empty());
  // A second run finds nothing.
  const std::string once = PrintGraph(*r.graph);
  EXPECT_FALSE(testing::RunPass(kPass, *r.graph));
  EXPECT_EQ(PrintGraph(*r.graph), once);
  EXPECT_LE(MaxDiffAfter(passes, text), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Exporters, FuseAttentionVariantTest, ::testing::ValuesIn(Variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) {
                           return std::string(i.param.name);
                         });

// Where(mask, scores, -10000): becomes the additive mask Where(mask, 0, -10000), exact on
// every row with at least one visible key (the inputs below have one in each row).
TEST(FuseAttentionTest, WhereWithFiniteFillBecomesAdditiveMask) {
  const std::string text = AttentionGraph(Make(Proj::kPacked, Scale::kDiv, MaskStyle::kBoolFinite));
  const testing::FusionRun r = RunWithReport({kPass}, text);
  ASSERT_TRUE(r.graph);
  const Node* mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  ASSERT_EQ(mha->num_inputs(), 2);
  const Node* where = mha->input(1).node;
  ASSERT_EQ(where->op(), "Where");
  EXPECT_EQ(where->input(0).name(), "mask");
  EXPECT_EQ(rewrite::ScalarConstant(where->input(1)), 0.0);
  EXPECT_EQ(rewrite::ScalarConstant(where->input(2)), -10000.0);
  auto original = Parse(text);
  auto feeds = testing::RandomInputs(*original, 7);
  Tensor mask(DType::kBool, {kB, 1, 1, kS});
  const int bits[] = {1, 0, 1, 1, 0, 1, 0, 0};
  for (int i = 0; i < kB * kS; ++i) mask.SetFromDouble(i, bits[i]);
  feeds["mask"] = mask;
  EXPECT_LE(testing::MaxAbsDiff(*original, *r.graph, feeds), 1e-5);
}

// ---- Near-misses: the graph is left alone and the reason is reported. ------------------

void ExpectMiss(const Spec& s, const std::string& reason) {
  const std::string text = AttentionGraph(s);
  const testing::FusionRun r = RunWithReport({kPass}, text);
  ASSERT_TRUE(r.graph);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(PrintGraph(*r.graph), PrintGraph(*Parse(text)));
  const FusionKindReport& k = r.report.kinds().at("attention");
  EXPECT_EQ(k.fused, 0);
  ASSERT_EQ(k.missed.size(), 1u);
  EXPECT_EQ(k.missed[0].reason, reason);
  const std::vector<std::string>& nodes = k.missed[0].nodes;
  for (const char* n : {"qk", "softmax", "pv"})
    EXPECT_NE(std::find(nodes.begin(), nodes.end(), n), nodes.end()) << n;
}

// A bool mask with a -inf fill and no IsNaN guard: a fully masked row is NaN in the
// original but zeros in the kernel, so it is a miss (both Where operand orders).
TEST(FuseAttentionTest, MissesUnguardedMinusInfBoolMask) {
  const std::string why =
      "a fully masked row would be NaN in the model but 0 in kiln.MultiHeadAttention: add "
      "the IsNaN guard or use a finite fill";
  ExpectMiss(Make(Proj::kPacked, Scale::kDiv, MaskStyle::kBoolKeep), why);
  ExpectMiss(Make(Proj::kPacked, Scale::kDiv, MaskStyle::kBoolDrop), why);
}

TEST(FuseAttentionTest, MissesSoftmaxOverNonLastAxis) {
  Spec s = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kAdditive);
  s.softmax_axis = 1;
  ExpectMiss(s, "Softmax over axis 1, not the last (key) axis");
}

TEST(FuseAttentionTest, MissesRank2MaskAddedDirectly) {
  ExpectMiss(Make(Proj::kPacked, Scale::kDiv, MaskStyle::kRank2),
             "mask has shape [2,4], which does not broadcast to them (scores [B, N, S, S] = "
             "[2,2,4,4]); masks broadcastable to [B, N, S, S] such as [B, 1, 1, S], "
             "[B, 1, S, S] or [1, 1, S, S] are fused");
}

TEST(FuseAttentionTest, MissesProbabilitiesReadElsewhere) {
  Spec s = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kNone);
  s.probs_output = true;
  ExpectMiss(s, "interior value softmax (Softmax) is a graph output");
}

TEST(FuseAttentionTest, MissesScoresScaledTwice) {
  ExpectMiss(Make(Proj::kPacked, Scale::kTwice, MaskStyle::kNone),
             "scores scaled twice (expected one scale: on the scores, on Q, or sqrt(scale) on "
             "both Q and K)");
}

TEST(FuseAttentionTest, MissesRuntimeScale) {
  ExpectMiss(Make(Proj::kPacked, Scale::kRuntime, MaskStyle::kNone),
             "the attention scale (runtime_scale) is computed at run time and did not fold to "
             "a constant (give static shapes, --shape)");
}

TEST(FuseAttentionTest, MissesCrossAttention) {
  Spec s = Make(Proj::kLinear, Scale::kDiv, MaskStyle::kNone);
  s.cross = true;
  ExpectMiss(s, "cross-attention (K/V from a different input than Q) is not fused yet");
}

// The head split target reads the dims of an input whose dims are not known to be the
// same (other symbols, not computed from x).
TEST(FuseAttentionTest, MissesSplitWithUnprovableDims) {
  Spec s = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kNone);
  s.dims = Dims::kSymbolicOtherInput;
  s.unrelated_dims = true;
  ExpectMiss(s,
             "the Q head split Reshape does not provably keep the [batch, sequence] dims "
             "of its input");
}

// A merge Reshape that copies the head dims (0 past [B, S]) cannot read [B, S, H] instead.
TEST(FuseAttentionTest, MissesMergeCopyingHeadDims) {
  Spec s = Make(Proj::kPacked, Scale::kDiv, MaskStyle::kNone);
  s.merge_copies_heads = true;
  ExpectMiss(s,
             "the head merge Reshape's target [2,4,2,4] may copy the head dims (a 0 past "
             "the [B, S] entries); only targets that do not are fused");
}

// A Softmax classifier head is not attention: no change and nothing reported.
TEST(FuseAttentionTest, LeavesPlainSoftmaxAlone) {
  const std::string text = R"(graph main opset=17 {
  %0 = Input() : f32[2,8] "x"
  %1 = Input() : f32[8,3] "w"
  %2 = MatMul(%0, %1) : f32[2,3]
  %3 = Softmax(%2) {axis=-1} : f32[2,3]
  return "y": %3
})";
  testing::ExpectNoChange(kPass, text);
  const testing::FusionRun r = RunWithReport({kPass}, text);
  EXPECT_EQ(r.report.total_missed(), 0);
  EXPECT_EQ(r.report.total_fused(), 0);
}

}  // namespace
}  // namespace kiln
