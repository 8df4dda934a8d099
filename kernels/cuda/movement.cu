// Data-movement kernels (movement.h).
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/movement.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t Wrap(int64_t id, int64_t dim, bool* bad) {
  if (id < -dim || id >= dim) {
    *bad = true;
    return -1;
  }
  return id < 0 ? id + dim : id;
}

template <int SIZE>
__global__ void StridedCopyKernel(StridedCopyArgs a, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    int64_t rem = o, s = a.src_offset, d = a.dst_offset;
    for (int j = a.rank - 1; j >= 0; --j) {
      const int64_t idx = rem % a.dims[j];
      rem /= a.dims[j];
      s += idx * a.src_strides[j];
      d += idx * a.dst_strides[j];
    }
    CopyElem(a.src, s, a.dst, d, SIZE);
  }
}

template <int SIZE>
__global__ void GatherKernel(GatherArgs a) {
  const int64_t n = a.outer * a.num_indices * a.inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t r = o % a.inner, t = o / a.inner;
    const int64_t i = t % a.num_indices, outer = t / a.num_indices;
    bool bad = false;
    const int64_t id = Wrap(LoadIndex(a.indices, a.idx_i32, i), a.axis_dim, &bad);
    if (bad) {
      RecordError(a.err);
      ZeroElem(a.y, o, SIZE);
      continue;
    }
    CopyElem(a.data, (outer * a.axis_dim + id) * a.inner + r, a.y, o, SIZE);
  }
}

template <int SIZE>
__global__ void GatherNDKernel(GatherNDArgs a) {
  const int64_t n = a.batch * a.tuples * a.slice;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t r = o % a.slice, t = (o / a.slice) % a.tuples, b = o / (a.slice * a.tuples);
    const int64_t base = (b * a.tuples + t) * a.k;
    int64_t off = b * a.batch_stride;
    bool bad = false;
    for (int j = 0; j < a.k; ++j)
      off += Wrap(LoadIndex(a.indices, a.idx_i32, base + j), a.dims[j], &bad) * a.strides[j];
    if (bad) {
      RecordError(a.err);
      ZeroElem(a.y, o, SIZE);
      continue;
    }
    CopyElem(a.data, off + r, a.y, o, SIZE);
  }
}

template <int SIZE>
__global__ void GatherElementsKernel(GatherElementsArgs a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < a.n;
       o += step) {
    bool bad = false;
    const int64_t id = Wrap(LoadIndex(a.indices, a.idx_i32, o), a.axis_dim, &bad);
    if (bad) {
      RecordError(a.err);
      ZeroElem(a.y, o, SIZE);
      continue;
    }
    int64_t rem = o, off = 0;
    for (int j = a.rank - 1; j >= 0; --j) {
      const int64_t idx = rem % a.idx_dims[j];
      rem /= a.idx_dims[j];
      off += (j == a.axis ? id : idx) * a.data_strides[j];
    }
    CopyElem(a.data, off, a.y, o, SIZE);
  }
}

// CumSum's accumulator per storage type: floats in double (no wrap), integers in 64 bits
// with two's-complement wrap-around (as the reference), stored back truncated.
template <typename T>
struct ScanTraits {
  using Acc = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  static __device__ Acc Load(T v) { return static_cast<Acc>(v); }
  static __device__ Acc Add(Acc a, Acc b) {
    return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
  static __device__ T Store(Acc a) { return static_cast<T>(a); }
};
template <typename T>
struct FloatScanTraits {
  using Acc = double;
  static __device__ Acc Load(T v) { return static_cast<double>(ToFloat(v)); }
  static __device__ Acc Add(Acc a, Acc b) { return a + b; }
  static __device__ T Store(Acc a) { return FromFloat<T>(static_cast<float>(a)); }
};
template <>
struct ScanTraits<float> : FloatScanTraits<float> {};
template <>
struct ScanTraits<__half> : FloatScanTraits<__half> {};
template <>
struct ScanTraits<__nv_bfloat16> : FloatScanTraits<__nv_bfloat16> {};

template <typename T>
__global__ void CumSumKernel(CumSumArgs a) {
  using S = ScanTraits<T>;
  const int64_t lines = a.outer * a.inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines;
       l += step) {
    const int64_t o = l / a.inner, in = l % a.inner;
    int64_t first = o * a.len * a.inner + in, len = a.len;
    if (a.cu_seqlens != nullptr) {  // packed: inner = 1
      first = a.cu_seqlens[o];
      len = a.cu_seqlens[o + 1] - first;
    }
    const T* x = static_cast<const T*>(a.x) + first;
    T* y = static_cast<T*>(a.y) + first;
    typename S::Acc acc = 0;
    for (int64_t k = 0; k < len; ++k) {
      const int64_t j = (a.reverse ? len - 1 - k : k) * a.inner;
      const typename S::Acc v = S::Load(x[j]);
      if (a.exclusive) {
        y[j] = S::Store(acc);
        acc = S::Add(acc, v);
      } else {
        acc = S::Add(acc, v);
        y[j] = S::Store(acc);
      }
    }
  }
}

