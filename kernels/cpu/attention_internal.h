// Internal: the execution strategies behind MultiHeadAttention and Attention (attention.h), so that
// tests can check every one of them on any shape and benches can compare them in one run.
// Production code calls MultiHeadAttention or Attention, which pick a strategy from the shape.
#pragma once

#include "absl/status/status.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu::internal {

enum class AttentionPath {
  kAuto,       // what MultiHeadAttention does: chosen from the shape and thread count
  kRows,       // hand-written row kernel (isa_impl.inc): one query row at a time
  kGemmHeads,  // work items = (batch, group of heads); per item two single-threaded
               // oneDNN batched matmuls around an in-place mask + softmax
  kGemmBatch,  // per batch item, oneDNN parallelizes each batched matmul over all heads;
               // kiln parallelizes the mask + softmax rows in between (kept to compare;
               // kAuto never picks it, attention.cc says why)
  kCache,      // few query rows over many keys (a KV cache's decode step): work items =
               // (batch, K/V head, key chunk), each reading its K and V rows once for all
               // the group's query rows, no Kᵀ packing; chunks merged by their row max
};

absl::Status MultiHeadAttentionWithPath(const CpuContext& ctx, const MultiHeadAttentionArgs& a,
                                        AttentionPath path);
absl::Status AttentionWithPath(const CpuContext& ctx, const AttentionArgs& a, AttentionPath path);

// The path kAuto takes for `queries` query rows per head over `keys` keys (S and S for
// MultiHeadAttention, S and L for Attention); never kAuto.
AttentionPath ChooseAttentionPath(int64_t queries, int64_t keys);

}  // namespace kiln::cpu::internal
