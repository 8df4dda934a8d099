// EmbedLayerNorm kernel (embed.h).
#include "kernels/cuda/embed.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_row.cuh"

namespace kiln::cuda {
namespace {

// The table row of `id` (ONNX Gather wrap), or -1 when out of range.
__device__ __forceinline__ int64_t Row(int64_t id, int64_t rows) {
  if (id < -rows || id >= rows) return -1;
  return id < 0 ? id + rows : id;
}

template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(kEmbedMaxThreads) EmbedKernel(EmbedArgs a) {
  __shared__ float scratch[32];
  const int64_t token = blockIdx.x;
  const int64_t b = token / a.seq, s = token % a.seq;
  const int64_t h = a.hidden;
  const int64_t w = Row(LoadIndex(a.input_ids, a.ids_i32, token), a.word_rows);
  int64_t p = s;
  if (a.position_ids) {
    p = LoadIndex(a.position_ids, a.ids_i32, a.position_rows == 1 ? s : b * a.seq + s);
  }
  p = Row(p, a.pos_rows);
  int64_t g = 0;
  if (a.segment_ids) g = Row(LoadIndex(a.segment_ids, a.ids_i32, token), a.segment_rows);
  T* y = static_cast<T*>(a.y) + token * h;
  T* sum = a.sum ? static_cast<T*>(a.sum) + token * h : nullptr;
  if (w < 0 || p < 0 || g < 0) {
    if (threadIdx.x == 0) RecordError(a.err);
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
      y[i] = FromFloat<T>(0.f);
      if (sum) sum[i] = FromFloat<T>(0.f);
    }
    return;
  }
  const T* word = static_cast<const T*>(a.word) + w * h;
  const T* pos = static_cast<const T*>(a.pos) + p * h;
  const T* seg = a.segment ? static_cast<const T*>(a.segment) + g * h : nullptr;
  float v[ITEMS * VEC];
  float local = 0.f;
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const int64_t i = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * VEC;
    float* e = v + it * VEC;
    if (i < h) {
      float q[VEC];
      LoadVec<T, VEC>(word, i, e);
      LoadVec<T, VEC>(pos, i, q);
#pragma unroll
      for (int j = 0; j < VEC; ++j) e[j] += q[j];
      if (seg) {
        LoadVec<T, VEC>(seg, i, q);
#pragma unroll
        for (int j = 0; j < VEC; ++j) e[j] += q[j];
      }
      if (sum) StoreVec<T, VEC>(sum, i, e);
#pragma unroll
      for (int j = 0; j < VEC; ++j) local += e[j];
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) e[j] = 0.f;
    }
  }
  NormalizeRow<T, VEC, ITEMS>(v, local, h, a.eps, false, static_cast<const T*>(a.gamma),
                              static_cast<const T*>(a.beta), y, scratch);
}

template <typename T>
cudaError_t LaunchT(const EmbedArgs& a, const NormLaunch& l, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const dim3 grid(static_cast<unsigned>(a.batch * a.seq)), block(l.threads);
  if (l.vec == 1)
    EmbedKernel<T, 1, kNormFloatsPerThread><<<grid, block, 0, stream>>>(a);
  else
    EmbedKernel<T, kVec, kNormFloatsPerThread / kVec><<<grid, block, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t EmbedLayerNorm(const EmbedArgs& a, cudaStream_t stream) {
  const int64_t tokens = a.batch * a.seq;
  if (tokens == 0) return cudaSuccess;
  if (tokens > 0x7fffffff) return cudaErrorInvalidValue;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool aligned16 = aligned(a.word) && aligned(a.pos) && (!a.segment || aligned(a.segment)) &&
                         aligned(a.gamma) && aligned(a.beta) && aligned(a.y) &&
                         (!a.sum || aligned(a.sum));
  NormLaunch l;
  if (!ChooseNormLaunch(a.dtype, a.hidden, aligned16, &l, kEmbedMaxThreads))
    return cudaErrorInvalidValue;
  switch (a.dtype) {
    case ElemType::kF32:
      return LaunchT<float>(a, l, stream);
    case ElemType::kF16:
      return LaunchT<__half>(a, l, stream);
    case ElemType::kBF16:
      return LaunchT<__nv_bfloat16>(a, l, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
