// Elementwise reference kernels: unary math, binary arithmetic and comparisons with
// multidirectional (numpy) broadcasting, variadic Min/Max/Sum/Mean, logic ops, Where,
// Clip and Cast. Semantics follow the ONNX spec (opset 21 forms):
//  - integers are computed in their own type with two's-complement wrap-around (never
//    through double), integer Div truncates toward zero, integer division by zero is an
//    InvalidArgument error rather than undefined behaviour;
//  - floats are computed in double and rounded once to the output type (for f16/bf16 via
//    f32, as ONNX Runtime and numpy do); + - * / and sqrt therefore give the correctly
//    rounded f32 result, transcendental functions are at least as accurate as f32 libm;
//  - Min/Max propagate NaN (numpy.minimum/maximum);
//  - Cast float->int truncates, saturates out-of-range values and maps NaN to 0 (the spec
//    leaves these undefined); Cast to/from string is Unimplemented.
// Unsupported dtypes give Unimplemented naming the dtype. Clarity beats speed here.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

// absl 20220623 StrCat does not take std::string_view.
std::string DName(DType d) { return std::string(DTypeName(d)); }

using Inputs = absl::Span<const Tensor* const>;
using Result = absl::StatusOr<std::vector<Tensor>>;

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

absl::Status UnsupportedDType(const std::string& op, DType d) {
  return absl::UnimplementedError(absl::StrCat(op, " does not support dtype ", DName(d)));
}

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
// Input access and broadcasting.

absl::StatusOr<const Tensor*> Arg(Inputs in, int i, const std::string& op) {
  if (i >= static_cast<int>(in.size()) || in[i] == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(op, ": required input ", i, " is missing"));
  return in[i];
}

const Tensor* OptArg(Inputs in, int i) { return i < static_cast<int>(in.size()) ? in[i] : nullptr; }

absl::Status SameDType(const Tensor& a, const Tensor& b, const std::string& op) {
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

Result One(absl::StatusOr<Tensor> t) {
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

template <Arith kOp>
absl::StatusOr<Tensor> ArithTensors(const Tensor& a, const Tensor& b, const std::string& op) {
  KILN_RETURN_IF_ERROR(SameDType(a, b, op));
  return Visit(a.dtype(), op, [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kBool) {
      return UnsupportedDType(op, a.dtype());
    } else {
      constexpr bool kShift = kOp == Arith::kShl || kOp == Arith::kShr;
      if constexpr (kShift) {
        if constexpr (!T::kInt || std::is_signed_v<typename T::C>) {
          return UnsupportedDType(op, a.dtype());
        }
      }
      if constexpr (T::kInt && (kOp == Arith::kDiv || kOp == Arith::kMod || kOp == Arith::kFMod)) {
        int64_t out_n = 1;
        KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, BroadcastShapes(a.dims(), b.dims()));
        for (int64_t d : dims) out_n *= d;
        for (int64_t i = 0; out_n > 0 && i < b.NumElements(); ++i)
          if (T::Load(b.raw(), i) == 0)
            return absl::InvalidArgumentError(absl::StrCat(op, ": integer division by zero"));
      }
      return Map2<T, T, T>(a, b, [](auto x, auto y) { return ApplyArith<kOp>(x, y); });
    }
  });
}

template <Arith kOp>
Result BinaryArith(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  return One(ArithTensors<kOp>(*a, *b, node.op()));
}

Result ModKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  const int64_t fmod = node.attr_int_or("fmod", 0);
  if (fmod != 0 && fmod != 1)
    return absl::InvalidArgumentError(absl::StrCat("fmod must be 0 or 1, got ", fmod));
  if (fmod == 0 && IsFloat(a->dtype()))
    return absl::InvalidArgumentError("Mod on floating-point inputs requires fmod=1");
  if (fmod == 1) return One(ArithTensors<Arith::kFMod>(*a, *b, node.op()));
  return One(ArithTensors<Arith::kMod>(*a, *b, node.op()));
}

