// Internal pieces of kiln/verify.h shared between its files and its tests.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::verify_internal {

// Spearman's rank correlation of a and b (ties get their mean rank); nullopt below 3 values
// or when either side is constant.
std::optional<double> Spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace kiln::verify_internal
