// The CPU eltwise kernel (eltwise.h): conversions between storage types and the domain,
// the ops per domain (as kernels/cuda/eltwise.cu computes them), and a row walk over the
// collapsed broadcast layout.
#include "kernels/cpu/eltwise.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {
namespace {

using kernels::EltOp;

template <typename D>
D Load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<D>(static_cast<const float*>(p)[i]);
    case DType::kF16:
      return static_cast<D>(HalfToFloat(static_cast<const uint16_t*>(p)[i]));
    case DType::kBF16:
      return static_cast<D>(BF16ToFloat(static_cast<const uint16_t*>(p)[i]));
    case DType::kF64:
      return static_cast<D>(static_cast<const double*>(p)[i]);
    case DType::kI8:
      return static_cast<D>(static_cast<const int8_t*>(p)[i]);
    case DType::kU8:
      return static_cast<D>(static_cast<const uint8_t*>(p)[i]);
    case DType::kI16:
      return static_cast<D>(static_cast<const int16_t*>(p)[i]);
    case DType::kU16:
      return static_cast<D>(static_cast<const uint16_t*>(p)[i]);
    case DType::kI32:
      return static_cast<D>(static_cast<const int32_t*>(p)[i]);
    case DType::kU32:
      return static_cast<D>(static_cast<const uint32_t*>(p)[i]);
    case DType::kI64:
      return static_cast<D>(static_cast<const int64_t*>(p)[i]);
    case DType::kU64:
      return static_cast<D>(static_cast<const uint64_t*>(p)[i]);
    case DType::kBool:
      return static_cast<D>(static_cast<const uint8_t*>(p)[i] != 0);
    default:
      return D{};
  }
}

// Float -> integer: truncate, saturate, NaN -> 0 (the reference's Cast).
template <typename I, typename F>
I SaturateTo(F v) {
  using L = std::numeric_limits<I>;
  if (v != v) return I{0};
  if (v <= static_cast<F>(L::min())) return L::min();
  if (v >= static_cast<F>(L::max())) return L::max();
  return static_cast<I>(v);
}

template <typename I, typename D>
I ToInt(D v) {
  if constexpr (std::is_floating_point_v<D>) {
    return SaturateTo<I>(v);
  } else {
    return static_cast<I>(v);  // integers narrow by wrapping
  }
}

template <typename D>
void Store(void* p, DType t, int64_t i, D v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(p)[i] = FloatToBF16(static_cast<float>(v));
      break;
    case DType::kF64:
      static_cast<double*>(p)[i] = static_cast<double>(v);
      break;
    case DType::kI8:
      static_cast<int8_t*>(p)[i] = ToInt<int8_t>(v);
      break;
    case DType::kU8:
      static_cast<uint8_t*>(p)[i] = ToInt<uint8_t>(v);
      break;
    case DType::kI16:
      static_cast<int16_t*>(p)[i] = ToInt<int16_t>(v);
      break;
    case DType::kU16:
      static_cast<uint16_t*>(p)[i] = ToInt<uint16_t>(v);
      break;
    case DType::kI32:
      static_cast<int32_t*>(p)[i] = ToInt<int32_t>(v);
      break;
    case DType::kU32:
      static_cast<uint32_t*>(p)[i] = ToInt<uint32_t>(v);
      break;
    case DType::kI64:
      static_cast<int64_t*>(p)[i] = ToInt<int64_t>(v);
      break;
    case DType::kU64:
      static_cast<uint64_t*>(p)[i] = ToInt<uint64_t>(v);
      break;
    case DType::kBool:
      static_cast<uint8_t*>(p)[i] = v != D{0} ? 1 : 0;
      break;
    default:
      break;
  }
}

