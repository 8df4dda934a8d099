// The no-op forms of single nodes: what a node forwards unchanged, defined once. DCE
// removes them all (passes/dead_code_elimination.cc); a pass that meets one of them in the
// middle of its own rewrite asks here instead of re-deriving it. Which pass removes which
// no-op form is in docs/passes.md ("No-op forms and their owners").
// Limits: trusts stored types (shape inference); equal symbolic dims are taken as equal
// sizes, as ONNX dim_param names mean.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::noop {

// The value `n` forwards unchanged, or a null Value when `n` is not a no-op: Identity;
// Dropout in inference (mask unused, training_mode absent or constant false, or ratio
// constant 0); Cast / CastLike to the input's own dtype; Reshape, Expand and Slice whose
// output type equals the input type (every dim known or a symbol, no "?"), Slice also
// only when its constant params select the full range with step 1; Transpose with the
// identity perm.
Value NoOpSource(const Graph& g, Node& n);

// Dropout whose training_mode input is absent or the constant false: its output is its
// input (and its mask all true), so it is pure.
bool IsInferenceDropout(const Node& n);

// A Transpose's permutation (no perm: the reversed dims), nullopt unless it is a
// permutation of the input's rank (when that is known; else of the output's).
std::optional<std::vector<int64_t>> TransposePerm(const Node& t);
bool IsIdentityPerm(const std::vector<int64_t>& p);
// Transpose whose valid permutation (TransposePerm) is the identity.
bool IsIdentityTranspose(const Node& n);

}  // namespace kiln::noop
