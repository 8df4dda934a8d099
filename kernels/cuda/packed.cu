// Packed-token kernels (packed.h).
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/packed.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSegmentBlocks = 64;  // each block rescans the lengths

__global__ void __launch_bounds__(kThreads) SegmentsKernel(PackedSegmentsArgs a) {
  __shared__ long long part[kThreads];
  __shared__ int bad_s;
  const int64_t n = a.sequences;
  const int64_t per = (n + kThreads - 1) / kThreads;
  const int64_t lo = min(n, threadIdx.x * per), hi = min(n, lo + per);
  if (threadIdx.x == 0) bad_s = 0;
  __syncthreads();
  // Each accepted length is at most T < 2^31, so no sum below overflows.
  long long sum = 0;
  bool bad = false;
  for (int64_t i = lo; i < hi; ++i) {
    const long long v = a.lengths[i];
    if (v < 0 || v > a.tokens)
      bad = true;
    else
      sum += v;
  }
  if (bad) bad_s = 1;
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {  // inclusive scan of the runs' sums
    const long long add = threadIdx.x >= off ? part[threadIdx.x - off] : 0;
    __syncthreads();
    part[threadIdx.x] += add;
    __syncthreads();
  }
  const long long total = part[kThreads - 1];
  const bool ok = bad_s == 0 && total <= a.tokens;
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      a.cu[0] = 0;
      if (!ok) RecordError(a.err);
    }
    long long run = threadIdx.x == 0 ? 0 : part[threadIdx.x - 1];
    for (int64_t i = lo; i < hi; ++i) {
      if (ok) run += a.lengths[i];
      a.cu[i + 1] = ok ? static_cast<int32_t>(run) : 0;
    }
    if (a.tile_cu != nullptr) {  // the same scan over each sequence's tile count
      long long tiles = 0;
      for (int64_t i = lo; ok && i < hi; ++i)
        tiles += (a.lengths[i] + a.tile_rows - 1) / a.tile_rows;
      __syncthreads();  // every thread has read `part` above
      part[threadIdx.x] = tiles;
      __syncthreads();
      for (int off = 1; off < kThreads; off <<= 1) {
        const long long add = threadIdx.x >= off ? part[threadIdx.x - off] : 0;
        __syncthreads();
        part[threadIdx.x] += add;
        __syncthreads();
      }
      long long t = threadIdx.x == 0 ? 0 : part[threadIdx.x - 1];
      if (threadIdx.x == 0) a.tile_cu[0] = 0;
      for (int64_t i = lo; i < hi; ++i) {
        if (ok) t += (a.lengths[i] + a.tile_rows - 1) / a.tile_rows;
        a.tile_cu[i + 1] = ok ? static_cast<int32_t>(t) : 0;
      }
    }
  }
  if (a.zero == nullptr) return;
  const int64_t end = ok ? total : 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (a.zero_row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(a.zero) % 4 == 0) {
    uint32_t* z = static_cast<uint32_t*>(a.zero);
    const int64_t row = a.zero_row_bytes / 4;
    for (int64_t w = end * row + first; w < a.tokens * row; w += stride) z[w] = 0u;
  } else {
    unsigned char* z = static_cast<unsigned char*>(a.zero);
    const int64_t row = a.zero_row_bytes;
    for (int64_t w = end * row + first; w < a.tokens * row; w += stride) z[w] = 0;
  }
}

__global__ void __launch_bounds__(kThreads) PositionsKernel(PackedPositionsArgs a) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < a.tokens;
       t += stride) {
    const int64_t s = SegmentOf(a.cu, a.sequences, t);
    a.y[t] = s < 0 ? 0 : t - a.cu[s];
  }
}

}  // namespace

cudaError_t PackedSegments(const PackedSegmentsArgs& a, cudaStream_t stream) {
  if (a.sequences < 1 || a.tokens < 0 || a.tokens > 0x7fffffff || a.cu == nullptr ||
      (a.zero != nullptr && a.zero_row_bytes <= 0) || (a.tile_cu != nullptr && a.tile_rows < 1))
    return cudaErrorInvalidValue;
  unsigned blocks = 1;
  if (a.zero != nullptr) {
    const bool by_word = a.zero_row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(a.zero) % 4 == 0;
    const int64_t words = a.tokens * (by_word ? a.zero_row_bytes / 4 : a.zero_row_bytes);
    blocks = GridFor(words, kThreads, 8);
    if (blocks > kMaxSegmentBlocks) blocks = kMaxSegmentBlocks;
  }
  SegmentsKernel<<<blocks, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t PackedPositions(const PackedPositionsArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.sequences < 1 || a.tokens < 0 || a.tokens > 0x7fffffff || a.cu == nullptr)
    return cudaErrorInvalidValue;
  PositionsKernel<<<GridFor(a.tokens, kThreads), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
