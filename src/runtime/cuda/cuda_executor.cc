// CudaExecutor: Create (host-side plan checks, device checks, weight upload, step init,
// graph capture) and Run (staging, graph replay or step launches, copies out, data-error
// check). See cuda_executor.h.
#include "runtime/cuda/cuda_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/movement.h"
#include "kiln/support/status.h"
#include "plan/plan_metadata.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda_backend.h"
#include "runtime/prepare_steps.h"

namespace kiln::runtime {
namespace {

constexpr MemoryKind kHostOrDevice[] = {MemoryKind::kHost, MemoryKind::kCuda};
constexpr int64_t kAlign = 256;  // staging slots: what cuBLASLt and vector loads like best

int64_t Align(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

std::vector<int64_t> Contiguous(std::span<const int64_t> d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// The device-side pad (small -> big, to_big) or slice (big -> small) copy of the leading
// block `small` of a dense tensor of dims `big`.
absl::Status PadCopy(const void* src, void* dst, std::span<const int64_t> small,
                     std::span<const int64_t> big, int elem, bool to_big, cudaStream_t stream) {
  cuda::StridedCopyArgs a;
  a.src = src;
  a.dst = dst;
  a.elem_size = elem;
  const std::vector<int64_t> dims(small.begin(), small.end());
  const std::vector<int64_t> s_small = Contiguous(small), s_big = Contiguous(big);
  if (!cuda::CollapseCopy(dims, to_big ? s_small : s_big, to_big ? s_big : s_small, &a))
    return absl::InvalidArgumentError("a padded tensor has more than 8 non-contiguous dims");
  return CudaStatus(cuda::StridedCopy(a, stream), "padding copy");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(std::shared_ptr<const Plan> plan,
                                                             const ExecutorOptions& options) {
  return CudaExecutor::Create(std::move(plan), options);
}

CudaExecutor::Slot::~Slot() {
  cudaSetDevice(device);
  for (const std::vector<Graph>& per_bucket : graphs)
    for (const Graph& g : per_bucket) cudaGraphExecDestroy(g.exec);
  if (lt) cuda::Lt()->Destroy(lt);
  if (stream) cudaStreamDestroy(stream);
  if (block) cudaFree(block);
  if (pinned) cudaFreeHost(pinned);
}

CudaExecutor::~CudaExecutor() {
  if (!weights_ && !init_lt_) return;  // never reached a device
  cudaSetDevice(device_);
  pool_.TakeAll();  // slots before the weights their graphs read
  steps_.clear();
  if (init_lt_) cuda::Lt()->Destroy(init_lt_);
  if (weights_) cudaFree(weights_);
}

absl::StatusOr<std::unique_ptr<Executor>> CudaExecutor::Create(std::shared_ptr<const Plan> plan,
                                                               const ExecutorOptions& options) {
  KILN_RETURN_IF_ERROR(plan_internal::ValidatePlan(*plan, plan->weights.size()));
  KILN_ASSIGN_OR_RETURN(PlanSession session,
                        PlanSession::Create(*plan, SessionOptions{true, kAlign}));
  std::unique_ptr<CudaExecutor> e(new CudaExecutor(std::move(plan), std::move(session)));
  e->route_ = PackedRoute::Of(*e->plan_);
  KILN_RETURN_IF_ERROR(e->PrepareSteps());  // host only: bad plans fail here, GPU or not
  KILN_RETURN_IF_ERROR(e->InitDevice(options));
  return std::unique_ptr<Executor>(std::move(e));
}

absl::Status CudaExecutor::PrepareSteps() {
  auto table = [](const std::string& id) { return FindCudaKernel(id); };
  KILN_RETURN_IF_ERROR(
      runtime::PrepareSteps<CudaStep>(*plan_, session_, PlanTarget::kCuda, table, &steps_));
  // Layout of a slot's device block and pinned staging (sizes come from the plan: every
  // sum is checked).
  // A step's own scratch (CudaStep::ScratchBytes) follows the cuBLASLt workspace; the steps
  // run one after another on the slot's stream, so one region of the largest need serves all.
  int64_t scratch = 0;
  for (const std::vector<PreparedStep>& bucket : steps_)
    for (const PreparedStep& s : bucket) scratch = std::max(scratch, s.kernel->ScratchBytes());
  bool ok = AlignUp(std::max<int64_t>(session_.max_total_bytes(), 1), kAlign, &error_offset_) &&
            !AddOverflows(error_offset_, kAlign, &workspace_offset_) &&
            !AddOverflows(workspace_offset_, static_cast<int64_t>(cuda::kGemmWorkspaceBytes),
                          &scratch_offset_) &&
            !AddOverflows(scratch_offset_, scratch, &block_bytes_);
  scratch_bytes_ = scratch;
  int64_t host_io = 0;
  for (int b = 0; ok && b < session_.num_buckets(); ++b) {
    const BucketIo& io = session_.bucket(b);
    int64_t n = 0, a = 0;
    for (size_t i = 0; i < io.input_bytes.size(); ++i)
      if (io.staging_in[i] != BucketIo::kDirect)
        ok = ok && AlignUp(io.input_bytes[i], 64, &a) && !AddOverflows(n, a, &n);
    for (size_t o = 0; o < io.output_bytes.size(); ++o)
      if (io.staging_out[o] != BucketIo::kDirect)
        ok = ok && AlignUp(io.output_bytes[o], 64, &a) && !AddOverflows(n, a, &n);
    host_io = std::max(host_io, n);
  }
  if (!ok || AddOverflows(64, host_io, &pinned_bytes_))
    return absl::InvalidArgumentError(
        "the plan's arena and I/O sizes overflow a run's device block");
  return absl::OkStatus();
}

absl::InlinedVector<std::byte*, 16> CudaExecutor::DeviceBases(
    std::byte* block, int b, std::span<const TensorView> inputs) const {
  const PlanIo pio = session_.io(b);  // the bucket's program's signature
  const BucketIo& io = session_.bucket(b);
  const int nin = static_cast<int>(pio.inputs.size());
  absl::InlinedVector<std::byte*, 16> bases(3 + pio.inputs.size() + pio.outputs.size(), nullptr);
  bases[kArenaSlot] = block;
  bases[kWeightSlot] = weights_;
  for (int i = 0; i < nin; ++i)
    if (io.staging_in[i] != BucketIo::kDirect) bases[BaseSlotOfInput(i)] = block + io.staging_in[i];
  for (size_t o = 0; o < pio.outputs.size(); ++o)
    if (io.staging_out[o] != BucketIo::kDirect)
      bases[BaseSlotOfOutput(nin, static_cast<int>(o))] = block + io.staging_out[o];
  if (!inputs.empty())
    for (const PlanInPlace& ip : io.direct) {
      std::byte* p = static_cast<std::byte*>(const_cast<void*>(inputs[ip.input].data));
      bases[BaseSlotOfInput(ip.input)] = bases[BaseSlotOfOutput(nin, ip.output)] = p;
    }
  return bases;
}

absl::Status CudaExecutor::InitDevice(const ExecutorOptions& options) {
  const Plan& plan = *plan_;
  graphs_ = options.cuda_graphs;
  device_ = options.cuda_device;
  const CudaDeviceInfo dev = QueryCudaDevice(device_);
  if (!dev.available)
    return absl::FailedPreconditionError(
        absl::StrCat("kiln::Executor: cannot run a cuda plan here: ", dev.reason));
  KILN_RETURN_IF_ERROR(CheckSmCompatibility(plan.cuda_sms, dev.sm));
  KILN_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
  const size_t wbytes = std::max<size_t>(plan.weights.size(), 1);
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&weights_), wbytes); e != cudaSuccess) {
    weights_ = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrFormat("uploading the weights: cannot allocate %d bytes of device memory (%s)",
                        wbytes, cudaGetErrorString(e)));
  }
  if (plan.weights.size() > 0)
    KILN_CUDA_TRY(
        cudaMemcpy(weights_, plan.weights.data(), plan.weights.size(), cudaMemcpyHostToDevice),
        "uploading the weights");
  // The device holds the weights now: a file-mapped plan's pages are no longer needed (a
  // read would fault them back in from the file).
  const long page = ::sysconf(_SC_PAGESIZE);
  const uintptr_t base = reinterpret_cast<uintptr_t>(plan.weights.data());
  if (plan.weights.file_mapped() && page > 0 && base % page == 0 && plan.weights.size() > 0)
    ::madvise(reinterpret_cast<void*>(base), plan.weights.size(), MADV_DONTNEED);
  KILN_RETURN_IF_ERROR(CublasStatus(cuda::Lt()->Create(&init_lt_), "cublasLtCreate"));
  const CudaInitEnv env{init_lt_, weights_, cuda::kGemmWorkspaceBytes, dev.sm, dev.multiprocessors};
  for (size_t b = 0; b < steps_.size(); ++b)
    for (size_t s = 0; s < steps_[b].size(); ++s) {
      absl::Status st = steps_[b][s].kernel->Init(env);
      if (!st.ok())
        return absl::Status(
            st.code(),
            absl::StrCat(StepWhere(static_cast<int>(b), static_cast<int>(s), *steps_[b][s].source),
                         ": ", st.message()));
    }
  // One slot now, its graphs captured, so the first Run replays.
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Slot> slot, NewSlot());
  if (graphs_) {
    for (int b = 0; b < session_.num_buckets(); ++b)
      if (session_.bucket(b).direct.empty())  // else at its first run, over the run's buffers
        KILN_RETURN_IF_ERROR(Capture(b, *slot, DeviceBases(slot->block, b)));
  }
  pool_.Release(std::move(slot));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaExecutor::Slot>> CudaExecutor::NewSlot() const {
  auto s = std::make_unique<Slot>();
  s->device = device_;
  KILN_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
  if (cudaError_t e =
          cudaMalloc(reinterpret_cast<void**>(&s->block), static_cast<size_t>(block_bytes_));
      e != cudaSuccess) {
    s->block = nullptr;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot allocate a run's %d bytes of device memory (arena, staging, cuBLASLt "
        "workspace, step scratch): %s",
        block_bytes_, cudaGetErrorString(e)));
  }
  if (cudaError_t e =
          cudaMallocHost(reinterpret_cast<void**>(&s->pinned), static_cast<size_t>(pinned_bytes_));
      e != cudaSuccess) {
    s->pinned = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot allocate %d bytes of pinned host staging: %s", pinned_bytes_,
                        cudaGetErrorString(e)));
  }
  KILN_CUDA_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  KILN_RETURN_IF_ERROR(CublasStatus(cuda::Lt()->Create(&s->lt), "cublasLtCreate"));
  s->graphs.resize(steps_.size());
  return s;
}

