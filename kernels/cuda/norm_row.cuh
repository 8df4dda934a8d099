// Device code shared by the row-normalizing kernels (norm.cu, embed.cu): vector loads and
// stores of a row held in registers, and the two-reduction LayerNorm / RMSNorm of it.
#pragma once

#include "kernels/cuda/device_util.cuh"

namespace kiln::cuda {

template <typename T, int VEC>
__device__ __forceinline__ void LoadVec(const T* p, int64_t i, float* out) {
  if constexpr (VEC == 1) {
    out[0] = ToFloat(p[i]);
  } else {
    const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(p + i);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = ToFloat(v.v[j]);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void StoreVec(T* p, int64_t i, const float* in) {
  if constexpr (VEC == 1) {
    p[i] = FromFloat<T>(in[0]);
  } else {
    Vec<T, VEC> v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = FromFloat<T>(in[j]);
    *reinterpret_cast<Vec<T, VEC>*>(p + i) = v;
  }
}

// Thread t holds elements (it·blockDim.x + t)·VEC + j of the row in v[it·VEC + j] (zeros
// past h) and `local`, the sum of its elements (of their squares when `rms`). Normalizes
// with fp32 statistics (mean, then the centred variance from the registers) and writes
// y = norm(v) · gamma (+ beta).
template <typename T, int VEC, int ITEMS>
__device__ __forceinline__ void NormalizeRow(const float* v, float local, int64_t h, float eps,
                                             bool rms, const T* gamma, const T* beta, T* y,
                                             float* scratch) {
  const float inv_h = 1.0f / static_cast<float>(h);
  float mean = 0.f, rstd;
  if (rms) {
    rstd = rsqrtf(BlockSum(local, scratch) * inv_h + eps);
  } else {
    mean = BlockSum(local, scratch) * inv_h;
    float sq = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
      const int64_t i = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * VEC;
      if (i < h) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float d = v[it * VEC + j] - mean;
          sq += d * d;
        }
      }
    }
    rstd = rsqrtf(BlockSum(sq, scratch) * inv_h + eps);
  }
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const int64_t i = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * VEC;
    if (i >= h) continue;
    float g[VEC], b[VEC], out[VEC];
    LoadVec<T, VEC>(gamma, i, g);
    if (beta) {
      LoadVec<T, VEC>(beta, i, b);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) b[j] = 0.f;
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = (v[it * VEC + j] - mean) * rstd * g[j] + b[j];
    StoreVec<T, VEC>(y, i, out);
  }
}

}  // namespace kiln::cuda
