// kiln's public C++ API: compile an ONNX model into a Plan, save/load it (kiln/plan/plan.h:
// WritePlanFile, LoadPlanFile), and run it with an Executor.
//
//   kiln::CompileOptions opts;
//   opts.profile = {{"batch", {1, 8}}, {"sequence", {32, 128}}};
//   absl::StatusOr<kiln::Plan> plan = kiln::Compile("model.onnx", opts);
//   KILN_RETURN_IF_ERROR(kiln::WritePlanFile(*plan, "model.kiln"));
//   // or, holding the weights once: kiln::CompileToFile("model.onnx", "model.kiln", opts)
//   auto exec = kiln::Executor::Create(std::make_shared<kiln::Plan>(*std::move(plan)));
//   (*exec)->Run(inputs, outputs);   // non-owning TensorViews, no copies of caller buffers
//
// Thread safety: an Executor is immutable after Create. Run and OutputDims may be called
// from any number of threads at once on the same Executor; each Run takes a private
// activation arena from a pool (one arena per concurrent call, reused afterwards).
// Errors are absl::Status values; bad plans, bad inputs and shapes outside every bucket
// are InvalidArgument with a message naming the input, never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"
#include "kiln/plan/plan.h"

namespace kiln {

// The version string compiled into the library ("0.1.0").
std::string_view Version();

// The CUDA side of this build and this machine (`kiln --version`, `kiln plan-info`).
struct CudaDeviceInfo {
  bool built = false;          // kiln was built with its CUDA backend
  std::string build;           // e.g. "CUDA 13.0.88, cuBLAS 13.1.0, sm_80 sm_90"
  std::vector<int> build_sms;  // the architectures the kernels were compiled for
  bool available = false;      // device `ordinal` answered
  std::string reason;          // why not, when not (no driver, no device, ...)
  std::string name;            // e.g. "NVIDIA H200"
  int sm = 0;                  // compute capability as major*10 + minor (90)
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
  int driver_version = 0;  // cudaDriverGetVersion (13000 = 13.0)
};
// Never fails: without CUDA support or a device, `available` is false with the reason.
CudaDeviceInfo QueryCudaDevice(int ordinal = 0);

// `bytes` of device memory on CUDA device `ordinal` (at least one byte is allocated), freed
// when the last copy of the pointer goes: for callers that keep a run's outputs on the GPU
// (MutableTensorView::memory = kCuda), such as the Python package's device outputs.
// ResourceExhausted when the device is out of memory; FailedPrecondition without a device
// or without the CUDA backend.
absl::StatusOr<std::shared_ptr<void>> AllocateCudaBuffer(int ordinal, size_t bytes);

struct CompileOptions {
  PlanTarget target = PlanTarget::kCpu;
  int opt_level = 2;  // 0..3, as `kiln opt -O<n>`
  // "fp32"; cpu "bf16" or "int8"; cuda "fp16" or "bf16" (docs/precision.md). "auto" (cpu)
  // is for the gated compiles of kiln/verify.h, which try int8, then its fallbacks, until
  // the accuracy gate holds; Compile itself refuses it.
  std::string precision = "fp32";
  // cpu int8/bf16 plans: a group of GEMMs at another precision, "attention" (the Q/K/V and
  // output projections) or "ffn" (the others) -> "bf16" or "fp32": --precision auto's
  // fallbacks.
  std::map<std::string, std::string> gemm_group_precision;
  // cpu int8/bf16 plans (and "auto"): the output heads' GEMMs (a Linear whose result is a
  // graph output through layout and activation ops only: an LM head, a classifier) at
  // "int8", "bf16" or "fp32". Empty: fp32, their error being the output's error. An int8 LM
  // head reads a quarter of the fp32 bytes per decoded token. docs/precision.md.
  std::string head_precision;
  // Input sets for the passes that run the model while compiling (numeric-safety's range
  // calibration of fp16 plans): a folder of .npz files / sub-folders of .npy files, as
  // `kiln verify --calib`. Empty: two seeded random valid sets at the smallest profile
  // shape (compiler/calibration.h).
  std::string calib_dir;
  // cpu int8 plans: how the GEMMs' inputs are quantized. "dynamic" (default): each row at
  // run time with its own max |x| (rows never affect each other). "static": one range per
  // Linear from the calibration sets, chosen by `observer` — "minmax", "percentile" (of |x|,
  // at `percentile`, default 99.99) or "entropy" (KL divergence, as TensorRT) — and stored
  // in the plan (docs/precision.md "Static activations").
  std::string int8_activations = "dynamic";
  std::string observer = "percentile";
  double percentile = 99.99;
  // cuda: the SM architectures the plan is for (e.g. {90, 80}); empty: 80 and 90. The
  // executor refuses a GPU whose architecture is not among them.
  std::vector<int> cuda_sms;
  // cuda, fp32 plans: let the GEMMs (linear, matmul) use TF32 tensor cores (10-bit
  // mantissa inputs, fp32 accumulation). Off by default: an fp32 plan computes in fp32.
  bool allow_tf32 = false;
  // cuda: fp16/bf16 attention at head size 8, 16, 32, 64 or 128 runs on the tensor-core
  // flash kernel. false keeps the simple CUDA-core kernel (for comparison and diagnosis).
  bool cuda_flash_attention = true;
  // One static shape: graph input name -> dims, and/or symbol -> value.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::map<std::string, int64_t> symbols;
  // Shape buckets: symbol -> the values to compile (a bucket per combination, ascending).
  // Symbols named neither here nor in `symbols` must not remain in the graph: compiling a
  // model whose inputs keep an unbound symbolic dim is InvalidArgument naming it.
  std::map<std::string, std::vector<int64_t>> profile;
  std::vector<std::string> disabled_passes;  // as `kiln opt --disable-pass`
  // KV-cache decoders (past key/value inputs, present outputs, as optimum exports them):
  // the cache capacities (slots per sequence) to compile decode buckets for, e.g. {256,
  // 1024}. Non-empty: the plan gets a prefill program (the profile's buckets with an empty
  // past) and a decode program (one token per sequence, for each batch of the profile and
  // each capacity); the model's past and total lengths are bound by kiln, not the profile.
  // Empty: the model is compiled as exported. docs/generation.md.
  std::vector<int64_t> decode_context;
  // The decode program's paged cache (docs/generation.md): slots per block (0: the largest
  // power of two <= 128 dividing every capacity) and blocks in each K/V pool (0: enough for
  // every sequence of the largest batch at the largest capacity, plus the scratch block).
  int64_t kv_block_size = 0;
  int64_t kv_cache_blocks = 0;
  // A generation plan's prefill logits: "last" (the default): output `logits` is [batch, 1,
  // vocab], each sequence's logits at its last token (the last nonzero attention_mask
  // position), and the LM head (with the row-wise ops before it) runs on that row only;
  // "all": [batch, sequence, vocab] as exported (every prompt position scored, e.g. for
  // prompt log-probabilities). docs/generation.md.
  std::string prefill_logits = "last";
  // Receives one line per compile phase (pass summaries, bucket n/m, ...). Null: silent.
  std::function<void(std::string_view)> progress;
};

// Imports `model_path`, optimizes it and lowers it for options.target into a Plan whose
// buckets each hold a static memory plan and kernel list. Deterministic: the same model
// bytes and options give a Plan that serializes to identical bytes.
absl::StatusOr<Plan> Compile(const std::string& model_path, const CompileOptions& options = {});

// Compile, then WritePlanFile to `plan_path`, without gathering the weights into the Plan:
// each constant is streamed from the imported model (whose external data is mapped, not
// read) into the file in placement order, so peak memory stays near the model's weight
// bytes instead of twice them. The file is byte-identical to WritePlanFile(*Compile(...)).
// Returns the written plan's header and metadata (its `plan.weights` is empty).
absl::StatusOr<PlanInfo> CompileToFile(const std::string& model_path, const std::string& plan_path,
                                       const CompileOptions& options = {});

// A canonical one-line rendering of the options that shape the plan (stored in
// Plan::compile_options; progress callbacks are not part of it).
std::string CompileOptionsString(const CompileOptions& options);

// Where a tensor's bytes live: host memory, or device memory of the executor's CUDA
// device (e.g. a torch.Tensor's data_ptr() on that GPU).
enum class MemoryKind : uint8_t { kHost = 0, kCuda = 1 };

// Non-owning views of caller tensors (dense, row-major).
struct TensorView {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  const void* data = nullptr;
  MemoryKind memory = MemoryKind::kHost;
};
struct MutableTensorView {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  void* data = nullptr;
  MemoryKind memory = MemoryKind::kHost;
};

struct ExecutorOptions {
  int num_threads = 0;  // cpu: 0 = one per core (kiln::cpu::DefaultNumThreads); at most 1024
  int cuda_device = 0;  // cuda: the device ordinal the plan runs on
  // cuda: capture each bucket's steps as a CUDA graph at first use and replay it after
  // (inputs and outputs go through fixed staging slots so that replays stay valid).
  bool cuda_graphs = true;
};

// The CUDA runtime's stream type, declared so that this header needs no CUDA headers
// (it is cudaStream_t).
using CudaStream = struct CUstream_st*;

struct RunOptions {
  // cuda: the stream the run's work is ordered on (after work already queued there); null:
  // the executor's own stream. Run returns once the outputs are written either way.
  CudaStream cuda_stream = nullptr;
  // Which of the plan's programs runs (PlanProgram): the model as exported, a KV-cache
  // decoder's decode step (kiln::GenerationSession uses it; include/kiln/generation.h), or
  // the packed program of an encoder, on inputs of its own signature (IoOf; docs/packing.md).
  PlanProgram program = PlanProgram::kModel;
  // A model-program run on a plan with a packed program (compiled with --profile
  // tokens=...) packs the batch when every row's mask is a prefix of ones: the real tokens
  // run end to end and the outputs come back in the padded layout, zeros at the padding
  // (docs/packing.md). false: always the padded buckets.
  bool pack = true;
};

// One kernel call of a run, for --trace (Chrome trace "X" events).
struct TraceEvent {
  std::string kernel;
  // What ran it, where the kernel has several implementations: for a cpu `linear`, the GEMM
  // backend, ISA and tile ("kiln:avx2:4x24", "onednn:brg:avx512_core"); empty otherwise.
  std::string impl;
  std::vector<std::string> provenance;  // the ONNX nodes it covers
  int64_t start_ns = 0;                 // since the start of Run
  int64_t duration_ns = 0;
};

struct RunStats {
  int bucket = -1;                // index into Plan::buckets
  bool padded = false;            // inputs were padded up to the bucket's shape
  bool packed = false;            // the batch ran packed (RunOptions::pack); `bucket` is the
                                  // last packed call's
  bool collect_trace = false;     // in: fill `trace`
  std::vector<TraceEvent> trace;  // out, when collect_trace
};

class Executor {
 public:
  // Validates the plan for this process (target, kernels known, parameters in range) and
  // prepares it (e.g. prepacks Linear weights). Plans for another target are
  // FailedPrecondition.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<const Plan> plan,
                                                          const ExecutorOptions& options = {});
  virtual ~Executor() = default;

