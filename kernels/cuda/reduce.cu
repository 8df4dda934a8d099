// Reduction kernel (reduce.h).
#include <limits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/reduce.h"

namespace kiln::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ double Combine(ReduceOp op, double a, double v) {
  switch (op) {
    case ReduceOp::kProd:
      return a * v;
    case ReduceOp::kMax:
      return (a != a || v != v) ? NAN : fmax(a, v);
    case ReduceOp::kMin:
      return (a != a || v != v) ? NAN : fmin(a, v);
    default:
      return a + v;  // sums (the per-element part is applied before)
  }
}

__device__ __forceinline__ double Init(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return 1.0;
    case ReduceOp::kMax:
      return -INFINITY;
    case ReduceOp::kMin:
      return INFINITY;
    default:
      return 0.0;
  }
}

// Where output element o's reduced set starts in x, and its g-th element.
__device__ __forceinline__ int64_t OutBase(const ReduceArgs& a, int64_t o) {
  int64_t base = 0;
  for (int j = a.out_rank - 1; j >= 0; --j) {
    base += (o % a.out_dims[j]) * a.out_strides[j];
    o /= a.out_dims[j];
  }
  return base;
}
__device__ __forceinline__ int64_t RedOffset(const ReduceArgs& a, int64_t base, int64_t g) {
  for (int j = a.red_rank - 1; j >= 0; --j) {
    base += (g % a.red_dims[j]) * a.red_strides[j];
    g /= a.red_dims[j];
  }
  return base;
}

template <typename T>
__global__ void ReduceKernel(ReduceArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
       o < a.out_count; o += warps) {
    const int64_t base = OutBase(a, o);
    const T* x = static_cast<const T*>(a.x);
    double acc = Init(a.op);
    for (int64_t g = lane; g < a.group; g += 32) {
      const int64_t off = RedOffset(a, base, g);
      double v = static_cast<double>(ToFloat(x[off]));
      if (a.op == ReduceOp::kL1) v = fabs(v);
      if (a.op == ReduceOp::kL2 || a.op == ReduceOp::kSumSquare) v = v * v;
      acc = Combine(a.op, acc, v);
    }
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) acc = Combine(a.op, acc, __shfl_xor_sync(0xffffffffu, acc, s));
    if (lane == 0) {
      if (a.op == ReduceOp::kMean) acc = a.group > 0 ? acc / static_cast<double>(a.group) : NAN;
      if (a.op == ReduceOp::kL2) acc = sqrt(acc);
      static_cast<T*>(a.y)[o] = FromFloat<T>(static_cast<float>(acc));
    }
  }
}

// Integers (i32, i64): wrap-around 64-bit arithmetic as the reference, then the low bits
// stored (sum, prod, l1, sum_square; max and min signed). Mean and L2 are not taken.
__device__ __forceinline__ uint64_t CombineInt(ReduceOp op, uint64_t a, uint64_t v) {
  switch (op) {
    case ReduceOp::kProd:
      return a * v;
    case ReduceOp::kMax:
      return static_cast<int64_t>(v) > static_cast<int64_t>(a) ? v : a;
    case ReduceOp::kMin:
      return static_cast<int64_t>(v) < static_cast<int64_t>(a) ? v : a;
    default:
      return a + v;
  }
}

template <typename T>
__global__ void ReduceIntKernel(ReduceArgs a, uint64_t init) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
       o < a.out_count; o += warps) {
    const int64_t base = OutBase(a, o);
    const T* x = static_cast<const T*>(a.x);
    uint64_t acc = init;
    for (int64_t g = lane; g < a.group; g += 32) {
      const int64_t off = RedOffset(a, base, g);
      uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(x[off]));
      if (a.op == ReduceOp::kL1 && static_cast<int64_t>(v) < 0) v = 0 - v;
      if (a.op == ReduceOp::kSumSquare) v = v * v;
      acc = CombineInt(a.op, acc, v);
    }
#pragma unroll
    for (int s = 16; s > 0; s >>= 1)
      acc = CombineInt(a.op, acc,
                       static_cast<uint64_t>(
                           __shfl_xor_sync(0xffffffffu, static_cast<unsigned long long>(acc), s)));
    if (lane == 0) static_cast<T*>(a.y)[o] = static_cast<T>(static_cast<int64_t>(acc));
  }
}

template <typename T>
uint64_t IntInit(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return 1;
    case ReduceOp::kMax:
      return static_cast<uint64_t>(static_cast<int64_t>(std::numeric_limits<T>::min()));
    case ReduceOp::kMin:
      return static_cast<uint64_t>(static_cast<int64_t>(std::numeric_limits<T>::max()));
    default:
      return 0;
  }
}

}  // namespace

cudaError_t Reduce(const ReduceArgs& a, cudaStream_t stream) {
  if (a.out_count == 0) return cudaSuccess;
  if (a.out_rank < 0 || a.out_rank > kMaxRank || a.red_rank < 0 || a.red_rank > kMaxRank)
    return cudaErrorInvalidValue;
  const unsigned grid = GridFor(a.out_count, kWarpsPerBlock);
  const int threads = kWarpsPerBlock * 32;
  switch (a.type) {
    case ElemType::kF32:
      ReduceKernel<float><<<grid, threads, 0, stream>>>(a);
      break;
    case ElemType::kF16:
      ReduceKernel<__half><<<grid, threads, 0, stream>>>(a);
      break;
    case ElemType::kBF16:
      ReduceKernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(a);
      break;
    case ElemType::kI32:
    case ElemType::kI64:
      if (a.op == ReduceOp::kMean || a.op == ReduceOp::kL2) return cudaErrorInvalidValue;
      if (a.type == ElemType::kI32)
        ReduceIntKernel<int32_t><<<grid, threads, 0, stream>>>(a, IntInit<int32_t>(a.op));
      else
        ReduceIntKernel<int64_t><<<grid, threads, 0, stream>>>(a, IntInit<int64_t>(a.op));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
