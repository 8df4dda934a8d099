// Internal to the elementwise kernel files (elementwise.cc, elementwise_unary.cc,
// elementwise_binary.cc): dtype traits and dispatch, broadcasting element walks, and the
// integer arithmetic shared by the unary and binary ops. Semantics are described at the
// top of elementwise.cc. Integers never go through double; floats compute in double.
#pragma once

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference::elementwise {

// Each file registers its own kernels; RegisterElementwiseKernels calls them.
void RegisterUnaryKernels(KernelTable& t);   // elementwise_unary.cc
void RegisterBinaryKernels(KernelTable& t);  // elementwise_binary.cc

// ---------------------------------------------------------------------------------------
// dtype traits: storage type S, compute type C (double for floats, the type itself for
// integers, bool for bool), and element load/store.

enum class Kind { kFloat, kInt, kBool };

template <DType D, typename S_, typename C_, Kind K>
struct TraitsBase {
  using S = S_;
  using C = C_;
  static constexpr DType kDType = D;
  static constexpr Kind kKind = K;
  static constexpr bool kFloat = K == Kind::kFloat;
  static constexpr bool kInt = K == Kind::kInt;
  static constexpr bool kBool = K == Kind::kBool;
};

template <DType D>
struct Tr;

template <DType D, typename T>
struct IntTraits : TraitsBase<D, T, T, Kind::kInt> {
  static T Load(const void* p, int64_t i) { return static_cast<const T*>(p)[i]; }
  static void Store(void* p, int64_t i, T v) { static_cast<T*>(p)[i] = v; }
};
template <>
struct Tr<DType::kI8> : IntTraits<DType::kI8, int8_t> {};
template <>
struct Tr<DType::kU8> : IntTraits<DType::kU8, uint8_t> {};
template <>
struct Tr<DType::kI16> : IntTraits<DType::kI16, int16_t> {};
template <>
struct Tr<DType::kU16> : IntTraits<DType::kU16, uint16_t> {};
template <>
struct Tr<DType::kI32> : IntTraits<DType::kI32, int32_t> {};
template <>
struct Tr<DType::kU32> : IntTraits<DType::kU32, uint32_t> {};
template <>
struct Tr<DType::kI64> : IntTraits<DType::kI64, int64_t> {};
template <>
struct Tr<DType::kU64> : IntTraits<DType::kU64, uint64_t> {};

template <>
struct Tr<DType::kF32> : TraitsBase<DType::kF32, float, double, Kind::kFloat> {
  static double Load(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  static void Store(void* p, int64_t i, double v) {
    static_cast<float*>(p)[i] = static_cast<float>(v);
  }
};
template <>
struct Tr<DType::kF64> : TraitsBase<DType::kF64, double, double, Kind::kFloat> {
  static double Load(const void* p, int64_t i) { return static_cast<const double*>(p)[i]; }
  static void Store(void* p, int64_t i, double v) { static_cast<double*>(p)[i] = v; }
};
template <>
struct Tr<DType::kF16> : TraitsBase<DType::kF16, uint16_t, double, Kind::kFloat> {
  static double Load(const void* p, int64_t i) {
    return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, int64_t i, double v) {
    static_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
  }
};
template <>
struct Tr<DType::kBF16> : TraitsBase<DType::kBF16, uint16_t, double, Kind::kFloat> {
  static double Load(const void* p, int64_t i) {
    return BF16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, int64_t i, double v) {
    static_cast<uint16_t*>(p)[i] = FloatToBF16(static_cast<float>(v));
  }
};
template <>
struct Tr<DType::kBool> : TraitsBase<DType::kBool, uint8_t, bool, Kind::kBool> {
  static bool Load(const void* p, int64_t i) { return static_cast<const uint8_t*>(p)[i] != 0; }
  static void Store(void* p, int64_t i, bool v) { static_cast<uint8_t*>(p)[i] = v ? 1 : 0; }
};

// Calls f(Tr<D>{}) for the runtime dtype `d`; f returns absl::StatusOr<Tensor>.
template <typename F>
absl::StatusOr<Tensor> Visit(DType d, const std::string& op, F&& f) {
  switch (d) {
    case DType::kF32:
      return f(Tr<DType::kF32>{});
    case DType::kF64:
      return f(Tr<DType::kF64>{});
    case DType::kF16:
      return f(Tr<DType::kF16>{});
    case DType::kBF16:
      return f(Tr<DType::kBF16>{});
    case DType::kI8:
      return f(Tr<DType::kI8>{});
    case DType::kU8:
      return f(Tr<DType::kU8>{});
    case DType::kI16:
      return f(Tr<DType::kI16>{});
    case DType::kU16:
      return f(Tr<DType::kU16>{});
    case DType::kI32:
      return f(Tr<DType::kI32>{});
    case DType::kU32:
      return f(Tr<DType::kU32>{});
    case DType::kI64:
      return f(Tr<DType::kI64>{});
    case DType::kU64:
      return f(Tr<DType::kU64>{});
    case DType::kBool:
      return f(Tr<DType::kBool>{});
    default:
      return UnsupportedDType(op, d);
  }
}

// ---------------------------------------------------------------------------------------
// Input checks and broadcasting.

inline absl::Status SameDType(const Tensor& a, const Tensor& b, const std::string& op) {
  if (a.dtype() != b.dtype())
    return absl::InvalidArgumentError(absl::StrCat(op, ": input dtypes differ (", DName(a.dtype()),
                                                   " vs ", DName(b.dtype()), ")"));
  return absl::OkStatus();
}

// Calls f(out_index, offsets) for every element of `out`, where offsets[k] is the flat
// index into input k broadcast to `out` (inputs are right-aligned, size-1 dims repeat).
template <size_t N, typename F>
void WalkBroadcast(const std::vector<int64_t>& out,
                   const std::array<const std::vector<int64_t>*, N>& ins, F&& f) {
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  if (total == 0) return;
  bool same = true;
  for (const auto* d : ins) same = same && *d == out;
  std::array<int64_t, N> off{};
  if (same) {
    for (int64_t i = 0; i < total; ++i) {
      off.fill(i);
      f(i, off);
    }
    return;
  }
  const int r = static_cast<int>(out.size());
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) {
    const std::vector<int64_t>& d = *ins[k];
    st[k].assign(r, 0);
    const int shift = r - static_cast<int>(d.size());
    int64_t stride = 1;
    for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
      if (d[i] != 1) st[k][i + shift] = stride;
      stride *= d[i];
    }
  }
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < total; ++i) {
    f(i, off);
    for (int d = r - 1; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += st[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= st[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

// out = fn(a[i], b[i]) with broadcasting; TA/TB/TO are dtype traits.
template <typename TA, typename TB, typename TO, typename Fn>
absl::StatusOr<Tensor> Map2(const Tensor& a, const Tensor& b, Fn fn) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, BroadcastShapes(a.dims(), b.dims()));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(TO::kDType, dims));
  const void* pa = a.raw();
  const void* pb = b.raw();
  void* po = out.raw();
  WalkBroadcast<2>(out.dims(), {&a.dims(), &b.dims()},
                   [&](int64_t i, const std::array<int64_t, 2>& o) {
                     TO::Store(po, i, fn(TA::Load(pa, o[0]), TB::Load(pb, o[1])));
                   });
  return out;
}

// out = fn(x[i]) with the same shape; TX/TO are dtype traits.
template <typename TX, typename TO, typename Fn>
absl::StatusOr<Tensor> Map1(const Tensor& x, Fn fn) {
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(TO::kDType, x.dims()));
  const void* px = x.raw();
  void* po = out.raw();
  const int64_t n = x.NumElements();
  for (int64_t i = 0; i < n; ++i) TO::Store(po, i, fn(TX::Load(px, i)));
  return out;
}

