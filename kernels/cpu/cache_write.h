// The cache append of a decode program (kiln.CacheWrite, docs/generation.md): y = cache
// with new[b, h, s, :] written at slot positions[b, s]. When y is the cache (the
// generation session passes one buffer as both) only the new rows move: the past is never
// copied. Positions are checked before anything is written: one outside [0, slots) is
// InvalidArgument and y is left untouched.
// Paged (`paged.table` set): cache and y are a block pool [blocks, heads, block_size, row]
// and slot p of sequence b is row p % block_size of block table[b, p / block_size]
// (paged_cache.h); `slots` is then width × block_size. Rows of different sequences that
// land on one slot (a batch padded with block 0 as the scratch block) are written in
// sequence order, so the last one wins.
// Limits: dense row-major; y must be the cache or not overlap it; new must not overlap y.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/cpu/paged_cache.h"

namespace kiln::cpu {

struct CacheWriteArgs {
  const void* cache = nullptr;         // [batch, heads, slots, row] or the paged pool
  const void* rows = nullptr;          // [batch, heads, seq, row]
  const int64_t* positions = nullptr;  // [batch, seq]
  void* y = nullptr;                   // the cache's layout
  int64_t batch = 0, heads = 0, slots = 0, seq = 0;
  size_t row_bytes = 0;  // row elements × element size
  PagedCache paged;      // table null: dense
};

absl::Status CacheWrite(const CpuContext& ctx, const CacheWriteArgs& a);

}  // namespace kiln::cpu
