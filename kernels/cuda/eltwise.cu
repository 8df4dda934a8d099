// The generic elementwise kernel (eltwise.h).
#include <cuda/std/limits>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/eltwise.h"

namespace kiln::cuda {
namespace {

// ---- loads and stores between storage types and a domain type D ----------------------

template <typename D>
__device__ __forceinline__ D Load(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::kF32:
      return static_cast<D>(static_cast<const float*>(p)[i]);
    case ElemType::kF16:
      return static_cast<D>(__half2float(static_cast<const __half*>(p)[i]));
    case ElemType::kBF16:
      return static_cast<D>(__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]));
    case ElemType::kF64:
      return static_cast<D>(static_cast<const double*>(p)[i]);
    case ElemType::kI8:
      return static_cast<D>(static_cast<const int8_t*>(p)[i]);
    case ElemType::kU8:
      return static_cast<D>(static_cast<const uint8_t*>(p)[i]);
    case ElemType::kI16:
      return static_cast<D>(static_cast<const int16_t*>(p)[i]);
    case ElemType::kU16:
      return static_cast<D>(static_cast<const uint16_t*>(p)[i]);
    case ElemType::kI32:
      return static_cast<D>(static_cast<const int32_t*>(p)[i]);
    case ElemType::kU32:
      return static_cast<D>(static_cast<const uint32_t*>(p)[i]);
    case ElemType::kI64:
      return static_cast<D>(static_cast<const int64_t*>(p)[i]);
    case ElemType::kU64:
      return static_cast<D>(static_cast<const uint64_t*>(p)[i]);
    case ElemType::kBool:
      return static_cast<D>(static_cast<const uint8_t*>(p)[i] != 0);
  }
  return D{};
}

// Float -> integer: truncate, saturate, NaN -> 0 (the reference's Cast).
template <typename I, typename F>
__device__ __forceinline__ I SaturateTo(F v) {
  using L = ::cuda::std::numeric_limits<I>;
  if (v != v) return I{0};
  if (v <= static_cast<F>(L::min())) return L::min();
  if (v >= static_cast<F>(L::max())) return L::max();
  return static_cast<I>(v);
}

template <typename I, typename D>
__device__ __forceinline__ I ToInt(D v) {
  if constexpr (std::is_floating_point_v<D>) {
    return SaturateTo<I>(v);
  } else {
    return static_cast<I>(v);  // integers narrow by wrapping
  }
}

template <typename D>
__device__ __forceinline__ void Store(void* p, ElemType t, int64_t i, D v) {
  switch (t) {
    case ElemType::kF32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case ElemType::kF16:
      static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v));
      break;
    case ElemType::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v));
      break;
    case ElemType::kF64:
      static_cast<double*>(p)[i] = static_cast<double>(v);
      break;
    case ElemType::kI8:
      static_cast<int8_t*>(p)[i] = ToInt<int8_t>(v);
      break;
    case ElemType::kU8:
      static_cast<uint8_t*>(p)[i] = ToInt<uint8_t>(v);
      break;
    case ElemType::kI16:
      static_cast<int16_t*>(p)[i] = ToInt<int16_t>(v);
      break;
    case ElemType::kU16:
      static_cast<uint16_t*>(p)[i] = ToInt<uint16_t>(v);
      break;
    case ElemType::kI32:
      static_cast<int32_t*>(p)[i] = ToInt<int32_t>(v);
      break;
    case ElemType::kU32:
      static_cast<uint32_t*>(p)[i] = ToInt<uint32_t>(v);
      break;
    case ElemType::kI64:
      static_cast<int64_t*>(p)[i] = ToInt<int64_t>(v);
      break;
    case ElemType::kU64:
      static_cast<uint64_t*>(p)[i] = ToInt<uint64_t>(v);
      break;
    case ElemType::kBool:
      static_cast<uint8_t*>(p)[i] = v != D{0} ? 1 : 0;
      break;
  }
}

// ---- the ops, per domain ----------------------------------------------------------------

__device__ __forceinline__ bool IsBoolOp(EltOp op) {
  switch (op) {
    case EltOp::kIsNaN:
    case EltOp::kNot:
    case EltOp::kEqual:
    case EltOp::kLess:
    case EltOp::kLessOrEqual:
    case EltOp::kGreater:
    case EltOp::kGreaterOrEqual:
    case EltOp::kAnd:
    case EltOp::kOr:
    case EltOp::kXor:
      return true;
    default:
      return false;
  }
}

