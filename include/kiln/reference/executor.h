// The reference executor: runs an IR graph directly with simple, obviously correct CPU
// kernels. It is the oracle for every pass, fusion and optimized kernel, and the
// evaluator for constant folding, so clarity beats speed. Kernels follow the ONNX spec
// exactly (broadcasting, negative axes, int64 shape arithmetic).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"

namespace kiln {

// Runs one node on concrete inputs (null entries for omitted optional inputs).
// Errors name the node (Node::Describe). Used by constant folding.
absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node,
                                                 absl::Span<const Tensor* const> inputs);

// Runs the whole graph. `inputs` maps graph input names to tensors; every graph input
// must be bound and match its declared dtype and rank (symbolic dims bind consistently).
// Returns the graph outputs in order.
absl::StatusOr<std::vector<Tensor>> RunReference(
    const Graph& g, const absl::flat_hash_map<std::string, Tensor>& inputs);

// Called with every node output as it is computed (constants and graph inputs included),
// before it can be freed: what calibration and range analysis read.
using ValueObserver = std::function<void(const Node& node, int output, const Tensor& value)>;
absl::StatusOr<std::vector<Tensor>> RunReference(
    const Graph& g, const absl::flat_hash_map<std::string, Tensor>& inputs,
    const ValueObserver& observe);

// True if the reference executor has a kernel for this op.
bool HasReferenceKernel(std::string_view domain, std::string_view op);

}  // namespace kiln
