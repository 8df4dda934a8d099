// The KV-cache kernels of decode programs (kv_cache.h): the cache append and split-KV
// attention over a paged cache.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/split_kv.h"

namespace kiln::cuda {
namespace {

// ---- cache_write ------------------------------------------------------------------------

// One thread per 4-byte word of the new rows: row (b, h, s) goes to slot positions[b, s].
__global__ void CacheWriteKernel(CacheWriteArgs a, int64_t words) {
  const int64_t row_words = a.row_bytes / 4;
  const uint32_t* src = static_cast<const uint32_t*>(a.rows);
  uint32_t* dst = static_cast<uint32_t*>(a.y);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < words;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = e % row_words, r = e / row_words;  // r = (b·H + h)·S + s
    const int64_t s = r % a.seq, bh = r / a.seq, h = bh % a.heads, b = bh / a.heads;
    const int64_t p = a.positions[b * a.seq + s];
    if (p < 0 || p >= a.slots) {
      RecordError(a.err);
      continue;
    }
    int64_t slot_row;  // the destination row of the cache
    if (a.table != nullptr) {
      const int64_t blk = a.table[b * a.width + p / a.block_size];
      if (blk < 0 || blk >= a.blocks) {
        RecordError(a.err);
        continue;
      }
      slot_row = (blk * a.heads + h) * a.block_size + p % a.block_size;
    } else {
      slot_row = (b * a.heads + h) * a.slots + p;
    }
    dst[slot_row * row_words + w] = src[r * row_words + w];
  }
}

// ---- tensor_scatter ---------------------------------------------------------------------

// One thread per element of the update.
__global__ void TensorScatterKernel(TensorScatterArgs a, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % a.inner, r = e / a.inner;  // r = (b·outer + o)·seq + s
    const int64_t s = r % a.seq, bo = r / a.seq, b = bo / a.outer;
    const int64_t start = a.write_indices ? a.write_indices[b] : 0;
    if (start < 0 || (!a.circular && start > a.cap - a.seq)) {
      RecordError(a.err);
      continue;
    }
    const int64_t at = (start % a.cap + s) % a.cap;
    CopyElem(a.update, e, a.y, (bo * a.cap + at) * a.inner + i, a.elem_size);
  }
}

// ---- paged attention --------------------------------------------------------------------

constexpr int kWarps = 4;         // per block
constexpr int kKeysInFlight = 4;  // keys a warp scores before it updates its softmax

// Sequence b's key j: its row in a pool of [blocks, Nkv, bs, D] for KV head kvh, or -1
// (recording the data error) for a block id out of range.
__device__ __forceinline__ int64_t KeyRow(const PagedAttentionArgs& a, int64_t b, int64_t kvh,
                                          int64_t NKV, int64_t j) {
  const int64_t blk = a.table[b * a.width + j / a.block_size];
  if (blk < 0 || blk >= a.blocks) {
    RecordError(a.err);
    return -1;
  }
  return (blk * NKV + kvh) * a.block_size + j % a.block_size;
}

// grid (splits, N, B·S), kWarps warps: one chunk of keys for one query row of one head.
template <typename T, int MAX_D>
__global__ void __launch_bounds__(kWarps * 32) PagedAttentionKernel(PagedAttentionArgs a) {
  constexpr int PER_LANE = MAX_D / 32;
  __shared__ float q_s[MAX_D];
  __shared__ float m_s[kWarps], l_s[kWarps];
  __shared__ float o_s[kWarps][MAX_D];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t D = a.head_size, N = a.heads, S = a.seq;
  const int64_t NKV = a.kv_heads > 0 ? a.kv_heads : N;
  const int64_t L = a.width * a.block_size;
  const int64_t split = blockIdx.x, h = blockIdx.y, kvh = h / (N / NKV);
  const int64_t b = blockIdx.z / S, i = blockIdx.z % S;
  const int64_t keys = split_kv::VisibleKeys(L, S, i, a.causal);
  const split_kv::KeyRange range = split_kv::ChunkKeys(L, keys, a.splits, split);
  const int64_t j0 = range.begin, j1 = range.end;
  const T* q = static_cast<const T*>(a.q) + ((b * N + h) * S + i) * D;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) q_s[d] = ToFloat(q[d]);
  __syncthreads();
  float qd[PER_LANE];
