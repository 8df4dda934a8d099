// Executor::Create (dispatch on the plan's target) and the convenience Run that allocates
// the outputs. The executors: runtime/cpu/cpu_executor.{h,cc}, runtime/cuda (or, in a build
// without CUDA, runtime/no_cuda, which refuses cuda plans).
#include "absl/strings/str_format.h"
#include "kiln/kiln.h"
#include "kiln/support/status.h"
#include "runtime/cpu/cpu_executor.h"
#include "runtime/cuda_backend.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(std::shared_ptr<const Plan> plan,
                                                           const ExecutorOptions& options) {
  if (plan == nullptr) return absl::InvalidArgumentError("kiln::Executor: the plan is null");
  switch (plan->target) {
    case PlanTarget::kCpu:
      return runtime::CpuExecutor::Create(std::move(plan), options);
    case PlanTarget::kCuda:
      return runtime::CreateCudaExecutor(std::move(plan), options);
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("kiln::Executor: the plan targets %s, which no executor runs",
                      std::string(PlanTargetName(plan->target))));
}

absl::StatusOr<std::vector<Tensor>> Executor::Run(std::span<const TensorView> inputs,
                                                  RunStats* stats,
                                                  const RunOptions& options) const {
  std::vector<std::vector<int64_t>> dims;
  dims.reserve(inputs.size());
  for (const TensorView& v : inputs) dims.push_back(v.dims);
  KILN_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> out_dims,
                        OutputDims(dims, options.program));
  const std::vector<PlanTensorSig>& sigs = IoOf(*plan_, options.program).outputs;
  std::vector<Tensor> outputs;
  std::vector<MutableTensorView> views;
  for (size_t o = 0; o < out_dims.size(); ++o) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(sigs[o].dtype, out_dims[o]));
    views.push_back({t.dtype(), t.dims(), t.raw()});
    outputs.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(Run(inputs, views, stats, options));
  return outputs;
}

}  // namespace kiln
