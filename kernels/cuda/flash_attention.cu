// The flash attention kernel (flash_attention.h).
// Fragment layouts (flash_layout.h) are PTX's for mma.m16n8k16 (g = lane / 4, t = lane % 4):
// A (16×16, row) a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];
// B (16×8, col) b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]; C (16×8 fp32) c0,c1 = C[g][2t..],
// c2,c3 = C[g+8][2t..]. So the C fragments of two neighbouring 8-key score tiles are
// exactly the A fragment of a 16-key P tile, and a K row in shared memory is Kᵀ's column:
// b0/b1 of S = Q·Kᵀ are 32-bit loads of K[key][2t..]. V is [key][d] = B row-major, read
// transposed by ldmatrix.trans.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/flash_layout.h"
#include "kernels/cuda/packed.h"

namespace kiln::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zero-filled when !valid (src is then unread).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename T>
__device__ __forceinline__ void Mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void Mma<__half>(float c[4], const uint32_t a[4], uint32_t b0,
                                            uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void Mma<__nv_bfloat16>(float c[4], const uint32_t a[4], uint32_t b0,
                                                   uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 b16 matrices, transposed; lane l gives the row address of matrix l / 8.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t r[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(row)));
}

// Two floats as one 32-bit pair of T, `lo` in the low half (the lower column).
template <typename T>
__device__ __forceinline__ uint32_t Pack(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t Pack<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t Pack<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// rows × D elements from global (row stride `stride`) into shared rows of
// flash::RowPitch(D); rows >= valid_rows are zero-filled. Columns [D, pitch) are not
// written.
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void LoadTile(T* smem, const T* g, int64_t stride, int valid_rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < ROWS * kChunks; c += THREADS) {
    const int r = flash::ChunkRow(D, c), col = flash::ChunkCol(D, c);
    const bool valid = r < valid_rows;
    CpAsync16(smem + r * flash::RowPitch(D) + col, valid ? g + r * stride + col : g, valid);
  }
}

