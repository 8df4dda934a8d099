// Executor::Create and the convenience Run. STUB until the CPU executor lands.
#include "kiln/kiln.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(std::shared_ptr<const Plan> plan,
                                                           const ExecutorOptions& options) {
  return absl::UnimplementedError("kiln::Executor: the CPU executor is not implemented yet");
}

absl::StatusOr<std::vector<Tensor>> Executor::Run(std::span<const TensorView> inputs,
                                                  RunStats* stats) const {
  return absl::UnimplementedError("kiln::Executor::Run: not implemented yet");
}

}  // namespace kiln
