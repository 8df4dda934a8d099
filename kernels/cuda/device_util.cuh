// Device-side helpers shared by the .cu files: float conversion of the storage types,
// warp and block reductions in fp32, the error word, and 16-byte vector access.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

// f(T{}) with T the C++ type of float element type `t` (float, __half, __nv_bfloat16), for
// launching a kernel template on the operand dtype; cudaErrorInvalidValue for other types.
template <typename F>
cudaError_t DispatchFloat(ElemType t, F&& f) {
  switch (t) {
    case ElemType::kF32:
      return f(float{});
    case ElemType::kF16:
      return f(__half{});
    case ElemType::kBF16:
      return f(__nv_bfloat16{});
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// act(v) in f32 (common.h's LinearAct).
__device__ __forceinline__ float Activate(float v, LinearAct act) {
  switch (act) {
    case LinearAct::kGeluErf:
      return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f));
    case LinearAct::kGeluTanh:
      return 0.5f * v * (1.f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
    case LinearAct::kRelu:
      return fmaxf(v, 0.f);
    case LinearAct::kTanh:
      return tanhf(v);
    case LinearAct::kNone:
      break;
  }
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `scratch` holds 32 floats of shared memory; safe to call back to back.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  return WarpSum(v);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(v);
}

__device__ __forceinline__ void RecordError(const ErrorSink& e) {
  if (e.word != nullptr) atomicCAS(e.word, 0u, e.code);
}

// VEC consecutive elements of T as one aligned access (16 bytes when VEC * sizeof(T) = 16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

// Element i of a buffer of runtime type `t`, as double (index/elementwise kernels).
__device__ __forceinline__ double LoadAsDouble(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::kF32:
      return static_cast<const float*>(p)[i];
    case ElemType::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case ElemType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case ElemType::kF64:
      return static_cast<const double*>(p)[i];
    case ElemType::kI8:
      return static_cast<const int8_t*>(p)[i];
    case ElemType::kU8:
      return static_cast<const uint8_t*>(p)[i];
    case ElemType::kI16:
      return static_cast<const int16_t*>(p)[i];
    case ElemType::kU16:
      return static_cast<const uint16_t*>(p)[i];
    case ElemType::kI32:
      return static_cast<const int32_t*>(p)[i];
    case ElemType::kU32:
      return static_cast<const uint32_t*>(p)[i];
    case ElemType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case ElemType::kU64:
      return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case ElemType::kBool:
      return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

// An index tensor element (i32 or i64).
__device__ __forceinline__ int64_t LoadIndex(const void* p, bool i32, int64_t i) {
  return i32 ? static_cast<int64_t>(static_cast<const int32_t*>(p)[i])
             : static_cast<const int64_t*>(p)[i];
}

// Copies one element of `size` bytes (1, 2, 4 or 8).
__device__ __forceinline__ void CopyElem(const void* src, int64_t si, void* dst, int64_t di,
                                         int size) {
  switch (size) {
    case 1:
      static_cast<uint8_t*>(dst)[di] = static_cast<const uint8_t*>(src)[si];
      break;
    case 2:
      static_cast<uint16_t*>(dst)[di] = static_cast<const uint16_t*>(src)[si];
      break;
    case 4:
      static_cast<uint32_t*>(dst)[di] = static_cast<const uint32_t*>(src)[si];
      break;
    default:
      static_cast<uint64_t*>(dst)[di] = static_cast<const uint64_t*>(src)[si];
      break;
  }
}

__device__ __forceinline__ void ZeroElem(void* dst, int64_t di, int size) {
  switch (size) {
    case 1:
      static_cast<uint8_t*>(dst)[di] = 0;
      break;
    case 2:
      static_cast<uint16_t*>(dst)[di] = 0;
      break;
    case 4:
      static_cast<uint32_t*>(dst)[di] = 0;
      break;
    default:
      static_cast<uint64_t*>(dst)[di] = 0;
      break;
  }
}

}  // namespace kiln::cuda