template <typename T, int D, int BQ, int BK>
__global__ void __launch_bounds__(BQ / 16 * 32, 1) FlashKernel(FlashAttentionArgs a) {
  constexpr int kThreads = BQ / 16 * 32;
  constexpr int DP = (D + 15) / 16 * 16;  // head size padded to the MMA's k (8 -> 16)
  constexpr int kRow = flash::RowPitch(D);
  static_assert(kRow == DP + flash::kPad);
  constexpr int kKSteps = DP / 16;  // k-steps of Q·Kᵀ
  constexpr int kSTiles = BK / 8;   // 8-key score tiles per key tile
  constexpr int kOTiles = DP / 8;   // 8-wide output tiles
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + BQ * kRow;      // [2][BK][kRow]
  T* v_s = k_s + 2 * BK * kRow;  // [2][BK][kRow]
  __shared__ int kept_end_s;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = blockIdx.y;
  int64_t b = blockIdx.z;
  // Causal blocks near the end have the most keys: start them first.
  int64_t q_tile = a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  if (a.tile_cu != nullptr) {  // packed: blockIdx.x is a tile over every sequence
    b = SegmentOf(a.tile_cu, a.batch, blockIdx.x);
    if (b < 0) return;  // past the last tile: the whole block
    q_tile = blockIdx.x - a.tile_cu[b];
  }
  const int64_t q0 = q_tile * BQ;

  int64_t q_len = a.q_len, kv_len = a.kv_len, q_tok = b * a.q_batch_stride,
          kv_tok = b * a.kv_batch_stride, y_tok = b * a.y_batch_stride;
  if (a.cu_seqlens_q != nullptr) {
    const int64_t qs = a.cu_seqlens_q[b], ks = a.cu_seqlens_kv[b];
    q_len = a.cu_seqlens_q[b + 1] - qs;
    kv_len = a.cu_seqlens_kv[b + 1] - ks;
    q_tok = qs * a.q_row_stride;
    kv_tok = ks * a.kv_row_stride;
    y_tok = qs * a.y_row_stride;
  }
  if (q0 >= q_len) return;
  if constexpr (DP != D) {  // the padding columns are zeros (cp.async writes columns < D)
    for (int r = threadIdx.x; r < BQ + 4 * BK; r += kThreads)
      for (int c = D; c < DP; ++c) q_s[r * kRow + c] = FromFloat<T>(0.f);
  }
  const int64_t hk = h / (a.heads / a.kv_heads);
  const T* qp = static_cast<const T*>(a.q) + q_tok + h * D;
  const T* kp = static_cast<const T*>(a.k) + kv_tok + hk * D;
  const T* vp = static_cast<const T*>(a.v) + kv_tok + hk * D;
  T* yp = static_cast<T*>(a.y) + y_tok + h * D;

  // Keys this block visits.
  int64_t end = CausalKeyEnd(a.causal, q0, BQ, q_len, kv_len);
  const bool bool_mask = a.mask_type == ElemType::kBool;
  const float* fmask = static_cast<const float*>(a.mask);
  const uint8_t* bmask = static_cast<const uint8_t*>(a.mask);
  const int64_t mask_bh = b * a.mask_stride[0] + h * a.mask_stride[1];
  if (a.mask != nullptr && a.mask_stride[2] == 0) {  // key padding: skip the padded tail
    if (threadIdx.x == 0) kept_end_s = 0;
    __syncthreads();
    int kept = 0;
    for (int64_t j = threadIdx.x; j < kv_len; j += kThreads) {
      const int64_t mi = mask_bh + j * a.mask_stride[3];
      if (bool_mask ? bmask[mi] != 0 : KeyIsKept(fmask[mi])) kept = static_cast<int>(j) + 1;
    }
    atomicMax(&kept_end_s, kept);
    __syncthreads();
    const int64_t pad_end = PaddedKeyEnd(bool_mask, kept_end_s, kv_len);
    if (pad_end < end) end = pad_end;
  }
  const int n_tiles = static_cast<int>((end + BK - 1) / BK);

  // Q and the first K/V tile in one copy group.
  const int q_rows = static_cast<int>(q_len - q0 < BQ ? q_len - q0 : BQ);
  LoadTile<T, D, BQ, kThreads>(q_s, qp + q0 * a.q_row_stride, a.q_row_stride, q_rows);
  auto load_kv = [&](int tile, int buf) {
    const int64_t j0 = static_cast<int64_t>(tile) * BK;
    const int rows = static_cast<int>(kv_len - j0 < BK ? kv_len - j0 : BK);
    LoadTile<T, D, BK, kThreads>(k_s + buf * BK * kRow, kp + j0 * a.kv_row_stride, a.kv_row_stride,
                                 rows);
    LoadTile<T, D, BK, kThreads>(v_s + buf * BK * kRow, vp + j0 * a.kv_row_stride, a.kv_row_stride,
                                 rows);
  };
  if (n_tiles > 0) load_kv(0, 0);
  CpAsyncCommit();

  // This thread's two query rows (C fragment rows of elements 0-1 and 2-3, of the warp's 16).
  const int64_t row[2] = {q0 + warp * 16 + flash::CRow(lane, 0),
                          q0 + warp * 16 + flash::CRow(lane, 2)};
  const int64_t causal_shift = kv_len - q_len;
  int64_t mask_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {  // rows past q_len read row q_len - 1 (never written)
    const int64_t i = row[r] < q_len ? row[r] : q_len - 1;
    mask_row[r] = mask_bh + i * a.mask_stride[2];
  }

  uint32_t qf[kKSteps][4];
  float o[kOTiles][4];
#pragma unroll
  for (int n = 0; n < kOTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  for (int tile = 0; tile < n_tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < n_tiles) {
      load_kv(tile + 1, buf ^ 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    if (tile == 0) {
      const T* qw = q_s + warp * 16 * kRow;
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          qf[kk][r] =
              *reinterpret_cast<const uint32_t*>(qw + kk * 16 + flash::AFragOffset(lane, r, kRow));
      }
    }
    const T* kt = k_s + buf * BK * kRow;
    const T* vt = v_s + buf * BK * kRow;

    // S = Q·Kᵀ for this warp's 16 rows × BK keys.
    float s[kSTiles][4];
#pragma unroll
    for (int n = 0; n < kSTiles; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      const T* ktile = kt + n * 8 * kRow;  // keys n·8 .. n·8 + 7
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(
            ktile + kk * 16 + flash::BFromRowsOffset(lane, 0, kRow));
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(
            ktile + kk * 16 + flash::BFromRowsOffset(lane, 1, kRow));
        Mma<T>(s[n], qf[kk], b0, b1);
      }
    }

    // Scale, mask, causality; the tile's row maxima.
    const int64_t j0 = static_cast<int64_t>(tile) * BK;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;  // row[r] is fragment row CRow(lane, e)
        const int64_t j = j0 + n * 8 + flash::CCol(lane, e);
        float x = s[n][e] * a.scale;
        if (j >= kv_len || (a.causal && j > row[r] + causal_shift)) {
          x = -INFINITY;
        } else if (a.mask != nullptr) {
          const int64_t mi = mask_row[r] + j * a.mask_stride[3];
          if (bool_mask)
            x = bmask[mi] != 0 ? x : -INFINITY;
          else
            x += __ldg(fmask + mi);
        }
        s[n][e] = x;
        tile_max[r] = fmaxf(tile_max[r], x);
      }

    // Online softmax: new running max (over the 4 lanes sharing a row), correction of the
    // old sum and accumulator, probabilities in natural-log units times log2(e).
    float corr[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = tile_max[r];
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[r], mx);
      m_use[r] = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet
      corr[r] = exp2f((m_run[r] - m_use[r]) * kLog2e);
      m_run[r] = m_new;
      l_run[r] *= corr[r];
    }
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const float p = exp2f((s[n][e] - m_use[r]) * kLog2e);
        s[n][e] = p;
        l_run[r] += p;
      }

      // O += P·V, 16 keys per k-step; P's A fragment from two neighbouring score tiles.
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t pf[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float* sp = s[2 * kk + flash::PTile(r)] + 2 * flash::PPair(r);
        pf[r] = Pack<T>(sp[0], sp[1]);
      }
      const T* vrow = vt + kk * 16 * kRow + flash::VLdmatrixRowOffset(lane, kRow);