template <typename D>
__device__ __forceinline__ bool BoolResult(EltOp op, D a, D b) {
  switch (op) {
    case EltOp::kIsNaN:
      return a != a;
    case EltOp::kNot:
      return !(a != D{0});
    case EltOp::kEqual:
      return a == b;
    case EltOp::kLess:
      return a < b;
    case EltOp::kLessOrEqual:
      return a <= b;
    case EltOp::kGreater:
      return a > b;
    case EltOp::kGreaterOrEqual:
      return a >= b;
    case EltOp::kAnd:
      return (a != D{0}) && (b != D{0});
    case EltOp::kOr:
      return (a != D{0}) || (b != D{0});
    case EltOp::kXor:
      return (a != D{0}) != (b != D{0});
    default:
      return false;
  }
}

// Float domains (float, double).
template <typename F>
__device__ __forceinline__ F FloatResult(EltOp op, F a, F b) {
  constexpr F kNaN = F(NAN);
  switch (op) {
    case EltOp::kIdentity:
      return a;
    case EltOp::kNeg:
      return -a;
    case EltOp::kAbs:
      return fabs(a);
    case EltOp::kSign:
      return a != a ? a : (a > F(0) ? F(1) : (a < F(0) ? F(-1) : F(0)));
    case EltOp::kRelu:
      return a < F(0) ? F(0) : a;
    case EltOp::kSqrt:
      return sqrt(a);
    case EltOp::kReciprocal:
      return F(1) / a;
    case EltOp::kExp:
      return exp(a);
    case EltOp::kLog:
      return log(a);
    case EltOp::kErf:
      return erf(a);
    case EltOp::kTanh:
      return tanh(a);
    case EltOp::kSigmoid:
      return a >= F(0) ? F(1) / (F(1) + exp(-a)) : exp(a) / (F(1) + exp(a));
    case EltOp::kSin:
      return sin(a);
    case EltOp::kCos:
      return cos(a);
    case EltOp::kFloor:
      return floor(a);
    case EltOp::kCeil:
      return ceil(a);
    case EltOp::kRound:
      return rint(a);  // half to even
    case EltOp::kGelu:
      return F(0.5) * a * (F(1) + erf(a * F(0.70710678118654752440)));
    case EltOp::kGeluTanh:
      return F(0.5) * a * (F(1) + tanh(F(0.79788456080286535588) * (a + F(0.044715) * a * a * a)));
    case EltOp::kAdd:
      return a + b;
    case EltOp::kSub:
      return a - b;
    case EltOp::kMul:
      return a * b;
    case EltOp::kDiv:
      return a / b;
    case EltOp::kPow:
      return pow(a, b);
    case EltOp::kMax:
      return (a != a || b != b) ? kNaN : (b > a ? b : a);
    case EltOp::kMin:
      return (a != a || b != b) ? kNaN : (b < a ? b : a);
    case EltOp::kFMod:
      return fmod(a, b);
    case EltOp::kMod: {
      F r = fmod(a, b);
      if (r != F(0) && ((r < F(0)) != (b < F(0)))) r += b;
      return r;
    }
    default:
      return F(0);
  }
}

