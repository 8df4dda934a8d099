// LayerNorm / RMSNorm / SkipLayerNorm drivers: argument checks, row partitioning, ISA dispatch.
#include "kernels/cpu/layer_norm.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {

absl::Status LayerNorm(const CpuContext& ctx, const float* x, const float* gamma, const float* beta,
                       int64_t rows, int64_t h, float eps, float* y) {
  if (rows < 0 || h < 0)
    return absl::InvalidArgumentError(absl::StrCat("LayerNorm got rows=", rows, " h=", h));
  if (rows == 0 || h == 0) return absl::OkStatus();
  if (!x || !gamma || !y) return absl::InvalidArgumentError("LayerNorm: null pointer");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, rows, std::max<int64_t>(1, 4096 / h), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) k.layer_norm_row(x + r * h, gamma, beta, eps, h, y + r * h);
  });
  return absl::OkStatus();
}

absl::Status RmsNorm(const CpuContext& ctx, const float* x, const float* gamma, int64_t rows,
                     int64_t h, float eps, float* y) {
  if (rows < 0 || h < 0)
    return absl::InvalidArgumentError(absl::StrCat("RmsNorm got rows=", rows, " h=", h));
  if (rows == 0 || h == 0) return absl::OkStatus();
  if (!x || !gamma || !y) return absl::InvalidArgumentError("RmsNorm: null pointer");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, rows, std::max<int64_t>(1, 4096 / h), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) k.rms_norm_row(x + r * h, gamma, eps, h, y + r * h);
  });
  return absl::OkStatus();
}

absl::Status SkipLayerNorm(const CpuContext& ctx, const SkipLayerNormArgs& a) {
  if (a.rows < 0 || a.h < 0 || a.skip_rows <= 0 || (a.rows > 0 && a.rows % a.skip_rows != 0))
    return absl::InvalidArgumentError(
        absl::StrCat("SkipLayerNorm got rows=", a.rows, " h=", a.h, " skip_rows=", a.skip_rows));
  if (a.rows == 0 || a.h == 0) return absl::OkStatus();
  if (!a.x || !a.skip || !a.gamma || !a.y)
    return absl::InvalidArgumentError("SkipLayerNorm: null pointer");
  if (a.rms && a.beta) return absl::InvalidArgumentError("SkipLayerNorm: rms with a beta");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  const int64_t h = a.h;
  ParallelFor(ctx, a.rows, std::max<int64_t>(1, 4096 / h), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      // The residual goes to `sum` when someone reads it, else straight into y (in place).
      float* s = a.sum ? a.sum + r * h : a.y + r * h;
      k.add_row(a.x + r * h, a.skip + (r % a.skip_rows) * h, a.bias, h, s);
      if (a.rms)
        k.rms_norm_row(s, a.gamma, a.eps, h, a.y + r * h);
      else
        k.layer_norm_row(s, a.gamma, a.beta, a.eps, h, a.y + r * h);
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
