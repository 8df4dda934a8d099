// kiln.CacheWrite on the CPU (cache_write.h): a bounds check of every position (and, paged,
// of every block id it lands on), a copy of the cache when y is not the cache, then one row
// copy per (sequence, head, new row).
#include "kernels/cpu/cache_write.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace kiln::cpu {

absl::Status CheckBlockIds(const PagedCache& p, int64_t b, int64_t columns) {
  for (int64_t c = 0; c < columns; ++c) {
    const int64_t id = p.table[b * p.width + c];
    if (id < 0 || id >= p.blocks)
      return absl::InvalidArgumentError(absl::StrFormat(
          "block table entry [%d, %d] = %d is outside the cache's %d blocks", b, c, id, p.blocks));
  }
  return absl::OkStatus();
}

absl::Status CacheWrite(const CpuContext& ctx, const CacheWriteArgs& a) {
  const PagedCache& pg = a.paged;
  if (pg.paged() && (pg.block_size <= 0 || pg.blocks <= 0 || pg.width * pg.block_size != a.slots))
    return absl::InvalidArgumentError(
        absl::StrFormat("paged cache: %d blocks of %d slots, %d per sequence, do not make %d slots",
                        pg.blocks, pg.block_size, pg.width, a.slots));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t s = 0; s < a.seq; ++s) {
      const int64_t p = a.positions[b * a.seq + s];
      if (p < 0 || p >= a.slots)
        return absl::InvalidArgumentError(absl::StrFormat(
            "position %d of sequence %d is outside the cache's %d slots", p, b, a.slots));
      if (pg.paged() && (pg.Block(b, p) < 0 || pg.Block(b, p) >= pg.blocks))
        return absl::InvalidArgumentError(absl::StrFormat(
            "position %d of sequence %d: block table entry [%d, %d] = %d is outside the "
            "cache's %d blocks",
            p, b, b, p / pg.block_size, pg.Block(b, p), pg.blocks));
    }
  const auto* src = static_cast<const std::byte*>(a.rows);
  auto* y = static_cast<std::byte*>(a.y);
  // The bytes to copy when y is not the cache: planes of one (b, h), or the whole pool.
  const int64_t planes = pg.paged() ? pg.blocks * a.heads : a.batch * a.heads;
  const size_t plane = static_cast<size_t>(pg.paged() ? pg.block_size : a.slots) * a.row_bytes;
  if (a.y != a.cache && planes > 0 && plane > 0)
    ParallelFor(ctx, planes, 1, [&](int64_t begin, int64_t end) {
      std::memcpy(y + begin * plane, static_cast<const std::byte*>(a.cache) + begin * plane,
                  static_cast<size_t>(end - begin) * plane);
    });
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t s = 0; s < a.seq; ++s) {
      const int64_t p = a.positions[b * a.seq + s];
      for (int64_t h = 0; h < a.heads; ++h) {
        const int64_t row = pg.paged()
                                ? (pg.Block(b, p) * a.heads + h) * pg.block_size + p % pg.block_size
                                : (b * a.heads + h) * a.slots + p;
        std::memcpy(y + row * a.row_bytes, src + ((b * a.heads + h) * a.seq + s) * a.row_bytes,
                    a.row_bytes);
      }
    }
  return absl::OkStatus();
}

}  // namespace kiln::cpu
