// Gelu driver: chunks of at least 16 Ki elements per thread, ISA dispatch.
#include "kernels/cpu/activation.h"

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

}  // namespace kiln::cpu
