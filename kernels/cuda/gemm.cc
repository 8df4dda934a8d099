// cuBLASLt GEMMs (gemm.h).
#include "kernels/cuda/gemm.h"

#include <cstdint>
#include <utility>

#include "kernels/cuda/cublaslt_api.h"

namespace kiln::cuda {
namespace {

cudaDataType_t DataType(ElemType t) {
  switch (t) {
    case ElemType::kF16:
      return CUDA_R_16F;
    case ElemType::kBF16:
      return CUDA_R_16BF;
    case ElemType::kI8:
      return CUDA_R_8I;
    default:
      return CUDA_R_32F;
  }
}

// The largest power of two <= cap dividing `bytes` (cap for 0).
uint32_t AlignmentOf(int64_t bytes, uint32_t cap) {
  uint32_t a = cap;
  while (a > 1 && bytes % a != 0) a /= 2;
  return a;
}

#define LT_TRY(expr)                            \
  do {                                          \
    const cublasStatus_t _s = (expr);           \
    if (_s != CUBLAS_STATUS_SUCCESS) return _s; \
  } while (0)

}  // namespace

const char* CublasStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_(unknown)";
  }
}

LtGemm::~LtGemm() {
  const LtApi* lt = Lt();  // loaded if any descriptor exists
  if (lt == nullptr) return;
  if (d_) lt->MatrixLayoutDestroy(d_);
  if (c_) lt->MatrixLayoutDestroy(c_);
  if (b_) lt->MatrixLayoutDestroy(b_);
  if (a_) lt->MatrixLayoutDestroy(a_);
  if (op_) lt->MatmulDescDestroy(op_);
}

cublasStatus_t LtGemm::Init(cublasLtHandle_t handle, const GemmDesc& d, size_t workspace_bytes) {
  desc_ = d;
  const LtApi* lt = Lt();
  if (lt == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (d.m == 0 || d.n == 0) {  // nothing to compute (Run returns at once); no valid layout
    ready_ = true;
    return CUBLAS_STATUS_SUCCESS;
  }
  const bool int8 = d.dtype == ElemType::kI8;
  if (int8 && (!d.trans_w || d.bias || d.epilogue != GemmEpilogue::kNone || d.residual ||
               d.batch > 1 || d.k % 4 != 0 || d.n % 4 != 0))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const cudaDataType_t dt = DataType(d.dtype), out = int8 ? CUDA_R_32I : dt;
  const cublasComputeType_t compute = int8 ? CUBLAS_COMPUTE_32I
                                      : d.dtype == ElemType::kF32 && d.allow_tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  LT_TRY(lt->MatmulDescCreate(&op_, compute, int8 ? CUDA_R_32I : CUDA_R_32F));
  const cublasOperation_t ta = d.trans_w ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  LT_TRY(lt->MatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT_TRY(lt->MatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (d.bias) {
    epi = d.epilogue == GemmEpilogue::kRelu       ? CUBLASLT_EPILOGUE_RELU_BIAS
          : d.epilogue == GemmEpilogue::kGeluTanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                  : CUBLASLT_EPILOGUE_BIAS;
    LT_TRY(lt->MatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d.bias,
                                      sizeof(d.bias)));
  } else if (d.epilogue == GemmEpilogue::kRelu) {
    epi = CUBLASLT_EPILOGUE_RELU;
  } else if (d.epilogue == GemmEpilogue::kGeluTanh) {
    epi = CUBLASLT_EPILOGUE_GELU;
  }
  LT_TRY(lt->MatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  // Column-major: A = weight (n x k after op), B = x (k x m), C = D = y (n x m).
  const uint64_t m = d.m, n = d.n, k = d.k;
  if (d.trans_w)
    LT_TRY(lt->MatrixLayoutCreate(&a_, dt, k, n, k));
  else
    LT_TRY(lt->MatrixLayoutCreate(&a_, dt, n, k, n));
  LT_TRY(lt->MatrixLayoutCreate(&b_, dt, k, m, k));
  LT_TRY(lt->MatrixLayoutCreate(&c_, out, n, m, n));
  LT_TRY(lt->MatrixLayoutCreate(&d_, out, n, m, n));
  if (d.batch > 1) {
    const int32_t count = static_cast<int32_t>(d.batch);
    const int64_t sa = d.stride_w, sb = d.stride_x, sc = d.stride_y;
    for (auto [layout, stride] :
         {std::pair{a_, sa}, std::pair{b_, sb}, std::pair{c_, sc}, std::pair{d_, sc}}) {
      LT_TRY(lt->MatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                          sizeof(count)));
      LT_TRY(lt->MatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                          &stride, sizeof(stride)));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  LT_TRY(lt->MatmulPreferenceCreate(&pref));
  const size_t elem = static_cast<size_t>(ElemSize(d.dtype));
  const uint32_t align_a = AlignmentOf(d.batch > 1 ? d.stride_w * elem : 0, d.align_w);
  const uint32_t align_b = AlignmentOf(d.batch > 1 ? d.stride_x * elem : 0, d.align_x);
  const uint32_t align_d = AlignmentOf(d.batch > 1 ? d.stride_y * elem : 0, d.align_y);
  const uint32_t align_c =
      AlignmentOf(d.batch > 1 ? d.stride_y * elem : 0, d.residual ? d.align_residual : d.align_y);
  cublasStatus_t s = lt->MatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  for (auto [attr, v] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}}) {
    if (s == CUBLAS_STATUS_SUCCESS) s = lt->MatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt->MatmulAlgoGetHeuristic(handle, op_, a_, b_, c_, d_, pref, 1, &result, &found);
  lt->MatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (found == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  algo_ = result.algo;
  ready_ = true;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t LtGemm::Run(cublasLtHandle_t handle, const void* x, const void* w,
                           const void* residual, void* y, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream) const {
  if (!ready_) return CUBLAS_STATUS_NOT_INITIALIZED;  // (ready: cuBLASLt is loaded)
  if (desc_.m == 0 || desc_.n == 0) return CUBLAS_STATUS_SUCCESS;
  const LtApi* lt = Lt();
  const float alpha = 1.f, beta = desc_.residual ? 1.f : 0.f;
  const int32_t alpha_i = 1, beta_i = 0;  // int8 mode: the scale type is int32
  const bool int8 = desc_.dtype == ElemType::kI8;
  const void* c = desc_.residual ? residual : y;
  return lt->Matmul(handle, op_, int8 ? static_cast<const void*>(&alpha_i) : &alpha, w, a_, x, b_,
                    int8 ? static_cast<const void*>(&beta_i) : &beta, c, c_, y, d_, &algo_,
                    workspace, workspace_bytes, stream);
}

}  // namespace kiln::cuda
