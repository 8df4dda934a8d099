// The CUDA plan executor behind kiln::Executor for target cuda (docs/plan-kernels.md).
// Create: checks every step of every bucket against its contract and rule and prepares it
// from the CUDA kernel table (host code: a malformed plan is InvalidArgument on any
// machine), then checks the device (present, an SM the plan and this build cover), uploads
// the weights once (and drops the plan's file-mapped host pages), initializes the steps
// (cuBLASLt algorithms) and a first run slot, capturing each bucket as a CUDA graph.
// Run: the device-neutral PlanSession checks the caller's tensors and picks a bucket;
// inputs (host or device memory) are staged into the slot's fixed arena slots (padded
// runs: zero-filled, then the block copied in), the bucket's graph is replayed (or its
// steps launched), outputs are copied out (sliced when padded), and the stream is
// synchronized before Run returns; a non-zero data-error word fails the run naming the
// step.
// Why slots: Run is const and may be called from many threads; each call leases a slot
// (device arena + staging + cuBLASLt workspace + error word, pinned host staging, a stream,
// a cuBLASLt handle, and the graphs captured over exactly those addresses), so replays
// stay valid and concurrent runs never share memory.
// Decode programs (docs/generation.md): the cache pools, in place, are not staged: a run
// passes each as one device buffer for both its past input and present output, and the
// bucket's graph is captured over those addresses (one more per set of caches a run
// brings, up to kGraphsPerBucket per slot).
// Packed programs (docs/packing.md): a model-program Run over host inputs packs the batch
// by its mask (runtime/packing.h) and runs the packed buckets, as the CPU executor does;
// device-memory inputs take the padded buckets.
// Limits: one device per executor; Run blocks until the outputs are written (the work is
// ordered on the caller's stream when one is given); traced runs launch step by step with
// an event pair per step instead of replaying the graph.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/container/inlined_vector.h"
#include "kiln/kiln.h"
#include "runtime/cuda/cuda_steps.h"
#include "runtime/packing.h"
#include "runtime/plan_session.h"
#include "runtime/pool.h"
#include "runtime/prepare_steps.h"

namespace kiln::runtime {

class CudaExecutor final : public Executor {
 public:
  static absl::StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<const Plan> plan,
                                                          const ExecutorOptions& options);
  ~CudaExecutor() override;

  absl::StatusOr<std::vector<std::vector<int64_t>>> OutputDims(
      std::span<const std::vector<int64_t>> input_dims,
      PlanProgram program = PlanProgram::kModel) const override;
  absl::Status Run(std::span<const TensorView> inputs, std::span<const MutableTensorView> outputs,
                   RunStats* stats = nullptr, const RunOptions& options = {}) const override;
  using Executor::Run;
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  int device() const override { return device_; }

 private:
  using PreparedStep = PreparedStepOf<CudaStep>;
  // One concurrent run's resources (see the file comment).
  struct Slot {
    int device = 0;
    std::byte* block = nullptr;   // device: arena + staging | error word | workspace | scratch
    std::byte* pinned = nullptr;  // host staging of host I/O, then the error word's copy
    cudaStream_t stream = nullptr;
    cublasLtHandle_t lt = nullptr;
    // A bucket's graph and the bases it was captured over.
    struct Graph {
      absl::InlinedVector<std::byte*, 16> bases;
      cudaGraphExec_t exec = nullptr;
    };
    // Per bucket, captured on first use, the most recently used first. Only a decode
    // bucket has more than one: one per set of caches its runs bring (GenerationSessions
    // sharing the executor), at most kGraphsPerBucket (the least recently used goes).
    std::vector<std::vector<Graph>> graphs;
    ~Slot();
  };

  CudaExecutor(std::shared_ptr<const Plan> plan, PlanSession session)
      : Executor(std::move(plan)), session_(std::move(session)) {}
  absl::Status PrepareSteps();
  absl::Status InitDevice(const ExecutorOptions& options);
  absl::StatusOr<std::unique_ptr<Slot>> NewSlot() const;
  // Enqueues bucket b's steps on `stream` over `bases` (trace: an event pair per step).
  absl::Status LaunchSteps(int b, const Slot& slot, cudaStream_t stream, std::byte* const* bases,
                           std::vector<cudaEvent_t>* events) const;
  // Captures bucket b's graph over `bases` into the slot (first in its list).
  absl::Status Capture(int b, Slot& slot, const absl::InlinedVector<std::byte*, 16>& bases) const;
  static constexpr size_t kGraphsPerBucket = 8;
  // The base pointers (StepIo's slots) of bucket b in a slot's device block: arena,
  // weights, and every graph input and output at its staging offset, or for a direct
  // in-place pair (BucketIo::direct) the run's own buffer (null without `inputs`).
  absl::InlinedVector<std::byte*, 16> DeviceBases(std::byte* block, int b,
                                                  std::span<const TensorView> inputs = {}) const;
  absl::Status DataError(int b, uint32_t code) const;
  // A direct packed run's sequence_lengths (host or device memory) against its tokens.
  absl::Status CheckPackedRun(std::span<const TensorView> inputs, cudaStream_t stream) const;

  PlanSession session_;
  std::optional<PackedRoute> route_;  // a plan with a packed program
  int device_ = 0;
  bool graphs_ = true;
  std::vector<std::vector<PreparedStep>> steps_;  // per bucket
  std::byte* weights_ = nullptr;                  // device copy of the plan's weights
  cublasLtHandle_t init_lt_ = nullptr;
  int64_t error_offset_ = 0, workspace_offset_ = 0, block_bytes_ = 0;  // within a slot block
  int64_t scratch_offset_ = 0, scratch_bytes_ = 0;  // the steps' scratch (after the workspace)
  int64_t pinned_bytes_ = 0;
  mutable ResourcePool<Slot> pool_;
};

}  // namespace kiln::runtime