bool IsBoolOp(EltOp op) {
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
bool BoolResult(EltOp op, D a, D b) {
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

template <typename F>
F FloatResult(EltOp op, F a, F b) {
  const F nan = std::numeric_limits<F>::quiet_NaN();
  switch (op) {
    case EltOp::kIdentity:
      return a;
    case EltOp::kNeg:
      return -a;
    case EltOp::kAbs:
      return std::fabs(a);
    case EltOp::kSign:
      return a != a ? a : (a > F(0) ? F(1) : (a < F(0) ? F(-1) : F(0)));
    case EltOp::kRelu:
      return a < F(0) ? F(0) : a;
    case EltOp::kSqrt:
      return std::sqrt(a);
    case EltOp::kReciprocal:
      return F(1) / a;
    case EltOp::kExp:
      return std::exp(a);
    case EltOp::kLog:
      return std::log(a);
    case EltOp::kErf:
      return std::erf(a);
    case EltOp::kTanh:
      return std::tanh(a);
    case EltOp::kSigmoid:
      return a >= F(0) ? F(1) / (F(1) + std::exp(-a)) : std::exp(a) / (F(1) + std::exp(a));
    case EltOp::kSin:
      return std::sin(a);
    case EltOp::kCos:
      return std::cos(a);
    case EltOp::kFloor:
      return std::floor(a);
    case EltOp::kCeil:
      return std::ceil(a);
    case EltOp::kRound:
      return std::rint(a);  // half to even in the default rounding mode
    case EltOp::kGelu:
      return F(0.5) * a * (F(1) + std::erf(a * F(0.70710678118654752440)));
    case EltOp::kGeluTanh:
      return F(0.5) * a *
             (F(1) + std::tanh(F(0.79788456080286535588) * (a + F(0.044715) * a * a * a)));
    case EltOp::kAdd:
      return a + b;
    case EltOp::kSub:
      return a - b;
    case EltOp::kMul:
      return a * b;
    case EltOp::kDiv:
      return a / b;
    case EltOp::kPow:
      return std::pow(a, b);
    case EltOp::kMax:
      return (a != a || b != b) ? nan : (b > a ? b : a);
    case EltOp::kMin:
      return (a != a || b != b) ? nan : (b < a ? b : a);
    case EltOp::kFMod:
      return std::fmod(a, b);
    case EltOp::kMod: {
      F r = std::fmod(a, b);
      if (r != F(0) && ((r < F(0)) != (b < F(0)))) r += b;
      return r;
    }
    default:
      return F(0);
  }
}

// Integer domains: I is int64_t or uint64_t; arithmetic wraps (unsigned math); a division
// by zero sets *bad.
template <typename I>
I IntResult(EltOp op, I a, I b, bool* bad) {
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
        if (b == I{-1})  // INT_MIN / -1 wraps; the remainder is 0
          return op == EltOp::kDiv ? static_cast<I>(U{0} - static_cast<U>(a)) : I{0};
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

// y[o] for output element o, operands at offsets off[0..2].
template <typename D>
void Element(const EltwiseArgs& a, int64_t o, const int64_t* off, bool* bad) {
  const EltOp op = a.op;
  if (op == EltOp::kWhere) {
    const bool c = Load<bool>(a.in[0], a.in_type[0], off[0]);
    const D v = c ? Load<D>(a.in[1], a.in_type[1], off[1]) : Load<D>(a.in[2], a.in_type[2], off[2]);
    Store<D>(a.y, a.out_type, o, v);
    return;
  }
  const D x = Load<D>(a.in[0], a.in_type[0], off[0]);
  const D y = a.layout.num_inputs > 1 ? Load<D>(a.in[1], a.in_type[1], off[1]) : D{};
  if (op == EltOp::kClip) {  // as the reference: a NaN x fails both tests and passes through
    const D hi = Load<D>(a.in[2], a.in_type[2], off[2]);
    D v = x < y ? y : x;
    v = v > hi ? hi : v;
    Store<D>(a.y, a.out_type, o, v);
    return;
  }
  if (IsBoolOp(op)) {
    Store<bool>(a.y, a.out_type, o, BoolResult<D>(op, x, y));
    return;
  }
  if constexpr (std::is_same_v<D, bool>) {
    Store<bool>(a.y, a.out_type, o, x);  // Identity (Cast from bool)
  } else if constexpr (std::is_floating_point_v<D>) {
    Store<D>(a.y, a.out_type, o, FloatResult<D>(op, x, y));
  } else {
    Store<D>(a.y, a.out_type, o, IntResult<D>(op, x, y, bad));
  }
}

// f32 binary arithmetic over one span, each operand read contiguously (stride 1) or as
// one broadcast value (stride 0): loops the compiler vectorizes. Same results as
// FloatResult (correctly rounded + - * /, Min/Max propagating NaN).
template <typename F>
void BinarySpan(const float* x, int64_t sx, const float* y, int64_t sy, int64_t n, float* out,
                F f) {
  if (sx == 1 && sy == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], y[i]);
  } else if (sx == 1) {
    const float b = y[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], b);
  } else {
    const float c = x[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(c, y[i]);
  }
}

template <typename F>
void UnarySpan(const float* x, int64_t n, float* out, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
}

// Every element of x[0, n) is in the ISA exp's exact range (not NaN, no overflow).
bool InExpRange(const float* x, int64_t n, float hi) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= x[i] <= hi;  // false for NaN too
  return ok;
}

