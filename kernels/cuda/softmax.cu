// Softmax kernel (softmax.h).
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/softmax.h"

namespace kiln::cuda {
namespace {

// Combines running (max, sum of exp(x - max)) pairs; an all -inf side contributes 0.
__device__ __forceinline__ void Combine(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) {
    m = mm;
    s = 0.f;
    return;
  }
  s = s * expf(m - mm) + s2 * expf(m2 - mm);
  m = mm;
}

template <typename T>
__global__ void __launch_bounds__(1024) SoftmaxKernel(const T* x, T* y, int64_t n) {
  __shared__ float sm[32], ss[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * n;
  T* yr = y + row * n;
  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) Combine(m, s, ToFloat(xr[i]), 1.f);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    Combine(m, s, m2, s2);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  m = lane < warps ? sm[lane] : -INFINITY;
  s = lane < warps ? ss[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    Combine(m, s, m2, s2);
  }
  const float inv = 1.f / s;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    yr[i] = FromFloat<T>(expf(ToFloat(xr[i]) - m) * inv);
}

template <typename T>
cudaError_t LaunchT(const SoftmaxArgs& a, cudaStream_t stream) {
  SoftmaxKernel<T><<<static_cast<unsigned>(a.rows), SoftmaxThreads(a.n), 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<T*>(a.y), a.n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Softmax(const SoftmaxArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return cudaSuccess;
  if (a.rows > 0x7fffffff) return cudaErrorInvalidValue;
  switch (a.dtype) {
    case ElemType::kF32:
      return LaunchT<float>(a, stream);
    case ElemType::kF16:
      return LaunchT<__half>(a, stream);
    case ElemType::kBF16:
      return LaunchT<__nv_bfloat16>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
