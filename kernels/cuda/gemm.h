// GEMMs through cuBLASLt: Linear (y[m,n] = act(x[m,k] · w' + bias) (+ residual through the
// C operand, β = 1), w' = w [k,n] or wᵀ with w [n,k]) and batched MatMul of activations
// (strided batches, stride 0 for a broadcast operand). fp32 (CUBLAS_COMPUTE_32F; TF32 only
// when allowed), fp16 and bf16 with fp32 accumulation and fp32 scale.
// Row-major on a column-major library: y row-major [m,n] is D column-major [n,m], so the
// call is D = W'ᵀ·X with A = the weight (n×k: w as stored, or transposed) and B = x (k×m).
// Epilogues: bias, bias+ReLU, bias+GELU — cuBLASLt's GELU epilogue is the tanh
// approximation (PyTorch's addmm_activation falls back to gelu(approximate="tanh") where it
// cannot use it), so only `gelu_tanh` Linear steps use it; an erf GELU runs as a separate
// kernel after a bias epilogue (the executor does that). Algorithm: the heuristic's first
// choice for the workspace given, picked once at Init (needs the device) and reused.
// Alignment: the caller states each pointer's byte alignment (align_*, up to 256); the
// algorithm is chosen for the smaller of that and what the batch strides allow, so Run must
// be given pointers at least that aligned. The bias pointer is fixed at Init (weights do
// not move).
// int8 mode (dtype kI8, quant_linear.h): x and w s8, y the s32 sums y = x · wᵀ (CUBLAS_COMPUTE_32I,
// int32 scale), for the IMMA tensor-core kernels, whose plain-layout form takes "TN" only
// (w [n,k]: trans_w) with k and n multiples of 4; no bias, epilogue, residual or batches.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublasLt.h>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

// cuBLASLt's recommended workspace on Hopper; each run slot owns one.
inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

enum class GemmEpilogue : uint8_t { kNone, kRelu, kGeluTanh };

struct GemmDesc {
  ElemType dtype = ElemType::kF32;  // x, w, bias, residual, y; kI8: x, w (y s32)
  int64_t m = 0, n = 0, k = 0;
  bool trans_w = false;
  int64_t batch = 1;                                 // > 1: strided batches (MatMul)
  int64_t stride_x = 0, stride_w = 0, stride_y = 0;  // elements between batches
  const void* bias = nullptr;                        // [n], fixed for the GEMM's life, or null
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  bool residual = false;  // y = ... + residual[m,n] (epilogue kNone only)
  bool allow_tf32 = false;
  // Byte alignment (a power of two, <= 256) of the x, w, residual and y pointers Run gets.
  uint32_t align_x = 256, align_w = 256, align_residual = 256, align_y = 256;
};

class LtGemm {
 public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Builds the descriptors and picks the algorithm (needs the device).
  cublasStatus_t Init(cublasLtHandle_t handle, const GemmDesc& desc, size_t workspace_bytes);
  // Enqueues y = ... on `stream`. Safe from several threads with different workspaces.
  cublasStatus_t Run(cublasLtHandle_t handle, const void* x, const void* w, const void* residual,
                     void* y, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

 private:
  GemmDesc desc_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool ready_ = false;
};

// "CUBLAS_STATUS_NOT_SUPPORTED" etc.
const char* CublasStatusName(cublasStatus_t s);

}  // namespace kiln::cuda
