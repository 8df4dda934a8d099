// kiln's int8 GEMM, the kernel of an int8 plan's Linear (kiln.QuantLinear, docs/fused-ops.md):
// Y[M,N] = act(q(X ⊙ x_mul)[M,K] · Wᵀ · sx[m] · w_scale[n] + bias[n]), W s8 [N, K] quantized
// per output channel at compile time, each row of X (times x_mul, when the compile smoothed
// the Linear) quantized at run time to s8 with its own scale sx[m] = max |row| / 127 (so
// rows never affect each other: padding and packed tokens stay exact). Two passes per call:
// quantize X's rows into a per-thread scratch, then the register tiles over (row block, weight
// panel) items as the fp32 PanelGemm does, the scales, bias and activation applied on the
// accumulators before anything is stored. Paths (qgemm_internal.h): AVX-512 VNNI (vpdpbusd), AVX2
// (vpmaddubsw on |q| and sign(w, q): exact, unlike a u8 × s8 vpmaddubsw, which saturates), scalar.
// Every path computes the same integer sums, so outputs agree across CPUs up to the float
// epilogue's rounding. Limits: X and Y dense row-major; a row holding inf or NaN gives a NaN row;
// K at most kQuantLinearMaxK (kiln/ir/ops.h); weights in [-127, 127] (Pack refuses -128).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {
namespace internal {
struct QuantKernels;
}

class QuantGemm {
 public:
  // Packs W (s8 [N, K]), its scales [N], bias ([N], may be null) and x_mul ([K], may be
  // null: each row of X is multiplied by it before it is quantized — the smoothing that
  // calibration moved into W) for the best path of `isa` (kAuto: this CPU's). x_absmax > 0:
  // static activations — every row quantized with the scale x_absmax / 127 (a calibrated
  // range; values beyond it clamp) instead of its own max |row| / 127.
  static absl::StatusOr<std::unique_ptr<QuantGemm>> Pack(Isa isa, int64_t k, int64_t n,
                                                         const int8_t* w, const float* w_scale,
                                                         const float* bias,
                                                         const float* x_mul = nullptr,
                                                         float x_absmax = 0.0f);
  ~QuantGemm();

  // y[m, N] = act(q(x)[m, K] · Wᵀ · sx · w_scale + bias); activation as PanelGemm (0 none,
  // 1 gelu, 2 gelu_tanh, 3 relu, 4 tanh). Thread-safe.
  absl::Status Run(const CpuContext& ctx, const float* x, int64_t m, float* y,
                   int activation) const;

  // "kiln:avx512_vnni:8x48" (path and register tile), for traces and benches.
  std::string ImplName() const;
  int64_t packed_bytes() const;

 private:
  QuantGemm() = default;
  struct Free {
    void operator()(void* p) const;
  };
  Isa isa_ = Isa::kScalar;
  const internal::QuantKernels* kernels_ = nullptr;
  int64_t k_ = 0, k4_ = 0, n_ = 0, panels_ = 0;
  float x_absmax_ = 0.0f;                 // > 0: static activations
  std::unique_ptr<int8_t, Free> packed_;  // panels_ · k4_ · nr
  std::unique_ptr<int32_t, Free> comp_;   // panels_ · nr (VNNI), else null
  std::unique_ptr<float, Free> w_scale_;  // panels_ · nr, zero past N
  std::unique_ptr<float, Free> bias_;     // panels_ · nr, or null
  std::unique_ptr<float, Free> x_mul_;    // k_, or null
};

}  // namespace kiln::cpu