#pragma unroll
  for (int t = 0; t < PER_LANE; ++t) {
    const int64_t d = lane + 32 * t;
    qd[t] = d < D ? q_s[d] : 0.f;
  }
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  const uint8_t* bmask = static_cast<const uint8_t*>(a.mask);
  const float* fmask = static_cast<const float*>(a.mask);
  const int64_t mrow = b * a.mask_stride[0] + h * a.mask_stride[1] + i * a.mask_stride[2];
  // An additive mask's "excluded" keys (at most -1e30: HF's float32-min fill, -inf) weigh
  // exactly 0 in fp32 when the row sees any other key, so they are skipped unread (a cache's
  // free slots, left padding); a row that sees none keeps them all (a softmax over those
  // scores, as the decomposed graph computes).
  bool skip_excluded = false;
  if (a.mask && a.mask_type == ElemType::kF32) {
    int seen = 0;
    for (int64_t j = threadIdx.x; j < keys && !seen; j += blockDim.x)
      seen = fmask[mrow + j * a.mask_stride[3]] > split_kv::kExcluded;
    skip_excluded = __syncthreads_or(seen) != 0;
  }
  float m = -INFINITY, l = 0.f, o[PER_LANE];
#pragma unroll
  for (int t = 0; t < PER_LANE; ++t) o[t] = 0.f;
  for (int64_t g = j0 + warp * kKeysInFlight; g < j1; g += kWarps * kKeysInFlight) {
    // The mask first: a key it removes (bool false, additive -inf) is never read.
    float s[kKeysInFlight], bias[kKeysInFlight];
    int64_t rows[kKeysInFlight];
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      const int64_t j = g + u;
      bias[u] = -INFINITY;
      if (j < j1) {
        const int64_t mi = mrow + j * a.mask_stride[3];
        const bool is_bool = a.mask_type == ElemType::kBool;
        bias[u] = split_kv::KeyBias(a.mask != nullptr, is_bool, a.mask && is_bool && bmask[mi],
                                    a.mask && !is_bool ? fmask[mi] : 0.f, skip_excluded);
      }
      rows[u] = bias[u] == -INFINITY ? -1 : KeyRow(a, b, kvh, NKV, j);
      float dot = 0.f;
      if (rows[u] >= 0) {
        const T* krow = kp + rows[u] * D;
#pragma unroll
        for (int t = 0; t < PER_LANE; ++t) {
          const int64_t d = lane + 32 * t;
          if (d < D) dot += qd[t] * ToFloat(krow[d]);
        }
      }
      s[u] = dot;
    }
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      const float dot = WarpSum(s[u]);
      s[u] = rows[u] >= 0 ? dot * a.scale + bias[u] : -INFINITY;
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) m_new = fmaxf(m_new, s[u]);
    if (m_new == -INFINITY) continue;  // nothing visible yet
    const float corr = split_kv::Rescale(m, m_new);
    l *= corr;
#pragma unroll
    for (int t = 0; t < PER_LANE; ++t) o[t] *= corr;
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      if (s[u] == -INFINITY) continue;  // uniform across the warp
      const float p = expf(s[u] - m_new);
      l += p;
      const T* vrow = vp + rows[u] * D;
#pragma unroll
      for (int t = 0; t < PER_LANE; ++t) {
        const int64_t d = lane + 32 * t;
        if (d < D) o[t] += p * ToFloat(vrow[d]);
      }
    }
    m = m_new;
  }
  // Merge the warps: rescale each to the block's max.
  if (lane == 0) {
    m_s[warp] = m;
    l_s[warp] = l;
  }
#pragma unroll
  for (int t = 0; t < PER_LANE; ++t) o_s[warp][lane + 32 * t] = o[t];
  __syncthreads();
  float bm = -INFINITY;
  for (int w = 0; w < kWarps; ++w) bm = fmaxf(bm, m_s[w]);
  float bl = 0.f;
  float scale_w[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    scale_w[w] = split_kv::Rescale(m_s[w], bm);
    bl += l_s[w] * scale_w[w];
  }
  const int64_t row = blockIdx.z * N + h;  // (b·S + i)·N + h
  if (a.splits == 1) {
    T* y = static_cast<T*>(a.y) + row * D;
    const float inv = bl == 0.f ? 0.f : 1.f / bl;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float acc = 0.f;
      for (int w = 0; w < kWarps; ++w) acc += o_s[w][d] * scale_w[w];
      y[d] = FromFloat<T>(bl == 0.f ? 0.f : acc * inv);
    }
    return;
  }
  float* part = a.partial + (row * a.splits + split) * (D + 2);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int w = 0; w < kWarps; ++w) acc += o_s[w][d] * scale_w[w];
    part[2 + d] = acc;
  }
  if (threadIdx.x == 0) {
    part[0] = bm;
    part[1] = bl;
  }
}

