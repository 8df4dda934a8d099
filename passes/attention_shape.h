// Shape facts for the attention matcher: the elements of a Reshape target (constants or
// dims of other tensors, through the Shape->Gather->Unsqueeze->Concat chains exporters
// emit when shapes are symbolic) and whether a Reshape keeps its input's [B, S] dims.
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

// True when Reshape `r` provably keeps dims 0 and 1 of its input (from the value types, or
// from its target copying them: 0, the known size, or Shape(y)[i] of a `same_bs` value y,
// i.e. one known to share the input's leading [B, S] dims).
bool KeepsBatchAndSequence(const Node* r, const std::vector<Value>& same_bs);

}  // namespace kiln::attention
