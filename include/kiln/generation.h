// kiln::GenerationSession: KV-cached generation over an Executor whose plan has a prefill
// and a decode program (CompileOptions::decode_context, `kiln compile --decode-context`;
// docs/generation.md).
//
//   auto exec = kiln::Executor::Create(plan);             // shared: sessions do not own it
//   auto gen = kiln::GenerationSession::Create(*std::move(exec));
//   absl::StatusOr<kiln::Tensor> logits = (*gen)->Prefill({{1, 2, 3}, {4, 5}});  // [2, vocab]
//   logits = (*gen)->Decode({7, 9});                                            // [2, vocab]
//
// The session owns one cache per past K/V input of the plan ([batch, kv_heads, capacity,
// head], host memory: decode programs are cpu-only for now) and passes it as both the past
// input and the present output of every decode step, whose kiln.CacheWrite appends this
// token's keys and values in place: the past is never copied per token. Sequence b holds
// its tokens in slots 0 .. length(b)-1 (slot = position); the attention mask marks them.
// The capacity is the plan's smallest decode capacity that holds the longest sequence, and
// grows to the next one when a sequence reaches it (one copy of the cache per growth).
// Sequences of different lengths share a batch: prompts are right-padded for the prefill,
// and each sequence decodes at its own position.
// Thread safety: one session per thread (a session is a mutable cache); many sessions may
// share one Executor.
// Errors: token ids outside [0, vocab), empty or too-long prompts, Decode before Prefill,
// a sequence index out of range and a sequence at the plan's maximum context are
// InvalidArgument / FailedPrecondition / ResourceExhausted with the numbers, never a crash.
// Limits: the cache is contiguous per sequence at the current capacity (not paged blocks),
// so a fork copies the source's slots; no prefix sharing; cpu plans only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"
#include "kiln/kiln.h"

namespace kiln {

class GenerationSession {
 public:
  // FailedPrecondition when the executor's plan has no decode program or its signature is
  // not a KV-cache decoder's (input_ids, attention_mask, position_ids, past/present pairs,
  // logits [batch, sequence, vocab]).
  static absl::StatusOr<std::unique_ptr<GenerationSession>> Create(
      std::shared_ptr<const Executor> executor);

  // Starts prompts.size() sequences (the batch; any earlier ones are dropped), fills the
  // cache with their keys and values and returns each one's logits at its last prompt token,
  // [batch, vocab] f32. Each prompt needs at least one token and at most max_context() - 1.
  absl::StatusOr<Tensor> Prefill(std::span<const std::vector<int64_t>> prompts);

  // Appends next_ids[b] to sequence b (one per sequence) and returns the logits after it,
  // [batch, vocab] f32.
  absl::StatusOr<Tensor> Decode(std::span<const int64_t> next_ids);

  // Starts sequence `b` of the batch over with `prompt` (a batch-1 prefill copied into its
  // slots; the other sequences keep theirs) and returns the logits at its last token,
  // [1, vocab]. Needs a batch-1 prefill bucket; grows the capacity when the prompt needs it.
  absl::StatusOr<Tensor> Restart(int b, std::span<const int64_t> prompt);

  // Sequence `dst` becomes a copy of sequence `src` (its cache slots and length), e.g. to
  // branch a beam or sample two continuations of one prompt.
  absl::Status Fork(int src, int dst);

  int batch() const { return static_cast<int>(lengths_.size()); }
  // Tokens sequence `b` holds (prompt + decoded); InvalidArgument for b out of range.
  absl::StatusOr<int64_t> length(int b) const;
  int64_t capacity() const { return capacity_; }              // slots per sequence now
  int64_t max_context() const { return capacities_.back(); }  // the largest capacity
  int64_t vocab() const { return vocab_; }
  // Bytes the caches hold now (all K/V inputs, all sequences, `capacity()` slots).
  int64_t cache_bytes() const;

 private:
  struct Cache {
    int input = 0, output = 0;  // plan input (past) and output (present)
    int64_t heads = 0, head = 0;
    std::vector<float> data;  // [batch, heads, capacity, head]
  };
  explicit GenerationSession(std::shared_ptr<const Executor> executor)
      : executor_(std::move(executor)) {}
  struct PrefillRun {
    std::vector<Tensor> outputs;  // the plan's outputs, [nb, ..., seq, ...]
    int64_t seq = 0;              // the prefill bucket's sequence length
    int64_t longest = 0;          // the longest prompt
  };
  absl::Status CheckIds(std::span<const int64_t> ids, const char* what) const;
  absl::Status Grow(int64_t capacity);
  absl::StatusOr<PrefillRun> RunPrefill(std::span<const std::vector<int64_t>> prompts,
                                        const char* what) const;
  void TakePrefillRow(const PrefillRun& run, int64_t src, int64_t dst, int64_t len,
                      float* logits_row);

  std::shared_ptr<const Executor> executor_;
  int ids_ = -1, mask_ = -1, positions_ = -1, logits_ = -1;  // plan I/O indices
  std::vector<int64_t> capacities_;                          // the decode capacities, ascending
  std::vector<int64_t> prefill_lengths_;                     // prefill sequence lengths, ascending
  int64_t vocab_ = 0;
  std::vector<Cache> caches_;
  std::vector<int64_t> lengths_;  // per sequence
  int64_t capacity_ = 0;
  std::vector<int64_t> mask_data_;  // [batch, capacity]: 1 for filled slots
};

}  // namespace kiln
