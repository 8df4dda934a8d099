// Which fp32 GEMM backend runs a Linear: oneDNN's matmul or kiln's own packed-panel
// microkernel (panel_gemm.h). Chosen per (instruction set, shape class) from a table of
// measurements (docs/benchmarks.md "GEMM backends", bench/gemm_backends.cc), once per
// Linear at Executor::Create; the plan file stays backend-neutral.
// KILN_GEMM=onednn|kiln overrides the table process-wide (for benchmarks and bisecting).
// Limits: the shape class is the row count M and whether the weight is large (K·N); K and
// N only gate the rules' ranges.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

enum class GemmBackend { kAuto, kOneDnn, kKiln };

std::string_view GemmBackendName(GemmBackend b);

// One row of the choice table: for `isa` and m in [min_m, max_m], use `backend`.
struct GemmRule {
  Isa isa;
  int64_t min_m, max_m;
  GemmBackend backend;
  std::string_view why;  // the measurement behind it, one line
  // The rule applies only to weights of at least this many elements (K·N): large weights
  // stream from memory, and their best backend differs from the small ones'.
  int64_t min_weight = 0;
};

// The table measured on kiln's CPU machines (gemm_choice.cc).
std::span<const GemmRule> MeasuredGemmRules();

// The first rule of `rules` matching (isa, m, a weight of `weight` elements); oneDNN when
// none does (it runs anywhere).
GemmBackend ChooseGemmBackend(std::span<const GemmRule> rules, Isa isa, int64_t m,
                              int64_t weight = 0);

// KILN_GEMM as a backend (kAuto when unset or "auto"); InvalidArgument for other values.
absl::StatusOr<GemmBackend> GemmBackendFromEnv();

// The backend a Linear uses: `requested` unless kAuto, else KILN_GEMM, else the measured
// table for (isa, m, weight elements) — isa already resolved (CpuContext::ResolvedIsa).
GemmBackend ResolveGemmBackend(GemmBackend requested, Isa isa, int64_t m, int64_t weight = 0);

}  // namespace kiln::cpu
