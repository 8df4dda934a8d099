// kiln IR -> ONNX ModelProto, so that anyone can check kiln's rewrites with another
// runtime. The IR holds every op in its opset-21 signature, so the model is written at
// default-domain opset 21; ops of kiln's own domain go to the `kiln` domain (version 1).
// Constants become initializers; known intermediate types become value_info.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"

namespace kiln {

inline constexpr int kExportOpset = 21;

// Serialized ModelProto bytes.
absl::StatusOr<std::string> ExportOnnxBytes(const Graph& g);
absl::Status ExportOnnxFile(const Graph& g, const std::string& path);

}  // namespace kiln
