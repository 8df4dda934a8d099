// Activation memory planner: assigns each intermediate buffer an offset in one arena so
// that buffers alive at the same time never overlap, reusing memory between buffers whose
// live ranges are disjoint and sharing storage in place where the caller allows it.
// It knows nothing of the IR (buffers are ids, sizes and step intervals) so the lowering
// can call it per shape bucket and tests can drive it directly. Greedy, largest first,
// lowest fitting offset: not optimal (the problem is NP-hard), but never worse than no
// reuse and deterministic. Algorithm and guarantees: docs/memory-planning.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::compiler {

// One buffer to place. Steps are positions in the execution order; a buffer is live from
// the step that writes it through the step that last reads it, both inclusive.
struct BufferRequest {
  int64_t id = 0;          // unique among the request list
  int64_t bytes = 0;       // >= 0; rounded up to `alignment` when placed
  int64_t first_step = 0;  // the step that writes it
  int64_t last_step = 0;   // the step that last reads it (>= first_step)
  int64_t alignment = 64;  // a power of two; the offset is a multiple of it
  // The id of a buffer whose storage this one may take over: the op writing this buffer
  // reads `inplace_of` for the last time (elementwise ops, LayerNorm, residual adds).
  // It is an error unless that buffer exists and its last_step == this first_step. The
  // hint is silently not taken when this buffer's aligned size or alignment exceeds the
  // other's, when that buffer is written and last read at the same step, or when another
  // buffer with a smaller id already claims it.
  std::optional<int64_t> inplace_of;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // offsets[i] is the arena offset of requests[i]
  int64_t arena_bytes = 0;       // max over buffers of offset + aligned size; never
                                 // more than no_reuse_bytes
  int64_t no_reuse_bytes = 0;    // sum of all aligned sizes
  // Max over steps of the aligned bytes live at once, where an in-place source is no
  // longer counted at the step its successor takes it over. No plan honouring the same
  // in-place choices can use less, so arena_bytes >= peak_live_bytes.
  int64_t peak_live_bytes = 0;
  std::vector<int64_t> inplace;  // ids placed in their inplace_of's storage, ascending
};

// Plans the arena. InvalidArgument on malformed requests (negative size, last_step <
// first_step, duplicate ids, bad alignment, illegal inplace_of) or when an offset or a
// total would overflow int64. The result depends only on the set of requests, not on
// their order.
absl::StatusOr<MemoryPlan> PlanMemory(std::span<const BufferRequest> requests);

}  // namespace kiln::compiler
