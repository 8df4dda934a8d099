// CpuExecutor: Create-time preparation of every bucket from the CPU kernel table and the
// run loop; bucket choice, padding and staging are the PlanSession's. See cpu_executor.h.
#include "runtime/cpu/cpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/gemm_choice.h"
#include "kiln/support/status.h"
#include "plan/plan_metadata.h"
#include "runtime/prepare_steps.h"

namespace kiln::runtime {
namespace {

alignas(64) std::byte kEmptyData[64];

constexpr MemoryKind kHostOnly[] = {MemoryKind::kHost};

// Whether input i of a step of `kernel` is a weight read only to pack it at Create (its
// steps then read their packed copy): the Linear weights and the int4 codes.
bool ReadOnlyToPack(const std::string& kernel, size_t i) {
  return i == 1 && (kernel == "linear" || kernel == "block_quant_linear");
}

}  // namespace

CpuExecutor::Block::~Block() { std::free(data); }

CpuExecutor::~CpuExecutor() = default;

absl::StatusOr<std::unique_ptr<Executor>> CpuExecutor::Create(std::shared_ptr<const Plan> plan,
                                                              const ExecutorOptions& options) {
  if (options.num_threads < 0 || options.num_threads > cpu::kMaxThreads)
    return absl::InvalidArgumentError(
        absl::StrFormat("ExecutorOptions::num_threads is %d; use 1..%d, or 0 for one per core",
                        options.num_threads, cpu::kMaxThreads));
  // Development switches (docs/cli.md): a typo must not silently run the default path.
  KILN_RETURN_IF_ERROR(cpu::IsaCapFromEnv().status());
  KILN_RETURN_IF_ERROR(cpu::GemmBackendFromEnv().status());
  KILN_RETURN_IF_ERROR(plan_internal::ValidatePlan(*plan, plan->weights.size()));
  KILN_ASSIGN_OR_RETURN(PlanSession session, PlanSession::Create(*plan, SessionOptions{}));
  std::unique_ptr<CpuExecutor> e(new CpuExecutor(std::move(plan), std::move(session)));
  e->route_ = PackedRoute::Of(*e->plan_);
  KILN_RETURN_IF_ERROR(e->Prepare(options));
  return std::unique_ptr<Executor>(std::move(e));
}

absl::Status CpuExecutor::Prepare(const ExecutorOptions& options) {
  const Plan& plan = *plan_;
  ctx_.num_threads = options.num_threads > 0 ? options.num_threads : cpu::DefaultNumThreads();
  FindReleasableWeightPages();
  CpuPrepareEnv env{ctx_, linears_, quant_linears_, block_quant_linears_};
  auto table = [&](const std::string& id)
      -> std::function<absl::StatusOr<std::unique_ptr<CpuStep>>(const StepChecker&)> {
    const CpuPrepareFn fn = FindCpuKernel(id);
    if (fn == nullptr) return nullptr;
    return [this, fn, &env](const StepChecker& c) {
      absl::StatusOr<std::unique_ptr<CpuStep>> step = fn(c, env);
      if (step.ok() && ReadOnlyToPack(c.step().kernel, 1)) {  // packed: drop its plain pages
        const PlanBuffer& w = c.bucket().buffers[c.step().inputs[1]];
        ReleaseWeightPages(w.offset, w.bytes);
      }
      return step;
    };
  };
  KILN_RETURN_IF_ERROR(PrepareSteps<CpuStep>(plan, session_, PlanTarget::kCpu, table, &steps_));
  {
    WarmUpSet done;
    cpu::ScopedOmpThreads omp_threads(ctx_.threads());
    for (const auto& bucket : steps_)
      for (const PreparedStep& p : bucket) p.kernel->WarmUp(ctx_, done);
  }
  // Pages a later bucket's new layout faulted back in.
  ReleaseWeightPages(0, static_cast<int64_t>(plan.weights.size()));
  return absl::OkStatus();
}

// Linear weights live twice after Create: in the plan (the file mapping) and packed in
// oneDNN's layout. Steps only read the packed copy (the plain one is read again only if a
// new M needs another layout), so the resident pages of weights that nothing else reads are
// returned to the kernel as soon as each is packed: MADV_DONTNEED on a private read-only
// file mapping drops them and a later read faults them back in from the file. Without
// this, BERT-base's peak RSS holds its Linear weights twice. Owned (non-file) weights are
// never touched: there DONTNEED would zero them.
void CpuExecutor::FindReleasableWeightPages() {
  const Plan& plan = *plan_;
  const long page = ::sysconf(_SC_PAGESIZE);
  const uintptr_t base = reinterpret_cast<uintptr_t>(plan.weights.data());
  if (!plan.weights.file_mapped() || page <= 0 || base % page != 0) return;
  page_bytes_ = page;
  // 0 unused, 1 Linear weight only, 2 read by another step (2 wins in either order).
  releasable_.assign((plan.weights.size() + page - 1) / page, 0);
  for (const PlanBucket& bucket : plan.buckets) {
    for (const PlanStep& step : bucket.steps) {
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (step.inputs[i] < 0 || step.inputs[i] >= static_cast<int>(bucket.buffers.size()))
          continue;
        const PlanBuffer& buf = bucket.buffers[step.inputs[i]];
        if (buf.kind != PlanBufferKind::kWeight || buf.bytes <= 0) continue;
        if (ReadOnlyToPack(step.kernel, i)) {
          // Only pages wholly inside the weight: the edges may hold a neighbour.
          for (int64_t p = (buf.offset + page - 1) / page; p < (buf.offset + buf.bytes) / page; ++p)
            if (releasable_[p] == 0) releasable_[p] = 1;
        } else {
          for (int64_t p = buf.offset / page; p <= (buf.offset + buf.bytes - 1) / page; ++p)
            releasable_[p] = 2;
        }
      }
    }
  }
}

