// The simple attention kernel (attention.h).
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/packed.h"

namespace kiln::cuda {
namespace {

constexpr int kWarps = static_cast<int>(kAttentionRowsPerBlock);

// Where the kernel reads Q, K, V: element c of head n of token t of batch item b at
// x + b·batch + n·head + t·row + c; S query rows, L keys.
struct Layout {
  const void *q, *k, *v;
  int64_t q_row, q_head, q_batch;
  int64_t kv_row, kv_head, kv_batch;
  int64_t keys;  // L
};

// Element c of the head at `x` (head size D), rotated by the tables' row (cos, sin) over the
// first R elements when R > 0.
template <typename T>
__device__ float Rotated(const T* x, int64_t c, const T* cos, const T* sin, int64_t r,
                         bool interleaved) {
  const float v = ToFloat(x[c]);
  if (c >= r) return v;
  const int64_t half = r / 2;
  float partner;
  if (interleaved)
    partner = c % 2 == 0 ? -ToFloat(x[c + 1]) : ToFloat(x[c - 1]);
  else
    partner = c < half ? -ToFloat(x[c + half]) : ToFloat(x[c - half]);
  return v * ToFloat(cos[c]) + partner * ToFloat(sin[c]);
}

template <typename T, int MAX_D>
__global__ void __launch_bounds__(kWarps * 32) AttentionKernel(AttentionArgs a, Layout lay) {
  constexpr int KT = MAX_D > 128 ? 16 : 32;  // keys per tile
  constexpr int PER_LANE = MAX_D / 32;       // output elements per lane
  __shared__ float q_s[kWarps][MAX_D];
  __shared__ float k_s[KT][MAX_D + 1];
  __shared__ float v_s[KT][MAX_D + 1];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t D = a.head_size, N = a.heads;
  const int64_t NKV = a.kv_heads > 0 ? a.kv_heads : N;
  const int64_t h = blockIdx.y, kvh = h / (N / NKV);
  int64_t b = blockIdx.z, q_block = blockIdx.x;
  if (a.tile_cu != nullptr) {  // packed: blockIdx.x is a tile over every sequence
    b = SegmentOf(a.tile_cu, a.batch, blockIdx.x);
    if (b < 0) return;  // past the last tile: the whole block
    q_block = blockIdx.x - a.tile_cu[b];
  }
  // This batch item's lengths, its first token (of y, as [tokens, N·D]) and Q/K/V offsets.
  int64_t S = a.seq, L = lay.keys, y_tok = b * a.seq;
  int64_t q_off = b * lay.q_batch, kv_off = b * lay.kv_batch;
  if (a.cu_seqlens != nullptr) {
    y_tok = a.cu_seqlens[b];
    S = L = a.cu_seqlens[b + 1] - y_tok;
    q_off = y_tok * lay.q_row;
    kv_off = y_tok * lay.kv_row;
  }
  const int64_t q0 = q_block * kWarps;
  if (q0 >= S) return;          // the whole block: past this sequence's queries
  const int64_t i = q0 + warp;  // this warp's query row
  const bool active = i < S;
  const T* base = static_cast<const T*>(lay.q) + q_off + h * lay.q_head;  // token 0
  const T* kbase = static_cast<const T*>(lay.k) + kv_off + kvh * lay.kv_head;
  const T* vbase = static_cast<const T*>(lay.v) + kv_off + kvh * lay.kv_head;
  const int64_t causal_offset = L - S;  // query i sees keys j <= i + L - S
  const int64_t R = a.cos ? a.rotary_dim : 0;
  const T* cos_b = static_cast<const T*>(a.cos) + b * a.rotary_batch_stride;
  const T* sin_b = static_cast<const T*>(a.sin) + b * a.rotary_batch_stride;
  if (active)
    for (int64_t d = lane; d < D; d += 32)
      q_s[warp][d] =
          Rotated(base + i * lay.q_row, d, cos_b + i * R, sin_b + i * R, R, a.rotary_interleaved);
  float o[PER_LANE];
#pragma unroll
  for (int t = 0; t < PER_LANE; ++t) o[t] = 0.f;
  float m = -INFINITY, l = 0.f;
  // Keys a query of this block can see: all, or (causal) up to the block's last row.
  int64_t last_key = L - 1;
  if (a.causal) last_key = min(L - 1, q0 + kWarps - 1 + causal_offset);
  const uint8_t* bmask = static_cast<const uint8_t*>(a.mask);
  const float* fmask = static_cast<const float*>(a.mask);
  const int64_t mrow = b * a.mask_stride[0] + h * a.mask_stride[1] + i * a.mask_stride[2];
  for (int64_t j0 = 0; j0 <= last_key; j0 += KT) {
    __syncthreads();  // the previous tile is no longer read
    for (int64_t e = threadIdx.x; e < KT * D; e += blockDim.x) {
      const int64_t kk = e / D, d = e % D, j = j0 + kk;
      float kv = 0.f, vv = 0.f;
      if (j < L) {
        kv = Rotated(kbase + j * lay.kv_row, d, cos_b + j * R, sin_b + j * R, R,
                     a.rotary_interleaved);
        vv = ToFloat(vbase[j * lay.kv_row + d]);
      }
      k_s[kk][d] = kv;
      v_s[kk][d] = vv;
    }
    __syncthreads();
    if (!active) continue;
    const int64_t j = j0 + lane;
    float s = -INFINITY;
    if (lane < KT && j < L && !(a.causal && j > i + causal_offset)) {
      float dot = 0.f;
      for (int64_t d = 0; d < D; ++d) dot += q_s[warp][d] * k_s[lane][d];
      s = dot * a.scale;
      if (a.mask) {
        const int64_t mi = mrow + j * a.mask_stride[3];
        if (a.mask_type == ElemType::kBool)
          s = bmask[mi] ? s : -INFINITY;
        else
          s += fmask[mi];
      }
    }
    const float m_new = fmaxf(m, WarpMax(s));
    if (m_new == -INFINITY) continue;  // nothing visible yet
    const float p = s == -INFINITY ? 0.f : __expf(s - m_new);
    const float corr = m == -INFINITY ? 0.f : __expf(m - m_new);
    l = l * corr + WarpSum(p);
    m = m_new;
#pragma unroll
    for (int t = 0; t < PER_LANE; ++t) o[t] *= corr;
#pragma unroll 4
    for (int kk = 0; kk < KT; ++kk) {
      const float pk = __shfl_sync(0xffffffffu, p, kk);
#pragma unroll
      for (int t = 0; t < PER_LANE; ++t) {
        const int d = lane + 32 * t;
        if (d < MAX_D) o[t] += pk * v_s[kk][d];
      }
    }
  }
  if (!active) return;
  // Every key masked: zeros (even where a masked key's V is inf/NaN); a NaN sum stays NaN.
  const float inv = l == 0.f ? 0.f : 1.f / l;
  T* y = static_cast<T*>(a.y) + (y_tok + i) * N * D + h * D;
#pragma unroll
  for (int t = 0; t < PER_LANE; ++t) {
    const int64_t d = lane + 32 * t;
    if (d < D) y[d] = FromFloat<T>(l == 0.f ? 0.f : o[t] * inv);
  }
}

template <typename T>
cudaError_t LaunchT(const AttentionArgs& a, const Layout& lay, cudaStream_t stream) {
  const dim3 grid = a.tile_cu != nullptr
                        ? dim3(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.heads), 1)
                        : dim3(static_cast<unsigned>((a.seq + kWarps - 1) / kWarps),
                               static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  const dim3 block(kWarps * 32);
  if (a.head_size <= 64)
    AttentionKernel<T, 64><<<grid, block, 0, stream>>>(a, lay);
  else if (a.head_size <= 128)
    AttentionKernel<T, 128><<<grid, block, 0, stream>>>(a, lay);
  else
    AttentionKernel<T, 256><<<grid, block, 0, stream>>>(a, lay);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  if (a.head_size <= 0 || a.head_size > kAttentionMaxHeadSize || a.heads > 65535 ||
      a.batch > 65535 || (a.seq + kWarps - 1) / kWarps > 0x7fffffff)
    return cudaErrorInvalidValue;
  if (a.kv_heads < 0 || (a.kv_heads > 0 && a.heads % a.kv_heads != 0)) return cudaErrorInvalidValue;
  if ((a.cos == nullptr) != (a.sin == nullptr) ||
      (a.cos && (a.rotary_dim <= 0 || a.rotary_dim % 2 != 0 || a.rotary_dim > a.head_size)))
    return cudaErrorInvalidValue;
  if (a.mask && a.mask_type != ElemType::kF32 && a.mask_type != ElemType::kBool)
    return cudaErrorInvalidValue;
  if (a.cu_seqlens && (!a.qkv || a.mask || a.cos || a.causal)) return cudaErrorInvalidValue;
  if (a.tile_cu && (!a.cu_seqlens || a.tiles < 1 || a.tiles > 0x7fffffff))
    return cudaErrorInvalidValue;
  const int64_t S = a.seq, D = a.head_size, N = a.heads;
  const int64_t NKV = a.kv_heads > 0 ? a.kv_heads : N;
  Layout lay;
  if (a.qkv != nullptr) {
    const int64_t row = (N + 2 * NKV) * D;
    const size_t es = ElemSize(a.dtype);
    const char* base = static_cast<const char*>(a.qkv);
    lay.q = base;
    lay.k = base + N * D * es;
    lay.v = base + (N + NKV) * D * es;
    lay.q_row = lay.kv_row = row;
    lay.q_head = lay.kv_head = D;
    lay.q_batch = lay.kv_batch = S * row;
    lay.keys = S;
  } else {
    if (!a.q || !a.k || !a.v || a.cos || a.kv_seq < 0 || (a.causal && a.kv_seq < S))
      return cudaErrorInvalidValue;
    lay.q = a.q;
    lay.k = a.k;
    lay.v = a.v;
    lay.q_row = lay.kv_row = D;
    lay.q_head = S * D;
    lay.q_batch = N * S * D;
    lay.kv_head = a.kv_seq * D;
    lay.kv_batch = NKV * a.kv_seq * D;
    lay.keys = a.kv_seq;
  }
  switch (a.dtype) {
    case ElemType::kF32:
      return LaunchT<float>(a, lay, stream);
    case ElemType::kF16:
      return LaunchT<__half>(a, lay, stream);
    case ElemType::kBF16:
      return LaunchT<__nv_bfloat16>(a, lay, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
