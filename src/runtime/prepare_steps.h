// The device-neutral walk over a plan's steps at Executor::Create: for every step of every
// bucket, the target's kernel contract (unknown kernel ids refused), StepChecker's contract
// check and operand resolution, then the backend's prepare function from its kernel table;
// and, per bucket, that every graph output with bytes is written by some step. The CPU and
// CUDA executors both call it with their own kernel type and table.
#pragma once

#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "runtime/plan_session.h"
#include "runtime/step_checker.h"

namespace kiln::runtime {

template <typename Kernel>
struct PreparedStepOf {
  std::unique_ptr<Kernel> kernel;
  StepOperands ops;
  const PlanStep* source = nullptr;  // for errors and traces
};

// InvalidArgument "bucket B: no step writes graph output 'name'" when one with bytes is not.
absl::Status CheckOutputsWritten(const Plan& plan, const PlanSession& session, int b);

// `prepare(kernel_id)` looks the id up in the backend's table and returns a callable
// `fn(const StepChecker&) -> absl::StatusOr<std::unique_ptr<Kernel>>`, or null for an id the
// table lacks (then: unknown kernel). Fills `steps` per bucket, in step order.
template <typename Kernel, typename Prepare>
absl::Status PrepareSteps(const Plan& plan, const PlanSession& session, PlanTarget target,
                          Prepare prepare,
                          std::vector<std::vector<PreparedStepOf<Kernel>>>* steps) {
  steps->resize(plan.buckets.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    for (size_t s = 0; s < bucket.steps.size(); ++s) {
      const PlanStep& step = bucket.steps[s];
      const KernelContract* contract = FindKernelContract(target, step.kernel);
      auto fn = prepare(step.kernel);
      if (contract == nullptr || fn == nullptr)
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: unknown kernel '%s' for target %s",
                            StepWhere(static_cast<int>(b), static_cast<int>(s), step), step.kernel,
                            std::string(PlanTargetName(target))));
      StepChecker c(plan, static_cast<int>(b), static_cast<int>(s),
                    session.bucket(static_cast<int>(b)), *contract);
      KILN_RETURN_IF_ERROR(c.CheckContract());
      PreparedStepOf<Kernel> p;
      KILN_ASSIGN_OR_RETURN(p.ops, c.Resolve());
      KILN_ASSIGN_OR_RETURN(p.kernel, fn(c));
      p.source = &step;
      (*steps)[b].push_back(std::move(p));
    }
    KILN_RETURN_IF_ERROR(CheckOutputsWritten(plan, session, static_cast<int>(b)));
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