#pragma unroll
      for (int n = 0; n < kOTiles; n += 2) {
        uint32_t vf[4];
        LdMatrixX4Trans(vf, vrow + n * 8);
        Mma<T>(o[n], pf, vf[0], vf[1]);
        Mma<T>(o[n + 1], pf, vf[2], vf[3]);
      }
    }
    __syncthreads();  // buffer `buf` is reloaded at the next iteration
  }
  CpAsyncWait<0>();  // with no key tile, Q's copy is still in flight

  // Row sums over the 4 lanes of a row; normalize once. Every key masked: zeros, even where
  // a masked key's V is inf/NaN (0·inf in the accumulator); a NaN sum stays NaN.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l == 0.f ? 0.f : 1.f / l;
    if (row[r] < q_len) {
      T* y = yp + row[r] * a.y_row_stride + flash::CCol(lane, 0);
#pragma unroll
      for (int n = 0; n < kOTiles; ++n)
        if (n * 8 < D)
          *reinterpret_cast<uint32_t*>(y + n * 8) =
              l == 0.f ? 0u : Pack<T>(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
  }
}

template <typename T, int D, int BQ, int BK>
cudaError_t LaunchShape(const FlashAttentionArgs& a, cudaStream_t stream, bool init_only) {
  const FlashLaunch l{BQ, BK};
  const int64_t smem = l.SmemBytes(D);
  if (init_only)
    return cudaFuncSetAttribute(FlashKernel<T, D, BQ, BK>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(smem));
  const dim3 grid = a.tile_cu != nullptr
                        ? dim3(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.heads), 1)
                        : dim3(static_cast<unsigned>((a.q_len + BQ - 1) / BQ),
                               static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  FlashKernel<T, D, BQ, BK><<<grid, BQ / 16 * 32, smem, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t LaunchD(const FlashAttentionArgs& a, const FlashLaunch& l, cudaStream_t stream,
                    bool init_only) {
  if (l.block_q == 64 && l.block_k == 64) return LaunchShape<T, D, 64, 64>(a, stream, init_only);
  if (l.block_q == 128 && l.block_k == 64) return LaunchShape<T, D, 128, 64>(a, stream, init_only);
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchT(const FlashAttentionArgs& a, const FlashLaunch& l, cudaStream_t stream,
                    bool init_only) {
  switch (a.head_size) {
    case 8:
      return LaunchD<T, 8>(a, l, stream, init_only);
    case 16:
      return LaunchD<T, 16>(a, l, stream, init_only);
    case 32:
      return LaunchD<T, 32>(a, l, stream, init_only);
    case 64:
      return LaunchD<T, 64>(a, l, stream, init_only);
    case 128:
      return LaunchD<T, 128>(a, l, stream, init_only);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t Dispatch(const FlashAttentionArgs& a, const FlashLaunch& l, cudaStream_t stream,
                     bool init_only) {
  switch (a.dtype) {
    case ElemType::kF16:
      return LaunchT<__half>(a, l, stream, init_only);
    case ElemType::kBF16:
      return LaunchT<__nv_bfloat16>(a, l, stream, init_only);
    default:
      return cudaErrorInvalidValue;
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

FlashLaunch ChooseFlashLaunch(int sm, int64_t head_size) {
  // One shape for every SM and head size until kiln_gpu_bench --attention has measured
  // the table (docs/benchmarks.md): 4 warps, 64 keys per tile, as FlashAttention-2's
  // forward kernel uses at these head sizes.
  (void)sm;
  (void)head_size;
  return FlashLaunch{64, 64};
}

const char* FlashAttentionUnsupported(const FlashAttentionArgs& a, const FlashLaunch& l) {
  if (a.dtype != ElemType::kF16 && a.dtype != ElemType::kBF16) return "dtype is not fp16/bf16";
  if (!FlashHeadSizeSupported(a.head_size)) return "head_size is not 8, 16, 32, 64 or 128";
  bool shape_ok = false;
  for (const FlashLaunch& k : kFlashLaunches)
    shape_ok |= k.block_q == l.block_q && k.block_k == l.block_k;
  if (!shape_ok) return "the launch shape is not instantiated";
  if (a.batch < 0 || a.q_len < 0 || a.kv_len < 0 || a.q_len > 0x7fffffff || a.kv_len > 0x7fffffff)
    return "a length is out of range";
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    return "kv_heads does not divide heads";
  if (a.heads > 65535 || a.batch > 65535) return "batch or heads exceed the grid (65535)";
  if ((a.q_len + l.block_q - 1) / l.block_q > 0x7fffffff) return "q_len exceeds the grid";
  if (a.mask != nullptr && a.mask_type != ElemType::kF32 && a.mask_type != ElemType::kBool)
    return "the mask is not f32 or bool";
  if ((a.cu_seqlens_q == nullptr) != (a.cu_seqlens_kv == nullptr))
    return "cu_seqlens_q and cu_seqlens_kv come together";
  if (a.cu_seqlens_q != nullptr && a.mask != nullptr) return "no mask in the packed form";
  if (a.tile_cu != nullptr &&
      (a.cu_seqlens_q == nullptr || a.causal || a.tiles < 1 || a.tiles > 0x7fffffff))
    return "tile offsets need the packed form, no causality and 1 to 2^31 - 1 tiles";
  if (a.q_row_stride % 8 != 0 || a.kv_row_stride % 8 != 0 || a.y_row_stride % 2 != 0 ||
      a.q_batch_stride % 8 != 0 || a.kv_batch_stride % 8 != 0 || a.y_batch_stride % 2 != 0)
    return "a stride breaks the 16-byte alignment rule";
  return nullptr;
}

cudaError_t FlashAttentionInit(ElemType dtype, int64_t head_size, const FlashLaunch& launch) {
  FlashAttentionArgs a;
  a.dtype = dtype;
  a.head_size = head_size;
  return Dispatch(a, launch, nullptr, /*init_only=*/true);
}

cudaError_t FlashAttention(const FlashAttentionArgs& a, const FlashLaunch& launch,
                           cudaStream_t stream) {
  if (FlashAttentionUnsupported(a, launch) != nullptr) return cudaErrorInvalidValue;
  if (a.batch == 0 || a.q_len == 0) return cudaSuccess;
  if (!Aligned16(a.q) || !Aligned16(a.k) || !Aligned16(a.v) ||
      reinterpret_cast<uintptr_t>(a.y) % 4 != 0)
    return cudaErrorInvalidValue;
  return Dispatch(a, launch, stream, /*init_only=*/false);
}

}  // namespace kiln::cuda
