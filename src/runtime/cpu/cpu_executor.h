// The CPU plan executor behind kiln::Executor for target cpu (docs/plan-kernels.md).
// Create checks every step of every bucket once against its contract and the kernel's rule
// and prepares it from the CPU kernel table (cpu_steps.h: prepacked Linear weights shared
// across buckets, parsed ref nodes); Run lets the device-neutral PlanSession check the
// caller's tensors and pick a bucket, resolves the buffers as base + offset over the
// caller's memory, a pooled activation arena and the weights, and calls the kernels in order.
// Why a pool of arenas: Run is const and may be called from many threads at once; each
// call takes a private 64-byte-aligned arena (with room for padded staging copies) from a
// free list and returns it, so the steady state allocates nothing.
// Limits: host memory only; one thread count per executor (ExecutorOptions::num_threads);
// padded runs copy inputs into zeroed staging buffers and slice outputs back.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/cpu_context.h"
#include "kiln/kiln.h"
#include "runtime/cpu/cpu_steps.h"
#include "runtime/packing.h"
#include "runtime/plan_session.h"
#include "runtime/pool.h"
#include "runtime/prepare_steps.h"

namespace kiln::runtime {

class CpuExecutor final : public Executor {
 public:
  static absl::StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<const Plan> plan,
                                                          const ExecutorOptions& options);
  ~CpuExecutor() override;

  absl::StatusOr<std::vector<std::vector<int64_t>>> OutputDims(
      std::span<const std::vector<int64_t>> input_dims,
      PlanProgram program = PlanProgram::kModel) const override;
  absl::Status Run(std::span<const TensorView> inputs, std::span<const MutableTensorView> outputs,
                   RunStats* stats = nullptr, const RunOptions& options = {}) const override;
  using Executor::Run;

 private:
  using PreparedStep = PreparedStepOf<CpuStep>;
  // A run's 64-byte-aligned arena + staging block.
  struct Block {
    std::byte* data = nullptr;
    ~Block();
  };

  CpuExecutor(std::shared_ptr<const Plan> plan, PlanSession session)
      : Executor(std::move(plan)), session_(std::move(session)) {}
  absl::Status Prepare(const ExecutorOptions& options);
  // Page bookkeeping for dropping Linear weights' plain pages once packed (file-mapped
  // plans only; see cpu_executor.cc).
  void FindReleasableWeightPages();
  void ReleaseWeightPages(int64_t offset, int64_t bytes) const;

  PlanSession session_;
  std::optional<PackedRoute> route_;  // the plan's packed program, if any
  cpu::CpuContext ctx_;
  std::vector<std::vector<PreparedStep>> steps_;  // per bucket
  LinearCache linears_;
  QuantCache quant_linears_;
  BlockQuantCache block_quant_linears_;
  mutable ResourcePool<Block> pool_;
  std::vector<uint8_t> releasable_;  // per weights page: 0 unused, 1 releasable, 2 kept
  int64_t page_bytes_ = 4096;
};

}  // namespace kiln::runtime
