// A paged KV cache (docs/generation.md): the keys (or values) of every sequence live in one
// pool of fixed-size blocks [blocks, heads, block_size, row]; sequence b's slot j is row
// j % block_size of block table[b, j / block_size]. kiln.CacheWrite writes through the
// table and kiln.Attention reads through it, so a sequence holds the blocks its tokens
// fill, sequences may share blocks (a fork), and nothing moves when a sequence grows.
// Limits: block ids are checked where they are used (CheckBlockIds), not the whole table.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace kiln::cpu {

struct PagedCache {
  const int64_t* table = nullptr;  // [batch, width] block ids; null: a dense cache
  int64_t width = 0;               // blocks per sequence (the table's columns)
  int64_t block_size = 0;          // slots per block
  int64_t blocks = 0;              // blocks in the pool

  bool paged() const { return table != nullptr; }
  // Block of sequence b's slot j, unchecked.
  int64_t Block(int64_t b, int64_t j) const { return table[b * width + j / block_size]; }
};

// OK when table[b, c] is in [0, blocks) for every c < columns; else InvalidArgument naming
// the sequence, the column and the id.
absl::Status CheckBlockIds(const PagedCache& p, int64_t b, int64_t columns);

}  // namespace kiln::cpu
