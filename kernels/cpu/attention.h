// Fused multi-head attention for kiln.MultiHeadAttention (docs/fused-ops.md), fp32:
// qkv [B, S, 3H] packed (Q, K, V each [B, S, N·D]); per batch and head
// P = softmax(scale · Q·Kᵀ + mask, causal), Y = P·V, heads merged into y [B, S, H].
// How (attention.cc, chosen by shape): for S ≤ 64 a hand-written kernel, register-blocked
// over query rows, on a per-worker Kᵀ panel (no oneDNN per-call cost); for longer S,
// per (batch, head group) two single-threaded oneDNN batched matmuls on strided views of
// qkv around an in-place mask + softmax, in parallel over the groups. Never a [B,N,S,S]
// score tensor (docs/benchmarks.md has the numbers).
// Masks: additive f32 or bool (0 = masked out), any shape broadcastable to [B, N, S, S];
// a row with every key masked yields zeros.
// Limits: fp32; per worker a score block of about 64K floats (256 KiB; query rows are
// blocked past S = 256) and no online softmax; for S > 64, causal attention still computes
// the masked upper triangle of the scores.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

struct AttentionMask {
  const float* additive = nullptr;   // f32 mask added to the scaled scores, or
  const uint8_t* boolean = nullptr;  // bool mask, one byte per element (0 = masked out)
  std::vector<int64_t> dims;         // its shape, rank ≤ 4, broadcastable to [B, N, S, S]
};

struct MultiHeadAttentionArgs {
  const float* qkv = nullptr;  // [B, S, 3·N·D]
  int64_t batch = 0, seq = 0, num_heads = 0, head_size = 0;
  float scale = 1.0f;
  bool causal = false;
  AttentionMask mask;  // both pointers null: no mask
  float* y = nullptr;  // [B, S, N·D]; must not overlap qkv
};

absl::Status MultiHeadAttention(const CpuContext& ctx, const MultiHeadAttentionArgs& a);

}  // namespace kiln::cpu