Result BitShiftKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  const std::string* dir = node.attr_string("direction");
  if (dir == nullptr || (*dir != "LEFT" && *dir != "RIGHT"))
    return absl::InvalidArgumentError("BitShift needs direction \"LEFT\" or \"RIGHT\"");
  if (*dir == "LEFT") return One(ArithTensors<Arith::kShl>(*a, *b, node.op()));
  return One(ArithTensors<Arith::kShr>(*a, *b, node.op()));
}

// Variadic Min / Max / Sum / Mean: a left fold of the binary op (each step rounds to the
// output type, as numpy does). Mean divides the sum by the input count.
template <Arith kOp>
absl::StatusOr<Tensor> FoldVariadic(const Node& node, Inputs in) {
  if (in.empty()) return absl::InvalidArgumentError(absl::StrCat(node.op(), " needs an input"));
  KILN_ASSIGN_OR_RETURN(const Tensor* first, Arg(in, 0, node.op()));
  Tensor acc = *first;
  for (size_t i = 1; i < in.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* next, Arg(in, static_cast<int>(i), node.op()));
    KILN_ASSIGN_OR_RETURN(acc, ArithTensors<kOp>(acc, *next, node.op()));
  }
  if (in.size() == 1) {  // no binary step ran: validate the dtype here
    if (acc.dtype() == DType::kBool || DTypeSize(acc.dtype()) == 0)
      return UnsupportedDType(node.op(), acc.dtype());
    acc = acc.Clone();
  }
  return acc;
}

template <Arith kOp>
Result Variadic(const Node& node, Inputs in) {
  return One(FoldVariadic<kOp>(node, in));
}

Result MeanKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(Tensor sum, FoldVariadic<Arith::kAdd>(node, in));
  if (!IsFloat(sum.dtype())) return UnsupportedDType(node.op(), sum.dtype());
  const double n = static_cast<double>(in.size());
  return One(Visit(sum.dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kFloat) {
      return Map1<T, T>(sum, [n](double v) { return v / n; });
    } else {
      return UnsupportedDType("Mean", sum.dtype());
    }
  }));
}

// ---------------------------------------------------------------------------------------
// Pow: the base's dtype decides the output; the exponent may be any numeric dtype.

template <typename T>
absl::StatusOr<T> IntPow(T base, int64_t e) {
  if (e < 0) {
    if (base == 0) return absl::InvalidArgumentError("Pow: integer zero to a negative power");
    if (base == 1) return T{1};
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return static_cast<T>((e % 2 == 0) ? 1 : -1);
    }
    return T{0};  // |1 / base^|e|| < 1 truncates to zero
  }
  T result = 1;
  T b = base;
  while (e > 0) {
    if (e & 1) result = WrapMul(result, b);
    b = WrapMul(b, b);
    e >>= 1;
  }
  return result;
}

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

Result PowKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  return One(Visit(a->dtype(), "Pow", [&](auto ta) -> absl::StatusOr<Tensor> {
    using TA = decltype(ta);
    if constexpr (TA::kBool) {
      return UnsupportedDType("Pow", a->dtype());
    } else {
      return Visit(b->dtype(), "Pow", [&](auto tb) -> absl::StatusOr<Tensor> {
        using TB = decltype(tb);
        if constexpr (TB::kBool) {
          return UnsupportedDType("Pow", b->dtype());
        } else if constexpr (TA::kFloat) {
          return Map2<TA, TB, TA>(
              *a, *b, [](double x, auto y) { return std::pow(x, static_cast<double>(y)); });
        } else if constexpr (TB::kFloat) {
          return Map2<TA, TB, TA>(*a, *b, [](auto x, double y) {
            return SaturatingFromDouble<TA>(std::pow(static_cast<double>(x), y));
          });
        } else {
          absl::Status err;
          using CA = typename TA::C;
          auto t = Map2<TA, TB, TA>(*a, *b, [&err](CA x, auto y) {
            int64_t e = static_cast<int64_t>(y);
            if constexpr (std::is_same_v<decltype(y), uint64_t>) {
              if (y > static_cast<uint64_t>(INT64_MAX)) e = INT64_MAX;
            }
            absl::StatusOr<CA> r = IntPow<CA>(x, e);
            if (!r.ok()) {
              err = r.status();
              return CA{0};
            }
            return *r;
          });
          if (!err.ok()) return err;
          return t;
        }
      });
    }
  }));
}

