// Elementwise binary reference kernels: Add Sub Mul Div Mod BitShift Pow with numpy
// broadcasting, variadic Min/Max/Sum/Mean, comparisons, and the logic ops (with Not).
// Integers compute in their own type with wrap-around; integer division by zero is an
// InvalidArgument error. See elementwise.cc for the shared semantics.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/elementwise_internal.h"

namespace kiln::reference::elementwise {
namespace {

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

// BitwiseAnd / BitwiseOr / BitwiseXor (opset 18): integer dtypes only.
template <Logic kOp>
Result BitwiseKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  KILN_RETURN_IF_ERROR(SameDType(*a, *b, node.op()));
  return One(Visit(a->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (!T::kInt) {
      return UnsupportedDType(node.op(), a->dtype());
    } else {
      return Map2<T, T, T>(*a, *b, [](auto x, auto y) {
        using C = decltype(x);
        switch (kOp) {
          case Logic::kAnd:
            return static_cast<C>(x & y);
          case Logic::kOr:
            return static_cast<C>(x | y);
          case Logic::kXor:
            return static_cast<C>(x ^ y);
        }
        return C{0};
      });
    }
  }));
}

Result BitwiseNotKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  return One(Visit(x->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    if constexpr (!T::kInt) {
      return UnsupportedDType(node.op(), x->dtype());
    } else {
      return Map1<T, T>(*x, [](auto v) { return static_cast<decltype(v)>(~v); });
    }
  }));
}

Result NotKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (x->dtype() != DType::kBool) return UnsupportedDType(node.op(), x->dtype());
  using B = Tr<DType::kBool>;
  return One(Map1<B, B>(*x, [](bool v) { return !v; }));
}

}  // namespace

void RegisterBinaryKernels(KernelTable& t) {
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
  add("BitwiseAnd", &BitwiseKernel<Logic::kAnd>);
  add("BitwiseOr", &BitwiseKernel<Logic::kOr>);
  add("BitwiseXor", &BitwiseKernel<Logic::kXor>);
  add("BitwiseNot", &BitwiseNotKernel);
}

}  // namespace kiln::reference::elementwise
