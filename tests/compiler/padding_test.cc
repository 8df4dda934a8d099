// The padding analysis (src/compiler/padding.h): the sequence case on small optimized
// graphs (masks honoured through fused attention and pooling, causal attention, CLS
// pooling, what blocks it: an unfused Softmax, a reduction over the symbol, an unmasked
// attention, no integer mask input), the batch case and expression outputs from the
// plan's signature, and the catalogue's position-mixing kinds the analysis relies on.
#include "compiler/padding.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_replace.h"
#include "kiln/ir/ops.h"
#include "kiln/ir/text.h"

namespace kiln::compiler {
namespace {

// A pooled encoder: attention, then pooling. `att` and `pool` are the two kiln ops'
// operands and attributes, `mid` extra nodes between them.
std::unique_ptr<Graph> Encoder(const std::string& att, const std::string& pool,
                               const std::string& mid = "",
                               const std::string& mask_type = "i64[batch,seq]") {
  const std::string text =
      absl::StrReplaceAll(R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,8] "x"
  %1 = Input() : $MASK "attention_mask"
  %2 = Cast(%1) {to=1} : f32[batch,seq]
  %3 = kiln.MultiHeadAttention$ATT : f32[batch,seq,8]
  $MID
  %9 = kiln.Pool$POOL : f32[batch,8]
  return "y": %9
})",
                          {{"$ATT", att}, {"$POOL", pool}, {"$MID", mid}, {"$MASK", mask_type}});
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  return g.ok() ? std::move(*g) : std::make_unique<Graph>();
}

constexpr char kMaskedAtt[] = "(%0, %2) {num_heads=2}";
constexpr char kMeanPool[] = "(%3, %1) {mode=\"mean\"}";

TEST(PaddingTest, MaskedAttentionAndPoolingPadTheSequence) {
  auto g = Encoder(kMaskedAtt, kMeanPool);
  EXPECT_TRUE(SequencePaddable(*g, "seq"));
  EXPECT_FALSE(SequencePaddable(*g, "batch"));  // the mask's batch dim is leading
}

TEST(PaddingTest, CausalAttentionAndClsPoolingNeedNoMask) {
  // Causal attention without a mask, masked pooling: padded keys come after every query.
  EXPECT_TRUE(SequencePaddable(*Encoder("(%0) {num_heads=2, causal=1}", kMeanPool), "seq"));
  // CLS pooling reads position 0 only; the attention takes the mask.
  EXPECT_TRUE(SequencePaddable(*Encoder(kMaskedAtt, "(%3) {mode=\"cls\"}"), "seq"));
  // Nothing takes the mask at all: nothing shows the padding is honoured.
  EXPECT_FALSE(
      SequencePaddable(*Encoder("(%0) {num_heads=2, causal=1}", "(%3) {mode=\"cls\"}"), "seq"));
}

TEST(PaddingTest, UnmaskedMixingBlocksTheSequence) {
  // Non-causal attention without the mask sees the padded keys.
  EXPECT_FALSE(SequencePaddable(*Encoder("(%0) {num_heads=2}", kMeanPool), "seq"));
  // Mean pooling without the mask averages them in.
  EXPECT_FALSE(SequencePaddable(*Encoder(kMaskedAtt, "(%3) {mode=\"mean\"}"), "seq"));
  // An unfused Softmax: its masking cannot be checked.
  EXPECT_FALSE(SequencePaddable(
      *Encoder(kMaskedAtt, kMeanPool, "%4 = Softmax(%3) {axis=1} : f32[batch,seq,8]"), "seq"));
}

TEST(PaddingTest, ReductionsBlockOnlyOverTheSymbol) {
  const std::string over = R"(%4 = Constant() {value=tensor<i64[1]>[AXIS]} : i64[1]
  %5 = ReduceMean(%3, %4) : f32[batch,seq,1])";
  EXPECT_FALSE(SequencePaddable(
      *Encoder(kMaskedAtt, kMeanPool, absl::StrReplaceAll(over, {{"AXIS", "1"}})), "seq"));
  EXPECT_FALSE(SequencePaddable(
      *Encoder(kMaskedAtt, kMeanPool, absl::StrReplaceAll(over, {{"AXIS", "-2"}})), "seq"));
  EXPECT_TRUE(SequencePaddable(
      *Encoder(kMaskedAtt, kMeanPool, absl::StrReplaceAll(over, {{"AXIS", "2"}})), "seq"));
  // No axes: every axis, the sequence's too.
  EXPECT_FALSE(
      SequencePaddable(*Encoder(kMaskedAtt, kMeanPool, "%5 = ReduceSum(%3) : f32[1,1,1]"), "seq"));
}

TEST(PaddingTest, TheMaskMustBeAnIntegerInputOverTheSymbol) {
  EXPECT_FALSE(SequencePaddable(*Encoder(kMaskedAtt, kMeanPool, "", "f32[batch,seq]"), "seq"));
  EXPECT_FALSE(SequencePaddable(*Encoder(kMaskedAtt, kMeanPool, "", "i64[seq,batch]"), "seq"));
}