void CpuExecutor::ReleaseWeightPages(int64_t offset, int64_t bytes) const {
  if (releasable_.empty() || bytes <= 0) return;
  const uintptr_t base = reinterpret_cast<uintptr_t>(plan_->weights.data());
  const size_t end = std::min<size_t>(releasable_.size(), (offset + bytes) / page_bytes_ + 1);
  for (size_t p = offset / page_bytes_; p < end;) {
    if (releasable_[p] != 1) {
      ++p;
      continue;
    }
    size_t q = p;
    while (q < end && releasable_[q] == 1) ++q;
    // Advisory: a failure only means the pages stay resident.
    ::madvise(reinterpret_cast<void*>(base + p * page_bytes_), (q - p) * page_bytes_,
              MADV_DONTNEED);
    p = q;
  }
}

absl::StatusOr<std::vector<std::vector<int64_t>>> CpuExecutor::OutputDims(
    std::span<const std::vector<int64_t>> input_dims, PlanProgram program) const {
  return session_.OutputDims(input_dims, program);
}

absl::Status CpuExecutor::Run(std::span<const TensorView> inputs,
                              std::span<const MutableTensorView> outputs, RunStats* stats,
                              const RunOptions& options) const {
  if (options.program == PlanProgram::kModel && options.pack && route_) {
    KILN_ASSIGN_OR_RETURN(const bool done, route_->RunModel(*this, session_, kHostOnly, inputs,
                                                            outputs, stats, options));
    if (done) return absl::OkStatus();
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Plan& plan = *plan_;
  const PlanIo pio = IoOf(plan, options.program);
  const size_t nin = pio.inputs.size(), nout = pio.outputs.size();
  KILN_ASSIGN_OR_RETURN(const RunBinding r,
                        session_.Bind(inputs, outputs, kHostOnly, options.program));
  if (options.program == PlanProgram::kPacked)
    KILN_RETURN_IF_ERROR(CheckPackedInputs(plan, inputs));
  const BucketIo& io = session_.bucket(r.bucket);

  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<Block> block, pool_.Acquire([&]() -> absl::StatusOr<std::unique_ptr<Block>> {
        int64_t size;
        if (!AlignUp(std::max<int64_t>(session_.max_total_bytes(), 64), 64, &size))
          return absl::ResourceExhaustedError("activation arena size overflows");
        auto b = std::make_unique<Block>();
        b->data = static_cast<std::byte*>(std::aligned_alloc(64, static_cast<size_t>(size)));
        if (b->data == nullptr)
          return absl::ResourceExhaustedError(
              absl::StrFormat("cannot allocate a %d-byte activation arena", size));
        return b;
      }));
  Lease<Block> lease(pool_, std::move(block));
  std::byte* const arena = lease->data;
  absl::InlinedVector<std::byte*, 16> bases(3 + nin + nout, nullptr);
  bases[kArenaSlot] = arena;
  bases[kWeightSlot] =
      const_cast<std::byte*>(reinterpret_cast<const std::byte*>(plan.weights.data()));
  if (bases[kWeightSlot] == nullptr) bases[kWeightSlot] = kEmptyData;
  auto caller_in = [&](size_t i) {
    return inputs[i].data ? const_cast<std::byte*>(static_cast<const std::byte*>(inputs[i].data))
                          : kEmptyData;
  };
  auto caller_out = [&](size_t o) {
    return outputs[o].data ? static_cast<std::byte*>(outputs[o].data) : kEmptyData;
  };
  // Padded runs stage the inputs and outputs whose dims differ from the bucket's.
  for (size_t i = 0; i < nin; ++i) {
    const uint32_t slot = BaseSlotOfInput(static_cast<int>(i));
    if (!r.stage_in[i]) {
      bases[slot] = caller_in(i);
      continue;
    }
    std::byte* staging = arena + io.staging_in[i];
    std::memset(staging, 0, static_cast<size_t>(io.input_bytes[i]));
    CopyBlock(caller_in(i), staging, inputs[i].dims, io.input_dims[i],
              DTypeSize(pio.inputs[i].dtype), /*to_big=*/true);
    bases[slot] = staging;
  }
  for (size_t o = 0; o < nout; ++o) {
    const uint32_t slot = BaseSlotOfOutput(static_cast<int>(nin), static_cast<int>(o));
    bases[slot] = r.stage_out[o] ? arena + io.staging_out[o] : caller_out(o);
  }

  const std::vector<PreparedStep>& steps = steps_[r.bucket];
  const bool trace = stats != nullptr && stats->collect_trace;
  if (trace) {
    stats->trace.clear();
    stats->trace.reserve(steps.size());
  }
  {
    cpu::ScopedOmpThreads omp_threads(ctx_.threads());
    for (size_t s = 0; s < steps.size(); ++s) {
      const PreparedStep& step = steps[s];
      const auto start = trace ? std::chrono::steady_clock::now() : t0;
      absl::Status st = step.kernel->Run(ctx_, StepIo{bases.data(), &step.ops});
      if (!st.ok())
        return absl::Status(
            st.code(), absl::StrCat(StepWhere(r.bucket, static_cast<int>(s), *step.source), ": ",
                                    st.message()));
      if (trace) {
        const auto end = std::chrono::steady_clock::now();
        TraceEvent ev;
        ev.kernel = step.source->kernel;
        ev.impl = std::string(step.kernel->Impl());
        ev.provenance = step.source->provenance;
        ev.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start - t0).count();
        ev.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
        stats->trace.push_back(std::move(ev));
      }
    }
  }
  for (size_t o = 0; o < nout; ++o) {
    if (!r.stage_out[o]) continue;
    CopyBlock(arena + io.staging_out[o], caller_out(o), outputs[o].dims, io.output_dims[o],
              DTypeSize(pio.outputs[o].dtype), /*to_big=*/false);
  }
  if (stats != nullptr) {
    stats->bucket = r.bucket;
    stats->padded = r.padded;
    stats->packed = options.program == PlanProgram::kPacked;
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
