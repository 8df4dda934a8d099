// Reading and writing NumPy .npy files (format 1.0/2.0/3.0, little-endian, C order).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"

namespace kiln {

absl::StatusOr<Tensor> ReadNpy(const std::string& path);
absl::Status WriteNpy(const std::string& path, const Tensor& t);

}  // namespace kiln