// ---------------------------------------------------------------------------------------
// Comparisons and logic (bool outputs).

enum class Cmp { kEq, kLt, kGt, kLe, kGe };

template <Cmp kOp>
Result CompareKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  KILN_RETURN_IF_ERROR(SameDType(*a, *b, node.op()));
  return One(Visit(a->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kBool) {
      if (kOp != Cmp::kEq) return UnsupportedDType(node.op(), a->dtype());
    }
    return Map2<T, T, Tr<DType::kBool>>(*a, *b, [](auto x, auto y) -> bool {
      switch (kOp) {
        case Cmp::kEq:
          return x == y;
        case Cmp::kLt:
          return x < y;
        case Cmp::kGt:
          return x > y;
        case Cmp::kLe:
          return x <= y;
        case Cmp::kGe:
          return x >= y;
      }
      return false;
    });
  }));
}

enum class Logic { kAnd, kOr, kXor };

template <Logic kOp>
Result LogicKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  if (a->dtype() != DType::kBool) return UnsupportedDType(node.op(), a->dtype());
  if (b->dtype() != DType::kBool) return UnsupportedDType(node.op(), b->dtype());
  using B = Tr<DType::kBool>;
  return One(Map2<B, B, B>(*a, *b, [](bool x, bool y) {
    switch (kOp) {
      case Logic::kAnd:
        return x && y;
      case Logic::kOr:
        return x || y;
      case Logic::kXor:
        return x != y;
    }
    return false;
  }));
}

Result NotKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (x->dtype() != DType::kBool) return UnsupportedDType(node.op(), x->dtype());
  using B = Tr<DType::kBool>;
  return One(Map1<B, B>(*x, [](bool v) { return !v; }));
}

// IsNaN / IsInf: float inputs, bool output.
Result IsNaNKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(Visit(x->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kFloat) {
      return Map1<T, Tr<DType::kBool>>(*x, [](double v) { return std::isnan(v); });
    } else {
      return UnsupportedDType(node.op(), x->dtype());
    }
  }));
}

Result IsInfKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const bool neg = node.attr_int_or("detect_negative", 1) != 0;
  const bool pos = node.attr_int_or("detect_positive", 1) != 0;
  return One(Visit(x->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kFloat) {
      return Map1<T, Tr<DType::kBool>>(
          *x, [&](double v) { return std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg)); });
    } else {
      return UnsupportedDType(node.op(), x->dtype());
    }
  }));
}

// ---------------------------------------------------------------------------------------
// Unary ops. Float-only functions take and return double.

template <typename Fn>
absl::StatusOr<Tensor> MapFloat(const Tensor& x, const std::string& op, Fn fn) {
  return Visit(x.dtype(), op, [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kFloat) {
      return Map1<T, T>(x, fn);
    } else {
      return UnsupportedDType(op, x.dtype());
    }
  });
}

// Applies fn(double) for floats and fi(C) for integers (signed only if `signed_only`).
template <typename FnF, typename FnI>
absl::StatusOr<Tensor> MapNumeric(const Tensor& x, const std::string& op, bool signed_only, FnF ff,
                                  FnI fi) {
  return Visit(x.dtype(), op, [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kFloat) {
      return Map1<T, T>(x, ff);
    } else if constexpr (T::kInt) {
      if (signed_only && !std::is_signed_v<typename T::C>) return UnsupportedDType(op, x.dtype());
      return Map1<T, T>(x, [&](typename T::C v) { return fi(v); });
    } else {
      return UnsupportedDType(op, x.dtype());
    }
  });
}

template <double (*F)(double)>
Result FloatUnary(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapFloat(*x, node.op(), [](double v) { return F(v); }));
}

