// Internal to the CPU executor: a Plan bucket checked and turned into a flat vector of
// prepared steps, so that Run does no lookups, parsing or validation per step.
// Why: Create validates every step once against docs/plan-kernels.md (kernel known,
// parameters present, typed and consistent with the buffers' dims and dtypes, no write to
// read-only memory, no unsupported overlap) so no kernel can touch memory outside a buffer
// at run time; Run then only resolves pointers as base + offset and switches on the kernel.
// Limits: target cpu only; ref steps keep their parsed one-node graph and evaluate it on
// the reference executor (copies in and out, slow path by design).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/cpu/matmul.h"
#include "kiln/ir/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::runtime {

// Kernel ids of target cpu (docs/plan-kernels.md).
enum class KernelId : uint8_t {
  kCopy,
  kRef,
  kLinear,
  kLayerNorm,
  kSkipLayerNorm,
  kAttention,
  kEmbedLayerNorm,
  kPool,
  kGelu,
  kSoftmax,
};

// Where an operand's bytes live: slot of the run's base-pointer table, plus an offset.
// Slot layout: 0 = null (omitted input), 1 = arena, 2 = weights, then graph inputs, then
// graph outputs (BaseSlotOfInput / BaseSlotOfOutput).
struct Operand {
  uint32_t slot = 0;
  int64_t offset = 0;
};
inline constexpr uint32_t kNullSlot = 0, kArenaSlot = 1, kWeightSlot = 2;
inline uint32_t BaseSlotOfInput(int binding) { return 3 + static_cast<uint32_t>(binding); }
inline uint32_t BaseSlotOfOutput(int num_inputs, int binding) {
  return 3 + static_cast<uint32_t>(num_inputs) + static_cast<uint32_t>(binding);
}

// A ref step's parsed one-node graph and the mapping of its I/O onto the step's operands.
struct RefNode {
  std::unique_ptr<Graph> graph;
  const Node* node = nullptr;
  // Per step output: which node output fills it.
  std::vector<int> output_result;
  // Dtype and dims of each step input / output buffer.
  std::vector<DType> in_dtype, out_dtype;
  std::vector<std::vector<int64_t>> in_dims, out_dims;
};

// One step, ready to run. Sizes are the step's parameters, already checked.
struct PreparedStep {
  KernelId kernel = KernelId::kCopy;
  std::vector<Operand> in, out;  // same length as the PlanStep's inputs / outputs
  int64_t copy_bytes = 0;
  // linear
  const cpu::PackedLinear* linear = nullptr;
  int64_t m = 0;
  // layer_norm / skip_layer_norm / softmax (rows, n = h)
  int64_t rows = 0, n = 0, skip_rows = 0;
  float eps = 0;
  // attention / embed_layer_norm / pool
  int64_t batch = 0, seq = 0, heads = 0, head_size = 0, hidden = 0;
  float scale = 1.0f;
  bool causal = false;
  bool mask_bool = false;          // attention: bool mask (else f32)
  std::vector<int64_t> mask_dims;  // attention mask buffer dims
  bool mask_i64 = false;           // pool: i64 mask (else f32)
  bool ids_i32 = false;            // embed_layer_norm: i32 ids (else i64)
  int64_t position_rows = 0, word_rows = 0, pos_rows = 0, segment_rows = 0;
  bool cls = false, normalize = false;
  bool tanh = false;     // gelu
  bool has_sum = false;  // skip_layer_norm second output
  std::shared_ptr<const RefNode> ref;
  // For errors and traces: the plan step.
  const PlanStep* source = nullptr;
};

// The shape of one bucket: concrete dims of every graph input and output.
struct PreparedBucket {
  std::vector<PreparedStep> steps;
  std::vector<std::vector<int64_t>> input_dims, output_dims;
  std::vector<int64_t> input_bytes, output_bytes;
  // Value of each of the executor's symbols (CpuExecutor's symbol order).
  std::vector<int64_t> symbol_values;
  int64_t arena_bytes = 0;
  // Offsets (within the run's arena block) of the staging copies used by padded runs.
  std::vector<int64_t> staging_in, staging_out;
  int64_t total_bytes = 0;  // arena + staging, 64-byte multiples
};

// Prepacked Linear weights shared across buckets, keyed by
// (weight offset, bias offset or -1, k, n, trans_w, activation).
using LinearKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int>;
using LinearCache = std::map<LinearKey, std::unique_ptr<cpu::PackedLinear>>;

// Checks and prepares step `s` of bucket `b`. `io` gives the bucket's graph I/O sizes
// (input_bytes / output_bytes must be filled). Errors: InvalidArgument
// "bucket B step S (kernel, provenance[0]): ...".
absl::StatusOr<PreparedStep> PrepareStep(const Plan& plan, int b, int s, const PreparedBucket& io,
                                         const cpu::CpuContext& ctx, LinearCache& linears);

// Runs one prepared step. bases[slot] is the base pointer of each operand slot (see
// Operand); errors are the kernel's, without the step's location.
absl::Status RunStep(const PreparedStep& p, const cpu::CpuContext& ctx, std::byte* const* bases);

// "bucket B step S (kernel, first provenance)" for messages.
std::string StepWhere(int b, int s, const PlanStep& step);

}  // namespace kiln::runtime
