// The int8 Linear's quantizer and epilogue (quant_linear.h).
#include <cfloat>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/quant_linear.h"

namespace kiln::cuda {
namespace {

constexpr int kRowThreads = 256;  // QuantizeRows: a block per row
constexpr int kColThreads = 256;  // QuantEpilogue: a block per 256 columns of some rows

template <typename T>
__global__ void __launch_bounds__(kRowThreads) QuantizeRowsKernel(QuantRowsArgs a) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* row = static_cast<const T*>(a.x) + r * a.k;
  auto at = [&](int64_t i) {
    const float v = ToFloat(row[i]);
    return a.x_mul ? v * a.x_mul[i] : v;
  };
  float amax = 0.f, bad = 0.f;
  for (int64_t i = threadIdx.x; i < a.k; i += kRowThreads) {
    const float v = at(i);
    if (!isfinite(v)) bad = 1.f;
    amax = fmaxf(amax, fabsf(v));
  }
  amax = BlockMax(amax, scratch);
  const bool finite = BlockMax(bad, scratch) == 0.f;
  if (a.x_absmax > 0.f) amax = a.x_absmax;
  // kernels/cpu/qgemm_internal.h's QuantInverse: 0 when 127 / a overflows (or a is 0).
  const float inv = 127.f / amax;
  const float mul = amax > 0.f && inv <= FLT_MAX ? inv : 0.f;
  int8_t* q = a.q + r * a.k;
  for (int64_t i = threadIdx.x; i < a.k; i += kRowThreads)
    q[i] = finite ? static_cast<int8_t>(fminf(fmaxf(rintf(at(i) * mul), -127.f), 127.f)) : 0;
  if (threadIdx.x == 0) a.sx[r] = finite ? amax / 127.f : __int_as_float(0x7fc00000);
}

template <typename T>
__global__ void __launch_bounds__(kColThreads) QuantEpilogueKernel(QuantEpilogueArgs a) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColThreads + threadIdx.x;
  if (j >= a.n) return;
  const float ws = a.w_scale[j];
  const float b = a.bias ? a.bias[j] : 0.f;
  T* y = static_cast<T*>(a.y);
  for (int64_t r = blockIdx.y; r < a.m; r += gridDim.y) {
    const int64_t i = r * a.n + j;
    float v = static_cast<float>(a.acc[i]) * (a.sx[r] * ws);
    if (a.bias) v += b;
    y[i] = FromFloat<T>(Activate(v, a.act));
  }
}

}  // namespace

cudaError_t QuantizeRows(const QuantRowsArgs& a, cudaStream_t stream) {
  if (a.m == 0) return cudaSuccess;
  if (a.m < 0 || a.m > 0x7fffffff || a.k <= 0 || !a.x || !a.q || !a.sx || !(a.x_absmax >= 0.f))
    return cudaErrorInvalidValue;
  return DispatchFloat(a.dtype, [&](auto t) {
    QuantizeRowsKernel<decltype(t)><<<static_cast<unsigned>(a.m), kRowThreads, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

cudaError_t QuantEpilogue(const QuantEpilogueArgs& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (a.m < 0 || a.n < 0 || (a.n + kColThreads - 1) / kColThreads > 0x7fffffff || !a.acc || !a.sx ||
      !a.w_scale || !a.y)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((a.n + kColThreads - 1) / kColThreads),
                  static_cast<unsigned>(a.m < 65535 ? a.m : 65535));
  return DispatchFloat(a.dtype, [&](auto t) {
    QuantEpilogueKernel<decltype(t)><<<grid, kColThreads, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace kiln::cuda