double Sqrt(double v) { return std::sqrt(v); }
double Exp(double v) { return std::exp(v); }
double Log(double v) { return std::log(v); }
double Erf(double v) { return std::erf(v); }
double Tanh(double v) { return std::tanh(v); }
double Sin(double v) { return std::sin(v); }
double Cos(double v) { return std::cos(v); }
double Tan(double v) { return std::tan(v); }
double Asin(double v) { return std::asin(v); }
double Acos(double v) { return std::acos(v); }
double Atan(double v) { return std::atan(v); }
double Sinh(double v) { return std::sinh(v); }
double Cosh(double v) { return std::cosh(v); }
double Asinh(double v) { return std::asinh(v); }
double Acosh(double v) { return std::acosh(v); }
double Atanh(double v) { return std::atanh(v); }
double Floor(double v) { return std::floor(v); }
double Ceil(double v) { return std::ceil(v); }
double Round(double v) { return std::nearbyint(v); }  // half to even (default rounding mode)
double Reciprocal(double v) { return 1.0 / v; }
double Sigmoid(double v) {
  return v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v));
}
double Softplus(double v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); }
double Softsign(double v) { return v / (1.0 + std::fabs(v)); }

Result ReluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapNumeric(
      *x, node.op(), /*signed_only=*/true, [](double v) { return v < 0 ? 0.0 : v; },
      [](auto v) { return v < 0 ? decltype(v){0} : v; }));
}

Result NegKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapNumeric(
      *x, node.op(), /*signed_only=*/true, [](double v) { return -v; },
      [](auto v) { return WrapNeg(v); }));
}

Result AbsKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapNumeric(
      *x, node.op(), /*signed_only=*/false, [](double v) { return std::fabs(v); },
      [](auto v) {
        if constexpr (std::is_signed_v<decltype(v)>) {
          return v < 0 ? WrapNeg(v) : v;
        } else {
          return v;
        }
      }));
}

Result SignKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapNumeric(
      *x, node.op(), /*signed_only=*/false,
      [](double v) { return std::isnan(v) ? v : (v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0)); },
      [](auto v) {
        using C = decltype(v);
        return static_cast<C>(v > 0 ? 1 : (v < 0 ? -1 : 0));
      }));
}

Result GeluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const std::string* approx = node.attr_string("approximate");
  const bool use_tanh = approx != nullptr && *approx == "tanh";
  if (approx != nullptr && *approx != "tanh" && *approx != "none")
    return absl::InvalidArgumentError(
        absl::StrCat("approximate must be \"none\" or \"tanh\", got \"", *approx, "\""));
  if (use_tanh) {
    const double k = std::sqrt(2.0 / M_PI);
    return One(MapFloat(*x, node.op(), [k](double v) {
      return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
    }));
  }
  return One(MapFloat(*x, node.op(),
                      [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }));
}

Result LeakyReluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 0.01f);
  return One(MapFloat(*x, node.op(), [alpha](double v) { return v < 0 ? alpha * v : v; }));
}

Result EluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 1.0f);
  return One(
      MapFloat(*x, node.op(), [alpha](double v) { return v < 0 ? alpha * std::expm1(v) : v; }));
}

Result CeluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 1.0f);
  if (alpha == 0) return absl::InvalidArgumentError("Celu alpha must be nonzero");
  return One(MapFloat(*x, node.op(), [alpha](double v) {
    return std::max(0.0, v) + std::min(0.0, alpha * std::expm1(v / alpha));
  }));
}

Result SeluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 1.67326319217681884765625f);
  const double gamma = node.attr_float_or("gamma", 1.05070102214813232421875f);
  return One(MapFloat(*x, node.op(), [alpha, gamma](double v) {
    return v > 0 ? gamma * v : gamma * alpha * std::expm1(v);
  }));
}

Result HardSigmoidKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 0.2f);
  const double beta = node.attr_float_or("beta", 0.5f);
  return One(MapFloat(*x, node.op(), [alpha, beta](double v) {
    return std::max(0.0, std::min(1.0, alpha * v + beta));
  }));
}

Result HardSwishKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapFloat(*x, node.op(),
                      [](double v) { return v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5)); }));
}

Result ThresholdedReluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 1.0f);
  return One(MapFloat(*x, node.op(), [alpha](double v) { return v > alpha ? v : 0.0; }));
}

