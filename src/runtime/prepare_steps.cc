// CheckOutputsWritten (prepare_steps.h).
#include "runtime/prepare_steps.h"

namespace kiln::runtime {

absl::Status CheckOutputsWritten(const Plan& plan, const PlanSession& session, int b) {
  const PlanBucket& bucket = plan.buckets[b];
  const std::vector<PlanTensorSig>& outputs = IoOf(plan, bucket.program).outputs;
  std::vector<bool> written(outputs.size(), false);
  for (const PlanStep& step : bucket.steps)
    for (int32_t idx : step.outputs)
      if (bucket.buffers[idx].kind == PlanBufferKind::kOutput)
        written[bucket.buffers[idx].binding] = true;
  for (size_t o = 0; o < outputs.size(); ++o)
    if (!written[o] && session.bucket(b).output_bytes[o] > 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d: no step writes graph output '%s'", b, outputs[o].name));
  return absl::OkStatus();
}

}  // namespace kiln::runtime