  const Plan& plan() const { return *plan_; }
  // Where this executor computes: host memory (cpu plans) or CUDA device `device()`'s
  // (cuda plans); what kiln::GenerationSession keeps its cache in.
  virtual MemoryKind memory() const { return MemoryKind::kHost; }
  virtual int device() const { return 0; }

  // The output dims for inputs of these dims (graph input order): what Run will write.
  // InvalidArgument when no bucket of `program` fits, naming the input and the allowed range.
  virtual absl::StatusOr<std::vector<std::vector<int64_t>>> OutputDims(
      std::span<const std::vector<int64_t>> input_dims,
      PlanProgram program = PlanProgram::kModel) const = 0;

  // Runs the plan: inputs in graph input order, outputs in graph output order with the
  // dims OutputDims gives. Caller buffers are read/written in place; the smallest bucket
  // that fits is chosen (padding paddable symbols when no bucket matches exactly). Each
  // view's `memory` says where its bytes are; an executor refuses memory it cannot address
  // (the CPU executor takes host memory only; the CUDA one host and device memory).
  virtual absl::Status Run(std::span<const TensorView> inputs,
                           std::span<const MutableTensorView> outputs, RunStats* stats = nullptr,
                           const RunOptions& options = {}) const = 0;

  // Convenience: allocates the outputs.
  absl::StatusOr<std::vector<Tensor>> Run(std::span<const TensorView> inputs,
                                          RunStats* stats = nullptr,
                                          const RunOptions& options = {}) const;

 protected:
  explicit Executor(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}
  std::shared_ptr<const Plan> plan_;
};

}  // namespace kiln
