// The arithmetic of the split-KV decode attention (kv_cache.h, PagedAttention): which keys a
// chunk scores, a key's additive bias from the mask, and the rescaling that merges online-
// softmax states (within a chunk, across warps, across chunks). The kernel calls these; the
// CPU test (tests/cuda/launch_layout_test.cc, SplitKv.*) runs the same decomposition on the
// host against one softmax in double, so the chunking and merging are checked without a
// GPU.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime_api.h>  // __host__ __device__

namespace kiln::cuda::split_kv {

struct KeyRange {
  int64_t begin = 0, end = 0;  // keys [begin, end)
};

// Query row i of S over L keys: the keys it sees (all, or causal bottom-right: j <= L - S +
// i), and of those chunk `split` of `splits` (chunks of ceil(L / splits) keys).
__host__ __device__ inline int64_t VisibleKeys(int64_t L, int64_t S, int64_t i, bool causal) {
  return causal ? (i + L - S + 1 < L ? i + L - S + 1 : L) : L;
}
__host__ __device__ inline KeyRange ChunkKeys(int64_t L, int64_t visible, int64_t splits,
                                              int64_t split) {
  const int64_t chunk = (L + splits - 1) / splits;
  KeyRange r;
  r.begin = split * chunk;
  r.end = r.begin + chunk < visible ? r.begin + chunk : visible;
  return r;
}

// An additive mask value at or below this is "excluded" (HF's float32-min fill, -inf).
constexpr float kExcluded = -1e30f;

// A key's bias: -inf (never read) for a bool mask's false, an additive -inf, or — when the
// row sees some key above kExcluded (`skip_excluded`) — an additive value at or below it,
// whose weight is then exactly 0 in fp32 anyway; else the additive value (0 without mask).
__host__ __device__ inline float KeyBias(bool has_mask, bool is_bool, bool keep, float additive,
                                         bool skip_excluded) {
  if (!has_mask) return 0.f;
  if (is_bool) return keep ? 0.f : -INFINITY;
  return skip_excluded && additive <= kExcluded ? -INFINITY : additive;
}

// The factor that moves a softmax state (sum and output) kept relative to max m to max
// m_new >= m: 0 for the empty state (m = -inf).
__host__ __device__ inline float Rescale(float m, float m_new) {
  return m == -INFINITY ? 0.f : expf(m - m_new);
}

}  // namespace kiln::cuda::split_kv
