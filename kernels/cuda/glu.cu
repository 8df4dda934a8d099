// Gated activation kernel (glu.h).
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/glu.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Act(float a, GluAct act) {
  switch (act) {
    case GluAct::kSilu:
      // a · sigmoid(a), sigmoid without overflow on either side.
      return a >= 0.f ? a / (1.f + __expf(-a)) : a * __expf(a) / (1.f + __expf(a));
    case GluAct::kGelu:
      return 0.5f * a * (1.f + erff(a * 0.70710678118654752440f));
    case GluAct::kGeluTanh:
      break;
  }
  return 0.5f * a * (1.f + tanhf(0.79788456080286535588f * (a + 0.044715f * a * a * a)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) GluKernel(GluArgs a) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= a.rows * a.f) return;
  const int64_t r = e / a.f, j = e % a.f;
  const T* x = static_cast<const T*>(a.x) + r * 2 * a.f;
  static_cast<T*>(a.y)[e] = FromFloat<T>(Act(ToFloat(x[j]), a.act) * ToFloat(x[a.f + j]));
}

template <typename T>
cudaError_t LaunchT(const GluArgs& a, cudaStream_t stream) {
  const int64_t blocks = (a.rows * a.f + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  GluKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Glu(const GluArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.f < 0) return cudaErrorInvalidValue;
  if (a.rows == 0 || a.f == 0) return cudaSuccess;
  return DispatchFloat(a.dtype, [&](auto t) { return LaunchT<decltype(t)>(a, stream); });
}

}  // namespace kiln::cuda
