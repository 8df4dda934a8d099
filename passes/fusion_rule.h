// One interface for fusion rules and one driver that applies them (docs/passes.md,
// "Writing a fusion"). A rule says which nodes can root its pattern, recognizes the
// pattern cheaply from a root (nothing is reported for a non-candidate), checks a
// candidate (returning the near-miss reason, or "" when it fuses) and rewrites it. The
// driver owns everything around that, the same way for every fusion:
//   * roots are taken by id, in graph order, before the sweep, and looked up again when
//     their turn comes, so a root that an earlier rewrite removed is skipped;
//   * a rewrite removes what it orphaned at once (FusionSession::RemoveIfDead), so the
//     next candidate sees the graph as it is: no dead reader makes a value look shared;
//   * it records each fused block and each near-miss (kind, nodes, reason) in the fusion
//     report, keeps the "missed" counter, and re-sorts the graph once after the sweep when
//     a rewrite asked it to (a fused node with a second output read earlier in the order).
// Header-only and IR-only, like passes/rewrite_util.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pass.h"
#include "kiln/support/status.h"
#include "passes/rewrite_util.h"

namespace kiln::fusion {

// What a rule may use while the driver applies it: counters, extra near-misses, removal
// of orphaned nodes, and a request to re-sort the graph after the sweep.
class FusionSession {
 public:
  FusionSession(const PassContext& ctx, absl::FunctionRef<void(const std::string&, int64_t)> count)
      : ctx_(ctx), count_(count) {}

  void Count(const std::string& counter, int64_t n = 1) { count_(counter, n); }

  // Records a near-miss of `kind` (counted under `counter`). The driver records the
  // root's own miss from Check's reason; a rule calls this for a second pattern it looked
  // at on the way (a normalization after a mean pooling that does not fit).
  void Missed(std::string_view kind, const std::vector<const Node*>& nodes,
              const std::string& reason, const std::string& counter = "missed") {
    Count(counter);
    if (ctx_.fusion_report) ctx_.fusion_report->Missed(std::string(kind), nodes, reason);
  }

  // Removes the nodes of `nodes` that nothing reads any more, then their producers that
  // became dead the same way (rewrite::RemoveIfDead). Call it at the end of a rewrite,
  // once every use has moved to the fused node; pointers into the removed nodes dangle.
  int RemoveIfDead(Graph& g, std::vector<Node*> nodes) {
    return rewrite::RemoveIfDead(g, std::move(nodes));
  }

  // The rewrite made a node read a value produced later in the graph order; the driver
  // runs Graph::TopoSort once, after the sweep.
  void NeedTopoSort() { topo_sort_ = true; }
  bool topo_sort_needed() const { return topo_sort_; }

 private:
  const PassContext& ctx_;
  absl::FunctionRef<void(const std::string&, int64_t)> count_;
  bool topo_sort_ = false;
};

// A fusion rule over match type M (what Recognize found, refined by Check).
template <typename M>
class FusionRule {
 public:
  using Match = M;
  virtual ~FusionRule() = default;

  // Whether `n` can root the pattern: a cheap op test.
  virtual bool IsRoot(const Node& n) const = 0;
  // Called once per sweep, before the first root: per-graph state (a NodeOrder).
  virtual void Begin(const Graph& /*g*/) {}
  // The pattern around `root`, or nullopt when `root` is not a candidate (nothing is
  // reported). Structural only: reasons belong in Check.
  virtual std::optional<M> Recognize(const Graph& g, Node* root, FusionSession& s) = 0;
  // "" when `m` fuses (Check may complete `m`: constants, absorbed neighbours), else the
  // near-miss reason, which the driver reports with Involved(m) under Kind(m).
  virtual std::string Check(const Graph& g, M& m, FusionSession& s) = 0;
  // Replaces the pattern. An error is a bug or an IR inconsistency, never a miss.
  virtual absl::Status Rewrite(Graph& g, M& m, FusionSession& s) = 0;

  // The fusion report kind ("gelu", "layernorm"): FusionKinds(). Empty for a clean-up
  // rule (reshapes around a Linear) whose rewrites are not fused blocks of their own.
  virtual std::string_view Kind(const M& m) const = 0;
  // The nodes a near-miss names (their provenance goes into the report).
  virtual std::vector<const Node*> Involved(const M& m) const = 0;
  // The counter a near-miss of `m` is counted under.
  virtual std::string MissCounter(const M& /*m*/) const { return "missed"; }
};

// Applies `rule` once over every root of `g`, in graph order, and says whether anything
// was rewritten. `count` adds to the calling pass's counters.
template <typename M>
absl::StatusOr<bool> ApplyRule(Graph& g, const PassContext& ctx, FusionRule<M>& rule,
                               absl::FunctionRef<void(const std::string&, int64_t)> count) {
  FusionSession s(ctx, count);
  rule.Begin(g);
  std::vector<int> roots;
  for (const auto& n : g.nodes())
    if (rule.IsRoot(*n)) roots.push_back(n->id());
  bool changed = false;
  for (const int id : roots) {
    Node* root = g.FindNodeById(id);
    if (root == nullptr) continue;  // removed by an earlier rewrite
    std::optional<M> m = rule.Recognize(g, root, s);
    if (!m) continue;
    const std::string kind(rule.Kind(*m));
    const std::string why = rule.Check(g, *m, s);
    if (!why.empty()) {
      s.Missed(kind, rule.Involved(*m), why, rule.MissCounter(*m));
      continue;
    }
    const std::string where = root->Describe();
    if (absl::Status st = rule.Rewrite(g, *m, s); !st.ok())
      return absl::Status(st.code(), absl::StrCat("fusing ", kind.empty() ? "" : kind + " ", "at ",
                                                  where, ": ", st.message()));
    changed = true;
    if (!kind.empty() && ctx.fusion_report) ctx.fusion_report->Fused(kind);
  }
  if (s.topo_sort_needed()) KILN_RETURN_IF_ERROR(g.TopoSort());
  return changed;
}

// A pass made of fusion rules, applied one after another, each over the whole graph.
class FusionPass : public Pass {
 protected:
  template <typename M>
  absl::StatusOr<bool> Apply(Graph& g, const PassContext& ctx, FusionRule<M>& rule) {
    return ApplyRule(g, ctx, rule,
                     [this](const std::string& counter, int64_t n) { Count(counter, n); });
  }
};

// The pass of a single rule R (default-constructible; a fresh one per run).
template <typename R>
class RulePass final : public FusionPass {
 public:
  RulePass(std::string_view name, std::string_view description)
      : name_(name), description_(description) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    R rule;
    return Apply(g, ctx, rule);
  }

 private:
  std::string_view name_, description_;  // string literals
};

}  // namespace kiln::fusion
