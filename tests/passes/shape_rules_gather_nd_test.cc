// Tests of the GatherND shape rule (passes/shape_rules_indexing.cc): symbolic dims, the
// batch_dims forms (a batch dim unknown in indices comes from data), what stays unknown
// when indices' last dim is not known, the errors for shapes no valid model has, and
// agreement of the inferred static type with what the reference executor produces.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectRewrite;
using testing::Parse;

constexpr char kPass[] = "shape-inference";

// A graph gathering from `data` with `indices` (both graph inputs) and the given
// attribute text (e.g. " {batch_dims=1}").
std::string Graph2(const std::string& data, const std::string& indices,
                   const std::string& attrs = "") {
  return absl::StrCat("graph g opset=21 {\n  %0 = Input() : ", data, " \"data\"\n",
                      "  %1 = Input() : ", indices, " \"indices\"\n", "  %2 = GatherND(%0, %1)",
                      attrs, "\n  return \"y\": %2\n}");
}

// Runs the pass; the type of output "y" as Type::ToString, or "error: <message>".
std::string OutType(const std::string& text) {
  auto g = Parse(text);
  if (!g) return "<parse error>";
  absl::StatusOr<bool> r = CreatePass(kPass)->Run(*g, PassContext{});
  if (!r.ok()) return absl::StrCat("error: ", r.status().message());
  EXPECT_TRUE(VerifyGraph(*g).ok()) << VerifyGraph(*g);
  return g->outputs()[0].value.type().ToString();
}

TEST(ShapeRulesGatherNDTest, BeforeAndExpected) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,8] "x"
  %1 = Input() : i64[n,1] "idx"
  %2 = GatherND(%0, %1)
  %3 = Input() : bool[batch,seq] "mask"
  %4 = Input() : i64[batch,q,seq,2] "pairs"
  %5 = GatherND(%3, %4)
  return "a": %2, "b": %5
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,8] "x"
  %1 = Input() : i64[n,1] "idx"
  %2 = GatherND(%0, %1) : f32[n,seq,8]
  %3 = Input() : bool[batch,seq] "mask"
  %4 = Input() : i64[batch,q,seq,2] "pairs"
  %5 = GatherND(%3, %4) : bool[batch,q,seq]
  return "a": %2, "b": %5
})");
}

TEST(ShapeRulesGatherNDTest, OutputRankIsQMinus1PlusRMinusKMinusB) {
  // b = 0: indices[:-1] + data[k:].
  EXPECT_EQ(OutType(Graph2("f32[2,3,4]", "i64[5,6,2]")), "f32[5,6,4]");
  EXPECT_EQ(OutType(Graph2("f32[2,3,4]", "i64[3]")), "f32[]");
  EXPECT_EQ(OutType(Graph2("i32[2,3,4]", "i64[1]")), "i32[3,4]");
  // b = 1: indices[:-1] + data[1 + k:].
  EXPECT_EQ(OutType(Graph2("f32[batch,3,4]", "i64[batch,1]", " {batch_dims=1}")), "f32[batch,4]");
  EXPECT_EQ(OutType(Graph2("f32[batch,3,4]", "i64[batch,7,2]", " {batch_dims=1}")), "f32[batch,7]");
  // b = 2.
  EXPECT_EQ(OutType(Graph2("f16[2,s,4,5]", "i64[2,s,1]", " {batch_dims=2}")), "f16[2,s,5]");
}

TEST(ShapeRulesGatherNDTest, BatchDimsUnknownInIndicesComeFromData) {
  EXPECT_EQ(OutType(Graph2("f32[batch,3,4]", "i64[?,9,1]", " {batch_dims=1}")), "f32[batch,9,4]");
  EXPECT_EQ(OutType(Graph2("f32[2,3,4]", "i64[?,1]", " {batch_dims=1}")), "f32[2,4]");
  // A known indices dim wins over a symbolic data dim (neither contradicts the other).
  EXPECT_EQ(OutType(Graph2("f32[batch,3,4]", "i64[2,1]", " {batch_dims=1}")), "f32[2,4]");
}

TEST(ShapeRulesGatherNDTest, UnknownWhatTheInputsDoNotDetermine) {
  // indices' last dim unknown: the output rank is unknown.
  EXPECT_EQ(OutType(Graph2("f32[2,3,4]", "i64[5,?]")), "f32[*]");
  EXPECT_EQ(OutType(Graph2("f32[2,3,4]", "i64[5,k]")), "f32[*]");
  // Either rank unknown.
  EXPECT_EQ(OutType(Graph2("f32[*]", "i64[5,1]")), "f32[*]");
  EXPECT_EQ(OutType(Graph2("f32[2,3]", "i64[*]")), "f32[*]");
}

TEST(ShapeRulesGatherNDTest, ErrorsNameTheNode) {
  const std::string k_too_big = OutType(Graph2("f32[2,3]", "i64[5,3]"));
  EXPECT_NE(k_too_big.find("error: "), std::string::npos) << k_too_big;
  EXPECT_NE(k_too_big.find("GatherND"), std::string::npos) << k_too_big;
  EXPECT_NE(k_too_big.find("indices last dim 3 must be in [1, 2]"), std::string::npos) << k_too_big;
  EXPECT_NE(OutType(Graph2("f32[2,3]", "i64[2,2]", " {batch_dims=1}")).find("error: "),
            std::string::npos);  // k > r - b
  EXPECT_NE(OutType(Graph2("f32[2,3]", "i64[5,0]")).find("error: "), std::string::npos);
  const std::string mismatch = OutType(Graph2("f32[2,3,4]", "i64[3,1]", " {batch_dims=1}"));
  EXPECT_NE(mismatch.find("batch dim 0 is 2 in data but 3 in indices"), std::string::npos)
      << mismatch;
  EXPECT_NE(OutType(Graph2("f32[2,3]", "i64[2,1]", " {batch_dims=2}")).find("error: "),
            std::string::npos);  // batch_dims >= min(r, q)
  EXPECT_NE(OutType(Graph2("f32[2,3]", "i64[2,1]", " {batch_dims=-1}")).find("error: "),
            std::string::npos);
}

// The inferred static type is exactly what the reference executor produces.
TEST(ShapeRulesGatherNDTest, TypeMatchesExecution) {
  for (const std::string& attrs : {std::string(""), std::string(" {batch_dims=1}")}) {
    auto g = Parse(Graph2("f32[2,3,4]", "i64[2,5,1]", attrs));
    ASSERT_TRUE(g);
    ASSERT_TRUE(CreatePass(kPass)->Run(*g, PassContext{}).ok());
    const Type& t = g->outputs()[0].value.type();
    ASSERT_TRUE(t.is_static()) << t.ToString();
    absl::flat_hash_map<std::string, Tensor> feeds =
        testing::RandomInputs(*g, /*seed=*/7, {}, /*int_high=*/2);  // indices in {0, 1}
    auto results = RunReference(*g, feeds);
    ASSERT_TRUE(results.ok()) << results.status();
    EXPECT_EQ((*results)[0].dtype(), t.dtype) << attrs;
    EXPECT_EQ((*results)[0].dims(), *t.StaticDims()) << attrs;
  }
}

}  // namespace
}  // namespace kiln