inline Result One(absl::StatusOr<Tensor> t) {
  if (!t.ok()) return t.status();
  return std::vector<Tensor>{*std::move(t)};
}

// ---------------------------------------------------------------------------------------
// Integer helpers: wrap-around arithmetic without signed-overflow UB.

template <typename T>
T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <typename T>
T WrapSub(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <typename T>
T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
template <typename T>
T WrapNeg(T a) {
  return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(a));
}
// Truncating division; b != 0 is checked by the caller. INT_MIN / -1 wraps to INT_MIN.
template <typename T>
T TruncDiv(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return WrapNeg(a);
  }
  return static_cast<T>(a / b);
}
// C remainder (sign of the dividend).
template <typename T>
T TruncRem(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
  }
  return static_cast<T>(a % b);
}
// Python remainder (sign of the divisor).
template <typename T>
T FloorRem(T a, T b) {
  T r = TruncRem(a, b);
  if constexpr (std::is_signed_v<T>) {
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Binary arithmetic (Add Sub Mul Div Mod Min Max BitShift) on one numeric dtype.

enum class Arith { kAdd, kSub, kMul, kDiv, kMod, kFMod, kMin, kMax, kShl, kShr };

template <Arith kOp, typename C>
C ApplyArith(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (kOp) {
      case Arith::kAdd:
        return a + b;
      case Arith::kSub:
        return a - b;
      case Arith::kMul:
        return a * b;
      case Arith::kDiv:
        return a / b;
      case Arith::kFMod:
        return std::fmod(a, b);
      case Arith::kMod: {
        C r = std::fmod(a, b);
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      }
      case Arith::kMin:
        return std::isnan(a) || std::isnan(b) ? NAN : (b < a ? b : a);
      case Arith::kMax:
        return std::isnan(a) || std::isnan(b) ? NAN : (b > a ? b : a);
      default:
        return 0;  // shifts are rejected before reaching here
    }
  } else {
    switch (kOp) {
      case Arith::kAdd:
        return WrapAdd(a, b);
      case Arith::kSub:
        return WrapSub(a, b);
      case Arith::kMul:
        return WrapMul(a, b);
      case Arith::kDiv:
        return TruncDiv(a, b);
      case Arith::kFMod:
        return TruncRem(a, b);
      case Arith::kMod:
        return FloorRem(a, b);
      case Arith::kMin:
        return b < a ? b : a;
      case Arith::kMax:
        return b > a ? b : a;
      case Arith::kShl:
        return b >= static_cast<C>(sizeof(C) * 8) ? C{0} : static_cast<C>(a << b);
      case Arith::kShr:
        return b >= static_cast<C>(sizeof(C) * 8) ? C{0} : static_cast<C>(a >> b);
    }
    return 0;
  }
}

// Float -> integer conversion that saturates out-of-range values and maps NaN to 0.
template <typename TI>
typename TI::C SaturatingFromDouble(double v) {
  using C = typename TI::C;
  if (std::isnan(v)) return C{0};
  constexpr double lo = static_cast<double>(std::numeric_limits<C>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<C>::max());
  if (v <= lo) return std::numeric_limits<C>::min();
  if (v >= hi) return std::numeric_limits<C>::max();
  return static_cast<C>(v);
}

}  // namespace kiln::reference::elementwise
