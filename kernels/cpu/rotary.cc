// Rotary (rotary.h): rows in parallel, each row's table rows found by walking the
// broadcast layout of the leading dims.
#include "kernels/cpu/rotary.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {

absl::Status Rotary(const CpuContext& ctx, const RotaryArgs& a) {
  const kernels::BroadcastLayout& l = a.rows;
  if (a.d < 0 || a.r < 0 || a.r % 2 != 0 || a.r > a.d || l.num_inputs != 3 || l.rank < 0 ||
      l.rank > kernels::kMaxEltRank || l.n < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("Rotary got d=", a.d, " r=", a.r, " rows=", l.n, " rank=", l.rank));
  if (l.n == 0 || a.d == 0) return absl::OkStatus();
  if (!a.x || !a.cos || !a.sin || !a.y) return absl::InvalidArgumentError("Rotary: null pointer");
  const int64_t d = a.d, r = a.r, h = r / 2;
  ParallelFor(ctx, l.n, std::max<int64_t>(1, 8192 / d), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t off[3] = {t, t, t};
      if (!l.contiguous) {
        off[0] = off[1] = off[2] = 0;
        for (int64_t rem = t, j = l.rank - 1; j >= 0; --j) {
          const int64_t idx = rem % l.dims[j];
          rem /= l.dims[j];
          for (int i = 0; i < 3; ++i) off[i] += idx * l.strides[i][j];
        }
      }
      const float* x = a.x + off[0] * d;
      const float* c = a.cos + off[1] * r;
      const float* s = a.sin + off[2] * r;
      float* y = a.y + t * d;
      if (a.interleaved) {
        for (int64_t j = 0; j < r; j += 2) {
          y[j] = x[j] * c[j] + (-x[j + 1]) * s[j];
          y[j + 1] = x[j + 1] * c[j + 1] + x[j] * s[j + 1];
        }
      } else {
        for (int64_t j = 0; j < h; ++j) {
          y[j] = x[j] * c[j] + (-x[j + h]) * s[j];
          y[j + h] = x[j + h] * c[j + h] + x[j] * s[j + h];
        }
      }
      if (r < d) std::memcpy(y + r, x + r, static_cast<size_t>(d - r) * sizeof(float));
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
