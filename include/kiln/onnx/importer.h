// ONNX ModelProto -> kiln IR. Opset differences are canonicalized here, once (see
// docs/architecture.md for the list), so passes never look at opset versions.
// External data is read only from regular files beneath the model's folder.
// Every malformed or unsupported model is an error naming the ONNX node, op and opset:
//   InvalidArgument  - malformed model (bad bytes, cycle, undefined input, bad dims ...)
//   Unimplemented    - well-formed but unsupported (ops, dtypes, opsets)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"

namespace kiln {

struct ImportOptions {
  // Limits checked with overflow-safe arithmetic before anything is allocated.
  int max_rank = 16;
  int64_t max_tensor_bytes = int64_t{8} << 30;  // one initializer / constant
  int64_t max_total_bytes = int64_t{32} << 30;  // all initializers together
  int max_nodes = 1'000'000;
};

// Parses and imports a model file. External data paths resolve against the file's folder.
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path,
                                                      const ImportOptions& options = {});
// Imports serialized ModelProto bytes. `model_dir` is the folder external data must stay
// beneath; empty means external data is rejected.
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxBytes(std::string_view bytes,
                                                       const std::string& model_dir,
                                                       const ImportOptions& options = {});

// The names of the model's graph inputs that are not also initializers (the graph's Input
// nodes), in order, from a parse of the file that builds no graph and decodes no tensor:
// what `--shape NAME=...` resolves against before a compile imports the model itself.
absl::StatusOr<std::vector<std::string>> OnnxGraphInputNames(const std::string& path);

// Reads a serialized TensorProto (e.g. the backend tests' input_0.pb) into a Tensor.
absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path);

}  // namespace kiln