template <typename T>
__global__ void FillKernel(T* y, int64_t n, T v) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = v;
}

template <template <int> class K, typename A>
cudaError_t BySize(int size, unsigned grid, const A& a, cudaStream_t stream) {
  switch (size) {
    case 1:
      K<1>::Launch(grid, a, stream);
      break;
    case 2:
      K<2>::Launch(grid, a, stream);
      break;
    case 4:
      K<4>::Launch(grid, a, stream);
      break;
    case 8:
      K<8>::Launch(grid, a, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <int S>
struct GatherL {
  static void Launch(unsigned g, const GatherArgs& a, cudaStream_t s) {
    GatherKernel<S><<<g, kThreads, 0, s>>>(a);
  }
};
template <int S>
struct GatherNDL {
  static void Launch(unsigned g, const GatherNDArgs& a, cudaStream_t s) {
    GatherNDKernel<S><<<g, kThreads, 0, s>>>(a);
  }
};
template <int S>
struct GatherElementsL {
  static void Launch(unsigned g, const GatherElementsArgs& a, cudaStream_t s) {
    GatherElementsKernel<S><<<g, kThreads, 0, s>>>(a);
  }
};

}  // namespace

cudaError_t StridedCopy(const StridedCopyArgs& a, cudaStream_t stream) {
  if (a.rank < 0 || a.rank > kMaxRank) return cudaErrorInvalidValue;
  int64_t n = 1;
  for (int j = 0; j < a.rank; ++j) n *= a.dims[j];
  if (n == 0) return cudaSuccess;
  const unsigned grid = GridFor(n, kThreads, 4);
  switch (a.elem_size) {
    case 1:
      StridedCopyKernel<1><<<grid, kThreads, 0, stream>>>(a, n);
      break;
    case 2:
      StridedCopyKernel<2><<<grid, kThreads, 0, stream>>>(a, n);
      break;
    case 4:
      StridedCopyKernel<4><<<grid, kThreads, 0, stream>>>(a, n);
      break;
    case 8:
      StridedCopyKernel<8><<<grid, kThreads, 0, stream>>>(a, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t Fill(void* y, int64_t n, int elem_size, uint64_t bits, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned grid = GridFor(n, kThreads, 4);
  switch (elem_size) {
    case 1:
      FillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint8_t*>(y), n,
                                                static_cast<uint8_t>(bits));
      break;
    case 2:
      FillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint16_t*>(y), n,
                                                static_cast<uint16_t>(bits));
      break;
    case 4:
      FillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint32_t*>(y), n,
                                                static_cast<uint32_t>(bits));
      break;
    case 8:
      FillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint64_t*>(y), n, bits);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t Gather(const GatherArgs& a, cudaStream_t stream) {
  const int64_t n = a.outer * a.num_indices * a.inner;
  if (n == 0) return cudaSuccess;
  return BySize<GatherL>(a.elem_size, GridFor(n, kThreads, 4), a, stream);
}

cudaError_t GatherND(const GatherNDArgs& a, cudaStream_t stream) {
  const int64_t n = a.batch * a.tuples * a.slice;
  if (n == 0) return cudaSuccess;
  if (a.k < 0 || a.k > kMaxRank) return cudaErrorInvalidValue;
  return BySize<GatherNDL>(a.elem_size, GridFor(n, kThreads, 4), a, stream);
}

cudaError_t GatherElements(const GatherElementsArgs& a, cudaStream_t stream) {
  if (a.n == 0) return cudaSuccess;
  if (a.rank < 1 || a.rank > kMaxRank || a.axis < 0 || a.axis >= a.rank)
    return cudaErrorInvalidValue;
  return BySize<GatherElementsL>(a.elem_size, GridFor(a.n, kThreads, 4), a, stream);
}

cudaError_t CumSum(const CumSumArgs& a, cudaStream_t stream) {
  const int64_t lines = a.outer * a.inner;
  if (lines == 0 || a.len == 0) return cudaSuccess;
  if (a.cu_seqlens != nullptr && (a.inner != 1 || a.reverse)) return cudaErrorInvalidValue;
  const unsigned grid = GridFor(lines, kThreads);
  switch (a.type) {
    case ElemType::kF32:
      CumSumKernel<float><<<grid, kThreads, 0, stream>>>(a);
      break;
    case ElemType::kF16:
      CumSumKernel<__half><<<grid, kThreads, 0, stream>>>(a);
      break;
    case ElemType::kBF16:
      CumSumKernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(a);
      break;
    case ElemType::kI32:
      CumSumKernel<int32_t><<<grid, kThreads, 0, stream>>>(a);
      break;
    case ElemType::kI64:
      CumSumKernel<int64_t><<<grid, kThreads, 0, stream>>>(a);
      break;
    case ElemType::kU32:
      CumSumKernel<uint32_t><<<grid, kThreads, 0, stream>>>(a);
      break;
    case ElemType::kU64:
      CumSumKernel<uint64_t><<<grid, kThreads, 0, stream>>>(a);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
