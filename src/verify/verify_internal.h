// Internal pieces of kiln/verify.h shared between its files and its tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"
#include "kiln/plan/plan.h"

namespace kiln::verify_internal {

// What synthesis needs to know of the model's inputs: for an integer input that indexes
// constant tables, the rows of the smallest (its ids must stay below).
struct InputRanges {
  std::map<std::string, int64_t> table_rows;
};
absl::StatusOr<InputRanges> AnalyzeInputs(const std::string& model_path);

// One valid input set for `sigs` at `dims` (inputs.cc explains the values), seeded.
absl::StatusOr<std::map<std::string, Tensor>> SyntheticInputs(
    const std::vector<PlanTensorSig>& sigs, const std::vector<std::vector<int64_t>>& dims,
    const InputRanges& ranges, uint64_t seed);

// Spearman's rank correlation of a and b (ties get their mean rank); nullopt below 3 values
// or when either side is constant.
std::optional<double> Spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace kiln::verify_internal
