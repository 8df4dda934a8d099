// Softmax driver: argument checks, row partitioning, ISA dispatch.
#include "kernels/cpu/softmax.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {

absl::Status Softmax(const CpuContext& ctx, const float* x, int64_t rows, int64_t n, float* y) {
  if (rows < 0 || n < 0)
    return absl::InvalidArgumentError(absl::StrCat("Softmax got rows=", rows, " n=", n));
  if (rows == 0 || n == 0) return absl::OkStatus();
  if (!x || !y) return absl::InvalidArgumentError("Softmax: null pointer");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, rows, std::max<int64_t>(1, 4096 / n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) k.softmax_row(x + r * n, n, y + r * n);
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
