// kiln::GenerationSession: KV-cached generation over an Executor whose plan has a prefill
// and a decode program (CompileOptions::decode_context, `kiln compile --decode-context`;
// docs/generation.md).
//
//   auto exec = kiln::Executor::Create(plan);             // shared: sessions do not own it
//   auto gen = kiln::GenerationSession::Create(*std::move(exec));
//   absl::StatusOr<kiln::Tensor> logits = (*gen)->Prefill({{1, 2, 3}, {4, 5}});  // [2, vocab]
//   logits = (*gen)->Decode({7, 9});                                            // [2, vocab]
//
// The cache is paged: per past K/V input of the plan the session owns a pool of fixed-size
// blocks ([blocks, kv_heads, block_size, head] f32, in the executor's memory: host memory
// for cpu plans, device memory for cuda plans), and each sequence a block table naming the blocks
// that hold its slots 0 .. length-1 (slot = position). Every decode step passes the pools as both
// the past inputs and the present outputs and the tables as `block_table`; its kiln.CacheWrite
// appends this token's keys and values through the table and its attention reads through it, so the
// past is never copied, a sequence takes a block only when its tokens reach it, and moving to a
// larger decode capacity (a wider mask and table) moves nothing. A host pool is reserved address
// space: its pages are committed when a block is first written and handed back to the system on
// Prefill, so resident memory follows the blocks in use. A device pool is allocated whole at Create
// (as vLLM's); on CUDA the prompt's keys and values stay on the device from the prefill run into
// the blocks, and each decode step replays its bucket's CUDA graph over the pools. Fork shares the
// source's blocks (copy on write of the partly filled last block). Thread safety: one session per
// thread (a session is a mutable cache); many sessions may share one Executor. Errors: token ids
// outside [0, vocab), empty or too-long prompts, Decode before Prefill, a sequence index out of
// range, a sequence at the plan's maximum context and a pool out of blocks are InvalidArgument /
// FailedPrecondition / ResourceExhausted with the numbers, never a crash; a failed call leaves
// every sequence's tokens as they were, except that a device error while a Prefill or Restart
// writes its prompt into the pools leaves those sequences empty. Limits: no prefix sharing between
// unrelated prompts; cuda generation plans are fp32; plans compiled before the paged cache (no
// decode signature) are refused with a recompile message.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"
#include "kiln/kiln.h"

namespace kiln {
namespace runtime {
struct CudaPagedRows;
}  // namespace runtime

class GenerationSession {
 public:
  // FailedPrecondition when the executor's plan has no decode program or its signature is
  // not a KV-cache decoder's (input_ids, attention_mask, position_ids, past/present pairs,
  // logits [batch, 1, vocab], or [batch, sequence, vocab] from --prefill-logits all).
  static absl::StatusOr<std::unique_ptr<GenerationSession>> Create(
      std::shared_ptr<const Executor> executor);

  // Starts prompts.size() sequences (the batch; any earlier ones are dropped), fills the
  // cache with their keys and values and returns each one's logits at its last prompt token,
  // [batch, vocab] f32. Each prompt needs at least one token and at most max_context() - 1.
  absl::StatusOr<Tensor> Prefill(std::span<const std::vector<int64_t>> prompts);

  // Appends next_ids[b] to sequence b (one per sequence) and returns the logits after it,
  // [batch, vocab] f32.
  absl::StatusOr<Tensor> Decode(std::span<const int64_t> next_ids);

  // Starts sequence `b` of the batch over with `prompt` (a batch-1 prefill copied into new
  // blocks; the other sequences keep theirs) and returns the logits at its last token,
  // [1, vocab]. Needs a batch-1 prefill bucket.
  absl::StatusOr<Tensor> Restart(int b, std::span<const int64_t> prompt);

  // Sequence `dst` becomes a copy of sequence `src` (its tokens and length), e.g. to branch
  // a beam or sample two continuations of one prompt. The two share src's blocks until one
  // of them writes into a shared block (then that block is copied).
  absl::Status Fork(int src, int dst);

