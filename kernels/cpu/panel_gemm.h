// kiln's own packed-panel fp32 GEMM: Y[M,N] = act(X[M,K] · W' + bias) (+ R), the Linear
// backend kiln picks where it measured faster than oneDNN (gemm_choice.h). The weights are
// packed once into panels of the ISA's tile width ([N/NR][K][NR], zero past N) so that the
// register tile (gemm_impl.inc) streams them contiguously; X is read in place.
// Parallel over (row block, panel) items, block-major, split contiguously: a row block of X
// sized to stay in L2 meets every panel before the next block is read, and each thread
// works on its own blocks (or, when M is one block, its own panels).
// Limits: fp32, dense row-major X/Y/R; no K blocking: a K×NR panel (≤ 576 KiB for K=3072 on
// AVX-512) streams through L2 once per row block, so large K gets small row blocks.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {
namespace internal {
struct IsaKernels;
}

class PanelGemm {
 public:
  // Packs W ([K, N], or [N, K] when trans_w) and bias ([N], may be null) for the tile of
  // `isa` (a path this CPU can run; kAuto = the best one).
  static absl::StatusOr<std::unique_ptr<PanelGemm>> Pack(Isa isa, int64_t k, int64_t n,
                                                         bool trans_w, const float* w,
                                                         const float* bias);
  ~PanelGemm();

  // y[m, N] = act(x[m, K] · W' + bias) + residual (residual [m, N], may be null, may be y).
  // activation: 0 none, 1 gelu (erf), 2 gelu (tanh), 3 relu, 4 tanh. Thread-safe.
  absl::Status Run(const CpuContext& ctx, const float* x, int64_t m, float* y, int activation,
                   const float* residual = nullptr) const;

  Isa isa() const { return isa_; }
  int tile_m() const;
  int tile_n() const;
  int64_t packed_bytes() const;

 private:
  PanelGemm() = default;
  struct Free {
    void operator()(float* p) const;
  };
  Isa isa_ = Isa::kScalar;
  const internal::IsaKernels* kernels_ = nullptr;
  int64_t k_ = 0, n_ = 0, panels_ = 0;
  std::unique_ptr<float, Free> packed_;  // panels_ · k_ · NR
  std::unique_ptr<float, Free> bias_;    // panels_ · NR, or null
};

}  // namespace kiln::cpu
