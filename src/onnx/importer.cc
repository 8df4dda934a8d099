// Being written (issue 2).
#include "kiln/onnx/importer.h"
namespace kiln {
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string&, const ImportOptions&) {
  return absl::UnimplementedError("importer not built yet");
}
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxBytes(std::string_view, const std::string&,
                                                       const ImportOptions&) {
  return absl::UnimplementedError("importer not built yet");
}
absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string&) {
  return absl::UnimplementedError("importer not built yet");
}
}  // namespace kiln
