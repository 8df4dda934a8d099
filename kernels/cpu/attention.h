// Fused multi-head attention for kiln.MultiHeadAttention and kiln.Attention
// (docs/fused-ops.md), fp32. MultiHeadAttention:
// qkv [B, S, (N + 2·Nkv)·D] packed (Q [B, S, N·D], then K and V [B, S, Nkv·D]); head n
// reads K/V head n / (N / Nkv) (grouped-query attention; Nkv = N is plain multi-head);
// Q and K optionally rotated first (rotate-half RoPE over the first R elements of each
// head); per batch and head P = softmax(scale · Q·Kᵀ + mask, causal), Y = P·V, heads
// merged into y [B, S, N·D].
// How (attention.cc, chosen by shape): for S ≤ 64 a hand-written kernel, register-blocked
// over query rows, on a per-worker Kᵀ panel (no oneDNN per-call cost); for longer S,
// per (batch, head group) two single-threaded oneDNN batched matmuls on strided views of
// qkv around an in-place mask + softmax, in parallel over the groups. Never a [B,N,S,S]
// score tensor (docs/benchmarks.md has the numbers).
// Masks: additive f32 or bool (0 = masked out), any shape broadcastable to [B, N, S, S];
// a row with every key masked yields zeros.
// Rotary: the rotated Q and K heads are written once to a per-call buffer
// ([B, S, (N + Nkv)·D] floats) that the strategies then read instead of qkv; V is read in
// place. Grouped K/V heads are read once per group by the row kernel (its packed Kᵀ is
// shared by the group's query heads).
// Few query rows over many keys (a decode step) take the cache path, which skips the keys
// after the last one the mask lets a batch item see (a static cache's free slots); it also
// reads a paged cache through its block table (kiln.Attention only).
// Limits: fp32; per worker a score block of about 64K floats (256 KiB; query rows are
// blocked past S = 256) and no online softmax; for S > 64, causal attention still computes
// the masked upper triangle of the scores.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/cpu/paged_cache.h"

namespace kiln::cpu {

struct AttentionMask {
  const float* additive = nullptr;   // f32 mask added to the scaled scores, or
  const uint8_t* boolean = nullptr;  // bool mask, one byte per element (0 = masked out)
  std::vector<int64_t> dims;         // its shape, rank ≤ 4, broadcastable to [B, N, S, S]
};

// Rotate-half tables: cos and sin [1 or B, S, R] (R even, R <= D).
struct RotaryTables {
  const float* cos = nullptr;  // null: no rotary
  const float* sin = nullptr;
  int64_t dim = 0;           // R
  bool per_batch = false;    // tables [B, S, R] (else [1, S, R], shared by the batch)
  bool interleaved = false;  // GPT-J's pairs (2j, 2j + 1) instead of rotate-half
};

struct MultiHeadAttentionArgs {
  const float* qkv = nullptr;  // [B, S, (N + 2·Nkv)·D]
  int64_t batch = 0, seq = 0, num_heads = 0, head_size = 0;
  int64_t num_kv_heads = 0;  // Nkv, dividing N; 0 means N
  RotaryTables rotary;
  float scale = 1.0f;
  bool causal = false;
  AttentionMask mask;  // both pointers null: no mask
  float* y = nullptr;  // [B, S, N·D]; must not overlap qkv
};

absl::Status MultiHeadAttention(const CpuContext& ctx, const MultiHeadAttentionArgs& a);

// kiln.Attention: Q, K and V given as heads (the KV-cache layout), so S query rows attend
// L keys; the same strategies as MultiHeadAttention (chosen by L) on other strides.
struct AttentionArgs {
  const float* q = nullptr;  // [B, N, S, D]
  const float* k = nullptr;  // [B, Nkv, L, D]
  const float* v = nullptr;  // [B, Nkv, L, D]
  int64_t batch = 0, seq = 0, kv_seq = 0, num_heads = 0, head_size = 0;
  int64_t num_kv_heads = 0;  // Nkv, dividing N; 0 means N
  float scale = 1.0f;
  // Bottom-right aligned: query row i sits at position L - S + i and attends keys
  // j <= L - S + i (needs L >= S).
  bool causal = false;
  AttentionMask mask;  // broadcastable to [B, N, S, L]; both pointers null: no mask
  float* y = nullptr;  // [B, S, N·D]; must not overlap q, k or v
  // Paged K/V (paged_cache.h): k and v are pools [blocks, Nkv, block_size, D] and L is
  // width × block_size. Always the cache path; the block ids of the keys it reads are
  // checked (InvalidArgument) before any is read.
  PagedCache paged;
};

absl::Status Attention(const CpuContext& ctx, const AttentionArgs& a);

}  // namespace kiln::cpu
