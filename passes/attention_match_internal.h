// Internals of the attention matcher (attention_match.h) shared by its files:
// attention_heads.cc walks a Q/K/V operand back through its head split to the projection,
// attention_mask.cc classifies the mask layers between Q·Kᵀ and the Softmax, and
// attention_match.cc ties the block together. Not for use outside these files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "passes/attention_match.h"

namespace kiln::attention::internal {

// The shape of `v`'s type, or null when its rank is unknown.
const std::vector<Dim>* ShapeOf(Value v);

// If `n` scales a tensor by a scalar (Mul either way round, Div by it), returns the index of
// the scaled operand and sets *factor (nullopt when the scalar is not a constant).
std::optional<int> ScaleOperand(const Node* n, std::optional<double>* factor);

// True when Transpose `t` has exactly this perm.
bool PermIs(const Node* t, std::vector<int64_t> perm);

// The node's first ONNX name, or "Op #id" without provenance.
std::string Name(const Node* n);

// Known, or the same symbol: equal for every input (two unknown dims are not).
bool SameDim(const Dim& a, const Dim& b);

// The known size of `v`'s last dim, else -1.
int64_t LastDim(Value v);

// Heads and head size of the split Reshape [B, S, H] -> [B, S, N, D]; empty on success.
std::string AnalyzeSplit(HeadPath& p, const char* which);

enum class PathKind { kQ, kK, kV };

// Walks from the attention MatMul operand `v` back to the projection. False if the
// head-split structure is not there.
bool WalkHeadPath(Value v, PathKind kind, HeadPath& p, std::string* issue);

// The heads form: from the attention MatMul operand `v` back through scales (Q, K), the Kᵀ
// transpose (K) and repeat_kv (K, V) to a 4-D heads value with known head count and size
// (p.heads_value, p.heads, p.head_dim, p.repeat). False if not so.
bool WalkHeads(Value v, PathKind kind, HeadPath& p, std::string* issue);

// A mask layer between Q·Kᵀ and the Softmax: an Add, or a Where whose operand
// `scores_operand` carries the scores.
struct MaskLayer {
  Node* node;
  bool is_where;
  int scores_operand;
};

// Every element of a constant equals one value: that value.
std::optional<double> UniformConstant(Value v);

// Classifies the mask layers into b.mask and b.causal; empty on success, the reason
// otherwise.
std::string AnalyzeMasks(const std::vector<MaskLayer>& layers, const std::vector<Dim>& scores,
                         AttentionBlock& b);

}  // namespace kiln::attention::internal
