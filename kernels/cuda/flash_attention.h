// Fused flash attention for fp16/bf16 (kiln.MultiHeadAttention in fp16/bf16 cuda plans;
// docs/fused-ops.md): tensor-core MMAs (mma.sync m16n8k16, sm_80 and later, sm_90
// included), fp32 scores, online softmax and accumulation, the score matrix never in
// device memory.
// How: a block takes `block_q` query rows of one (batch, head), one warp per 16 rows. Its Q
// tile is copied to shared memory once and held in registers as MMA fragments; K and V
// tiles of `block_k` keys stream through two shared-memory buffers with cp.async (tile t+1
// is in flight while tile t is computed). Each warp computes S = Q·Kᵀ for its rows in fp32
// registers, applies scale, mask and causality, updates the running row max and sum, turns
// the probabilities into 16-bit A fragments in registers (no trip through shared memory)
// and accumulates O += P·V (V fragments by ldmatrix.trans). O is normalized once at the
// end. Shared-memory rows are padded by 8 elements, so the fragment loads are free of
// bank conflicts.
// Layout: Q, K and V are strided views, so the fused QKV projection's [B, S, 3·N·D] output
// is read in place (q = qkv, k = qkv + N·D, v = qkv + 2·N·D, row stride 3·N·D); y is
// [B, Sq, N·D] (row stride given) for the output projection: no transpose on either side.
// Separate query and key lengths, grouped-query heads (kv_heads divides heads; head h
// reads K/V head h / (heads / kv_heads)) and a packed variable-length form (cu_seqlens)
// are in the interface for the ragged-batch and KV-cache work.
// Masks: an f32 additive mask or a bool mask (false = masked out), any shape broadcastable
// to [B, N, Sq, Skv] given by element strides (0 on broadcast dims); causal (query i sees
// keys j <= i + Skv - Sq; tiles above the diagonal are never visited). A mask with no query
// dependence (stride 0 on the query dim: a key-padding mask such as HF's [B, 1, 1, S]) is
// scanned once per block and the key tiles past the last kept key are skipped (see
// KeyIsKept / PaddedKeyEnd). A row whose every key is masked out (-inf or false) is zeros;
// a finite large negative mask is a score like any other, as in the decomposed graph.
// Limits: head_size 8, 16, 32, 64 or 128 (MiniLM 32, BERT-base 64, decoders 64/128; 8 and 16
// for tiny models); 16-bit Q/K/V/y (fp32 plans keep attention.h's exact
// path); pointers 16-byte aligned, row strides multiples of 8 elements.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

// True for the head sizes the flash kernel is instantiated for.
// 8 and 16 (tiny test models) run padded to 16 in shared memory.
constexpr bool FlashHeadSizeSupported(int64_t head_size) {
  return head_size == 8 || head_size == 16 || head_size == 32 || head_size == 64 ||
         head_size == 128;
}

struct FlashAttentionArgs {
  ElemType dtype = ElemType::kF16;  // of q, k, v and y: kF16 or kBF16
  // Element (batch 0, token 0, head 0) of each operand; head h of a token starts h·D
  // elements after the token's first element.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t q_row_stride = 0, kv_row_stride = 0;      // elements between consecutive tokens
  int64_t q_batch_stride = 0, kv_batch_stride = 0;  // elements between batches (no cu_seqlens)
  int64_t batch = 0, q_len = 0, kv_len = 0, heads = 0, kv_heads = 0, head_size = 0;
  float scale = 1.f;
  bool causal = false;
  const void* mask = nullptr;  // f32 (additive) or bool, or null
  ElemType mask_type = ElemType::kF32;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // elements per step of b, h, query, key
  // Packed variable-length form: batch b's queries are tokens [cu_seqlens_q[b],
  // cu_seqlens_q[b+1]) of q and y (likewise keys of k and v); q_len / kv_len are then the
  // longest lengths and the batch strides are unused. No mask in this form.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_kv = nullptr;
  // Optional with cu_seqlens (not causal): PackedSegments' tile offsets for the launch's
  // block_q rows (packed.h); the grid is then `tiles` blocks per head, each finding its
  // sequence and query tile there, instead of ceil(q_len / block_q) blocks per sequence.
  const int32_t* tile_cu = nullptr;
  int64_t tiles = 0;
  void* y = nullptr;  // must not overlap q, k or v
  int64_t y_row_stride = 0, y_batch_stride = 0;
};

