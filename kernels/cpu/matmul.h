// GEMM / Linear: Y[M,N] = act(X[M,K] · W' + bias), W' = W ([K,N]) or Wᵀ (W stored [N,K],
// trans_w), the activation fused. Two backends, chosen per M from the measured table in
// gemm_choice.h (so one Linear can run kiln for a batch-1 bucket and oneDNN for a
// batch-32 one, each packing its own copy of the weights on first use; the largest weights
// take oneDNN at every M, so they are packed once): kiln's packed-panel
// microkernel (panel_gemm.h) or oneDNN's matmul with the activation as an eltwise post-op. A
// PackedLinear is built once at load time. kiln: the weights are packed into panels of the ISA's
// tile width. oneDNN: they are reordered into the blocked layout oneDNN prefers
// ("any" format) and primitives are cached per (M, threads) because creating one costs far
// more than running a small one.
// bf16 weights (a bf16 plan's Linear): X is rounded to bf16 and oneDNN's bf16 matmul
// (avx512_core_bf16) accumulates in fp32; on a CPU without AVX-512 BF16 the weights are
// widened to fp32 once at Create and X is still rounded to bf16, on the fp32 backends (same
// products, ImplName says "bf16 widened").
// Limits: X and Y are dense row-major; M is the only dimension that varies per
// call. oneDNN: a new M
// creates (and caches) a primitive on first use — and, if oneDNN wants a different weight
// layout for it, one more reordered copy of the weights.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/cpu/gemm_choice.h"

namespace kiln::cpu {

enum class Activation { kNone, kGeluErf, kGeluTanh, kRelu, kTanh };

struct LinearDesc {
  int64_t k = 0;         // reduction dimension
  int64_t n = 0;         // output features
  bool trans_w = false;  // W is [N, K] (Gemm transB, tied embeddings) instead of [K, N]
  Activation activation = Activation::kNone;
  GemmBackend backend = GemmBackend::kAuto;  // kAuto: KILN_GEMM, else the measured table
  bool bf16_weights = false;                 // w holds bf16 values (uint16_t), not floats
};

class PackedLinear {
 public:
  // Copies `w` (and `bias`, [N], may be null) into oneDNN's preferred layout for a typical
  // batch of `typical_m` rows. The caller's buffers are not referenced afterwards, unless
  // `borrow_weights`: then `w` must outlive the PackedLinear and is read again only when a
  // new M needs a weight layout not packed yet (saves a plain copy of every weight; the
  // executor lends the plan's read-only weights).
  static absl::StatusOr<std::unique_ptr<PackedLinear>> Create(const LinearDesc& desc, const void* w,
                                                              const float* bias,
                                                              const CpuContext& ctx,
                                                              int64_t typical_m = 128,
                                                              bool borrow_weights = false);
  ~PackedLinear();

  // y[m, N] = act(x[m, K] · W' + bias). Safe to call from several threads at once.
  absl::Status Run(const CpuContext& ctx, const float* x, int64_t m, float* y) const;

  const LinearDesc& desc() const { return desc_; }
  // The backend for the typical M given to Create (never kAuto); ImplName says per M.
  GemmBackend backend() const;
  // What runs `m` rows, for traces and benches: "kiln:avx2:4x24" (backend, ISA, register
  // tile) or "onednn:" + oneDNN's implementation (e.g. "onednn:brg:avx512_core"); bf16
  // weights widened to fp32 (no AVX-512 BF16) append " (bf16 widened)".
  absl::StatusOr<std::string> ImplName(const CpuContext& ctx, int64_t m) const;

 private:
  struct State;
  explicit PackedLinear(const LinearDesc& desc);
  LinearDesc desc_;
  std::unique_ptr<State> state_;
};

// C[b] = alpha · A[b] · op(B[b]) for b < batch, with arbitrary row strides, through a
// cached oneDNN matmul (for attention-shaped products). A[b] is [M, K] with row stride lda
// and batch stride sa; B[b] is [K, N] (or [N, K] with trans_b) with ldb/sb; C[b] [M, N]
// with ldc/sc. Strides are in elements.
struct BatchedMatMulDesc {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_b = false;
  float alpha = 1.0f;
  int64_t lda = 0, sa = 0, ldb = 0, sb = 0, ldc = 0, sc = 0;
};
absl::Status BatchedMatMul(const CpuContext& ctx, const BatchedMatMulDesc& d, const float* a,
                           const float* b, float* c);

}  // namespace kiln::cpu
