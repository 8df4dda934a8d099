// Shared helpers for the reference kernels: broadcasting, axes, strides.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "reference/kernels.h"

namespace kiln::reference {

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(absl::Span<const int64_t> a,
                                                     absl::Span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("shapes [", absl::StrJoin(a, ","), "] and [",
                                                     absl::StrJoin(b, ","), "] do not broadcast"));
    }
  }
  return out;
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int64_t> Strides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

std::vector<int64_t> ToInt64Vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.NumElements()));
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = t.GetAsInt64(i);
  return v;
}

}  // namespace kiln::reference
