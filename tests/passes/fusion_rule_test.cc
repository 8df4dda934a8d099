// Tests for the fusion driver (passes/fusion_rule.h) with a toy rule: "a Relu absorbs the
// Relu that reads it" (Relu(Relu(x)) == Relu(x)). Checks what the driver promises every
// fusion: roots in graph order, a root removed by an earlier rewrite skipped, near-misses
// reported with the rule's kind, nodes, reason and counter, fused blocks reported (not for
// a clean-up rule), and rewrite errors naming the kind and node. (The one TopoSort after a
// sweep is exercised by the SkipLayerNorm and EmbedLayerNorm Sum-output tests.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "passes/fusion_rule.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::Parse;

struct Pair {
  Node* outer = nullptr;  // the root
  Node* inner = nullptr;  // the Relu reading it
};

class AbsorbRelu final : public fusion::FusionRule<Pair> {
 public:
  std::string kind = "gelu";  // any report kind
  bool fail_rewrite = false;
  std::vector<std::string> recognized;  // roots Recognize saw, by provenance

  bool IsRoot(const Node& n) const override { return rewrite::IsOp(&n, "Relu"); }
  std::optional<Pair> Recognize(const Graph& g, Node* root, fusion::FusionSession&) override {
    recognized.push_back(root->provenance().at(0));
    Node* user = rewrite::SingleUser(g, root->output(0));
    if (!rewrite::IsOp(user, "Relu")) return std::nullopt;
    return Pair{root, user};
  }
  std::string Check(const Graph&, Pair& p, fusion::FusionSession&) override {
    return p.inner->output_info(0).name == "keep" ? "the inner Relu is named keep" : "";
  }
  absl::Status Rewrite(Graph& g, Pair& p, fusion::FusionSession& s) override {
    if (fail_rewrite) return absl::InternalError("broken");
    rewrite::UnionProvenance(p.outer, p.inner);
    p.outer->set_output_name(0, p.inner->output_info(0).name);
    g.ReplaceAllUsesWith(p.inner->output(0), p.outer->output(0));
    s.Count("absorbed");
    s.RemoveIfDead(g, {p.inner});
    return absl::OkStatus();
  }
  std::string_view Kind(const Pair&) const override { return kind; }
  std::vector<const Node*> Involved(const Pair& p) const override { return {p.outer, p.inner}; }
  std::string MissCounter(const Pair&) const override { return "relu missed"; }
};

constexpr char kChain[] = R"(graph g opset=21 {
  %0 = Input() : f32[2] "x"
  %1 = Relu(%0) : f32[2] @ "r1"
  %2 = Relu(%1) : f32[2] @ "r2"
  %3 = Relu(%2) : f32[2] @ "r3"
  %4 = Relu(%3) : f32[2] "y" @ "r4"
  return "y": %4
})";

struct Applied {
  absl::StatusOr<bool> changed;
  PassCounters counters;
  FusionReport report;
};

Applied Apply(Graph& g, AbsorbRelu& rule) {
  Applied a{false, {}, {}};
  PassContext ctx;
  ctx.fusion_report = &a.report;
  a.changed =
      fusion::ApplyRule(g, ctx, rule, [&](const std::string& c, int64_t n) { a.counters[c] += n; });
  return a;
}

// r1 absorbs r2; r2, gone, is skipped; r3 absorbs r4. Recognize never sees r2.
TEST(FusionDriver, SkipsRootsAnEarlierRewriteRemoved) {
  auto g = Parse(kChain);
  ASSERT_TRUE(g);
  AbsorbRelu rule;
  Applied a = Apply(*g, rule);
  ASSERT_TRUE(a.changed.ok()) << a.changed.status();
  EXPECT_TRUE(*a.changed);
  EXPECT_EQ(rule.recognized, (std::vector<std::string>{"r1", "r3"}));
  EXPECT_EQ(testing::Counter(a.counters, "absorbed"), 2);
  EXPECT_EQ(a.report.kinds().at("gelu").fused, 2);
  EXPECT_EQ(PrintGraph(*g), PrintGraph(*Parse(R"(graph g opset=21 {
  %0 = Input() : f32[2] "x"
  %1 = Relu(%0) : f32[2] @ "r1", "r2"
  %2 = Relu(%1) : f32[2] "y" @ "r3", "r4"
  return "y": %2
})")));
  EXPECT_TRUE(VerifyGraph(*g).ok());
}

// A Check reason becomes a near-miss of the rule's kind naming Involved's nodes, counted
// under MissCounter; nothing changes for that root.
TEST(FusionDriver, ReportsTheCheckReasonAsANearMiss) {
  const std::string text = testing::Edit(kChain, "f32[2] @ \"r2\"", "f32[2] \"keep\" @ \"r2\"");
  auto g = Parse(text);
  ASSERT_TRUE(g);
  AbsorbRelu rule;
  Applied a = Apply(*g, rule);
  ASSERT_TRUE(a.changed.ok());
  EXPECT_EQ(testing::Counter(a.counters, "relu missed"), 1);
  const FusionKindReport& k = a.report.kinds().at("gelu");
  EXPECT_EQ(k.fused, 1);  // r2 absorbs r3; r4, then reading r2, has no Relu user
  ASSERT_EQ(k.missed.size(), 1u);
  EXPECT_EQ(k.missed[0].reason, "the inner Relu is named keep");
  EXPECT_EQ(k.missed[0].nodes, (std::vector<std::string>{"r1", "r2"}));
}

// An empty kind is a clean-up rule: rewrites happen, nothing is reported as fused.
TEST(FusionDriver, CleanUpRulesAreNotReported) {
  auto g = Parse(kChain);
  ASSERT_TRUE(g);
  AbsorbRelu rule;
  rule.kind = "";
  Applied a = Apply(*g, rule);
  ASSERT_TRUE(a.changed.ok());
  EXPECT_TRUE(*a.changed);
  EXPECT_TRUE(a.report.kinds().empty());
}

// A rewrite error stops the sweep and names the kind and the root node, op and opset.
TEST(FusionDriver, RewriteErrorsNameTheKindAndRoot) {
  auto g = Parse(kChain);
  ASSERT_TRUE(g);
  AbsorbRelu rule;
  rule.fail_rewrite = true;
  Applied a = Apply(*g, rule);
  ASSERT_FALSE(a.changed.ok());
  EXPECT_EQ(a.changed.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(a.changed.status().message(), "fusing gelu at node 'r1' (Relu, opset 21): broken");
}

// Nothing to do: no change, no report entries, no counters.
TEST(FusionDriver, NoCandidateChangesNothing) {
  auto g = Parse(R"(graph g opset=21 {
  %0 = Input() : f32[2] "x"
  %1 = Relu(%0) : f32[2] "y" @ "r1"
  return "y": %1
})");
  ASSERT_TRUE(g);
  AbsorbRelu rule;
  Applied a = Apply(*g, rule);
  ASSERT_TRUE(a.changed.ok());
  EXPECT_FALSE(*a.changed);
  EXPECT_TRUE(a.report.kinds().empty());
  EXPECT_TRUE(a.counters.empty());
}

}  // namespace
}  // namespace kiln
