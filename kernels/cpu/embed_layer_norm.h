// EmbedLayerNorm for kiln.EmbedLayerNorm (docs/fused-ops.md), fp32 tables:
// E = word[ids] + pos[position_ids or 0..S-1] (+ segment[segment_ids]), Y = LayerNorm(E)·γ+β,
// and E itself when `sum` is given (GPT-2: the embedding sum is also the first residual).
// Every id is range-checked (negative ids count from the end, as ONNX Gather) before any
// row is read; a bad id is InvalidArgument naming the tensor and the value.
// Limits: ids are i64 or i32, all of one type; position_ids, when given, are [B, S] or [S].
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

struct EmbedLayerNormArgs {
  // Index tensors: exactly one of the i64 / i32 pointers of each pair, or none where optional.
  const int64_t* input_ids = nullptr;  // [B, S]
  const int32_t* input_ids32 = nullptr;
  const int64_t* segment_ids = nullptr;  // [B, S] or null
  const int32_t* segment_ids32 = nullptr;
  const int64_t* position_ids = nullptr;  // [B, S], or [S] when position_rows == 1; null: 0..S-1
  const int32_t* position_ids32 = nullptr;
  int64_t position_rows = 0;  // B or 1 (broadcast over the batch)
  int64_t batch = 0, seq = 0, hidden = 0;
  const float* word = nullptr;
  int64_t word_rows = 0;  // [vocab, H]
  const float* pos = nullptr;
  int64_t pos_rows = 0;  // [max_pos, H]
  const float* segment = nullptr;
  int64_t segment_rows = 0;      // [types, H] or null
  const float* gamma = nullptr;  // [H]
  const float* beta = nullptr;   // [H]
  float eps = 1e-12f;
  float* y = nullptr;    // [B, S, H]
  float* sum = nullptr;  // [B, S, H] the embedding sum E (pre-LN decoders' first residual), or null
};

absl::Status EmbedLayerNorm(const CpuContext& ctx, const EmbedLayerNormArgs& a);

}  // namespace kiln::cpu
