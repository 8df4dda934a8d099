// The CPU plan executor behind kiln::Executor for target cpu (docs/plan-kernels.md).
// Create checks every step of every bucket once and prepares it (prepacked Linear weights
// shared across buckets, parsed ref nodes); Run checks the caller's tensors against the
// plan's signature, picks a bucket (exact match, else the cheapest padded one), resolves
// the buffers as base + offset over the caller's memory, a pooled activation arena and the
// weights, and calls the kernels in order.
// Why a pool of arenas: Run is const and may be called from many threads at once; each
// call takes a private 64-byte-aligned arena (with room for padded staging copies) from a
// mutex-guarded free list and returns it, so the steady state allocates nothing.
// Limits: one thread count per executor (ExecutorOptions::num_threads); padded runs copy
// inputs into zeroed staging buffers and slice outputs back.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_context.h"
#include "kiln/kiln.h"
#include "runtime/prepared_plan.h"

namespace kiln::runtime {

// A free list of equally sized, 64-byte-aligned blocks. Thread safe.
class ArenaPool {
 public:
  struct FreeBlock {
    void operator()(std::byte* p) const;
  };
  using Block = std::unique_ptr<std::byte, FreeBlock>;

  explicit ArenaPool(int64_t bytes) : bytes_(bytes) {}
  // A block of at least bytes() bytes (never null), from the free list or freshly allocated.
  absl::StatusOr<Block> Acquire();
  void Release(Block block);
  int64_t bytes() const { return bytes_; }
  void set_bytes(int64_t bytes) { bytes_ = bytes; }  // only before the first Acquire

 private:
  int64_t bytes_;
  std::mutex mu_;
  std::vector<Block> free_;
};

class CpuExecutor final : public Executor {
 public:
  static absl::StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<const Plan> plan,
                                                          const ExecutorOptions& options);

  absl::StatusOr<std::vector<std::vector<int64_t>>> OutputDims(
      std::span<const std::vector<int64_t>> input_dims) const override;
  absl::Status Run(std::span<const TensorView> inputs, std::span<const MutableTensorView> outputs,
                   RunStats* stats = nullptr) const override;
  using Executor::Run;

 private:
  struct Selection {
    int bucket = -1;
    bool padded = false;
  };
  // Per graph input dim: the symbol index, or -1 for a known dim.
  struct SymbolUse {
    int input = 0, dim = 0;
  };

  explicit CpuExecutor(std::shared_ptr<const Plan> plan) : Executor(std::move(plan)), pool_(0) {}
  absl::Status Prepare(const ExecutorOptions& options);
  absl::Status PrepareBucketIo(int b, PreparedBucket& pb) const;
  // Page bookkeeping for dropping Linear weights' plain pages once packed (file-mapped
  // plans only; see cpu_executor.cc).
  void FindReleasableWeightPages();
  void ReleaseWeightPages(int64_t offset, int64_t bytes) const;
  void WarmUpAttention() const;

  // Checks rank and dims of input `i` against the signature and binds its symbols into
  // `values` (-1 = unbound yet).
  absl::Status BindInput(int i, std::span<const int64_t> dims, int64_t* values) const;
  // Picks the bucket for bound symbol values; `elems` are the inputs' element counts.
  absl::StatusOr<Selection> Select(const int64_t* values, const int64_t* elems) const;
  absl::Status NoBucketError(const int64_t* values) const;
  // Output o's dim d for a run of `sel` with symbol `values`.
  int64_t OutputDim(const Selection& sel, const int64_t* values, int o, int d) const;

  cpu::CpuContext ctx_;
  std::vector<std::string> symbols_;                 // symbols of the graph inputs, first-use order
  std::vector<bool> paddable_;                       // per symbol
  std::vector<SymbolUse> first_use_;                 // per symbol: where it is first bound
  std::vector<std::vector<int>> input_dim_symbol_;   // [input][dim] -> symbol or -1
  std::vector<std::vector<int>> output_dim_symbol_;  // [output][dim] -> symbol or -1
  std::vector<PreparedBucket> buckets_;
  LinearCache linears_;
  mutable ArenaPool pool_;
  std::vector<uint8_t> releasable_;  // per weights page: 0 unused, 1 releasable, 2 kept
  int64_t page_bytes_ = 4096;
};

}  // namespace kiln::runtime
