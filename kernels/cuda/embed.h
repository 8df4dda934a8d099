// EmbedLayerNorm: y = LayerNorm(word[ids] + pos[position ids] (+ segment[segment ids])) ·
// gamma + beta, fp32 / fp16 / bf16 tables with fp32 statistics; ids i64 or i32; optionally
// the sum itself (GPT-2's first residual), rounded once, y computed from the unrounded sum.
// How: one block per token, the three table rows summed into registers (16-byte vector
// loads when the rows allow), then the same two-reduction normalization as norm.h, with the
// same launch shape (ChooseNormLaunch on `hidden`) but at most 512 threads a block (the
// three table rows' pointers and the sum need the registers): hidden ≤ kEmbedMaxHidden.
// Ids follow ONNX Gather: valid in [-rows, rows), negative ids count from the end; any other
// id records the step's code in the error word and writes a zero row.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

inline constexpr int kEmbedMaxThreads = 512;
inline constexpr int64_t kEmbedMaxHidden = 512 * 16;

struct EmbedArgs {
  ElemType dtype = ElemType::kF32;     // of the tables, gamma, beta and y
  bool ids_i32 = false;                // every id tensor is i32 (else i64)
  const void* input_ids = nullptr;     // [B, S]
  const void* segment_ids = nullptr;   // [B, S] or null
  const void* position_ids = nullptr;  // [B, S] (position_rows = B) or [S] (1); null: 0..S-1
  int64_t position_rows = 0;
  int64_t batch = 0, seq = 0, hidden = 0;
  const void* word = nullptr;
  int64_t word_rows = 0;
  const void* pos = nullptr;
  int64_t pos_rows = 0;
  const void* segment = nullptr;  // or null
  int64_t segment_rows = 0;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  float eps = 1e-12f;
  void* y = nullptr;    // [B, S, hidden]
  void* sum = nullptr;  // [B, S, hidden] the embedding sum before the LayerNorm, or null
  ErrorSink err;
};

cudaError_t EmbedLayerNorm(const EmbedArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
