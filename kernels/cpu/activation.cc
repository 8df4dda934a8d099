// Gelu and Glu drivers: chunks of at least 16 Ki elements per thread, ISA dispatch.
#include "kernels/cpu/activation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {

absl::Status Gelu(const CpuContext& ctx, const float* x, int64_t n, bool tanh_form, float* y) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("Gelu got n=", n));
  if (n == 0) return absl::OkStatus();
  if (!x || !y) return absl::InvalidArgumentError("Gelu: null pointer");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, n, 16384, [&](int64_t b, int64_t e) { k.gelu(x + b, e - b, tanh_form, y + b); });
  return absl::OkStatus();
}

absl::Status Glu(const CpuContext& ctx, const float* x, int64_t rows, int64_t f, GluActivation act,
                 float* y) {
  if (rows < 0 || f < 0) return absl::InvalidArgumentError(absl::StrCat("Glu got ", rows, "x", f));
  if (rows == 0 || f == 0) return absl::OkStatus();
  if (!x || !y) return absl::InvalidArgumentError("Glu: null pointer");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  const int64_t min_rows = std::max<int64_t>(1, 16384 / f);
  ParallelFor(ctx, rows, min_rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) k.glu_row(x + r * 2 * f, x + r * 2 * f + f, f, act, y + r * f);
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
