// Reading and writing NumPy .npy files (format 1.0/2.0/3.0, little-endian, C order), and
// reading .npz archives of them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"

namespace kiln {

absl::StatusOr<Tensor> ReadNpy(const std::string& path);
absl::Status WriteNpy(const std::string& path, const Tensor& t);
// The arrays of an .npz archive written by np.savez (stored members; a compressed one, as
// np.savez_compressed writes, is Unimplemented), named without ".npy", in archive order.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadNpz(const std::string& path);

}  // namespace kiln