// The launch shape: block_q query rows per block (16 per warp), block_k keys per tile.
struct FlashLaunch {
  int block_q = 64;
  int block_k = 64;
  int warps() const { return block_q / 16; }
  // Q, two K and two V tiles of 16-bit rows of the head size rounded up to 16, plus 8.
  int64_t SmemBytes(int64_t head_size) const {
    return static_cast<int64_t>(block_q + 4 * block_k) * ((head_size + 15) / 16 * 16 + 8) * 2;
  }
};

// The instantiated launch shapes (every head size and dtype has each of them).
inline constexpr FlashLaunch kFlashLaunches[] = {{64, 64}, {128, 64}};

// The launch shape kiln uses for `head_size` on an SM (major·10 + minor). Not yet chosen by
// measurement: no GPU was available when the kernel was written (docs/benchmarks.md,
// "Fused attention"); kiln_gpu_bench --attention sweeps kFlashLaunches on a GPU to set it.
FlashLaunch ChooseFlashLaunch(int sm, int64_t head_size);

// Why `a` cannot run on the flash kernel with `launch` (nullptr when it can): head size,
// dtype, lengths, grid limits, head grouping, mask form.
const char* FlashAttentionUnsupported(const FlashAttentionArgs& a, const FlashLaunch& launch);

// Sets the kernel's dynamic shared-memory limit for (dtype, head_size, launch) on the
// current device; once per executor before launches (not allowed inside graph capture).
cudaError_t FlashAttentionInit(ElemType dtype, int64_t head_size, const FlashLaunch& launch);

// Enqueues the kernel. cudaErrorInvalidValue when FlashAttentionUnsupported says why, or a
// pointer / stride breaks the alignment rule.
cudaError_t FlashAttention(const FlashAttentionArgs& a, const FlashLaunch& launch,
                           cudaStream_t stream);

// ---- The block's key range (host and device: unit-tested on the host) -------------------

// Mask values at or below this are "padding" for tile skipping. Exactness: a skipped key's
// score is at most |s| - 1e30 while the row keeps a key scored above -1e30 - |s|; fp32
// rounds both to within one ulp of their mask (the ulp at 1e30 is 7.6e22), so the skipped
// key's exp(score - max) underflows to exactly 0 whenever the unmasked scores |s| are
// below 1e22, i.e. for any real input. -inf, HF's finfo.min fill and bool false all count.
inline constexpr float kPaddedMaskValue = -1e30f;

// NaN is kept: the row must see it (and turn NaN, as the decomposed graph does).
__host__ __device__ inline bool KeyIsKept(float additive_mask_value) {
  return !(additive_mask_value <= kPaddedMaskValue);
}

// The end of the keys a block must visit for a query-independent mask whose last kept key
// is kept_end - 1 (kept_end = 0: none kept). Bool masks: keys from kept_end on are -inf,
// so kept_end it is (0: every row is zeros). Additive masks: the same when some key is kept;
// with none kept the decomposed graph gives the softmax over the huge negative scores, so
// every key is visited.
__host__ __device__ inline int64_t PaddedKeyEnd(bool bool_mask, int64_t kept_end, int64_t kv_len) {
  if (bool_mask || kept_end > 0) return kept_end < kv_len ? kept_end : kv_len;
  return kv_len;
}

// The end of the keys visible to query rows [q0, q0 + block_q) under causality (bottom-right
// aligned: query i sees keys j <= i + kv_len - q_len), or kv_len.
__host__ __device__ inline int64_t CausalKeyEnd(bool causal, int64_t q0, int64_t block_q,
                                                int64_t q_len, int64_t kv_len) {
  if (!causal) return kv_len;
  const int64_t last_q = (q0 + block_q < q_len ? q0 + block_q : q_len) - 1;
  int64_t end = last_q + (kv_len - q_len) + 1;
  if (end < 0) end = 0;
  return end < kv_len ? end : kv_len;
}

}  // namespace kiln::cuda