Result MishKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(MapFloat(*x, node.op(), [](double v) { return v * std::tanh(Softplus(v)); }));
}

// PRelu: y = x < 0 ? slope * x : x, slope broadcast to x.
Result PReluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* slope, Arg(in, 1, node.op()));
  KILN_RETURN_IF_ERROR(SameDType(*x, *slope, node.op()));
  return One(Visit(x->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (T::kBool) {
      return UnsupportedDType(node.op(), x->dtype());
    } else {
      return Map2<T, T, T>(
          *x, *slope, [](auto v, auto s) { return v < 0 ? ApplyArith<Arith::kMul>(s, v) : v; });
    }
  }));
}

// ---------------------------------------------------------------------------------------
// Where, Clip, Cast.

Result WhereKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* c, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* y, Arg(in, 2, node.op()));
  if (c->dtype() != DType::kBool)
    return absl::InvalidArgumentError(
        absl::StrCat("condition must be bool, got ", DName(c->dtype())));
  KILN_RETURN_IF_ERROR(SameDType(*x, *y, node.op()));
  const size_t es = DTypeSize(x->dtype());
  if (es == 0) return UnsupportedDType(node.op(), x->dtype());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, BroadcastShapes(c->dims(), x->dims()));
  KILN_ASSIGN_OR_RETURN(dims, BroadcastShapes(dims, y->dims()));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x->dtype(), dims));
  const uint8_t* pc = c->data<uint8_t>();
  const std::byte* px = x->raw();
  const std::byte* py = y->raw();
  std::byte* po = out.raw();
  WalkBroadcast<3>(out.dims(), {&c->dims(), &x->dims(), &y->dims()},
                   [&](int64_t i, const std::array<int64_t, 3>& o) {
                     const std::byte* src = pc[o[0]] ? px + o[1] * es : py + o[2] * es;
                     std::memcpy(po + i * es, src, es);
                   });
  return std::vector<Tensor>{std::move(out)};
}

Result ClipKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const Tensor* lo = OptArg(in, 1);
  const Tensor* hi = OptArg(in, 2);
  for (const Tensor* b : {lo, hi}) {
    if (b == nullptr) continue;
    KILN_RETURN_IF_ERROR(SameDType(*x, *b, node.op()));
    if (b->NumElements() != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("min/max must be scalars, got shape ", b->ShapeString()));
  }
  return One(Visit(x->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    using C = typename T::C;
    if constexpr (T::kBool) {
      return UnsupportedDType(node.op(), x->dtype());
    } else {
      const bool has_lo = lo != nullptr, has_hi = hi != nullptr;
      const C l = has_lo ? T::Load(lo->raw(), 0) : C{};
      const C h = has_hi ? T::Load(hi->raw(), 0) : C{};
      return Map1<T, T>(*x, [&](C v) {
        if (has_lo && v < l) v = l;
        if (has_hi && v > h) v = h;
        return v;
      });
    }
  }));
}

template <typename To, typename FromC>
typename To::C ConvertValue(FromC v) {
  using TC = typename To::C;
  if constexpr (To::kFloat) {
    return static_cast<double>(v);
  } else if constexpr (To::kBool) {
    return v != FromC{0};
  } else if constexpr (std::is_floating_point_v<FromC>) {
    return SaturatingFromDouble<To>(v);
  } else {
    return static_cast<TC>(v);  // integer narrowing wraps (C++20 modular conversion)
  }
}

absl::StatusOr<Tensor> CastTensor(const Tensor& x, DType to) {
  if (x.dtype() == DType::kString || to == DType::kString)
    return absl::UnimplementedError("Cast to or from string is not supported");
  return Visit(x.dtype(), "Cast", [&](auto tf) -> absl::StatusOr<Tensor> {
    using TF = decltype(tf);
    return Visit(to, "Cast", [&](auto tt) -> absl::StatusOr<Tensor> {
      using TT = decltype(tt);
      return Map1<TF, TT>(x, [](typename TF::C v) { return ConvertValue<TT>(v); });
    });
  });
}