// Integer domains: I is int64_t or uint64_t; arithmetic wraps (unsigned math), division by
// zero is a data error reported through `bad`.
template <typename I>
__device__ __forceinline__ I IntResult(EltOp op, I a, I b, bool* bad) {
  using U = uint64_t;
  switch (op) {
    case EltOp::kIdentity:
      return a;
    case EltOp::kNeg:
      return static_cast<I>(U{0} - static_cast<U>(a));
    case EltOp::kAbs:
      if constexpr (std::is_signed_v<I>)
        return a < I{0} ? static_cast<I>(U{0} - static_cast<U>(a)) : a;
      return a;
    case EltOp::kSign:
      if constexpr (std::is_signed_v<I>) return a > I{0} ? I{1} : (a < I{0} ? I{-1} : I{0});
      return a > I{0} ? I{1} : I{0};
    case EltOp::kRelu:
      if constexpr (std::is_signed_v<I>) return a < I{0} ? I{0} : a;
      return a;
    case EltOp::kAdd:
      return static_cast<I>(static_cast<U>(a) + static_cast<U>(b));
    case EltOp::kSub:
      return static_cast<I>(static_cast<U>(a) - static_cast<U>(b));
    case EltOp::kMul:
      return static_cast<I>(static_cast<U>(a) * static_cast<U>(b));
    case EltOp::kMax:
      return b > a ? b : a;
    case EltOp::kMin:
      return b < a ? b : a;
    case EltOp::kDiv:
    case EltOp::kMod:
    case EltOp::kFMod: {
      if (b == I{0}) {
        *bad = true;
        return I{0};
      }
      if constexpr (std::is_signed_v<I>) {
        if (b == I{-1}) {  // INT_MIN / -1 wraps; the remainder is 0
          return op == EltOp::kDiv ? static_cast<I>(U{0} - static_cast<U>(a)) : I{0};
        }
      }
      if (op == EltOp::kDiv) return a / b;
      I r = a % b;
      if constexpr (std::is_signed_v<I>) {
        if (op == EltOp::kMod && r != I{0} && ((r < I{0}) != (b < I{0}))) r += b;
      }
      return r;
    }
    default:
      return I{0};
  }
}

template <typename D, bool CONTIG>
__global__ void EltKernel(EltwiseArgs a) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < a.n;
       o += stride) {
    int64_t off0 = o, off1 = o, off2 = o;
    if (!CONTIG) {
      off0 = off1 = off2 = 0;
      int64_t rem = o;
      for (int d = a.rank - 1; d >= 0; --d) {
        const int64_t idx = rem % a.dims[d];
        rem /= a.dims[d];
        off0 += idx * a.in[0].strides[d];
        off1 += idx * a.in[1].strides[d];  // zero strides past num_inputs
        off2 += idx * a.in[2].strides[d];
      }
    }
    if (a.op == EltOp::kWhere) {
      const bool c = Load<bool>(a.in[0].data, a.in[0].type, off0);
      const D v =
          c ? Load<D>(a.in[1].data, a.in[1].type, off1) : Load<D>(a.in[2].data, a.in[2].type, off2);
      Store<D>(a.y, a.out_type, o, v);
      continue;
    }
    const D x = Load<D>(a.in[0].data, a.in[0].type, off0);
    const D y = a.num_inputs > 1 ? Load<D>(a.in[1].data, a.in[1].type, off1) : D{};
    if (a.op == EltOp::kClip) {  // as the reference: a NaN x fails both tests
      const D hi = Load<D>(a.in[2].data, a.in[2].type, off2);
      D v = x < y ? y : x;
      v = v > hi ? hi : v;
      Store<D>(a.y, a.out_type, o, v);
      continue;
    }
    if (IsBoolOp(a.op)) {
      Store<bool>(a.y, a.out_type, o, BoolResult<D>(a.op, x, y));
      continue;
    }
    if constexpr (std::is_same_v<D, bool>) {
      Store<bool>(a.y, a.out_type, o, x);  // Identity (Cast from bool)
    } else if constexpr (std::is_floating_point_v<D>) {
      Store<D>(a.y, a.out_type, o, FloatResult<D>(a.op, x, y));
    } else {
      bool bad = false;
      const D r = IntResult<D>(a.op, x, y, &bad);
      if (bad) RecordError(a.err);
      Store<D>(a.y, a.out_type, o, r);
    }
  }
}

template <typename D>
cudaError_t LaunchD(const EltwiseArgs& a, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const unsigned grid = GridFor(a.n, kThreads, 4);
  if (a.contiguous)
    EltKernel<D, true><<<grid, kThreads, 0, stream>>>(a);
  else
    EltKernel<D, false><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Eltwise(const EltwiseArgs& a, cudaStream_t stream) {
  if (a.n == 0) return cudaSuccess;
  if (a.num_inputs < 1 || a.num_inputs > 3 || a.rank < 0 || a.rank > kMaxRank)
    return cudaErrorInvalidValue;
  switch (a.domain) {
    case EltDomainKind::kF32:
      return LaunchD<float>(a, stream);
    case EltDomainKind::kF64:
      return LaunchD<double>(a, stream);
    case EltDomainKind::kI64:
      return LaunchD<int64_t>(a, stream);
    case EltDomainKind::kU64:
      return LaunchD<uint64_t>(a, stream);
    case EltDomainKind::kBool:
      return LaunchD<bool>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
