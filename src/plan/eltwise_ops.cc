// The eltwise op table and typing rule (eltwise_ops.h).
#include "plan/eltwise_ops.h"

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

std::optional<EltDomain> DomainOf(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return EltDomain::kF32;
    case DType::kF64:
      return EltDomain::kF64;
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
      return EltDomain::kI64;
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
      return EltDomain::kU64;
    case DType::kBool:
      return EltDomain::kBool;
    default:
      return std::nullopt;
  }
}

std::string Name(DType t) { return std::string(DTypeName(t)); }

}  // namespace

const std::vector<EltOpInfo>& EltOps() {
  // name, arity, floats, ints, bools, returns_bool
  static const std::vector<EltOpInfo>* ops = new std::vector<EltOpInfo>{
      {"Identity", 1, true, true, true, false},
      {"Neg", 1, true, true, false, false, true},
      {"Abs", 1, true, true, false, false},
      {"Sign", 1, true, true, false, false},
      {"Relu", 1, true, true, false, false, true},
      {"Sqrt", 1, true, false, false, false},
      {"Reciprocal", 1, true, false, false, false},
      {"Exp", 1, true, false, false, false},
      {"Log", 1, true, false, false, false},
      {"Erf", 1, true, false, false, false},
      {"Tanh", 1, true, false, false, false},
      {"Sigmoid", 1, true, false, false, false},
      {"Sin", 1, true, false, false, false},
      {"Cos", 1, true, false, false, false},
      {"Floor", 1, true, false, false, false},
      {"Ceil", 1, true, false, false, false},
      {"Round", 1, true, false, false, false},
      {"Gelu", 1, true, false, false, false},      // erf form
      {"GeluTanh", 1, true, false, false, false},  // Gelu approximate="tanh"
      {"IsNaN", 1, true, false, false, true},
      {"Not", 1, false, false, true, true},
      {"Add", 2, true, true, false, false},
      {"Sub", 2, true, true, false, false},
      {"Mul", 2, true, true, false, false},
      {"Div", 2, true, true, false, false},
      {"Pow", 2, true, false, false, false},
      {"Max", 2, true, true, false, false},
      {"Min", 2, true, true, false, false},
      {"Mod", 2, true, true, false, false},   // Python remainder (sign of the divisor)
      {"FMod", 2, true, true, false, false},  // C remainder (Mod fmod=1)
      {"Equal", 2, true, true, true, true},
      {"Less", 2, true, true, false, true},
      {"LessOrEqual", 2, true, true, false, true},
      {"Greater", 2, true, true, false, true},
      {"GreaterOrEqual", 2, true, true, false, true},
      {"And", 2, false, false, true, true},
      {"Or", 2, false, false, true, true},
      {"Xor", 2, false, false, true, true},
      {"Where", 3, true, true, true, false},
      {"Clip", 3, true, true, false, false},  // x, min, max (both given; NaN passes through)
  };
  return *ops;
}

const EltOpInfo* FindEltOp(std::string_view name) {
  for (const EltOpInfo& op : EltOps())
    if (op.name == name) return &op;
  return nullptr;
}

std::vector<std::string_view> EltOpNames() {
  std::vector<std::string_view> names;
  for (const EltOpInfo& op : EltOps()) names.push_back(op.name);
  return names;
}

absl::StatusOr<EltDomain> TypeEltwise(std::string_view op, const std::vector<DType>& inputs,
                                      DType output) {
  const EltOpInfo* info = FindEltOp(op);
  if (info == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("no eltwise op '", std::string(op), "'"));
  if (static_cast<int>(inputs.size()) != info->arity)
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(op), " takes ", info->arity, " inputs, got ", inputs.size()));
  // Where: bool condition, then two values of the output's dtype.
  const bool where = op == "Where";
  const size_t first = where ? 1 : 0;
  if (where && inputs[0] != DType::kBool)
    return absl::InvalidArgumentError(
        absl::StrCat("Where's condition must be bool, got ", Name(inputs[0])));
  for (size_t i = first + 1; i < inputs.size(); ++i)
    if (inputs[i] != inputs[first])
      return absl::InvalidArgumentError(absl::StrCat(std::string(op), ": input dtypes differ (",
                                                     Name(inputs[first]), " vs ", Name(inputs[i]),
                                                     ")"));
  const std::optional<EltDomain> d = DomainOf(inputs[first]);
  if (!d || !DomainOf(output))
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(op), ": unsupported dtype ", Name(d ? output : inputs[first])));
  const bool is_float = *d == EltDomain::kF32 || *d == EltDomain::kF64;
  const bool is_int = *d == EltDomain::kI64 || *d == EltDomain::kU64;
  if ((is_float && !info->floats) || (is_int && !info->ints) ||
      (*d == EltDomain::kBool && !info->bools) || (*d == EltDomain::kU64 && info->signed_only))
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(op), " is not defined on ", Name(inputs[first])));
  if (info->returns_bool) {
    if (output != DType::kBool)
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(op), " returns bool, not ", Name(output)));
  } else if (op != "Identity" && output != inputs[first]) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(op), " returns ", Name(inputs[first]), ", not ", Name(output)));
  }
  return *d;
}

}  // namespace kiln
