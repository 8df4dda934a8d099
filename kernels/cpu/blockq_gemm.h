// kiln's weight-only GEMM over 4- or 8-bit codes, the kernel of kiln.BlockQuantLinear
// (onnxruntime's MatMulNBits with 4 or 8 bits; docs/fused-ops.md): Y[M, N] = X[M, K] · Wᵀ (+
// bias) where W [N, K] is held as codes with a scale and a zero point per block of `block`
// consecutive k of each output channel, w = (code − zero) · scale. The weights stay 4- or
// 8-bit in memory — packed once into panels of 2·W channels (4 bits: two codes per byte) —
// and are dequantized in registers (blockq_impl.inc), so a decode step (M = 1) reads half a
// byte (one byte) per weight (and an f32 scale per block) where the f32 plan of the same
// file reads four: with few rows the tile multiplies the codes themselves and applies zero
// point and scale once per block (scale · (Σ x·code − zero · Σ x)); with many rows
// (prefill) each panel is dequantized once per row block into an f32 scratch panel, each
// weight (code − zero) · scale rounded once (DequantizeLinear's value), that a plain f32
// tile reads. X and Y stay f32 (no activation quantization): results match the dequantized
// f32 GEMM up to rounding. Parallel over (row block, panel) items as PanelGemm.
// Limits: X and Y dense row-major; codes in [0, 2^bits − 1]; block a power of two >= 16.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {
namespace internal {
struct IsaKernels;
}

// How Pack's codes lie in memory, and their width: 4-bit codes one per byte ([N, K], the
// IR's u4), 4-bit codes two per byte ([N, ceil(K / 2)], code k in the low nibble for even k,
// as ONNX packs INT4 and as plans store them since 2026-12-06), or 8-bit codes ([N, K], u8:
// MatMulNBits with bits = 8). Zero points are one per byte in every layout, 4- or 8-bit as
// the codes.
enum class CodeLayout { kOnePerByte, kTwoPerByte, kEightBit };

class BlockQuantGemm {
 public:
  // Packs codes ([N, K] in `layout`), scales ([N, ceil(K / block)]), zero points ([N,
  // ceil(K / block)], one per byte, or floats: `float_zero_points`, fractional ones as HQQ
  // writes them; both null: 2^(bits−1), 8 or 128) and bias ([N], may be null) for the tile of
  // `isa` (a path this CPU can run; kAuto = the best one).
  static absl::StatusOr<std::unique_ptr<BlockQuantGemm>> Pack(
      Isa isa, int64_t k, int64_t n, int64_t block, const uint8_t* codes, const float* scales,
      const uint8_t* zero_points, const float* bias, CodeLayout layout = CodeLayout::kOnePerByte,
      const float* float_zero_points = nullptr);
  ~BlockQuantGemm();

  // y[m, N] = act(x[m, K] · Wᵀ + bias); activation as PanelGemm (0 none, 1 gelu, 2
  // gelu_tanh, 3 relu, 4 tanh), applied to each tile while it is in L1. Thread-safe.
  absl::Status Run(const CpuContext& ctx, const float* x, int64_t m, float* y,
                   int activation = 0) const;

  // "kiln:avx512:8x32" (path and register tile; ":8bit" appended for 8-bit codes), for
  // traces and benches.
  std::string ImplName() const;
  int64_t packed_bytes() const;

 private:
  BlockQuantGemm() = default;
  struct Free {
    void operator()(void* p) const;
  };
  Isa isa_ = Isa::kScalar;
  const internal::IsaKernels* kernels_ = nullptr;
  int64_t k_ = 0, n_ = 0, block_ = 0, blocks_ = 0, panels_ = 0;
  int bits_ = 4;
  int64_t row_bytes_ = 0;                 // a panel row's codes: W (4 bits) or 2W (8 bits)
  std::unique_ptr<uint8_t, Free> codes_;  // panels_ · k_ · row_bytes_
  std::unique_ptr<float, Free> scale_;    // panels_ · blocks_ · 2W
  std::unique_ptr<uint8_t, Free> zero_;   // panels_ · blocks_ · row_bytes_, as the codes, or null
  std::unique_ptr<float, Free> fzero_;    // panels_ · blocks_ · 2W float zero points, or null
  std::unique_ptr<float, Free> bias_;     // panels_ · 2W, or null
};

}  // namespace kiln::cpu
