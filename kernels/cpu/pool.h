// Sentence pooling for kiln.Pool (docs/fused-ops.md), fp32 hidden states:
// mean: Y[b] = Σ_s hidden[b,s]·mask[b,s] / max(Σ_s mask[b,s], 1e-9); cls: Y[b] = hidden[b,0];
// last: Y[b] = hidden[b, the last s with mask[b,s] != 0] (zeros when there is none; S - 1
// without a mask: a prefill's last-token logits, decoder embedding models' pooling);
// normalize divides each row by max(‖Y[b]‖₂, 1e-12).
// Limits: the mask is f32 or i64 [B, S] (the executor converts other dtypes); sums over the
// sequence accumulate in fp32, in sequence order.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

enum class PoolMode { kMean, kCls, kLast };

struct PoolArgs {
  const float* hidden = nullptr;      // [B, S, H]
  const float* mask = nullptr;        // [B, S] f32, or
  const int64_t* mask_i64 = nullptr;  // [B, S] i64; neither: every position counts
  int64_t batch = 0, seq = 0, hidden_size = 0;
  PoolMode mode = PoolMode::kMean;
  bool normalize = false;
  float* y = nullptr;  // [B, H]
};

absl::Status Pool(const CpuContext& ctx, const PoolArgs& a);

}  // namespace kiln::cpu
