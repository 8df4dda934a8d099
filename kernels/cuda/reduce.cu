// Reduction kernel (reduce.h).
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

template <typename T>
__global__ void ReduceKernel(ReduceArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
       o < a.out_count; o += warps) {
    int64_t rem = o, base = 0;
    for (int j = a.out_rank - 1; j >= 0; --j) {
      base += (rem % a.out_dims[j]) * a.out_strides[j];
      rem /= a.out_dims[j];
    }
    const T* x = static_cast<const T*>(a.x);
    double acc = Init(a.op);
    for (int64_t g = lane; g < a.group; g += 32) {
      int64_t r = g, off = base;
      for (int j = a.red_rank - 1; j >= 0; --j) {
        off += (r % a.red_dims[j]) * a.red_strides[j];
        r /= a.red_dims[j];
      }
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
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
