// Elementwise unary reference kernels: float math functions (computed in double and
// rounded once), Relu/Neg/Abs/Sign on floats and integers, the parameterized activations
// (Gelu, LeakyRelu, Elu, Celu, Selu, HardSigmoid, HardSwish, ThresholdedRelu, Shrink, Swish, Mish,
// PRelu
// with a broadcast slope), and IsNaN/IsInf. See elementwise.cc for the shared semantics.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/elementwise_internal.h"

namespace kiln::reference::elementwise {
namespace {

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

// Shrink: x < -lambd ? x + bias : (x > lambd ? x - bias : 0).
Result ShrinkKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double bias = node.attr_float_or("bias", 0.0f);
  const double lambd = node.attr_float_or("lambd", 0.5f);
  return One(MapFloat(*x, node.op(), [bias, lambd](double v) {
    return v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
  }));
}

// Swish (opset 24): x · sigmoid(alpha · x).
Result SwishKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const double alpha = node.attr_float_or("alpha", 1.0f);
  return One(
      MapFloat(*x, node.op(), [alpha](double v) { return v / (1.0 + std::exp(-alpha * v)); }));
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

}  // namespace

void RegisterUnaryKernels(KernelTable& t) {
  auto add = [&t](const std::string& op, KernelFn fn) { t[KernelKey("", op)] = fn; };
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
  add("Shrink", &ShrinkKernel);
  add("Swish", &SwishKernel);
  add("Mish", &MishKernel);
  add("PRelu", &PReluKernel);
}

}  // namespace kiln::reference::elementwise
