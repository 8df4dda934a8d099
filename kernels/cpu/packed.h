// Packed-token kernels (docs/packing.md): tokens of several sequences laid end to end,
// [1, T, ...], `lengths` [N] (int64) saying how many belong to each sequence in order;
// tokens after the last sequence belong to none.
//   PackedAttention: kiln.MultiHeadAttention (no mask, not causal) within each sequence,
//     each sequence through the same strategies (attention.h) as a batch of one of its
//     length, so no score is computed across sequences or on padding; tokens of no
//     sequence get zeros.
//   PackedPool: kiln.Pool per sequence (mean over its tokens or its first token; an empty
//     sequence pools to zeros), summed in token order as the padded kernel does.
//   PackedPositions: each token's position in its sequence (0 for tokens of none).
//   PackedCumSum: CumSum along each sequence's tokens (the CumSum kernel per sequence, so
//     bit for bit the padded program's), 0 for tokens of none.
// Every kernel checks the lengths first (none negative, at most T tokens in all) and
// writes nothing when they are wrong.
// Limits: fp32; PackedAttention runs the sequences one after another, each parallel over
// its heads and row blocks (a parallel region per sequence).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/cpu/pool.h"
#include "kiln/ir/tensor.h"

namespace kiln::cpu {

struct PackedAttentionArgs {
  const float* qkv = nullptr;  // [T, (N + 2·Nkv)·D]
  const int64_t* lengths = nullptr;
  int64_t tokens = 0, sequences = 0, num_heads = 0, head_size = 0;
  int64_t num_kv_heads = 0;  // Nkv, dividing N; 0 means N
  float scale = 1.0f;
  float* y = nullptr;  // [T, N·D]; must not overlap qkv
};
absl::Status PackedAttention(const CpuContext& ctx, const PackedAttentionArgs& a);

struct PackedPoolArgs {
  const float* hidden = nullptr;  // [T, H]
  const int64_t* lengths = nullptr;
  int64_t tokens = 0, sequences = 0, hidden_size = 0;
  PoolMode mode = PoolMode::kMean;
  bool normalize = false;
  float* y = nullptr;  // [N, H]
};
absl::Status PackedPool(const CpuContext& ctx, const PackedPoolArgs& a);

absl::Status PackedPositions(const int64_t* lengths, int64_t sequences, int64_t tokens, int64_t* y);

struct PackedCumSumArgs {
  const void* x = nullptr;  // [T] of dtype (f32, i32, i64; any CumSum takes)
  const int64_t* lengths = nullptr;
  int64_t tokens = 0, sequences = 0;
  DType dtype = DType::kF32;
  bool exclusive = false;
  void* y = nullptr;  // [T]
};
absl::Status PackedCumSum(const CpuContext& ctx, const PackedCumSumArgs& a);

}  // namespace kiln::cpu
