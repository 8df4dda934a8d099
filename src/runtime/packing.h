// Transparent packing (docs/packing.md): a Run of the model program on a plan that also has
// a packed program lays the real tokens of the batch end to end — rows read up to their
// mask's length — runs the packed program on them (in as many calls as its largest bucket
// needs), and writes the outputs back in the padded layout: per-token outputs at the real
// positions, zeros at the padding; per-sequence outputs row by row.
// Why: a batch padded to its longest row spends its work on padding; the caller's tensors
// stay the standard padded ones.
// When it does not apply (a mask that is not each row's prefix of ones — left padding,
// holes —, a row with no token, a non-host tensor, a row longer than any packed bucket) the
// run takes the padded program, so packing is never what makes an answer wrong.
// Limits: host memory only; the packed copies are allocated per call.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"
#include "runtime/plan_session.h"

namespace kiln::runtime {

// A direct run of the packed program: `sequence_lengths` must be non-negative and add up
// to the tokens the token inputs hold (before any padding to a bucket), else
// InvalidArgument with the numbers. Host memory only (the CPU executor's).
absl::Status CheckPackedInputs(const Plan& plan, std::span<const TensorView> inputs);
// The packed signature's `sequence_lengths` input index, or -1.
int PackedLengthsInput(const Plan& plan);

class PackedRoute {
 public:
  // Null when the plan has no packed program (or its signature is not the one
  // kiln::Compile writes: model inputs in order with the mask as sequence_lengths).
  static std::optional<PackedRoute> Of(const Plan& plan);

  using RunPacked = std::function<absl::Status(std::span<const TensorView>,
                                               std::span<const MutableTensorView>, RunStats*)>;
  using PackedDims = std::function<absl::StatusOr<std::vector<std::vector<int64_t>>>(
      std::span<const std::vector<int64_t>>)>;
  // Runs model-signature `inputs` packed, writing `outputs` (already checked against the
  // model program); false, with nothing written, where packing does not apply.
  absl::StatusOr<bool> Run(std::span<const TensorView> inputs,
                           std::span<const MutableTensorView> outputs, const RunPacked& run,
                           const PackedDims& dims, RunStats* stats) const;
  // An executor's model-program Run through the route: checks the call against the model
  // program (memory kinds `memory`), then runs it packed on `exec`'s packed program; false
  // where packing does not apply (the caller then runs the padded buckets).
  absl::StatusOr<bool> RunModel(const Executor& exec, const PlanSession& session,
                                std::span<const MemoryKind> memory,
                                std::span<const TensorView> inputs,
                                std::span<const MutableTensorView> outputs, RunStats* stats,
                                const RunOptions& options) const;

 private:
  int mask_ = -1;                // model input index of the attention mask
  std::vector<bool> per_token_;  // per output: [tokens, ...] in the packed program
  // Splits rows of these lengths into runs of consecutive rows, one packed call each, so
  // that the tokens the chosen buckets hold (what their row-wise steps compute) plus a
  // per-call cost are least: a batch of 2570 tokens over buckets 2048 and 4096 runs as
  // 2048 + 1024 rather than one 4096 call. [first row, end row) per call.
  std::vector<std::pair<int64_t, int64_t>> Chunks(const std::vector<int64_t>& lengths) const;
  // The tokens of the smallest packed bucket holding `tokens` tokens of `sequences`
  // sequences; -1 when none does.
  int64_t BucketTokens(int64_t tokens, int64_t sequences) const;

  int64_t max_tokens_ = 0, max_sequences_ = 0;        // the largest packed bucket's
  std::vector<std::pair<int64_t, int64_t>> buckets_;  // (tokens, sequences) per packed bucket
};

}  // namespace kiln::runtime
