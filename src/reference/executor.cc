// Being written (issue 2): the graph walker and kernel dispatch.
#include "kiln/reference/executor.h"
namespace kiln {
absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node,
                                                 absl::Span<const Tensor* const> inputs) {
  return absl::UnimplementedError("reference executor not built yet");
}
absl::StatusOr<std::vector<Tensor>> RunReference(
    const Graph& g, const absl::flat_hash_map<std::string, Tensor>& inputs) {
  return absl::UnimplementedError("reference executor not built yet");
}
bool HasReferenceKernel(std::string_view, std::string_view) { return false; }
}  // namespace kiln