// One block of 128 threads per (b·S + i)·N + h row: merges its splits' partials into y.
template <typename T>
__global__ void __launch_bounds__(128) MergeSplitsKernel(PagedAttentionArgs a) {
  const int64_t row = blockIdx.x, D = a.head_size;
  const float* part = a.partial + row * a.splits * (D + 2);
  float bm = -INFINITY;
  for (int s = 0; s < a.splits; ++s) bm = fmaxf(bm, part[s * (D + 2)]);
  float bl = 0.f;
  for (int s = 0; s < a.splits; ++s)
    bl += part[s * (D + 2) + 1] * split_kv::Rescale(part[s * (D + 2)], bm);
  T* y = static_cast<T*>(a.y) + row * D;
  const float inv = bl == 0.f ? 0.f : 1.f / bl;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < a.splits; ++s)
      acc += part[s * (D + 2) + 2 + d] * split_kv::Rescale(part[s * (D + 2)], bm);
    y[d] = FromFloat<T>(bl == 0.f ? 0.f : acc * inv);
  }
}

template <typename T>
cudaError_t LaunchPaged(const PagedAttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.splits), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(a.batch * a.seq));
  if (a.head_size <= 64)
    PagedAttentionKernel<T, 64><<<grid, kWarps * 32, 0, stream>>>(a);
  else if (a.head_size <= 128)
    PagedAttentionKernel<T, 128><<<grid, kWarps * 32, 0, stream>>>(a);
  else
    PagedAttentionKernel<T, 256><<<grid, kWarps * 32, 0, stream>>>(a);
  if (a.splits > 1)
    MergeSplitsKernel<T><<<static_cast<unsigned>(a.batch * a.seq * a.heads), 128, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t CacheWrite(const CacheWriteArgs& a, cudaStream_t stream) {
  if (a.row_bytes <= 0 || a.row_bytes % 4 != 0 || a.slots <= 0 || a.batch < 0 || a.heads < 0 ||
      a.seq < 0 || !a.cache || !a.y ||
      (a.table &&
       (a.width <= 0 || a.block_size <= 0 || a.blocks <= 0 || a.width * a.block_size != a.slots)))
    return cudaErrorInvalidValue;
  if (a.y != a.cache && a.cache_bytes > 0) {
    const cudaError_t e = cudaMemcpyAsync(a.y, a.cache, static_cast<size_t>(a.cache_bytes),
                                          cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return e;
  }
  const int64_t words = a.batch * a.heads * a.seq * (a.row_bytes / 4);
  if (words == 0) return cudaSuccess;
  if (!a.rows || !a.positions) return cudaErrorInvalidValue;
  CacheWriteKernel<<<GridFor(words, 256, 4), 256, 0, stream>>>(a, words);
  return cudaGetLastError();
}

cudaError_t TensorScatter(const TensorScatterArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.outer < 0 || a.cap <= 0 || a.seq < 0 || a.seq > a.cap || a.inner < 0 ||
      !a.cache || !a.y ||
      (a.elem_size != 1 && a.elem_size != 2 && a.elem_size != 4 && a.elem_size != 8))
    return cudaErrorInvalidValue;
  if (a.y != a.cache && a.cache_bytes > 0) {
    const cudaError_t e = cudaMemcpyAsync(a.y, a.cache, static_cast<size_t>(a.cache_bytes),
                                          cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return e;
  }
  const int64_t n = a.batch * a.outer * a.seq * a.inner;
  if (n == 0) return cudaSuccess;
  if (!a.update) return cudaErrorInvalidValue;
  TensorScatterKernel<<<GridFor(n, 256, 4), 256, 0, stream>>>(a, n);
  return cudaGetLastError();
}

cudaError_t PagedAttention(const PagedAttentionArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  const int64_t NKV = a.kv_heads > 0 ? a.kv_heads : a.heads;
  if (a.head_size <= 0 || a.head_size > kPagedAttentionMaxHeadSize || a.heads <= 0 ||
      a.heads > 65535 || a.batch * a.seq > 65535 || a.batch * a.seq * a.heads > 0x7fffffff ||
      a.heads % NKV != 0 || a.splits < 1 || a.splits > 65535 || !a.q || !a.k || !a.v || !a.table ||
      !a.y || a.width <= 0 || a.block_size <= 0 || a.blocks <= 0 || (a.splits > 1 && !a.partial) ||
      (a.causal && a.width * a.block_size < a.seq))
    return cudaErrorInvalidValue;
  if (a.mask && a.mask_type != ElemType::kF32 && a.mask_type != ElemType::kBool)
    return cudaErrorInvalidValue;
  return DispatchFloat(a.dtype, [&](auto t) { return LaunchPaged<decltype(t)>(a, stream); });
}

}  // namespace kiln::cuda
