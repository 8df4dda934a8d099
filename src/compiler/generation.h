// The generation programs of a KV-cache decoder (docs/generation.md): finding the cache
// signature of a graph exported with past key/value inputs and present outputs (optimum's
// names: input_ids, attention_mask, position_ids; each present.* = Concat(past.*, this
// step's K/V) on the sequence axis), and rewriting a decode bucket's graph so that each
// past input is the whole static cache and its Concat a kiln.CacheWrite into it.
// Why: appending in place is what makes a decode step cost the new token, not a copy of
// the whole past; the plan stays one model with two programs sharing weights.
// Limits: position_ids must be a graph input (slot = position); the cache axis is dim 2
// of rank-4 [batch, kv_heads, past, head] K/V (optimum's layout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::compiler {

struct KvSignature {
  int input_ids = -1, attention_mask = -1, position_ids = -1;  // graph input indices
  std::string batch, sequence, past;  // the symbols of input_ids' dims ("" for a fixed
                                      // batch) and the past length
  std::string total;                  // attention_mask's dim 1 when it is a symbol of its own
  std::vector<PlanInPlace> caches;    // past input -> present output, sorted by output
};

// The cache signature of an optimized (symbolic) graph; InvalidArgument saying what is
// missing when the graph is not a KV-cache decoder kiln can drive.
absl::StatusOr<KvSignature> FindKvSignature(const Graph& g);

// Rewrites a decode bucket's graph (specialized with past = capacity - 1, sequence = 1 and
// optimized): each cache pair's past input becomes [B, H, capacity, D] and its Concat a
// kiln.CacheWrite(past, new, position_ids). InvalidArgument naming the input when a past
// is read by anything but that Concat (the rewrite would change what it reads).
absl::Status RewriteForDecode(Graph& g, const KvSignature& sig, int64_t capacity);

}  // namespace kiln::compiler
