// Pool (kiln.Pool): masked mean over the sequence, the CLS row, or the row of the last
// nonzero mask entry (zeros if none), optionally L2-normalized
// (sentence-transformers' Normalize); fp32 / fp16 / bf16 hidden states, fp32 sums.
// How: one block per batch row, threads over the hidden columns, each summing its columns
// down the sequence (coalesced rows); the mask sum and the squared norm are block
// reductions. Semantics as docs/fused-ops.md: mean = Σ h·m / max(Σ m, 1e-9); normalize
// divides by max(‖y‖, 1e-12), the fp32 row held in shared memory so it rounds once.
// Limits: normalize needs H ≤ kPoolMaxNormalizedHidden (the fp32 row in dynamic shared
// memory plus the kernel's 128-byte reduction scratch within the default 48 KiB).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

inline constexpr int64_t kPoolMaxNormalizedHidden = (48 * 1024 - 32 * 4) / 4;  // 12256

struct PoolArgs {
  ElemType dtype = ElemType::kF32;  // of hidden and y
  const void* hidden = nullptr;     // [B, S, H]
  const void* mask = nullptr;       // [B, S] of mask_type, or null (every position counts)
  ElemType mask_type = ElemType::kF32;
  int64_t batch = 0, seq = 0, hidden_size = 0;
  bool cls = false, last = false, normalize = false;  // last: the block's max of the
                                                      // unmasked rows, S < 2^24
  // Packed tokens (kiln.PackedPool, packed.h): hidden is [T, H] and row b pools tokens
  // [cu_seqlens[b], cu_seqlens[b+1]) (an empty one gives zeros); no mask, not `last`.
  const int32_t* cu_seqlens = nullptr;
  void* y = nullptr;  // [B, H]
};

cudaError_t Pool(const PoolArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
