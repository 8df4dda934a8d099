// CumSum (cumsum.h): one accumulator per (outer, inner) line, walked along len.
#include "kernels/cpu/cumsum.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {
namespace {

// T stored, A accumulated: the float type itself (as the reference executor and
// onnxruntime), uint64_t for integers (wrapping; the stored value is the sum mod 2^bits).
template <typename T, typename A>
void Lines(const CumSumArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  for (int64_t line = begin; line < end; ++line) {
    const int64_t o = line / a.inner, i = line % a.inner;
    A acc = A(0);
    for (int64_t step = 0; step < a.len; ++step) {
      const int64_t j = a.reverse ? a.len - 1 - step : step;
      const int64_t off = (o * a.len + j) * a.inner + i;
      const A v = static_cast<A>(x[off]);
      if (a.exclusive) {
        y[off] = static_cast<T>(acc);
        acc += v;
      } else {
        acc += v;
        y[off] = static_cast<T>(acc);
      }
    }
  }
}

}  // namespace

absl::Status CumSum(const CpuContext& ctx, const CumSumArgs& a) {
  if (a.outer < 0 || a.len < 0 || a.inner < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("CumSum got outer=", a.outer, " len=", a.len, " inner=", a.inner));
  const int64_t lines = a.outer * a.inner;
  if (lines == 0 || a.len == 0) return absl::OkStatus();
  if (a.x == nullptr || a.y == nullptr) return absl::InvalidArgumentError("CumSum: null pointer");
  void (*fn)(const CumSumArgs&, int64_t, int64_t) = nullptr;
  switch (a.dtype) {
    case DType::kF32:
      fn = &Lines<float, float>;
      break;
    case DType::kF64:
      fn = &Lines<double, double>;
      break;
    case DType::kI32:
      fn = &Lines<int32_t, uint64_t>;
      break;
    case DType::kI64:
      fn = &Lines<int64_t, uint64_t>;
      break;
    case DType::kU32:
      fn = &Lines<uint32_t, uint64_t>;
      break;
    case DType::kU64:
      fn = &Lines<uint64_t, uint64_t>;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("CumSum does not take ", std::string(DTypeName(a.dtype))));
  }
  // ≥ 16 Ki elements per thread before splitting.
  ParallelFor(ctx, lines, std::max<int64_t>(1, (int64_t{16} << 10) / a.len),
              [&](int64_t begin, int64_t end) { fn(a, begin, end); });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