PlanTensorSig Sig(const std::string& name, std::vector<Dim> dims) {
  return PlanTensorSig{name, DType::kF32, std::move(dims)};
}

TEST(PaddingTest, BatchCaseAndExpressionOutputs) {
  auto g = Encoder(kMaskedAtt, kMeanPool);
  const Dim batch = Dim::Symbol("batch"), seq = Dim::Symbol("seq");
  Plan plan;
  plan.inputs = {Sig("x", {batch, seq, Dim::Known(8)}), Sig("attention_mask", {batch, seq})};
  plan.outputs = {Sig("y", {batch, Dim::Known(8)})};
  EXPECT_EQ(PaddableSymbols(plan, *g, {"batch", "seq"}),
            (std::vector<std::string>{"batch", "seq"}));
  // An output dim that is an expression over a symbol (or no expression: "?") pins it.
  plan.outputs = {Sig("y", {batch, Dim::Symbol("2*seq")})};
  EXPECT_EQ(PaddableSymbols(plan, *g, {"batch", "seq"}), (std::vector<std::string>{"batch"}));
  plan.outputs = {Sig("y", {batch, Dim::Symbol("?")})};
  EXPECT_EQ(PaddableSymbols(plan, *g, {"batch", "seq"}), std::vector<std::string>{});
  // Batch case needs dim 0 of every input and output.
  plan.outputs = {Sig("y", {Dim::Known(1), batch})};
  EXPECT_EQ(PaddableSymbols(plan, *g, {"batch", "seq"}), (std::vector<std::string>{"seq"}));
}

// The analysis trusts these catalogue entries: a reduction or normalization marked kNone
// would let padding leak into outputs silently.
TEST(PaddingTest, CatalogueMixingKinds) {
  int mixing = 0;
  for (const OpInfo& op : AllOps()) {
    const std::string name(op.name);
    if (op.domain.empty() && name.rfind("Reduce", 0) == 0)
      EXPECT_EQ(op.mixing, PositionMixing::kReducesAxes) << name;
    mixing += op.mixing != PositionMixing::kNone;
  }
  EXPECT_EQ(FindOp("", "Softmax")->mixing, PositionMixing::kNormalizesAxis);
  EXPECT_EQ(FindOp("", "LogSoftmax")->mixing, PositionMixing::kNormalizesAxis);
  EXPECT_EQ(FindOp("kiln", "MultiHeadAttention")->mixing, PositionMixing::kMaskedOrCausal);
  // Its mask is input 3, where the analysis does not look: never paddable, like a Softmax.
  EXPECT_EQ(FindOp("kiln", "Attention")->mixing, PositionMixing::kNormalizesAxis);
  EXPECT_EQ(FindOp("kiln", "Pool")->mixing, PositionMixing::kMaskedOrFirst);
  // A decode program's cache append writes rows at slots its positions name.
  EXPECT_EQ(FindOp("kiln", "CacheWrite")->mixing, PositionMixing::kNormalizesAxis);
  // The packed-token ops mix within the sequences their lengths delimit (packed programs).
  for (const char* op : {"PackedAttention", "PackedPool", "PackedPositions", "PackedCumSum"})
    EXPECT_EQ(FindOp("kiln", op)->mixing, PositionMixing::kSegments) << op;
  // DynamicQuantizeLinear's scale is the whole tensor's range, padding included.
  EXPECT_EQ(FindOp("", "DynamicQuantizeLinear")->mixing, PositionMixing::kReducesAxes);
  // Hardmax normalizes like Softmax; ONNX's Attention takes its mask at input 3 (as
  // kiln.Attention); the vision ops window over the spatial dims; the losses reduce over
  // every position; Einsum may contract, ReverseSequence reorder and TensorScatter move
  // any position; GridSample samples anywhere; recurrent layers carry every step into the
  // next; the spectral ops sum over their axis; the detection and patch ops read across
  // the image.
  for (const char* op : {"Hardmax",
                         "Attention",
                         "Conv",
                         "ConvTranspose",
                         "MaxPool",
                         "AveragePool",
                         "LpPool",
                         "GlobalAveragePool",
                         "GlobalMaxPool",
                         "InstanceNormalization",
                         "GroupNormalization",
                         "LpNormalization",
                         "LRN",
                         "DepthToSpace",
                         "SpaceToDepth",
                         "Resize",
                         "NegativeLogLikelihoodLoss",
                         "SoftmaxCrossEntropyLoss",
                         "Einsum",
                         "ReverseSequence",
                         "TensorScatter"})
    EXPECT_EQ(FindOp("", op)->mixing, PositionMixing::kNormalizesAxis) << op;
  EXPECT_EQ(mixing, 55);
}

}  // namespace
}  // namespace kiln::compiler
