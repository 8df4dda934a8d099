// Multi-head attention for kiln.MultiHeadAttention (docs/fused-ops.md), the simple correct
// path: qkv [B, S, (N + 2·Nkv)·D] read in place (no transpose kernel; head n reads K/V head
// n / (N / Nkv)), y [B, S, N·D] written in place, fp32 / fp16 / bf16 I/O with fp32 scores, softmax
// and accumulation. The score matrix never reaches device memory. How: a block of 8 warps takes 8
// consecutive query rows of one (batch, head); key tiles (32 keys, 16 for head sizes over 128) of K
// and V are staged in shared memory (rows padded by one float, so the per-key dot products are
// bank-conflict free) and shared by the 8 warps; lane j scores key j of the tile, the warp keeps
// the online softmax (running max and sum) and each lane accumulates its D/32 output elements; the
// output is normalized once at the end. Causal attention skips tiles past the block's last query
// row. Rotary: with cos/sin tables [1 or B, S, R], each Q row and K tile element is rotated as it
// is loaded (rotate-half over the first R elements of the head: one more read of the partner
// element), in fp32. Masks: additive f32 or bool (false = masked out), any shape broadcastable to
// [B, N, S, S] given by element strides (0 on broadcast dims); a row whose every key is
// masked (bool, causal or -inf) yields zeros; a finite large negative additive mask is a
// score like any other (the decomposed graph's behaviour).
// kiln.Attention's head layout (q, k, v given apart, S queries over L keys) runs the same
// kernel on other strides; packed tokens (cu_seqlens) run it per sequence.
// Limits: head_size ≤ kAttentionMaxHeadSize; no tensor cores (the fused flash kernel is
// its own issue). Cost O(S²·D) per head on CUDA cores.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

inline constexpr int64_t kAttentionMaxHeadSize = 256;
inline constexpr int64_t kAttentionRowsPerBlock = 8;  // query rows per block (one per warp)

struct AttentionArgs {
  ElemType dtype = ElemType::kF32;  // of qkv (or q, k, v) and y
  const void* qkv = nullptr;        // [B, S, (N + 2·Nkv)·D]
  // kiln.Attention: instead of qkv (null), the heads: q [B, N, S, D], k and v
  // [B, Nkv, L = kv_seq, D] (the KV-cache layout); no rotary tables; causal is
  // bottom-right aligned (query i sees keys j <= L - S + i) and needs L >= S.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t kv_seq = 0;
  int64_t batch = 0, seq = 0, heads = 0, head_size = 0;
  int64_t kv_heads = 0;  // Nkv, dividing heads; 0 means heads
  // Rotary tables of qkv's dtype, [1 or B, S, rotary_dim]; null: no rotary.
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t rotary_dim = 0;
  int64_t rotary_batch_stride = 0;  // elements between batches of the tables (0: shared)
  bool rotary_interleaved = false;  // GPT-J's pairs (2j, 2j + 1) instead of rotate-half
  float scale = 1.f;
  bool causal = false;
  const void* mask = nullptr;  // f32 (additive) or bool, or null
  ElemType mask_type = ElemType::kF32;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // elements per step of b, h, query, key
  // Packed variable-length form (kiln.PackedAttention, packed.h): qkv and y are [T, ...]
  // tokens and batch item b is tokens [cu_seqlens[b], cu_seqlens[b+1]), attending only to
  // itself; `seq` is then an upper bound of the lengths (T). qkv only; no mask, rotary or
  // causality. With `tile_cu` (PackedSegments' tile offsets for kAttentionRowsPerBlock
  // rows) the grid is `tiles` blocks per head, each finding its sequence and rows there,
  // instead of ceil(seq / 8) blocks per sequence and head.
  const int32_t* cu_seqlens = nullptr;
  const int32_t* tile_cu = nullptr;
  int64_t tiles = 0;
  void* y = nullptr;  // [B, S, N·D]; must not overlap qkv
};

cudaError_t Attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
