// Plan-side helpers shared by `kiln run`, `bench`, `plan-info` and `inspect` on .kiln
// files: loading a plan into an executor, its input declarations, tensor views, bucket
// labels, the Chrome trace writer and small formatting helpers.
// Limits: the trace has one "X" event per kernel call on a single thread (the executor
// runs steps in order; kernel-internal threads are not shown).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"
#include "tools/cli.h"
#include "tools/run_inputs.h"

namespace kiln::cli {

// `s` with "plan 'PATH': " in front unless its message already names the path.
absl::Status NamePlan(const absl::Status& s, const std::string& path);
// ReadPlanInfo with errors naming the file.
absl::StatusOr<PlanInfo> ReadPlanInfoNamed(const std::string& path);

struct LoadedPlan {
  std::unique_ptr<Executor> executor;  // executor->plan() is the loaded plan
};
// LoadPlanFile + Executor::Create; errors name the file.
absl::StatusOr<LoadedPlan> LoadPlanAndExecutor(const std::string& path,
                                               const ExecutorOptions& options);

// The executor flags `run` and `bench` share: --threads N (cpu), --cuda-device N and
// --no-cuda-graph (cuda). True when the current argument was one of them (then `error`
// holds a bad value's message, if any). `given` records that one was seen.
bool ParseExecutorFlag(Args& args, ExecutorOptions* options, absl::Status* error, bool* given);
// Their help lines.
extern const char kExecutorFlagsHelp[];
// --no-pack, --program model|packed: the RunOptions of `kiln run` and `kiln bench`.
bool ParseRunFlag(Args& args, RunOptions* options, absl::Status* error, bool* given);
extern const char kRunFlagsHelp[];

// The plan's graph inputs as (name, Type) for BindInputs.
std::vector<InputDecl> PlanInputDecls(const Plan& plan, PlanProgram program = PlanProgram::kModel);
// Non-owning views of `tensors` (which must outlive them).
std::vector<TensorView> ViewsOf(const std::vector<Tensor>& tensors);

// "batch=1,sequence=32" for bucket `index` ("" when out of range or no symbols).
std::string BucketLabel(const Plan& plan, int index);
// "input_ids i64[batch,sequence]".
std::string SigString(const PlanTensorSig& sig);
// Lowercase hex of the model hash.
std::string HexSha256(const std::array<uint8_t, 32>& h);

// Writes {"traceEvents": [...]} with one complete ("X") event per step of the run: name =
// kernel id, ts/dur in microseconds since the start of Run, args.provenance = ONNX nodes.
absl::Status WriteChromeTrace(const std::string& path, const Plan& plan, const RunStats& stats);

}  // namespace kiln::cli
