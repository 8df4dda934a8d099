// LiveNodes: round-based worklists and cascading dead-node removal for rewriting
// passes. See live_nodes.h.
#include "passes/live_nodes.h"

#include <vector>

#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "passes/rewrite_util.h"

namespace kiln::rewrite {

absl::StatusOr<bool> LiveNodes::RunRounds(Graph& g, int max_rounds,
                                          absl::FunctionRef<bool(const Node*)> is_candidate,
                                          absl::FunctionRef<absl::StatusOr<bool>(Node*)> visit) {
  bool changed = false;
  for (int round = 0; round < max_rounds; ++round) {
    live_.clear();
    std::vector<int> candidates;
    for (const auto& p : g.nodes()) {
      live_[p->id()] = p.get();
      if (is_candidate(p.get())) candidates.push_back(p->id());
    }
    bool round_changed = false;
    for (int id : candidates) {
      auto it = live_.find(id);
      if (it == live_.end()) continue;
      KILN_ASSIGN_OR_RETURN(bool c, visit(it->second));
      round_changed |= c;
    }
    if (!round_changed) break;
    changed = true;
  }
  return changed;
}

absl::Status LiveNodes::RemoveIfDead(Graph& g, int id) {
  auto it = live_.find(id);
  if (it == live_.end()) return absl::OkStatus();
  Node* n = it->second;
  if (n->is_input() || !HasTrait(FindOp(n->domain(), n->op()), kPure)) return absl::OkStatus();
  for (int i = 0; i < n->num_outputs(); ++i)
    if (!n->output_info(i).uses.empty() || IsGraphOutput(g, n->output(i))) return absl::OkStatus();
  std::vector<int> producers;
  for (const Value& v : n->inputs())
    if (v) producers.push_back(v.node->id());
  live_.erase(it);
  KILN_RETURN_IF_ERROR(g.RemoveNode(n));
  for (int p : producers) KILN_RETURN_IF_ERROR(RemoveIfDead(g, p));
  return absl::OkStatus();
}

}  // namespace kiln::rewrite
