// Input access, dtype errors and double conversions shared by the computing kernel
// families (elementwise*.cc, math.cc), so that every kernel words a missing input or an
// unsupported dtype the same way. Header-only; the executor prefixes these messages with
// Node::Describe().
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "kiln/ir/tensor.h"

namespace kiln::reference {

using Inputs = absl::Span<const Tensor* const>;
using Result = absl::StatusOr<std::vector<Tensor>>;

// absl 20220623 StrCat does not take std::string_view.
inline std::string DName(DType d) { return std::string(DTypeName(d)); }

// Input `i`, or InvalidArgument when it is absent or omitted.
inline absl::StatusOr<const Tensor*> Arg(Inputs in, int i, const std::string& op) {
  if (i >= static_cast<int>(in.size()) || in[i] == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(op, ": required input ", i, " is missing"));
  return in[i];
}

// Input `i`, or nullptr when it is absent or omitted.
inline const Tensor* OptArg(Inputs in, int i) {
  return i < static_cast<int>(in.size()) ? in[i] : nullptr;
}

inline absl::Status UnsupportedDType(const std::string& op, DType d) {
  return absl::UnimplementedError(absl::StrCat(op, " does not support dtype ", DName(d)));
}

// The range of integer dtype `d` (the 4- and 2-bit ones included) as doubles; i64/u64
// stop at ±9.2e18, which converts back without overflow. {0, 0} for a non-integer.
inline std::pair<double, double> IntegerRange(DType d) {
  switch (d) {
    case DType::kI8:
      return {-128, 127};
    case DType::kU8:
      return {0, 255};
    case DType::kI16:
      return {-32768, 32767};
    case DType::kU16:
      return {0, 65535};
    case DType::kI32:
      return {-2147483648.0, 2147483647.0};
    case DType::kU32:
      return {0, 4294967295.0};
    case DType::kI64:
      return {-9.2e18, 9.2e18};
    case DType::kU64:
      return {0, 9.2e18};
    case DType::kI4:
      return {-8, 7};
    case DType::kU4:
      return {0, 15};
    case DType::kI2:
      return {-2, 1};
    case DType::kU2:
      return {0, 3};
    default:
      return {0, 0};
  }
}

// "[2,3,4]"
inline std::string DimsStr(absl::Span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

// Every element of `t` as double (Tensor::GetAsDouble).
inline std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.GetAsDouble(static_cast<int64_t>(i));
  return v;
}

// A tensor of `dtype` and `dims` holding `v`, each value stored by Tensor::SetFromDouble.
inline Tensor FromDoubles(DType dtype, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor t(dtype, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.SetFromDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

}  // namespace kiln::reference
