// Shape facts for the attention matcher: the elements of a Reshape target (constants or
// dims of other tensors, through the Shape->Gather->Unsqueeze->Concat chains exporters
// emit when shapes are symbolic), whether a Reshape keeps its input's [B, S] dims or its
// [B, N, S, D] head layout, and the batched Kᵀ chain of the dynamo SDPA export.
// Two dims are provably equal when shape inference gave them the same known size or
// symbol, or when both tensors descend from one tensor through ops that keep the leading
// [B, S] dims (projections, layer norms, elementwise ops with a bias-like operand, the
// Split of a packed projection, an embedding Gather and its ids).
// Limits: targets built by other ops (Slice of a Shape, arithmetic on dims) are unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::attention {

// What one element of a 1-D i64 shape vector is known to be.
struct ShapeElem {
  enum Kind { kUnknown, kConst, kDimOf } kind = kUnknown;
  int64_t value = 0;  // kConst
  Value of;           // kDimOf: dim `dim` of `of`
  int64_t dim = 0;
};

// The elements of shape vector `v`, or nullopt when its length is unknown.
std::optional<std::vector<ShapeElem>> DescribeShape(Value v, int depth = 4);

// Values that provably have `v`'s leading [B, S] dims: `v` and what it was computed from
// through ops that keep them (see the file comment), up to `depth` ops back.
std::vector<Value> SameLeadingDims(Value v, int depth = 12);

// True when Reshape `r` provably keeps dims 0 and 1 of its input (from the value types, or
// from its target copying them: 0 when allowzero = 0, the known size, or Shape(y)[i] where
// y's dim i has the same known size or symbol, or y shares the leading dims of the input
// or of a `same_bs` value, i.e. one known to share the input's leading [B, S] dims).
bool KeepsBatchAndSequence(const Node* r, const std::vector<Value>& same_bs);

// True when dims `a` and `b` are the same known size or the same symbol.
bool SameKnownDim(const Dim& a, const Dim& b);

// Kᵀ built with the heads folded into the batch (the dynamo SDPA export):
// Reshape([B, N, S, D] -> [B·N, S, D]) -> Transpose [0, 2, 1] -> Reshape([B, N, D, S]),
// which is Transpose [0, 1, 3, 2] when the dims line up as written (checked on the value
// types: S and D kept by the first Reshape, N, D, S produced by the second). Returns the
// [B, N, S, D] value and the three nodes in `via`; null when `v` is not built that way.
// The value may also be the 5-D repeat_kv Expand [B, Nkv, n, S, D] (its 4-D Reshape joined
// into the first Reshape): the caller checks that expansion.
Value BatchedKeyTranspose(Value v, std::vector<Node*>* via);

// True when Reshape `r` of a [B, N, S, D] tensor (N = `heads`, D = `head_dim`) provably
// keeps that shape: each target element copies the dim (0 with allowzero = 0, the same
// known size or symbol, N or D as a constant, B or S as dim 0 or 2 of the input or of a
// `same_layout` value), at most one is -1.
bool KeepsHeadLayout(const Node* r, int64_t heads, int64_t head_dim,
                     const std::vector<Value>& same_layout);

}  // namespace kiln::attention
