// The device-neutral half of every plan executor: the plan's signature (symbols of the
// graph inputs, which of them may be padded), each bucket's concrete I/O dims and sizes, the
// checks of a caller's tensors against the signature, bucket choice (exact, else the padded
// bucket with the fewest padded elements), output dims, and the layout of the staging
// copies that padded (or, on devices, all) I/O go through. CPU and CUDA executors both
// hold one; a backend supplies memory, weight placement and a kernel table.
// Why: none of this depends on where the bytes live, and two executors copying it would
// drift (docs/plan-kernels.md, Padding, is the rule both follow).
// Limits: staging slots follow the bucket's arena in one block per run; CopyBlock is the
// host-side pad/slice copy (devices use their own strided copy for device memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"

namespace kiln::runtime {

// The concrete I/O of one bucket and where its staging copies sit in a run's block.
struct BucketIo {
  std::vector<std::vector<int64_t>> input_dims, output_dims;
  std::vector<int64_t> input_bytes, output_bytes;
  std::vector<int64_t> symbol_values;  // per PlanSession symbol
  int64_t arena_bytes = 0;
  // Offsets (within the run's block, after the arena) of each input's / output's staging
  // slot; empty when the session stages nothing; kDirect for a direct in-place pair.
  std::vector<int64_t> staging_in, staging_out;
  static constexpr int64_t kDirect = -1;
  // stage_always sessions: the bucket's in-place pairs (PlanBucket::in_place), which are
  // not staged: a run passes one device buffer as both (a decode program's cache pools,
  // which staging would copy in and out whole at every token).
  std::vector<PlanInPlace> direct;
  int64_t total_bytes = 0;  // arena + staging, `align` multiples
};

struct SessionOptions {
  // Stage every input and output (devices whose replayed work needs fixed addresses) but
  // the in-place pairs, which a run binds directly (BucketIo::direct); otherwise only the
  // ones a padded run needs.
  bool stage_always = false;
  int64_t align = 64;  // staging slot alignment (a power of two)
};

// One Run's choice: the bucket, whether it pads, and which I/O go through staging.
struct RunBinding {
  int bucket = -1;
  bool padded = false;
  absl::InlinedVector<int64_t, 8> values;  // the run's symbol values
  absl::InlinedVector<bool, 8> stage_in, stage_out;
};

class PlanSession {
 public:
  // Reads the signature and every bucket's I/O; InvalidArgument for plans whose buckets do
  // not bind the signature's symbols or whose sizes overflow. Does not look at steps.
  static absl::StatusOr<PlanSession> Create(const Plan& plan, const SessionOptions& options);

  const Plan& plan() const { return *plan_; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  const BucketIo& bucket(int b) const { return buckets_[b]; }
  // The I/O bucket b binds (its program's signature).
  PlanIo io(int b) const { return IoOf(*plan_, plan_->buckets[b].program); }
  bool may_pad() const { return may_pad_; }
  // The largest total_bytes of any bucket (a run's block size).
  int64_t max_total_bytes() const { return max_total_bytes_; }

  // Checks the caller's tensors (count, dtype, dims against the signature, data present,
  // memory kind among `memory`) and the output views' dims, and chooses the bucket.
  // Only buckets of `program` are candidates. A direct in-place pair must be one buffer
  // (the same pointer in both views) in memory other than the host's, at the bucket's dims.
  absl::StatusOr<RunBinding> Bind(std::span<const TensorView> inputs,
                                  std::span<const MutableTensorView> outputs,
                                  std::span<const MemoryKind> memory,
                                  PlanProgram program = PlanProgram::kModel) const;
  // The output dims for inputs of these dims (Executor::OutputDims).
  absl::StatusOr<std::vector<std::vector<int64_t>>> OutputDims(
      std::span<const std::vector<int64_t>> input_dims,
      PlanProgram program = PlanProgram::kModel) const;
  // Output o's dim d in a run bound as `r` (padded dims are cut to the run's values).
  int64_t OutputDim(const RunBinding& r, int o, int d) const;

 private:
  struct SymbolUse {
    int input = 0, dim = 0;
  };
  // One signature's symbols (the plan's own, or a program's of Plan::signatures).
  struct Signature {
    const std::vector<PlanTensorSig>* inputs = nullptr;
    const std::vector<PlanTensorSig>* outputs = nullptr;
    std::vector<std::string> symbols;                 // of the graph inputs, first-use order
    std::vector<bool> paddable;                       // per symbol
    std::vector<SymbolUse> first_use;                 // per symbol: where it is first bound
    std::vector<std::vector<int>> input_dim_symbol;   // [input][dim] -> symbol or -1
    std::vector<std::vector<int>> output_dim_symbol;  // [output][dim] -> symbol or -1
    bool may_pad = false;
  };
  explicit PlanSession(const Plan& plan) : plan_(&plan) {}
  absl::Status ReadSignature(const PlanIo& io, Signature& sig);
  absl::Status ReadBucketIo(int b, BucketIo& io) const;
  absl::Status LayoutStaging(const SessionOptions& options);
  const Signature& SigOf(PlanProgram program) const;
  absl::Status BindInput(const Signature& sig, int i, std::span<const int64_t> dims,
                         int64_t* values) const;
  absl::StatusOr<RunBinding> Select(const Signature& sig, const int64_t* values,
                                    const int64_t* elems, PlanProgram program) const;
  absl::Status NoBucketError(const Signature& sig, const int64_t* values,
                             PlanProgram program) const;

  const Plan* plan_;
  std::vector<Signature> sigs_;  // [0]: the plan's own, then one per Plan::signatures entry
  std::vector<BucketIo> buckets_;
  bool may_pad_ = false;
  bool stage_always_ = false;
  int64_t max_total_bytes_ = 0;
};

// Copies the leading block of dims `small` between a dense tensor of dims `small` and one
// of dims `big` (same rank, small[d] <= big[d]); to_big: small -> big, else big -> small.
// Host memory only.
void CopyBlock(const std::byte* src, std::byte* dst, std::span<const int64_t> small,
               std::span<const int64_t> big, size_t elem, bool to_big);

// Rounds `v` up to a multiple of `align` (a power of two); false on overflow.
bool AlignUp(int64_t v, int64_t align, int64_t* out);

std::string DimsStr(std::span<const int64_t> d);

}  // namespace kiln::runtime