absl::Status CudaExecutor::LaunchSteps(int b, const Slot& slot, cudaStream_t stream,
                                       std::byte* const* bases,
                                       std::vector<cudaEvent_t>* events) const {
  const std::vector<PreparedStep>& steps = steps_[b];
  CudaRunEnv env;
  env.stream = stream;
  env.lt = slot.lt;
  env.workspace = slot.block + workspace_offset_;
  env.workspace_bytes = cuda::kGemmWorkspaceBytes;
  env.scratch = scratch_bytes_ > 0 ? slot.block + scratch_offset_ : nullptr;
  env.scratch_bytes = scratch_bytes_;
  for (size_t s = 0; s < steps.size(); ++s) {
    env.err = {reinterpret_cast<uint32_t*>(slot.block + error_offset_),
               static_cast<uint32_t>(s + 1)};
    if (events) KILN_CUDA_TRY(cudaEventRecord((*events)[2 * s], stream), "cudaEventRecord");
    absl::Status st = steps[s].kernel->Launch(env, StepIo{bases, &steps[s].ops});
    if (!st.ok())
      return absl::Status(
          st.code(),
          absl::StrCat(StepWhere(b, static_cast<int>(s), *steps[s].source), ": ", st.message()));
    if (events) KILN_CUDA_TRY(cudaEventRecord((*events)[2 * s + 1], stream), "cudaEventRecord");
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::Capture(int b, Slot& slot,
                                   const absl::InlinedVector<std::byte*, 16>& bases) const {
  KILN_CUDA_TRY(cudaStreamBeginCapture(slot.stream, cudaStreamCaptureModeThreadLocal),
                absl::StrCat("bucket ", b, ": beginning the CUDA graph capture"));
  const absl::Status launched = LaunchSteps(b, slot, slot.stream, bases.data(), nullptr);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(slot.stream, &graph);
  if (!launched.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return launched;
  }
  KILN_CUDA_TRY(ended, absl::StrCat("bucket ", b, ": ending the CUDA graph capture"));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  KILN_CUDA_TRY(inst, absl::StrCat("bucket ", b, ": instantiating its CUDA graph"));
  std::vector<Slot::Graph>& list = slot.graphs[b];
  if (list.size() >= kGraphsPerBucket) {
    cudaGraphExecDestroy(list.back().exec);
    list.pop_back();
  }
  list.insert(list.begin(), Slot::Graph{bases, exec});
  return absl::OkStatus();
}

absl::Status CudaExecutor::DataError(int b, uint32_t code) const {
  const size_t s = code - 1;
  if (s >= steps_[b].size())
    return absl::InternalError(
        absl::StrFormat("bucket %d: data-error code %d names no step", b, code));
  return absl::InvalidArgumentError(
      absl::StrCat(StepWhere(b, static_cast<int>(s), *steps_[b][s].source), ": ",
                   steps_[b][s].kernel->DataError(), " (the run's outputs are not valid)"));
}

absl::Status CudaExecutor::CheckPackedRun(std::span<const TensorView> inputs,
                                          cudaStream_t stream) const {
  // The lengths must add up to the tokens given (the kernels can only check them against the
  // bucket's): device-memory lengths are read back first, a small copy and a wait on a
  // direct packed run's path only.
  const int li = PackedLengthsInput(*plan_);
  if (li < 0 || li >= static_cast<int>(inputs.size()) || inputs[li].memory == MemoryKind::kHost ||
      inputs[li].dtype != DType::kI64 || inputs[li].dims.size() != 1)
    return CheckPackedInputs(*plan_, inputs);
  std::vector<TensorView> host(inputs.begin(), inputs.end());
  std::vector<int64_t> lengths(static_cast<size_t>(inputs[li].dims[0]));
  KILN_CUDA_TRY(cudaMemcpyAsync(lengths.data(), inputs[li].data, lengths.size() * sizeof(int64_t),
                                cudaMemcpyDeviceToHost, stream),
                "reading sequence_lengths back to check them");
  KILN_CUDA_TRY(cudaStreamSynchronize(stream), "reading sequence_lengths back to check them");
  host[li].data = lengths.data();
  host[li].memory = MemoryKind::kHost;
  return CheckPackedInputs(*plan_, host);
}

absl::StatusOr<std::vector<std::vector<int64_t>>> CudaExecutor::OutputDims(
    std::span<const std::vector<int64_t>> input_dims, PlanProgram program) const {
  return session_.OutputDims(input_dims, program);
}

absl::Status CudaExecutor::Run(std::span<const TensorView> inputs,
                               std::span<const MutableTensorView> outputs, RunStats* stats,
                               const RunOptions& options) const {
  if (options.program == PlanProgram::kModel && options.pack && route_) {
    KILN_ASSIGN_OR_RETURN(const bool done, route_->RunModel(*this, session_, kHostOrDevice, inputs,
                                                            outputs, stats, options));
    if (done) return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(const RunBinding r,
                        session_.Bind(inputs, outputs, kHostOrDevice, options.program));
  const int b = r.bucket;
  const PlanIo pio = session_.io(b);  // the bucket's program's signature
  const size_t nin = pio.inputs.size(), nout = pio.outputs.size();
  const BucketIo& io = session_.bucket(b);
  KILN_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Slot> leased, pool_.Acquire([this] { return NewSlot(); }));
  Lease<Slot> lease(pool_, std::move(leased));
  Slot& slot = *lease.get();
  cudaStream_t stream = options.cuda_stream ? options.cuda_stream : slot.stream;
  const bool trace = stats != nullptr && stats->collect_trace;
  if (options.program == PlanProgram::kPacked) KILN_RETURN_IF_ERROR(CheckPackedRun(inputs, stream));

  for (const PlanInPlace& ip : io.direct)  // Bind checked they are one device buffer
    if (reinterpret_cast<uintptr_t>(inputs[ip.input].data) % kAlign != 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "input '%s' (a cache updated in place) must be %d-byte aligned device memory",
          pio.inputs[ip.input].name, kAlign));
  const absl::InlinedVector<std::byte*, 16> bases = DeviceBases(slot.block, b, inputs);
  if (graphs_ && !trace) {  // the bucket's graph over these bases, first in its list
    std::vector<Slot::Graph>& list = slot.graphs[b];
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const Slot::Graph& g) { return g.bases == bases; });
    if (it == list.end())
      KILN_RETURN_IF_ERROR(Capture(b, slot, bases));  // before any work on the slot
    else
      std::rotate(list.begin(), it, it + 1);
  }

  std::vector<cudaEvent_t> events;
  struct HostOut {
    size_t o;
    std::byte* pinned;
  };
  absl::InlinedVector<HostOut, 8> host_outs;
  auto body = [&]() -> absl::Status {
    int64_t pin = 64;  // the first 64 bytes take the error word back
    for (size_t i = 0; i < nin; ++i) {
      const TensorView& v = inputs[i];
      const int64_t bytes = io.input_bytes[i];
      if (bytes == 0 || io.staging_in[i] == BucketIo::kDirect) continue;
      std::byte* dst = slot.block + io.staging_in[i];
      const bool pad = !std::equal(v.dims.begin(), v.dims.end(), io.input_dims[i].begin(),
                                   io.input_dims[i].end());
      const size_t elem = DTypeSize(pio.inputs[i].dtype);
      const std::string what = absl::StrCat("staging input '", pio.inputs[i].name, "'");
      if (v.memory == MemoryKind::kHost) {
        std::byte* p = slot.pinned + pin;
        pin += Align(bytes, 64);
        if (pad) {
          std::memset(p, 0, static_cast<size_t>(bytes));
          CopyBlock(static_cast<const std::byte*>(v.data), p, v.dims, io.input_dims[i], elem,
                    /*to_big=*/true);
        } else {
          std::memcpy(p, v.data, static_cast<size_t>(bytes));
        }
        KILN_CUDA_TRY(
            cudaMemcpyAsync(dst, p, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream),
            what);
      } else if (pad) {
        KILN_CUDA_TRY(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), stream), what);
        KILN_RETURN_IF_ERROR(PadCopy(v.data, dst, v.dims, io.input_dims[i], static_cast<int>(elem),
                                     /*to_big=*/true, stream));
      } else {
        KILN_CUDA_TRY(cudaMemcpyAsync(dst, v.data, static_cast<size_t>(bytes),
                                      cudaMemcpyDeviceToDevice, stream),
                      what);
      }
    }
    KILN_CUDA_TRY(cudaMemsetAsync(slot.block + error_offset_, 0, sizeof(uint32_t), stream),
                  "clearing the data-error word");
    if (trace) {
      events.resize(2 * steps_[b].size());
      for (cudaEvent_t& e : events) KILN_CUDA_TRY(cudaEventCreate(&e), "cudaEventCreate");
      KILN_RETURN_IF_ERROR(LaunchSteps(b, slot, stream, bases.data(), &events));
    } else if (graphs_) {
      KILN_CUDA_TRY(cudaGraphLaunch(slot.graphs[b].front().exec, stream),
                    absl::StrCat("bucket ", b, ": launching its CUDA graph"));
    } else {
      KILN_RETURN_IF_ERROR(LaunchSteps(b, slot, stream, bases.data(), nullptr));
    }
    for (size_t o = 0; o < nout; ++o) {
      const MutableTensorView& v = outputs[o];
      const int64_t bytes = io.output_bytes[o];
      if (bytes == 0 || io.staging_out[o] == BucketIo::kDirect) continue;
      const std::byte* src = slot.block + io.staging_out[o];
      const bool cut = !std::equal(v.dims.begin(), v.dims.end(), io.output_dims[o].begin(),
                                   io.output_dims[o].end());
      const std::string what = absl::StrCat("copying out output '", pio.outputs[o].name, "'");
      if (v.memory == MemoryKind::kHost) {
        std::byte* p = slot.pinned + pin;
        pin += Align(bytes, 64);
        KILN_CUDA_TRY(
            cudaMemcpyAsync(p, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream),
            what);
        host_outs.push_back({o, p});
      } else if (cut) {
        KILN_RETURN_IF_ERROR(PadCopy(src, v.data, v.dims, io.output_dims[o],
                                     static_cast<int>(DTypeSize(pio.outputs[o].dtype)),
                                     /*to_big=*/false, stream));
      } else {
        KILN_CUDA_TRY(cudaMemcpyAsync(v.data, src, static_cast<size_t>(bytes),
                                      cudaMemcpyDeviceToDevice, stream),
                      what);
      }
    }
    KILN_CUDA_TRY(cudaMemcpyAsync(slot.pinned, slot.block + error_offset_, sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, stream),
                  "reading the data-error word");
    return absl::OkStatus();
  };
  const absl::Status queued = body();
  // Whatever was queued finishes before the slot goes back to the pool.
  const cudaError_t synced = cudaStreamSynchronize(stream);
  auto free_events = [&] {
    for (cudaEvent_t e : events)
      if (e) cudaEventDestroy(e);
  };
  if (!queued.ok()) {
    free_events();
    return queued;
  }
  if (synced != cudaSuccess) {
    free_events();
    return CudaStatus(synced, absl::StrCat("running bucket ", b, " on the GPU"));
  }
  uint32_t code = 0;
  std::memcpy(&code, slot.pinned, sizeof(code));
  if (code != 0) {
    free_events();
    return DataError(b, code);
  }
  for (const HostOut& h : host_outs) {
    const MutableTensorView& v = outputs[h.o];
    CopyBlock(h.pinned, static_cast<std::byte*>(v.data), v.dims, io.output_dims[h.o],
              DTypeSize(pio.outputs[h.o].dtype), /*to_big=*/false);
  }
  if (trace) {
    stats->trace.clear();
    float t0 = 0;
    for (size_t s = 0; s < steps_[b].size(); ++s) {
      float begin = 0, dur = 0;
      cudaError_t e = cudaEventElapsedTime(&begin, events[0], events[2 * s]);
      if (e == cudaSuccess) e = cudaEventElapsedTime(&dur, events[2 * s], events[2 * s + 1]);
      if (e != cudaSuccess) {  // the outputs are written; the trace is what failed
        free_events();
        stats->trace.clear();
        return CudaStatus(e, absl::StrFormat("bucket %d step %d: reading the trace's timing", b,
                                             static_cast<int>(s)));
      }
      if (s == 0) t0 = begin;
      TraceEvent ev;
      ev.kernel = steps_[b][s].source->kernel;
      ev.provenance = steps_[b][s].source->provenance;
      ev.start_ns = static_cast<int64_t>((begin - t0) * 1e6);
      ev.duration_ns = static_cast<int64_t>(dur * 1e6);
      stats->trace.push_back(std::move(ev));
    }
    free_events();
  }
  if (stats != nullptr) {
    stats->bucket = b;
    stats->padded = r.padded;
    stats->packed = options.program == PlanProgram::kPacked;
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