// The f32 fast path for n output elements from o of one row: every operand f32 read with
// inner stride 0 or 1 (`step`), at `x[i] + base[i]`. Binary arithmetic in vectorizable
// loops; Exp and Sigmoid through the ISA's vector kernels where their inputs are in range
// (elsewhere, and for every other op, false: the caller takes the element walk).
bool FastF32Span(const EltwiseArgs& a, const internal::IsaKernels& k, const int64_t* base,
                 const int64_t* step, int64_t o, int64_t n) {
  const kernels::BroadcastLayout& l = a.layout;
  if (a.out_type != DType::kF32 || l.num_inputs > 2) return false;
  for (int i = 0; i < l.num_inputs; ++i)
    if (a.in_type[i] != DType::kF32 || (step[i] != 0 && step[i] != 1)) return false;
  const float* x = static_cast<const float*>(a.in[0]) + base[0];
  float* out = static_cast<float*>(a.y) + o;
  if (l.num_inputs == 2) {
    const float* y = static_cast<const float*>(a.in[1]) + base[1];
    if (step[0] == 0 && step[1] == 0) return false;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    switch (a.op) {
      case EltOp::kAdd:
        BinarySpan(x, step[0], y, step[1], n, out, [](float p, float q) { return p + q; });
        return true;
      case EltOp::kSub:
        BinarySpan(x, step[0], y, step[1], n, out, [](float p, float q) { return p - q; });
        return true;
      case EltOp::kMul:
        BinarySpan(x, step[0], y, step[1], n, out, [](float p, float q) { return p * q; });
        return true;
      case EltOp::kDiv:
        BinarySpan(x, step[0], y, step[1], n, out, [](float p, float q) { return p / q; });
        return true;
      case EltOp::kMax:
        BinarySpan(x, step[0], y, step[1], n, out,
                   [nan](float p, float q) { return (p != p || q != q) ? nan : (q > p ? q : p); });
        return true;
      case EltOp::kMin:
        BinarySpan(x, step[0], y, step[1], n, out,
                   [nan](float p, float q) { return (p != p || q != q) ? nan : (q < p ? q : p); });
        return true;
      default:
        return false;
    }
  }
  if (step[0] != 1) return false;
  switch (a.op) {
    case EltOp::kIdentity:
      if (out != x) std::memmove(out, x, n * sizeof(float));
      return true;
    case EltOp::kNeg:
      UnarySpan(x, n, out, [](float p) { return -p; });
      return true;
    case EltOp::kRelu:
      UnarySpan(x, n, out, [](float p) { return p < 0.f ? 0.f : p; });
      return true;
    case EltOp::kExp:
      if (!InExpRange(x, n, 88.3f)) return false;
      k.exp_row(x, n, out);
      return true;
    case EltOp::kSigmoid:
      if (!InExpRange(x, n, std::numeric_limits<float>::infinity())) return false;
      k.sigmoid_row(x, n, out);
      return true;
    default:
      return false;
  }
}

