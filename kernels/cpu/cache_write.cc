// kiln.CacheWrite on the CPU (cache_write.h): a bounds check of every position, a copy
// of the cache when y is not the cache, then one row copy per (sequence, head, new row).
#include "kernels/cpu/cache_write.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace kiln::cpu {

absl::Status CacheWrite(const CpuContext& ctx, const CacheWriteArgs& a) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t s = 0; s < a.seq; ++s) {
      const int64_t p = a.positions[b * a.seq + s];
      if (p < 0 || p >= a.slots)
        return absl::InvalidArgumentError(absl::StrFormat(
            "position %d of sequence %d is outside the cache's %d slots", p, b, a.slots));
    }
  const auto* src = static_cast<const std::byte*>(a.rows);
  auto* y = static_cast<std::byte*>(a.y);
  const size_t plane = static_cast<size_t>(a.slots) * a.row_bytes;  // one (b, h) of the cache
  if (a.y != a.cache && a.batch * a.heads > 0 && plane > 0)
    ParallelFor(ctx, a.batch * a.heads, 1, [&](int64_t begin, int64_t end) {
      std::memcpy(y + begin * plane, static_cast<const std::byte*>(a.cache) + begin * plane,
                  static_cast<size_t>(end - begin) * plane);
    });
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t s = 0; s < a.seq; ++s)
        std::memcpy(y + (b * a.heads + h) * plane + a.positions[b * a.seq + s] * a.row_bytes,
                    src + ((b * a.heads + h) * a.seq + s) * a.row_bytes, a.row_bytes);
  return absl::OkStatus();
}

}  // namespace kiln::cpu
