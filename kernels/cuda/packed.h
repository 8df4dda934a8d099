// Packed-token programs on CUDA (docs/packing.md): the tokens of several sequences laid end
// to end, [1, T, ...], and `lengths` [N] (int64) saying how many belong to each sequence in
// order; tokens after the last sequence belong to none.
// PackedSegments turns the lengths into the int32 offsets `cu` [N + 1] (sequence s is
// tokens [cu[s], cu[s+1])) that the variable-length attention (attention.h and
// flash_attention.h, `cu_seqlens`) and pooling (pool.h) kernels read, and optionally
// zero-fills the rows of tokens of no sequence. Each packed step runs it into scratch
// device memory (the run slot's workspace) before its own kernel, so a step reads nothing
// another step wrote.
// How: every block scans the lengths (each thread a run of consecutive entries, then a
// block scan of the runs' sums); block 0 writes `cu` (and the tile offsets), every block
// zero-fills its share of the rows past the last sequence. A negative length, or lengths adding up
// to more than T, records the step's error code and gives offsets that are all zero (no sequence,
// every row of no sequence: nothing reads outside the T tokens). PackedPositions: each token's
// position in its sequence (0 for tokens of none), by a binary search of `cu` (SegmentOf). Limits:
// T < 2^31 (the offsets are int32); the scan costs O(N) per block, N being the bucket's sequence
// count.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

struct PackedSegmentsArgs {
  const int64_t* lengths = nullptr;  // [sequences]
  int64_t sequences = 0, tokens = 0;
  int32_t* cu = nullptr;  // [sequences + 1], written
  // Optional: rows [cu[N], tokens) of this [tokens, row_bytes] tensor are zero-filled.
  void* zero = nullptr;
  int64_t zero_row_bytes = 0;
  // Optional: tile offsets [sequences + 1] for a kernel that gives each block `tile_rows`
  // query rows of one sequence: sequence s's tiles are [tile_cu[s], tile_cu[s+1]), so a
  // grid of PackedTileBound blocks covers every sequence with no block per (sequence,
  // tile) pair that has no rows.
  int32_t* tile_cu = nullptr;
  int64_t tile_rows = 0;
  ErrorSink err;
};

// Blocks enough for every tile of any lengths adding up to at most `tokens`:
// Σ ceil(len / rows) <= ceil(tokens / rows) + sequences.
constexpr int64_t PackedTileBound(int64_t tokens, int64_t sequences, int64_t rows) {
  return (tokens + rows - 1) / rows + sequences;
}

// Enqueues the scan (and the zero fill). cudaErrorInvalidValue for tokens >= 2^31 or
// sequences < 1.
cudaError_t PackedSegments(const PackedSegmentsArgs& a, cudaStream_t stream);

struct PackedPositionsArgs {
  const int32_t* cu = nullptr;  // PackedSegments' offsets, [sequences + 1]
  int64_t sequences = 0, tokens = 0;
  int64_t* y = nullptr;  // [tokens]
};

cudaError_t PackedPositions(const PackedPositionsArgs& a, cudaStream_t stream);

// The sequence holding token t under offsets cu [n + 1] (non-decreasing, cu[0] = 0), or -1
// for a token of no sequence (t >= cu[n]). Empty sequences hold no token: the answer is the
// last s with cu[s] <= t. Host and device (unit-tested on the host).
__host__ __device__ inline int64_t SegmentOf(const int32_t* cu, int64_t n, int64_t t) {
  if (n <= 0 || t < 0 || t >= cu[n]) return -1;
  int64_t lo = 0, hi = n - 1;  // cu[lo] <= t holds; find the last such index
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace kiln::cuda
