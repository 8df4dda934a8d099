// The input sets VerifyPlan reads (kiln/verify.h): a folder checked against the plan's model
// signature (compiler/calibration.h does the reading and the synthesis).
#include "compiler/calibration.h"
#include "kiln/verify.h"

namespace kiln {

absl::StatusOr<std::vector<std::map<std::string, Tensor>>> ReadInputSets(const Plan& plan,
                                                                         const std::string& dir) {
  return compiler::ReadInputSets(IoOf(plan, PlanProgram::kModel).inputs, dir);
}

}  // namespace kiln
