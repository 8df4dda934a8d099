// int4/int8 weight-only Linear (block_quant.h).
#include "kernels/cuda/block_quant.h"
#include "kernels/cuda/device_util.cuh"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 4;  // per block: 4 output columns
constexpr int kRows = 8;   // rows a warp accumulates at once

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) BlockQuantKernel(BlockQuantArgs a) {
  const T* xs = static_cast<const T*>(a.x);
  const T* bias = static_cast<const T*>(a.bias);
  T* ys = static_cast<T*>(a.y);
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (n >= a.n) return;  // the whole warp
  const int64_t blocks = (a.k + a.block_size - 1) / a.block_size;
  const bool wide = a.bits == 8;  // 8-bit codes: a byte is the code
  const int per_byte = a.one_code_per_byte || wide ? 1 : 2;
  const int64_t row_bytes = per_byte == 1 ? a.k : (a.k + 1) / 2;
  const uint8_t* codes = a.codes + n * row_bytes;
  const float* scales = a.scales + n * blocks;
  const uint8_t* zps = a.zero_points ? a.zero_points + n * blocks : nullptr;
  const float* fzps = a.float_zero_points ? a.float_zero_points + n * blocks : nullptr;
  const int mask = wide ? 255 : 15, default_zero = wide ? 128 : 8;
  for (int64_t m0 = 0; m0 < a.m; m0 += kRows) {
    const int rows = a.m - m0 < kRows ? static_cast<int>(a.m - m0) : kRows;
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
    for (int64_t p = lane; p < row_bytes; p += 32) {
      const uint8_t byte = codes[p];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h >= per_byte) break;
        const int64_t k = p * per_byte + h;
        if (k >= a.k) break;
        const int code = per_byte == 1 ? (byte & mask) : (h == 0 ? byte & 15 : byte >> 4);
        const int64_t kb = k / a.block_size;
        const float zp = fzps  ? fzps[kb]
                         : zps ? static_cast<float>(zps[kb] & mask)
                               : static_cast<float>(default_zero);
        const float w = (static_cast<float>(code) - zp) * scales[kb];
        const T* x = xs + m0 * a.k + k;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (r < rows) acc[r] += ToFloat(x[r * a.k]) * w;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = WarpSum(acc[r]);
    if (lane < rows) {
      float v = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (r == lane) v = acc[r];
      if (bias) v += ToFloat(bias[n]);
      ys[(m0 + lane) * a.n + n] = FromFloat<T>(Activate(v, a.act));
    }
  }
}

constexpr int kGatherThreads = 128;

__global__ void __launch_bounds__(kGatherThreads) BlockQuantGatherKernel(BlockQuantGatherArgs a) {
  const int64_t j = blockIdx.x;
  int64_t r = a.idx_i32 ? static_cast<const int32_t*>(a.indices)[j]
                        : static_cast<const int64_t*>(a.indices)[j];
  float* y = a.y + j * a.k;
  if (r < -a.table_rows || r >= a.table_rows) {
    for (int64_t c = threadIdx.x; c < a.k; c += kGatherThreads) y[c] = 0.f;
    if (threadIdx.x == 0) RecordError(a.err);
    return;
  }
  if (r < 0) r += a.table_rows;
  const bool packed = a.bits == 4 && !a.one_code_per_byte;
  const int64_t row_bytes = packed ? (a.k + 1) / 2 : a.k;
  const int64_t blocks = (a.k + a.block_size - 1) / a.block_size;
  const int mask = a.bits == 8 ? 255 : 15;
  const float default_zero = a.bits == 8 ? 128.f : 8.f;
  const uint8_t* codes = a.codes + r * row_bytes;
  for (int64_t c = threadIdx.x; c < a.k; c += kGatherThreads) {
    const int64_t b = r * blocks + c / a.block_size;
    const int code = packed ? (codes[c / 2] >> (4 * (c & 1))) & 15 : codes[c] & mask;
    const float zero = a.float_zero_points ? a.float_zero_points[b]
                       : a.zero_points     ? static_cast<float>(a.zero_points[b] & mask)
                                           : default_zero;
    y[c] = (static_cast<float>(code) - zero) * a.scales[b];
  }
}

}  // namespace

cudaError_t BlockQuantGather(const BlockQuantGatherArgs& a, cudaStream_t stream) {
  if (a.num_indices == 0) return cudaSuccess;
  if (a.num_indices < 0 || a.num_indices > 0x7fffffff || a.k <= 0 || a.block_size <= 0 ||
      a.table_rows < 0 || !a.codes || !a.scales || !a.indices || !a.y ||
      (a.bits != 4 && a.bits != 8) || (a.zero_points && a.float_zero_points))
    return cudaErrorInvalidValue;
  BlockQuantGatherKernel<<<static_cast<unsigned>(a.num_indices), kGatherThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t BlockQuantLinear(const BlockQuantArgs& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (a.m < 0 || a.n < 0 || a.k <= 0 || a.block_size <= 0 || !a.x || !a.codes || !a.scales ||
      !a.y || (a.bits != 4 && a.bits != 8) || (a.zero_points && a.float_zero_points) ||
      (a.n + kWarps - 1) / kWarps > 0x7fffffff)
    return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>((a.n + kWarps - 1) / kWarps);
  return DispatchFloat(a.dtype, [&](auto t) {
    BlockQuantKernel<decltype(t)><<<grid, kWarps * 32, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace kiln::cuda
