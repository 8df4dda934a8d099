// The generation programs of a KV-cache decoder (docs/generation.md): finding the cache
// signature of a graph exported with past key/value inputs and present outputs (optimum's
// names: input_ids, attention_mask, position_ids; each present.* = Concat(past.*, this
// step's K/V) on the sequence axis; or, for com.microsoft GroupQueryAttention's import,
// present.* = TensorScatter(Pad(past.*), this step's K/V, rows) and no position_ids), and
// rewriting a decode bucket's graph so that each past input is a pool of cache blocks,
// its Concat (Pad + TensorScatter) a kiln.CacheWrite into it through a block table, and
// the fused attention reads the keys and values through the same table.
// Why: appending in place is what makes a decode step cost the new token, not a copy of
// the whole past; the plan stays one model with two programs sharing weights.
// Limits: a Concat cache needs position_ids as a graph input (slot = position); the
// cache axis is dim 2 of rank-4 [batch, kv_heads, past, head] K/V (optimum's layout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::compiler {

struct KvSignature {
  // Graph input indices; position_ids is -1 when every cache is a TensorScatter one.
  int input_ids = -1, attention_mask = -1, position_ids = -1;
  std::string batch, sequence, past;  // the symbols of input_ids' dims ("" for a fixed
                                      // batch) and the past length
  std::string total;                  // attention_mask's dim 1 when it is a symbol of its own
  std::vector<PlanInPlace> caches;    // past input -> present output, sorted by output
};

// The cache signature of an optimized (symbolic) graph; InvalidArgument saying what is
// missing when the graph is not a KV-cache decoder kiln can drive.
absl::StatusOr<KvSignature> FindKvSignature(const Graph& g);

// The decode program's paged cache: each K/V pool is [blocks, H, block_size, D]; block 0
// is the scratch block (free table entries and padded batch rows point at it).
struct KvPaging {
  int64_t block_size = 0, blocks = 0;
};

// The name of the decode program's block table input and of its column symbol.
inline constexpr char kBlockTableInput[] = "block_table";
inline constexpr char kBlocksSymbol[] = "kv_blocks";

// The paging for these capacities and batches: `block_size` (0: the largest power of two
// <= 128 dividing every capacity) must divide every capacity; `blocks` (0: max batch × max
// capacity / block_size + 1) must hold one sequence at the largest capacity plus the
// scratch block. InvalidArgument with the numbers otherwise.
absl::StatusOr<KvPaging> ChooseKvPaging(const std::vector<int64_t>& capacities, int64_t max_batch,
                                        int64_t block_size, int64_t blocks);

// The decode program's signature: the plan's, with each cache pair's past input and present
// output the pool [blocks, H, block_size, D] (H and D must be known) and the block table
// [batch, kv_blocks] int64 appended to the inputs; the batch may be padded where the plan's
// batch may (padded rows write to and read the scratch block 0).
absl::StatusOr<PlanSignature> DecodeSignature(const Plan& plan, const KvSignature& kv,
                                              const KvPaging& paging);

// Rewrites a decode bucket's graph (specialized with past = capacity - 1, sequence = 1 and
// optimized) to the paged cache: a new input `block_table` [B, capacity / block_size]
// int64; each cache pair's past input becomes the pool [blocks, H, block_size, D], its
// Concat a kiln.CacheWrite(pool, new, position_ids, block_table) (a Pad + TensorScatter:
// the same with Unsqueeze(rows, [1]) as the slots), and each kiln.Attention reading that
// takes the block table too. InvalidArgument naming the input when a past is read by
// anything but its Concat (Pad), a Pad adds more than rows at the end of the cache axis,
// or the appended cache is read by anything but kiln.Attention's keys or values (the pool
// is not a [B, H, C, D] tensor any other op could read).
absl::Status RewriteForDecode(Graph& g, const KvSignature& sig, int64_t capacity,
                              const KvPaging& paging);

// The graph output a generation session reads: "logits", f32 [batch, sequence, vocab];
// -1 when the graph has none.
int LogitsOutput(const Graph& g);

// What RewriteForLastToken did: the nodes it now runs on one row per sequence, and the
// values it takes that row of (kiln.Pool{mode="last"} + Unsqueeze each).
struct LastTokenRewrite {
  int nodes = 0, cuts = 0;
};

// Rewrites a prefill bucket's graph (specialized: static [B, S, ...] shapes, an empty past)
// so that `logits` is [B, 1, V], the logits at each sequence's last token (the last
// position whose attention_mask is nonzero), which is all a generation session reads.
// Why: the LM head over every prompt row is a quarter of a prefill's work at LLM vocab
// sizes (896 × 151936 against ~15 M MACs a layer for Qwen2-0.5B); per row it is wasted on
// all but one. How: walking back from the logits, every node that is row-wise (the
// catalogue's kRowwise ops over the last axis, elementwise ops whose other inputs are
// constants not broadcast over the rows) with [B, S, ...] rows in and out, and whose
// results feed only such nodes and the logits, runs on the last row instead: each value it
// reads from outside that set (and not a constant) goes through kiln.Pool{mode="last"}
// with the attention mask, then Unsqueeze to [B, 1, H]. The present K/V outputs and
// everything they depend on are untouched. Where no node qualifies (or a cut value is not
// f32) the Pool sits on the logits themselves: the same [B, 1, V], computed in full.
// InvalidArgument when `logits` is not [B, S, V] with input_ids' B and S.
absl::StatusOr<LastTokenRewrite> RewriteForLastToken(Graph& g, const KvSignature& sig);

}  // namespace kiln::compiler
