// compiler::RewriteForLastToken (src/compiler/generation.h): which nodes of a prefill graph
// run on each sequence's last token, where the rows are taken (kiln.Pool{mode="last"} +
// Unsqueeze), and that the logits it gives are exactly the full graph's at the last
// unmasked position of every sequence (reference executor; the narrowed nodes compute the
// same row from the same values in the same order, so the comparison is exact). What the
// rewrite must not touch (a value another output reads, the position-mixing op) keeps its
// [B, S, ...] shape.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/generation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/ir/text.h"
#include "kiln/reference/executor.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// input_ids and attention_mask [2, 4]; "mixed" stands for the last attention (it mixes
// positions); then o_proj-like Linear, a residual Add reading "mixed" again, an RMSNorm,
// the LM head and a softcap-like Mul by a scalar: all row-wise.
constexpr char kPrefill[] = R"(graph g opset=21 {
  %0 = Input() : i64[2,4] "input_ids"
  %1 = Input() : i64[2,4] "attention_mask"
  %2 = Input() : f32[2,4,3] "x"
  %3 = Softmax(%2) {axis=1} : f32[2,4,3] "mixed"
  %4 = Constant() {value=tensor<f32[3,3]>[0.5, -0.25, 1, 0.75, 0.1, -1, 0.3, 0.9, -0.6]} : f32[3,3] "w1"
  %5 = kiln.Linear(%3, %4) : f32[2,4,3] "proj"
  %6 = Add(%5, %3) : f32[2,4,3] "residual"
  %7 = Constant() {value=tensor<f32[3]>[1, 0.5, 2]} : f32[3] "gamma"
  %8 = kiln.RMSNorm(%6, %7) {epsilon=1e-6} : f32[2,4,3] "norm"
  %9 = Constant() {value=tensor<f32[3,5]>[0.2, -0.4, 0.6, 1, -1, 0.3, 0.8, -0.2, 0.5, 0.1, -0.7, 0.9, 0.4, -0.3, 0.6]} : f32[3,5] "lm"
  %10 = kiln.Linear(%8, %9) : f32[2,4,5] "lm_out"
  %11 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "half"
  %12 = Mul(%10, %11) : f32[2,4,5] "scaled"
  return "logits": %12, "present": %3
})";

std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

compiler::KvSignature Signature() {
  compiler::KvSignature sig;
  sig.input_ids = 0;
  sig.attention_mask = 1;
  return sig;
}

absl::flat_hash_map<std::string, Tensor> Feeds() {
  std::vector<float> x(2 * 4 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i % 7) - 0.9f;
  // Sequence 0 has 3 tokens and a hole at position 1 (the last nonzero entry counts);
  // sequence 1 has 4.
  return {{"input_ids", Tensor::FromI64({2, 4}, {1, 2, 3, 0, 4, 5, 6, 7})},
          {"attention_mask", Tensor::FromI64({2, 4}, {1, 0, 1, 0, 1, 1, 1, 1})},
          {"x", Tensor::FromF32({2, 4, 3}, x)}};
}

// Rewrites `text` and checks the logits against the full graph's at positions {2, 3}.
compiler::LastTokenRewrite RewriteAndCompare(const std::string& text, std::string* printed) {
  absl::StatusOr<std::unique_ptr<Graph>> full = ParseGraph(text);
  absl::StatusOr<std::unique_ptr<Graph>> last = ParseGraph(text);
  EXPECT_TRUE(full.ok() && last.ok());
  absl::StatusOr<compiler::LastTokenRewrite> r = compiler::RewriteForLastToken(**last, Signature());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  *printed = PrintGraph(**last);
  absl::StatusOr<std::vector<Tensor>> want = RunReference(**full, Feeds());
  absl::StatusOr<std::vector<Tensor>> got = RunReference(**last, Feeds());
  EXPECT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(got.ok()) << got.status() << "\n" << *printed;
  if (!want.ok() || !got.ok()) return *r;
  const Tensor &w = (*want)[0], &g = (*got)[0];
  EXPECT_EQ(g.dims(), (std::vector<int64_t>{2, 1, 5}));
  const int64_t last_position[2] = {2, 3};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t v = 0; v < 5; ++v)
      EXPECT_EQ(g.GetAsDouble(b * 5 + v), w.GetAsDouble((b * 4 + last_position[b]) * 5 + v))
          << "sequence " << b << " logit " << v;
  // The other output is untouched.
  EXPECT_EQ((*got)[1].dims(), (*want)[1].dims());
  return *r;
}

TEST(LastToken, RowWiseTailRunsOnTheLastRow) {
  std::string printed;
  const compiler::LastTokenRewrite r = RewriteAndCompare(kPrefill, &printed);
  // Linear, Add, RMSNorm, LM head, Mul; one cut: "mixed", read by the Linear and the Add.
  EXPECT_EQ(r.nodes, 5);
  EXPECT_EQ(r.cuts, 1);
  EXPECT_THAT(printed, HasSubstr("kiln.Pool(%3, %1) {mode=\"last\"} : f32[2,3]"));
  EXPECT_THAT(printed, HasSubstr(": f32[2,4,3] \"mixed\""));
}

TEST(LastToken, AValueAnotherOutputReadsStaysWhole) {
  // "norm" is also an output: it and what it needs keep every row; the LM head and the Mul
  // are narrowed, cut at "norm".
  const std::string text =
      Edit(kPrefill, "return \"logits\": %12", "return \"hidden\": %8, \"logits\": %12");
  std::string printed;
  absl::StatusOr<std::unique_ptr<Graph>> g = ParseGraph(text);
  ASSERT_TRUE(g.ok());
  absl::StatusOr<compiler::LastTokenRewrite> r = compiler::RewriteForLastToken(**g, Signature());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->nodes, 2);
  EXPECT_EQ(r->cuts, 1);
  printed = PrintGraph(**g);
  EXPECT_THAT(printed, HasSubstr("kiln.Pool(%8, %1) {mode=\"last\"}"));
  EXPECT_THAT(printed, HasSubstr(": f32[2,4,3] \"norm\""));
}

TEST(LastToken, NothingRowWiseTakesTheRowOfTheFullLogits) {
  // The logits come straight from an op that mixes positions: the Pool sits on them.
  const std::string text = Edit(kPrefill, "%12 = Mul(%10, %11)", "%12 = Softmax(%10) {axis=1}");
  std::string printed;
  const compiler::LastTokenRewrite r = RewriteAndCompare(text, &printed);
  EXPECT_EQ(r.nodes, 0);
  EXPECT_EQ(r.cuts, 1);
  EXPECT_THAT(printed, HasSubstr("kiln.Pool(%12, %1) {mode=\"last\"} : f32[2,5]"));
}

TEST(LastToken, LogitsThatAreNotBatchSequenceVocabAreAnError) {
  const std::string text = Edit(kPrefill, "return \"logits\": %12", "return \"logits\": %4");
  absl::StatusOr<std::unique_ptr<Graph>> g = ParseGraph(text);
  ASSERT_TRUE(g.ok());
  absl::StatusOr<compiler::LastTokenRewrite> r = compiler::RewriteForLastToken(**g, Signature());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("output 'logits' is f32[3,3]"));
}

}  // namespace
}  // namespace kiln
