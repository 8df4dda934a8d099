// Internal: Plan <-> metadata protobuf (src/plan/plan.proto), and the semantic
// validation of a Plan (every index, offset and size in range) shared by the writer
// and the loader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/plan/plan.h"

namespace kiln::plan_internal {

// Checks that `plan` is well formed given a weights section of `weights_bytes` bytes
// (passed separately: ReadPlanInfo validates without loading the weights).
absl::Status ValidatePlan(const Plan& plan, uint64_t weights_bytes);

// Deterministic serialization of everything but the weights bytes, recording a weights
// section of `weights_bytes` bytes.
absl::StatusOr<std::string> EncodeMetadata(const Plan& plan, uint64_t weights_bytes);
inline absl::StatusOr<std::string> EncodeMetadata(const Plan& plan) {
  return EncodeMetadata(plan, plan.weights.size());
}

// Parses metadata into `plan` (all fields but weights) and returns the weights size it
// records. Checks encodings (known dtype codes and enums, set oneofs); ValidatePlan
// checks the rest.
absl::StatusOr<uint64_t> DecodeMetadata(std::string_view bytes, Plan* plan);

}  // namespace kiln::plan_internal
