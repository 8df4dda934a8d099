// What `kiln plan-info` reports about a plan: whether this machine can run it, and the
// whole description as one JSON object (`--json`; the Python package's Plan.info()).
#pragma once

#include <string>
#include <vector>

#include "kiln/plan/plan.h"

namespace kiln::cli {

// Whether this process can run `plan`: a cpu plan always; a cuda plan needs a CUDA-enabled
// kiln, device 0 answering and an SM that the plan and the build cover; and the plan's kiln
// version must equal this kiln's. `reasons` says why, one phrase per check.
struct Compat {
  bool ok = true;
  std::vector<std::string> reasons;
};
Compat CheckCompat(const Plan& plan);

// A plan below fp32: its precision notes grouped, one line per (precision, op, reason) with
// the count, e.g. "int8: 36 kiln.QuantLinear", "fp32: 12 kiln.SkipLayerNorm (normalization:
// ...)". Empty for an fp32 plan.
std::vector<std::string> PrecisionLines(const Plan& plan);

// The `kiln plan-info --json` object for `info` read from `path`. For a plan that is not a
// file, `path` is "": "plan" is then null and the file fields are whatever `info` holds
// (the Python package gives 0 for the file, metadata and offset, the weights' size).
std::string PlanInfoJson(const PlanInfo& info, const std::string& path);

}  // namespace kiln::cli