Result CastKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const std::optional<int64_t> code = node.attr_int("to");
  if (!code) return absl::InvalidArgumentError("Cast needs the 'to' attribute");
  const std::optional<DType> to = *code >= 0 && *code <= INT32_MAX
                                      ? DTypeFromOnnx(static_cast<int32_t>(*code))
                                      : std::nullopt;
  if (!to) return absl::UnimplementedError(absl::StrCat("Cast to ONNX dtype ", *code));
  return One(CastTensor(*x, *to));
}

// CastLike: cast input 0 to the dtype of input 1.
Result CastLikeKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* like, Arg(in, 1, node.op()));
  return One(CastTensor(*x, like->dtype()));
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& t) {
  auto add = [&t](const std::string& op, KernelFn fn) { t[KernelKey("", op)] = fn; };
  add("Add", &BinaryArith<Arith::kAdd>);
  add("Sub", &BinaryArith<Arith::kSub>);
  add("Mul", &BinaryArith<Arith::kMul>);
  add("Div", &BinaryArith<Arith::kDiv>);
  add("Mod", &ModKernel);
  add("BitShift", &BitShiftKernel);
  add("Pow", &PowKernel);
  add("Min", &Variadic<Arith::kMin>);
  add("Max", &Variadic<Arith::kMax>);
  add("Sum", &Variadic<Arith::kAdd>);
  add("Mean", &MeanKernel);
  add("Equal", &CompareKernel<Cmp::kEq>);
  add("Less", &CompareKernel<Cmp::kLt>);
  add("Greater", &CompareKernel<Cmp::kGt>);
  add("LessOrEqual", &CompareKernel<Cmp::kLe>);
  add("GreaterOrEqual", &CompareKernel<Cmp::kGe>);
  add("And", &LogicKernel<Logic::kAnd>);
  add("Or", &LogicKernel<Logic::kOr>);
  add("Xor", &LogicKernel<Logic::kXor>);
  add("Not", &NotKernel);
  add("IsNaN", &IsNaNKernel);
  add("IsInf", &IsInfKernel);
  add("Sqrt", &FloatUnary<Sqrt>);
  add("Exp", &FloatUnary<Exp>);
  add("Log", &FloatUnary<Log>);
  add("Erf", &FloatUnary<Erf>);
  add("Tanh", &FloatUnary<Tanh>);
  add("Sin", &FloatUnary<Sin>);
  add("Cos", &FloatUnary<Cos>);
  add("Tan", &FloatUnary<Tan>);
  add("Asin", &FloatUnary<Asin>);
  add("Acos", &FloatUnary<Acos>);
  add("Atan", &FloatUnary<Atan>);
  add("Sinh", &FloatUnary<Sinh>);
  add("Cosh", &FloatUnary<Cosh>);
  add("Asinh", &FloatUnary<Asinh>);
  add("Acosh", &FloatUnary<Acosh>);
  add("Atanh", &FloatUnary<Atanh>);
  add("Floor", &FloatUnary<Floor>);
  add("Ceil", &FloatUnary<Ceil>);
  add("Round", &FloatUnary<Round>);
  add("Reciprocal", &FloatUnary<Reciprocal>);
  add("Sigmoid", &FloatUnary<Sigmoid>);
  add("Softplus", &FloatUnary<Softplus>);
  add("Softsign", &FloatUnary<Softsign>);
  add("Relu", &ReluKernel);
  add("Neg", &NegKernel);
  add("Abs", &AbsKernel);
  add("Sign", &SignKernel);
  add("Gelu", &GeluKernel);
  add("LeakyRelu", &LeakyReluKernel);
  add("Elu", &EluKernel);
  add("Celu", &CeluKernel);
  add("Selu", &SeluKernel);
  add("HardSigmoid", &HardSigmoidKernel);
  add("HardSwish", &HardSwishKernel);
  add("ThresholdedRelu", &ThresholdedReluKernel);
  add("Mish", &MishKernel);
  add("PRelu", &PReluKernel);
  add("Where", &WhereKernel);
  add("Clip", &ClipKernel);
  add("Cast", &CastKernel);
  add("CastLike", &CastLikeKernel);
}

}  // namespace kiln::reference
