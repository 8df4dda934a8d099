// Input access, dtype errors and double conversions shared by the computing kernel
// families (elementwise*.cc, math.cc), so that every kernel words a missing input or an
// unsupported dtype the same way. Header-only; the executor prefixes these messages with
// Node::Describe().
#pragma once

#include <string>
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
