// The decode program's KV-cache kernels on CUDA (docs/generation.md): the cache append
// (kiln.CacheWrite) and attention of a few query rows over a paged cache (kiln.Attention
// with a block table), the split-KV ("flash-decoding") form.
//
// CacheWrite: y = cache with rows[b, h, s, :] at slot positions[b, s] of sequence b (dense
// [batch, heads, slots, row], or paged: row p % block_size of block table[b, p /
// block_size] of the pool [blocks, heads, block_size, row]). When y is the cache only the
// new rows move (the generation session passes one buffer as both); otherwise the cache is
// copied to y first. A position outside [0, slots) or a block id outside [0, blocks)
// records the step's data error and that row is not written (the others are: the run
// fails, so nothing reads them). Rows of two sequences landing on one slot (only the
// scratch block 0 is named that way) leave one of them there, which one unspecified.
//
// PagedAttention: q [B, N, S, D], k/v pools [blocks, Nkv, block_size, D] read through
// table [B, W] (L = W·block_size slots per sequence), y [B, S, N·D]; head n reads KV head
// n / (N / Nkv); mask additive f32 or bool by element strides over (b, h, query, key),
// causal bottom-right aligned (query i sees keys j <= L - S + i). fp32 scores, softmax and
// accumulation. How: the L keys are cut into `splits` chunks; a block of 4 warps takes one
// (chunk, head, query row): each warp scores keys of the chunk (lane d holds Q[d], Q[d+32],
// ..., one warp reduction per key, four keys in flight), keeps an online softmax and
// accumulates V; the warps merge in shared memory. With one split the block writes y;
// otherwise it writes its (max, sum, unnormalized output) to `partial` and a second kernel
// merges the splits of each row (the rescaling of FlashDecoding). A row whose every key is
// masked gets zeros, as the other attention kernels. Keys a mask removes are never read:
// bool false and -inf always, and additive values <= -1e30 (HF's float32-min fill of a
// cache's free slots) when the row sees some other key, since their weight is then exactly
// 0 in fp32 (a row that sees none is a softmax over them all, as the decomposed graph's).
// A block id outside [0, blocks) records the data error and its key is skipped.
// Why split: a decode step has B·N·S rows, often fewer than the SMs; splitting the cache
// length keeps every SM reading the cache.
// Limits: head_size <= 256; B·S and N <= 65535, B·S·N < 2^31; f32 / f16 / bf16 (one dtype
// for q, the pools and y).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

struct CacheWriteArgs {
  const void* cache = nullptr;         // dense [batch, heads, slots, row] or the pool
  const void* rows = nullptr;          // [batch, heads, seq, row]
  const int64_t* positions = nullptr;  // [batch, seq]
  void* y = nullptr;                   // cache's layout; the cache itself or no overlap
  int64_t batch = 0, heads = 0, slots = 0, seq = 0;
  int64_t row_bytes = 0;           // a multiple of 4
  int64_t cache_bytes = 0;         // the whole cache (copied when y is not the cache)
  const int64_t* table = nullptr;  // paged: [batch, width]; null: dense
  int64_t width = 0, block_size = 0, blocks = 0;
  ErrorSink err;
};

cudaError_t CacheWrite(const CacheWriteArgs& a, cudaStream_t stream);

// ONNX TensorScatter (opset 24), the cache update of onnxruntime-genai exports: y = cache
// with update[b, o, s, :] at position (write_indices[b] + s) of the cache axis (modulo cap
// when circular; 0 without write_indices). Layout [batch, outer, cap|seq, inner] elements
// of elem_size bytes. y is the cache (only the rows move) or does not overlap it (copied
// first). A write index < 0, or past cap - seq when linear, records the data error and that
// batch row is not written.
struct TensorScatterArgs {
  const void* cache = nullptr;
  const void* update = nullptr;
  const int64_t* write_indices = nullptr;  // [batch], or null
  void* y = nullptr;
  int64_t batch = 0, outer = 0, cap = 0, seq = 0, inner = 0;
  int elem_size = 4;
  bool circular = false;
  int64_t cache_bytes = 0;
  ErrorSink err;
};

cudaError_t TensorScatter(const TensorScatterArgs& a, cudaStream_t stream);

inline constexpr int64_t kPagedAttentionMaxHeadSize = 256;

struct PagedAttentionArgs {
  ElemType dtype = ElemType::kF32;
  const void* q = nullptr;  // [B, N, S, D]
  const void* k = nullptr;  // pools [blocks, Nkv, block_size, D]
  const void* v = nullptr;
  const int64_t* table = nullptr;  // [B, width]
  int64_t width = 0, block_size = 0, blocks = 0;
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_size = 0;
  float scale = 1.f;
  bool causal = false;
  const void* mask = nullptr;  // f32 (additive) or bool, or null
  ElemType mask_type = ElemType::kF32;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // elements per step of b, h, query, key
  void* y = nullptr;                      // [B, S, N·D]
  int splits = 1;                         // PagedAttentionSplits
  float* partial = nullptr;               // splits > 1: PagedAttentionWorkspace bytes
  ErrorSink err;
};

// The split count for `a` (its shape fields set): enough (chunk, head, row) blocks to
// fill about `target_blocks`, chunks of at least 64 keys, and a partial buffer of at most
// `workspace_bytes`.
int PagedAttentionSplits(const PagedAttentionArgs& a, int64_t target_blocks,
                         size_t workspace_bytes);
// Bytes of `partial` for a.splits (0 for one split).
size_t PagedAttentionWorkspace(const PagedAttentionArgs& a);

cudaError_t PagedAttention(const PagedAttentionArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