// Work items [begin, end): item t is span t % per_row (of `span` elements) of output row
// t / per_row (a row = the last collapsed dim), so that a layout that collapses to a few
// long rows still splits across threads.
template <typename D>
void Spans(const EltwiseArgs& a, const internal::IsaKernels& k, int64_t per_row, int64_t span,
           int64_t begin, int64_t end, bool* bad) {
  const kernels::BroadcastLayout& l = a.layout;
  const int nin = l.num_inputs;
  const int64_t inner = l.rank == 0 ? 1 : l.dims[l.rank - 1];
  int64_t step[3] = {0, 0, 0};
  for (int i = 0; i < nin; ++i) step[i] = l.rank == 0 ? 0 : l.strides[i][l.rank - 1];
  for (int64_t t = begin; t < end; ++t) {
    const int64_t row = t / per_row;
    const int64_t j0 = (t % per_row) * span, j1 = std::min(inner, j0 + span);
    int64_t base[3] = {0, 0, 0};
    int64_t rem = row;
    for (int d = l.rank - 2; d >= 0; --d) {
      const int64_t idx = rem % l.dims[d];
      rem /= l.dims[d];
      for (int i = 0; i < nin; ++i) base[i] += idx * l.strides[i][d];
    }
    if (l.contiguous)
      for (int i = 0; i < nin; ++i) base[i] = row * inner;
    for (int i = 0; i < nin; ++i) base[i] += j0 * step[i];
    if (std::is_same_v<D, float> && FastF32Span(a, k, base, step, row * inner + j0, j1 - j0))
      continue;
    for (int64_t j = 0; j < j1 - j0; ++j) {
      const int64_t off[3] = {base[0] + j * step[0], base[1] + j * step[1], base[2] + j * step[2]};
      Element<D>(a, row * inner + j0 + j, off, bad);
    }
  }
}

template <typename D>
absl::Status Run(const CpuContext& ctx, const EltwiseArgs& a) {
  const kernels::BroadcastLayout& l = a.layout;
  const int64_t inner = l.rank == 0 ? 1 : l.dims[l.rank - 1];
  const int64_t rows = inner == 0 ? 0 : l.n / inner;
  // Spans of at most 16 Ki elements, and ≥ 32 Ki elements per thread: below that a fork
  // costs more than the loop.
  constexpr int64_t kSpan = int64_t{16} << 10;
  const int64_t per_row = std::max<int64_t>(1, (inner + kSpan - 1) / kSpan);
  const int64_t span = (inner + per_row - 1) / per_row;
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  std::atomic<bool> bad{false};
  ParallelFor(ctx, rows * per_row,
              std::max<int64_t>(1, (int64_t{32} << 10) / std::max<int64_t>(span, 1)),
              [&](int64_t begin, int64_t end) {
                bool b = false;
                Spans<D>(a, k, per_row, span, begin, end, &b);
                if (b) bad.store(true, std::memory_order_relaxed);
              });
  if (bad.load()) return absl::InvalidArgumentError("integer division by zero");
  return absl::OkStatus();
}

}  // namespace

absl::Status Eltwise(const CpuContext& ctx, const EltwiseArgs& a) {
  const kernels::BroadcastLayout& l = a.layout;
  if (l.n == 0) return absl::OkStatus();
  if (l.num_inputs < 1 || l.num_inputs > 3 || l.rank < 0 || l.rank > kernels::kMaxEltRank)
    return absl::InvalidArgumentError("Eltwise: bad layout");
  for (int i = 0; i < l.num_inputs; ++i)
    if (a.in[i] == nullptr) return absl::InvalidArgumentError("Eltwise: null input");
  if (a.y == nullptr) return absl::InvalidArgumentError("Eltwise: null output");
  switch (a.domain) {
    case kernels::EltDomainKind::kF32:
      return Run<float>(ctx, a);
    case kernels::EltDomainKind::kF64:
      return Run<double>(ctx, a);
    case kernels::EltDomainKind::kI64:
      return Run<int64_t>(ctx, a);
    case kernels::EltDomainKind::kU64:
      return Run<uint64_t>(ctx, a);
    case kernels::EltDomainKind::kBool:
      return Run<bool>(ctx, a);
  }
  return absl::InvalidArgumentError("Eltwise: bad domain");
}

}  // namespace kiln::cpu
