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

std::vector<int64_t> BroadcastOffsets(absl::Span<const int64_t> src,
                                      absl::Span<const int64_t> out) {
  const int r = static_cast<int>(out.size());
  const int sr = static_cast<int>(src.size());
  std::vector<int64_t> sstride(r, 0);
  int64_t s = 1;
  for (int i = sr - 1; i >= 0; --i) {
    sstride[i + (r - sr)] = src[i] == 1 ? 0 : s;
    s *= src[i];
  }
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  std::vector<int64_t> offs(static_cast<size_t>(total));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < total; ++k) {
    offs[k] = off;
    for (int i = r - 1; i >= 0; --i) {
      ++idx[i];
      off += sstride[i];
      if (idx[i] < out[i]) break;
      off -= sstride[i] * out[i];
      idx[i] = 0;
    }
  }
  return offs;
}

bool BroadcastsTo(absl::Span<const int64_t> src, absl::Span<const int64_t> target) {
  auto b = BroadcastShapes(src, target);
  return b.ok() && *b == std::vector<int64_t>(target.begin(), target.end());
}

}  // namespace kiln::reference
