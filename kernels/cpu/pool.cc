// Pool driver: one batch row per work item, axpy/scale row kernels.
#include "kernels/cpu/pool.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {

absl::Status Pool(const CpuContext& ctx, const PoolArgs& a) {
  const int64_t nb = a.batch, s = a.seq, h = a.hidden_size;
  if (nb < 0 || s < 0 || h < 0)
    return absl::InvalidArgumentError(absl::StrCat("Pool got B=", nb, " S=", s, " H=", h));
  if (nb == 0 || h == 0) return absl::OkStatus();
  if (a.mode == PoolMode::kCls && s == 0)
    return absl::InvalidArgumentError("cls pooling needs a sequence length >= 1, got 0");
  if (!a.y || (s > 0 && !a.hidden)) return absl::InvalidArgumentError("Pool: null pointer");
  if (a.mask && a.mask_i64)
    return absl::InvalidArgumentError("Pool: give an f32 or an i64 mask, not both");
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  ParallelFor(ctx, nb, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* out = a.y + b * h;
      if (a.mode == PoolMode::kCls) {
        std::copy(a.hidden + b * s * h, a.hidden + b * s * h + h, out);
      } else if (a.mode == PoolMode::kLast) {
        int64_t last = s - 1;
        auto masked_out = [&](int64_t t) {
          return a.mask ? a.mask[b * s + t] == 0.0f : a.mask_i64 && a.mask_i64[b * s + t] == 0;
        };
        while (last >= 0 && masked_out(last)) --last;
        if (last < 0)
          std::fill(out, out + h, 0.0f);
        else
          std::copy(a.hidden + (b * s + last) * h, a.hidden + (b * s + last + 1) * h, out);
      } else {
        std::fill(out, out + h, 0.0f);
        float count = 0;
        for (int64_t t = 0; t < s; ++t) {
          const float m = a.mask       ? a.mask[b * s + t]
                          : a.mask_i64 ? static_cast<float>(a.mask_i64[b * s + t])
                                       : 1.0f;
          count += m;
          if (m != 0.0f) k.axpy(m, a.hidden + (b * s + t) * h, h, out);
        }
        k.scale(1.0f / std::max(count, 1e-9f), out, h);
      }
      if (a.normalize) {
        const float norm = std::sqrt(k.sum_squares(out, h));
        k.scale(1.0f / std::max(norm, 1e-12f), out, h);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