  int batch() const { return static_cast<int>(lengths_.size()); }
  // Tokens sequence `b` holds (prompt + decoded); InvalidArgument for b out of range.
  absl::StatusOr<int64_t> length(int b) const;
  // The decode capacity in use: the smallest compiled one above the longest sequence.
  int64_t capacity() const { return capacity_; }
  int64_t max_context() const { return capacities_.back(); }  // the largest capacity
  int64_t vocab() const { return vocab_; }
  int64_t block_size() const { return block_size_; }
  // Blocks per pool a sequence may use (the scratch block 0 excluded), and those in use.
  int64_t cache_blocks() const { return blocks_ - 1; }
  int64_t blocks_in_use() const { return cache_blocks() - static_cast<int64_t>(free_.size()); }
  // Bytes of the blocks in use, all K/V pools together.
  int64_t cache_bytes() const;

  ~GenerationSession();
  GenerationSession(const GenerationSession&) = delete;
  GenerationSession& operator=(const GenerationSession&) = delete;

 private:
  struct Cache {
    // Past input and present output: the same indices in both programs' signatures.
    int input = 0, output = 0;
    int64_t heads = 0, head = 0;
    float* pool = nullptr;  // [blocks, heads, block_size, head], mapped or device memory
    std::shared_ptr<void> device_pool;  // owns a device pool
  };
  explicit GenerationSession(std::shared_ptr<const Executor> executor)
      : executor_(std::move(executor)) {}
  struct PrefillRun {
    std::vector<Tensor> outputs;  // the plan's outputs, [nb, ..., seq, ...] (empty: on device)
    std::vector<const float*> present;     // per cache: its present output, host or device
    std::shared_ptr<void> device_outputs;  // the presents of a device run
    int64_t seq = 0;                       // the prefill bucket's sequence length
    int64_t longest = 0;                   // the longest prompt
  };
  absl::Status CheckIds(std::span<const int64_t> ids, const char* what) const;
  absl::StatusOr<PrefillRun> RunPrefill(std::span<const std::vector<int64_t>> prompts,
                                        const char* what) const;
  // Blocks that hold `slots` slots; CheckFree: ResourceExhausted (naming `what`, with the
  // numbers) when `needed` is more than the free blocks.
  int64_t BlocksFor(int64_t slots) const { return (slots + block_size_ - 1) / block_size_; }
  absl::Status CheckFree(int64_t needed, const char* what) const;
  int64_t TakeBlock();
  void Release(std::vector<int64_t>& table);
  float* Row(const Cache& c, int64_t block, int64_t h, int64_t slot) const;
  // Sequence `dst` := row `src` of a prefill's present outputs (its first `len` slots, in
  // fresh blocks), its logits row := the prefill's at position len - 1.
  // On a device the rows are not written here but appended to `writes` (one
  // runtime::CudaWritePagedRows for the whole batch).
  void TakePrefillRow(const PrefillRun& run, int64_t src, int64_t dst, int64_t len,
                      float* logits_row, std::vector<runtime::CudaPagedRows>* writes);

  std::shared_ptr<const Executor> executor_;
  MemoryKind memory_ = MemoryKind::kHost;  // of the pools: the executor's
  int device_ = 0;
  // Plan I/O indices (both programs); positions_ is -1 for a plan without position_ids
  // (GroupQueryAttention decoders derive the positions from the mask).
  int ids_ = -1, mask_ = -1, positions_ = -1, logits_ = -1;
  int table_ = -1;                        // the decode program's block table
  std::vector<int64_t> capacities_;       // the decode capacities, ascending
  std::vector<int64_t> prefill_lengths_;  // prefill sequence lengths, ascending
  int64_t vocab_ = 0;
  int64_t block_size_ = 0, blocks_ = 0;  // per pool, block 0 the scratch block
  size_t pool_bytes_ = 0;                // one pool's mapping
  std::vector<Cache> caches_;
  std::vector<int> refs_;                     // per block: the tables naming it
  std::set<int64_t> free_;                    // lowest first, so the committed pages stay few
  std::vector<std::vector<int64_t>> tables_;  // per sequence: its blocks in slot order
  std::vector<int64_t> lengths_;              // per sequence
  int64_t capacity_ = 0;
};

}  // namespace kiln
