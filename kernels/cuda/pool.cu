// Pool kernel (pool.h).
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/pool.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) PoolKernel(PoolArgs a) {
  __shared__ float scratch[32];
  extern __shared__ float row[];  // [H] when normalizing: the fp32 row, rounded once
  const int64_t b = blockIdx.x, H = a.hidden_size;
  int64_t S = a.seq, first = b * a.seq;  // this row's tokens [first, first + S) of hidden
  if (a.cu_seqlens != nullptr) {
    first = a.cu_seqlens[b];
    S = a.cu_seqlens[b + 1] - first;
  }
  const T* hid = static_cast<const T*>(a.hidden) + first * H;
  T* y = static_cast<T*>(a.y) + b * H;
  float denom = 1.f;
  int64_t last = -1;  // last: the row taken (-1: none, zeros)
  if (a.last) {
    float at = -1.f;  // exact: S < 2^24 (the contract's sizes)
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x)
      if (!a.mask || LoadAsDouble(a.mask, a.mask_type, b * S + s) != 0.0)
        at = static_cast<float>(s);
    last = static_cast<int64_t>(BlockMax(at, scratch));
  } else if (!a.cls) {
    float m = 0.f;
    if (a.mask) {
      for (int64_t s = threadIdx.x; s < S; s += blockDim.x)
        m += static_cast<float>(LoadAsDouble(a.mask, a.mask_type, b * S + s));
      m = BlockSum(m, scratch);
    } else {
      m = static_cast<float>(S);
    }
    denom = fmaxf(m, 1e-9f);
  }
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
    float acc;
    if (a.cls) {
      acc = S > 0 ? ToFloat(hid[c]) : 0.f;  // packed: an empty sequence pools to zeros
    } else if (a.last) {
      acc = last >= 0 ? ToFloat(hid[last * H + c]) : 0.f;
    } else {
      acc = 0.f;
      for (int64_t s = 0; s < S; ++s) {
        const float w =
            a.mask ? static_cast<float>(LoadAsDouble(a.mask, a.mask_type, b * S + s)) : 1.f;
        acc += ToFloat(hid[s * H + c]) * w;
      }
      acc /= denom;
    }
    sq += acc * acc;
    if (a.normalize)
      row[c] = acc;
    else
      y[c] = FromFloat<T>(acc);
  }
  if (!a.normalize) return;
  const float inv = 1.f / fmaxf(sqrtf(BlockSum(sq, scratch)), 1e-12f);
  // Each thread rescales the columns it computed (no other thread touches them).
  for (int64_t c = threadIdx.x; c < H; c += blockDim.x) y[c] = FromFloat<T>(row[c] * inv);
}

template <typename T>
cudaError_t LaunchT(const PoolArgs& a, cudaStream_t stream) {
  const size_t smem = a.normalize ? static_cast<size_t>(a.hidden_size) * sizeof(float) : 0;
  PoolKernel<T><<<static_cast<unsigned>(a.batch), kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Pool(const PoolArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.hidden_size == 0) return cudaSuccess;
  if (a.batch > 0x7fffffff || (a.cls && a.seq == 0 && !a.cu_seqlens) ||
      (a.last && a.seq >= (1 << 24)) || (a.cu_seqlens && (a.mask || a.last)))
    return cudaErrorInvalidValue;
  if (a.normalize && a.hidden_size > kPoolMaxNormalizedHidden) return cudaErrorInvalidValue;
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
