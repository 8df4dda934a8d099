// LiveNodes: the bookkeeping of rewriting passes that work in rounds over a worklist of
// node ids while removing nodes under it (transpose-elimination, reshape-simplification).
// Why: a rewrite may delete nodes that are still on the round's worklist, and a Node*
// would then dangle; ids are never reused, so a table of the nodes alive by id answers
// "is it still there" safely. Removal is cascading but conservative: only pure, unread,
// non-output nodes go, and graph inputs never do (they are the signature).
// Limits: a node created during a round must be Add()ed to be removable in that round;
// it becomes a candidate only in the next round.
#pragma once

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"

namespace kiln::rewrite {

class LiveNodes {
 public:
  // Runs rounds until one changes nothing or `max_rounds` have run. Each round refreshes
  // the table from `g` and calls `visit` on every node that `is_candidate` selected at
  // the round's start and that is still alive. Returns whether any round changed `g`.
  absl::StatusOr<bool> RunRounds(Graph& g, int max_rounds,
                                 absl::FunctionRef<bool(const Node*)> is_candidate,
                                 absl::FunctionRef<absl::StatusOr<bool>(Node*)> visit);

  // Records a node created during the current round.
  void Add(Node* n) { live_[n->id()] = n; }

  // Removes node `id` if it is still there, pure, unread and not a graph output, then
  // its producers that became dead the same way. Graph inputs stay.
  absl::Status RemoveIfDead(Graph& g, int id);

 private:
  absl::flat_hash_map<int, Node*> live_;
};

}  // namespace kiln::rewrite
