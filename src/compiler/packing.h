// The packed-token program of an encoder (docs/packing.md): proving that an optimized
// (symbolic) graph may run over the real tokens of a batch laid end to end, and rewriting
// it to do so. Per-token inputs [batch, sequence] become [tokens]; the attention mask input
// becomes `sequence_lengths` [sequences] (int64); attention and pooling become their
// packed forms (kiln.PackedAttention, kiln.PackedPool) over those lengths, the implicit
// position ids kiln.PackedPositions; per-token outputs become [tokens, ...] and per-sequence
// outputs [sequences, ...].
// Why: a re-ranking batch padded to its longest pair spends most of its Linear and far more
// of its attention work on padding; packed, it costs the tokens it has.
// The proof: the mask is checked by value (the attention masks it builds are exactly "key
// j hidden iff attention_mask[b, j] = 0", a mean pool's mask is attention_mask), and after
// the rewrite every op between the packed inputs and the outputs must keep tokens apart
// (catalogue traits kElementwise, kRowwise, views that keep the leading dims, the packed
// ops); anything else refuses packing with the node named.
// Limits: BERT-family encoders: no causal or rotary attention, positions implicit (0..S-1
// over a constant table) or a graph input, every input per-token or the mask.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"

namespace kiln::compiler {

// The symbols of a packed program's signature.
inline constexpr char kTokensSymbol[] = "tokens";
inline constexpr char kSequencesSymbol[] = "sequences";
// The packed program's name for the mask input it replaces.
inline constexpr char kSequenceLengthsInput[] = "sequence_lengths";

struct PackedSignature {
  int mask_input = -1;            // graph input index of the attention mask
  std::vector<int> token_inputs;  // the other inputs, all [batch, sequence]
  std::string batch;              // dim 0's symbol ("" for a fixed batch)
  int64_t fixed_batch = 0;        // dim 0 when it is fixed
  std::string sequence;           // dim 1's symbol
};

// The signature of an encoder kiln can pack, checked on the optimized symbolic graph
// (mask values included, by evaluating the mask chains on the reference executor);
// FailedPrecondition saying why not otherwise.
absl::StatusOr<PackedSignature> FindPackedSignature(const Graph& g);

// Rewrites a copy of `g` (the graph FindPackedSignature accepted) into its packed program.
// The result needs shape inference, then CheckPacked.
absl::StatusOr<std::unique_ptr<Graph>> PackGraph(const Graph& g, const PackedSignature& sig);

// The token-wise proof over a packed, shape-inferred graph: FailedPrecondition naming the
// first node that could mix tokens of different sequences.
absl::Status CheckPacked(const Graph& g);

}  // namespace kiln::compiler
