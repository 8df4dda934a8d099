// LayerNorm / SkipLayerNorm / RMSNorm / SkipRMSNorm kernels (norm.h).
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_row.cuh"

namespace kiln::cuda {
namespace {

struct NormParams {
  bool rms;  // IsRmsNorm(kind), computed on the host
  const void* x;
  const void* skip;
  int64_t skip_rows;
  const void* gamma;
  const void* beta;
  const void* bias;
  int64_t rows, h;
  float eps;
  void* y;
  void* sum;
};

template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(1024) NormKernel(NormParams p) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t h = p.h;
  const T* x = static_cast<const T*>(p.x) + row * h;
  const T* skip = p.skip ? static_cast<const T*>(p.skip) + (row % p.skip_rows) * h : nullptr;
  const T* bias = static_cast<const T*>(p.bias);
  float v[ITEMS * VEC];
  float local = 0.f;
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const int64_t i = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * VEC;
    float* e = v + it * VEC;
    if (i < h) {
      LoadVec<T, VEC>(x, i, e);
      if (skip) {
        float s[VEC];
        LoadVec<T, VEC>(skip, i, s);
#pragma unroll
        for (int j = 0; j < VEC; ++j) e[j] += s[j];
      }
      if (bias) {
        float b[VEC];
        LoadVec<T, VEC>(bias, i, b);
#pragma unroll
        for (int j = 0; j < VEC; ++j) e[j] += b[j];
      }
      if (p.sum) StoreVec<T, VEC>(static_cast<T*>(p.sum) + row * h, i, e);
#pragma unroll
      for (int j = 0; j < VEC; ++j) local += p.rms ? e[j] * e[j] : e[j];
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) e[j] = 0.f;
    }
  }
  NormalizeRow<T, VEC, ITEMS>(v, local, h, p.eps, p.rms, static_cast<const T*>(p.gamma),
                              static_cast<const T*>(p.beta), static_cast<T*>(p.y) + row * h,
                              scratch);
}

template <typename T>
cudaError_t LaunchT(const NormArgs& a, const NormLaunch& l, cudaStream_t stream) {
  NormParams p{IsRmsNorm(a.kind),
               a.x,
               a.skip,
               a.skip_rows > 0 ? a.skip_rows : 1,
               a.gamma,
               a.beta,
               a.bias,
               a.rows,
               a.h,
               a.eps,
               a.y,
               a.sum};
  if (!IsSkipNorm(a.kind)) p.skip = p.bias = p.sum = nullptr;
  if (IsRmsNorm(a.kind)) p.beta = nullptr;
  constexpr int kVec = 16 / sizeof(T);
  const dim3 grid(static_cast<unsigned>(a.rows)), block(l.threads);
  if (l.vec == 1)
    NormKernel<T, 1, kNormFloatsPerThread><<<grid, block, 0, stream>>>(p);
  else
    NormKernel<T, kVec, kNormFloatsPerThread / kVec><<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Norm(const NormArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.rows > 0x7fffffff) return cudaErrorInvalidValue;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool aligned16 =
      aligned(a.x) && aligned(a.y) && aligned(a.gamma) && (!a.beta || aligned(a.beta)) &&
      (!IsSkipNorm(a.kind) ||
       (aligned(a.skip) && (!a.bias || aligned(a.bias)) && (!a.sum || aligned(a.sum))));
  NormLaunch l;
  if (!ChooseNormLaunch(a.dtype, a.h, aligned16, &l)) return cudaErrorInvalidValue;
  switch (a.dtype) {
    case ElemType::kF32:
      return LaunchT<float>(a, l, stream);
    case ElemType::kF16:
      return LaunchT<__half>(a, l, stream);
    case ElemType::kBF16:
      return LaunchT<__nv_bfloat16>(a, l, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
