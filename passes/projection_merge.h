// Merging projections of one input into one kiln.Linear with concatenated weights, shared
// by fuse-qkv (Q, K, V) and fuse-glu (gate and up): what a projection is (kiln.Linear
// without activation, MatMul(x, W), MatMul + constant bias, or kiln.BlockQuantLinear
// without activation, alone or + constant bias), whether a group can merge, and the merged
// Linear (or BlockQuantLinear: codes, scales, zero points and biases concatenated by output
// channel, absent zero points written out as 8). Algebra: [x·W1 + b1, x·W2 + b2] =
// x·[W1 | W2] + [b1 | b2].
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "passes/rewrite_util.h"

namespace kiln::projection {

// One projection, in the form the merged Linear needs.
struct Projection {
  Value out;
  Value x;
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;
  int64_t trans_w = 0;
  // kiln.BlockQuantLinear: w is its u4 codes [N, K] (trans_w = 1), with these.
  bool block_quant = false;
  const Tensor* scales = nullptr;       // f32 [N, KB]
  const Tensor* zero_points = nullptr;  // [N, KB]: the codes' dtype or f32, or null (default)
  int64_t block_size = 0;
  std::vector<Node*> nodes;  // the nodes the merged Linear replaces
  int64_t k() const { return w->dims()[trans_w ? 1 : 0]; }
  int64_t n() const { return w->dims()[trans_w ? 0 : 1]; }
};

// Fills `p` for projection value `v` (`which` names it in reasons); the reason it cannot
// be merged, or "".
std::string Analyze(const Graph& g, Value v, const char* which, Projection* p);

// Why `ps` (`what` names them: "Q, K and V") cannot be merged into one Linear ("" when
// they can): shared nodes, different inputs (`cross` is the reason when all but the first
// share one: cross-attention), trans_w, dtypes, input sizes, bias on some only.
std::string CheckGroup(const std::vector<Projection>& ps, const std::string& what,
                       const std::string& cross);

// Inserts kiln.Linear(x, [W1 | W2 | ...], [b1 | ...]?) before the first replaced node (in
// `order`, else graph order), output [.., Σ n] named `name`, provenance of every
// projection. The old projections stay for the caller to rewire and remove; *first (when
// given) is the first replaced node, before which the caller can insert what follows.
Node* InsertMerged(Graph& g, const std::vector<Projection>& ps, const rewrite::NodeOrder& order,
                   const std::string& name, Node** first = nullptr);

// A constant inserted before `before`.
Value ConstantBefore(Graph& g, Node* before, Tensor t, std::string name);

}  // namespace kiln::projection
