// Rotary kernel (rotary.h).
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/rotary.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) RotaryKernel(RotaryArgs a) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const kernels::BroadcastLayout& l = a.rows;
  if (e >= l.n * a.d) return;
  const int64_t t = e / a.d, j = e % a.d;
  int64_t off[3] = {t, t, t};
  if (!l.contiguous) {
    off[0] = off[1] = off[2] = 0;
    int64_t rem = t;
    for (int k = l.rank - 1; k >= 0; --k) {
      const int64_t idx = rem % l.dims[k];
      rem /= l.dims[k];
      for (int i = 0; i < 3; ++i) off[i] += idx * l.strides[i][k];
    }
  }
  const T* x = static_cast<const T*>(a.x) + off[0] * a.d;
  T* y = static_cast<T*>(a.y) + t * a.d;
  if (j >= a.r) {
    y[j] = x[j];
    return;
  }
  const T* c = static_cast<const T*>(a.cos) + off[1] * a.r;
  const T* s = static_cast<const T*>(a.sin) + off[2] * a.r;
  const int64_t h = a.r / 2;
  float rot;
  if (a.interleaved)
    rot = j % 2 == 0 ? -ToFloat(x[j + 1]) : ToFloat(x[j - 1]);
  else
    rot = j < h ? -ToFloat(x[j + h]) : ToFloat(x[j - h]);
  y[j] = FromFloat<T>(ToFloat(x[j]) * ToFloat(c[j]) + rot * ToFloat(s[j]));
}

template <typename T>
cudaError_t LaunchT(const RotaryArgs& a, cudaStream_t stream) {
  const int64_t n = a.rows.n * a.d;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  RotaryKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Rotary(const RotaryArgs& a, cudaStream_t stream) {
  if (a.rows.n == 0 || a.d == 0) return cudaSuccess;
  if (a.r % 2 != 0 || a.r > a.d) return cudaErrorInvalidValue;
  return DispatchFloat(a.dtype, [&](auto t) { return LaunchT<decltype(t)>(a, stream); });
}

}  // namespace kiln::cuda
