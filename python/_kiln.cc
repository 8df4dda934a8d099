// kiln._kiln: the nanobind module under the Python package (python/kiln, docs/python.md).
// It exposes the public C++ API (kiln/kiln.h, kiln/plan/plan.h) as three things: compile(),
// Plan and Session. The Python layer (python/kiln/__init__.py) adds signatures, docs and
// the RAG classes on top.
//
// Zero copy: Session.run reads each input where the caller's array holds it (buffer
// protocol or DLPack, host or — for a cuda plan — device memory) and writes each output
// into a fresh 64-byte-aligned buffer that the returned numpy array owns. Nothing is
// converted silently: an input of the wrong dtype, a non-C-contiguous one or one on the
// wrong device is kiln.InvalidArgument naming the input and saying what to pass instead.
//
// Errors: every absl::Status that is not OK becomes the kiln._errors class for its code
// (kiln.InvalidArgument, kiln.NotFound, ...) with kiln's message; no C++ exception or
// abort reaches the interpreter. The GIL is released while kiln compiles or runs, so
// several Python threads can run one Session at once (Executor::Run is thread-safe).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/generation.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"
#include "kiln/verify.h"
#include "tools/plan_info_json.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

// Carries a non-OK status from the bindings to the exception translator below.
struct StatusError {
  absl::Status status;
};

void ThrowIfError(absl::Status status) {
  if (!status.ok()) throw StatusError{std::move(status)};
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> v) {
  if (!v.ok()) throw StatusError{std::move(v).status()};
  return *std::move(v);
}

absl::Status InvalidArgument(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// kiln DType <-> DLPack dtype. Only the dtypes a plan's inputs and outputs can have.
std::optional<DType> FromDlpack(nb::dlpack::dtype t) {
  using nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<dtype_code>(t.code);
  switch (code) {
    case dtype_code::Float:
      if (t.bits == 16) return DType::kF16;
      if (t.bits == 32) return DType::kF32;
      if (t.bits == 64) return DType::kF64;
      break;
    case dtype_code::Bfloat:
      if (t.bits == 16) return DType::kBF16;
      break;
    case dtype_code::Int:
      if (t.bits == 8) return DType::kI8;
      if (t.bits == 16) return DType::kI16;
      if (t.bits == 32) return DType::kI32;
      if (t.bits == 64) return DType::kI64;
      break;
    case dtype_code::UInt:
      if (t.bits == 8) return DType::kU8;
      if (t.bits == 16) return DType::kU16;
      if (t.bits == 32) return DType::kU32;
      if (t.bits == 64) return DType::kU64;
      break;
    case dtype_code::Bool:
      if (t.bits == 8) return DType::kBool;
      break;
    default:
      break;
  }
  return std::nullopt;
}

nb::dlpack::dtype ToDlpack(DType t) {
  using nb::dlpack::dtype_code;
  dtype_code code = dtype_code::Float;
  switch (t) {
    case DType::kF16:
    case DType::kF32:
    case DType::kF64:
      code = dtype_code::Float;
      break;
    case DType::kBF16:
      code = dtype_code::Bfloat;
      break;
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
      code = dtype_code::Int;
      break;
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
      code = dtype_code::UInt;
      break;
    case DType::kBool:
      code = dtype_code::Bool;
      break;
    default:
      throw StatusError{absl::InternalError(absl::StrCat(
          "plan output dtype ", std::string(DTypeName(t)), " has no numpy equivalent"))};
  }
  nb::dlpack::dtype d;
  d.code = static_cast<uint8_t>(code);
  d.bits = static_cast<uint8_t>(DTypeSize(t) * 8);
  d.lanes = 1;
  return d;
}

std::string DlpackName(nb::dlpack::dtype t) {
  if (std::optional<DType> d = FromDlpack(t)) return std::string(DTypeName(*d));
  return absl::StrCat("dlpack(code ", t.code, ", bits ", t.bits, ", lanes ", t.lanes, ")");
}

std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

nb::object JsonLoads(const std::string& text) {
  return nb::module_::import_("json").attr("loads")(text);
}

// A compiled plan, shared by every Session made from it. `file` holds the sizes
// ReadPlanInfo reported when the plan came from a file (absent for a plan compiled in
// memory), for info().
class PyPlan {
 public:
  PyPlan(std::shared_ptr<const Plan> plan, std::string path, std::optional<PlanInfo> file)
      : plan_(std::move(plan)), path_(std::move(path)), file_(std::move(file)) {}

  static PyPlan Load(const std::filesystem::path& path) {
    const std::string p = path.string();
    PlanInfo info;
    {
      nb::gil_scoped_release release;
      absl::StatusOr<PlanInfo> header = ReadPlanInfo(p);
      if (header.ok()) {
        info = *std::move(header);
        info.plan = Plan();  // only the sizes are kept; the loaded plan has the rest
      } else {
        ThrowIfError(Named(header.status(), p));
      }
    }
    absl::StatusOr<Plan> plan;
    {
      nb::gil_scoped_release release;
      plan = LoadPlanFile(p);
    }
    if (!plan.ok()) ThrowIfError(Named(plan.status(), p));
    return PyPlan(std::make_shared<const Plan>(*std::move(plan)), p, std::move(info));
  }

  void Save(const std::filesystem::path& path) const {
    absl::Status s;
    {
      nb::gil_scoped_release release;
      s = WritePlanFile(*plan_, path.string());
    }
    ThrowIfError(s);
  }

  nb::object Info() const {
    PlanInfo info;
    if (file_) {
      info = *file_;
    } else {
      info.format_version = kPlanFormatVersion;
      info.weights_bytes = plan_->weights.size();
    }
    info.plan = *plan_;
    info.plan.weights = PlanWeights();
    return JsonLoads(cli::PlanInfoJson(info, path_));
  }

  const std::shared_ptr<const Plan>& plan() const { return plan_; }
  const std::string& path() const { return path_; }

 private:
  static absl::Status Named(const absl::Status& s, const std::string& path) {
    if (absl::StrContains(s.message(), path)) return s;
    return absl::Status(s.code(), absl::StrCat("plan '", path, "': ", s.message()));
  }

  std::shared_ptr<const Plan> plan_;
  std::string path_;
  std::optional<PlanInfo> file_;
};

// "cpu", "cuda" or "cuda:N" -> (target, ordinal).
std::pair<PlanTarget, int> ParseDevice(const std::string& device) {
  if (device == "cpu") return {PlanTarget::kCpu, 0};
  if (device == "cuda") return {PlanTarget::kCuda, 0};
  int ordinal = -1;
  if (device.rfind("cuda:", 0) == 0 && absl::SimpleAtoi(device.substr(5), &ordinal) && ordinal >= 0)
    return {PlanTarget::kCuda, ordinal};
  throw StatusError{
      InvalidArgument(absl::StrCat("device '", device, "' is not one of cpu, cuda, cuda:N"))};
}

// An executor over one plan. Thread-safe: run() may be called from many threads at once;
// close() waits for nothing (runs already started keep the executor alive) and makes
// later runs fail with FailedPrecondition.
class PySession {
 public:
  PySession(const PyPlan& plan, int threads, std::optional<std::string> device)
      : plan_path_(plan.path()) {
    if (threads < 0 || threads > 1024)
      throw StatusError{
          InvalidArgument(absl::StrCat("threads=", threads, ": want 0 (one per core) .. 1024"))};
    const PlanTarget target = plan.plan()->target;
    const std::string dev = device.value_or(std::string(PlanTargetName(target)));
    const auto [dev_target, ordinal] = ParseDevice(dev);
    if (dev_target != target)
      throw StatusError{absl::FailedPreconditionError(absl::StrCat(
          "device '", dev, "': the plan is for target ", std::string(PlanTargetName(target)),
          "; compile it with target=\"", std::string(PlanTargetName(dev_target)), "\""))};
    ExecutorOptions options;
    options.num_threads = threads;
    options.cuda_device = ordinal;
    device_ = dev;
    ordinal_ = ordinal;
    threads_ = threads;
    absl::StatusOr<std::unique_ptr<Executor>> ex;
    {
      nb::gil_scoped_release release;
      ex = Executor::Create(plan.plan(), options);
    }
    if (!ex.ok()) ThrowIfError(ex.status());
    executor_ = std::shared_ptr<const Executor>(*std::move(ex));
    for (const PlanTensorSig& s : executor_->plan().inputs) input_names_.push_back(s.name);
    for (const PlanTensorSig& s : executor_->plan().outputs) output_names_.push_back(s.name);
  }

  nb::dict Run(nb::dict inputs, const std::string& outputs, bool pack) {
    if (outputs != "auto" && outputs != "host" && outputs != "device")
      throw StatusError{InvalidArgument(
          absl::StrCat("run(): outputs='", outputs, "' is not one of auto, host, device"))};
    if (outputs == "device" && device_ == "cpu")
      throw StatusError{
          InvalidArgument("run(): outputs='device' needs a cuda session; this one runs on cpu")};
    std::shared_ptr<const Executor> ex = executor();
    const Plan& plan = ex->plan();
    for (auto [key, value] : inputs) {
      std::string name;
      if (!nb::try_cast(key, name))
        throw StatusError{InvalidArgument("run(): input names must be str")};
      bool known = false;
      for (const std::string& n : input_names_) known |= n == name;
      if (!known)
        throw StatusError{InvalidArgument(absl::StrCat(
            "run(): '", name,
            "' is not an input of this plan (inputs: ", absl::StrJoin(input_names_, ", "), ")"))};
    }
    const size_t n = plan.inputs.size();
    std::vector<nb::ndarray<nb::ro>> arrays(n);
    std::vector<TensorView> views(n);
    std::vector<std::vector<int64_t>> dims(n);
    bool any_device_input = false;
    for (size_t i = 0; i < n; ++i) {
      const PlanTensorSig& sig = plan.inputs[i];
      nb::str key(sig.name.c_str());
      if (!inputs.contains(key))
        throw StatusError{InvalidArgument(
            absl::StrCat("run(): input '", sig.name,
                         "' is missing (inputs: ", absl::StrJoin(input_names_, ", "), ")"))};
      nb::handle value = inputs[key];
      if (!nb::try_cast(value, arrays[i], /*convert=*/false))
        throw StatusError{InvalidArgument(
            absl::StrCat("input '", sig.name, "': expected a numpy array or a DLPack tensor, got ",
                         nb::type_name(value.type()).c_str()))};
      views[i] = View(sig, arrays[i], &dims[i]);
      any_device_input |= views[i].memory == MemoryKind::kCuda;
    }
    std::vector<std::vector<int64_t>> out_dims = ValueOrThrow(ex->OutputDims(dims));

    // Outputs: one buffer each, host (64-byte aligned) or device, owned through a
    // shared_ptr that the returned array's capsule keeps.
    const bool on_device = outputs == "device" || (outputs == "auto" && any_device_input);
    std::vector<std::shared_ptr<void>> buffers(plan.outputs.size());
    std::vector<MutableTensorView> outs(plan.outputs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const DType dt = plan.outputs[i].dtype;
      size_t bytes = DTypeSize(dt);
      for (int64_t d : out_dims[i]) bytes *= static_cast<size_t>(d);
      if (on_device) {
        buffers[i] = ValueOrThrow(AllocateCudaBuffer(ordinal_, bytes));
      } else {
        buffers[i] = std::shared_ptr<void>(
            std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)), std::free);
        if (buffers[i] == nullptr)
          throw StatusError{absl::ResourceExhaustedError(absl::StrCat(
              "output '", plan.outputs[i].name, "': cannot allocate ", bytes, " bytes"))};
      }
      outs[i] = MutableTensorView{dt, out_dims[i], buffers[i].get(),
                                  on_device ? MemoryKind::kCuda : MemoryKind::kHost};
    }
    absl::Status status;
    {
      nb::gil_scoped_release release;
      RunOptions options;
      options.pack = pack;
      status = ex->Run(views, outs, nullptr, options);
    }
    ThrowIfError(status);

    nb::dict result;
    for (size_t i = 0; i < outs.size(); ++i) {
      auto* keep = new std::shared_ptr<void>(std::move(buffers[i]));
      nb::capsule owner(keep,
                        [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
      std::vector<size_t> shape(out_dims[i].begin(), out_dims[i].end());
      nb::object array;
      if (on_device) {
        // No framework of its own: a DLPack-capable array (torch.from_dlpack, cupy, ...).
        array = nb::ndarray<>(keep->get(), shape.size(), shape.data(), owner, nullptr,
                              ToDlpack(outs[i].dtype), nb::device::cuda::value, ordinal_)
                    .cast();
      } else {
        array = nb::ndarray<nb::numpy>(keep->get(), shape.size(), shape.data(), owner, nullptr,
                                       ToDlpack(outs[i].dtype), nb::device::cpu::value)
                    .cast();
      }
      result[plan.outputs[i].name.c_str()] = array;
    }
    return result;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    executor_.reset();
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return executor_ == nullptr;
  }
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::string& device() const { return device_; }
  int threads() const { return threads_; }

 private:
  std::shared_ptr<const Executor> executor() {
    std::lock_guard<std::mutex> lock(mu_);
    if (executor_ == nullptr)
      throw StatusError{absl::FailedPreconditionError(
          absl::StrCat("session", plan_path_.empty() ? "" : absl::StrCat(" of '", plan_path_, "'"),
                       " is closed"))};
    return executor_;
  }

  // Checks one input array against its signature and views it in place.
  TensorView View(const PlanTensorSig& sig, const nb::ndarray<nb::ro>& a,
                  std::vector<int64_t>* dims) const {
    const std::optional<DType> dt = FromDlpack(a.dtype());
    if (!dt || *dt != sig.dtype)
      throw StatusError{InvalidArgument(absl::StrCat(
          "input '", sig.name, "' has dtype ", DlpackName(a.dtype()), "; the plan wants ",
          std::string(DTypeName(sig.dtype)), " (convert it first, e.g. x.astype(np.",
          sig.dtype == DType::kI64   ? "int64"
          : sig.dtype == DType::kF32 ? "float32"
                                     : std::string(DTypeName(sig.dtype)),
          "))"))};
    dims->resize(a.ndim());
    int64_t expect = 1;
    bool contiguous = true;
    for (size_t d = a.ndim(); d-- > 0;) {
      (*dims)[d] = static_cast<int64_t>(a.shape(d));
      if (a.shape(d) != 1 && a.stride(d) != expect) contiguous = false;
      expect *= static_cast<int64_t>(a.shape(d));
    }
    if (!contiguous)
      throw StatusError{InvalidArgument(absl::StrCat(
          "input '", sig.name, "' ", DimsString(*dims),
          " is not C-contiguous; pass np.ascontiguousarray(x) (kiln reads inputs in place)"))};
    MemoryKind memory = MemoryKind::kHost;
    if (a.device_type() == nb::device::cuda::value) {
      if (device_ == "cpu" || a.device_id() != ordinal_)
        throw StatusError{
            InvalidArgument(absl::StrCat("input '", sig.name, "' is on cuda:", a.device_id(),
                                         "; this session runs on ", device_))};
      memory = MemoryKind::kCuda;
    } else if (a.device_type() != nb::device::cpu::value &&
               a.device_type() != nb::device::cuda_host::value) {
      throw StatusError{InvalidArgument(
          absl::StrCat("input '", sig.name, "' is on DLPack device type ", a.device_type(),
                       "; kiln reads host memory and, for cuda plans, CUDA device memory"))};
    }
    return TensorView{sig.dtype, *dims, a.data(), memory};
  }

  std::mutex mu_;
  std::shared_ptr<const Executor> executor_;
  std::string plan_path_;
  std::vector<std::string> input_names_, output_names_;
  std::string device_;
  int ordinal_ = 0;
  int threads_ = 0;
};

PlanTarget ParseTarget(const std::string& target) {
  if (target == "cpu") return PlanTarget::kCpu;
  if (target == "cuda") return PlanTarget::kCuda;
  throw StatusError{InvalidArgument(absl::StrCat("target '", target, "' is not one of cpu, cuda"))};
}

// compile(): the Python layer passes every option by keyword, already validated for
// types; values are checked here (and by kiln::Compile).
// A numpy f32 array owning the bytes of `t` (the Tensor's storage stays alive in its capsule).
nb::object ArrayOf(Tensor t) {
  auto* keep = new Tensor(std::move(t));
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(keep->dims().begin(), keep->dims().end());
  return nb::ndarray<nb::numpy>(keep->raw(), shape.size(), shape.data(), owner, nullptr,
                                ToDlpack(keep->dtype()), nb::device::cpu::value)
      .cast();
}

// kiln.Generator: kiln::GenerationSession over its own executor (include/kiln/generation.h).
// Not thread-safe, as the session is not: one generator per thread.
class PyGenerator {
 public:
  PyGenerator(const PyPlan& plan, int threads) {
    if (threads < 0 || threads > 1024)
      throw StatusError{
          InvalidArgument(absl::StrCat("threads=", threads, ": want 0 (one per core) .. 1024"))};
    ExecutorOptions options;
    options.num_threads = threads;
    absl::StatusOr<std::unique_ptr<Executor>> ex;
    absl::StatusOr<std::unique_ptr<GenerationSession>> session;
    {
      nb::gil_scoped_release release;
      ex = Executor::Create(plan.plan(), options);
      if (ex.ok())
        session = GenerationSession::Create(std::shared_ptr<const Executor>(*std::move(ex)));
    }
    ThrowIfError(ex.status());
    session_ = ValueOrThrow(std::move(session));
  }
  nb::object Prefill(const std::vector<std::vector<int64_t>>& prompts) {
    absl::StatusOr<Tensor> t;
    {
      nb::gil_scoped_release release;
      t = session_->Prefill(prompts);
    }
    return ArrayOf(ValueOrThrow(std::move(t)));
  }
  nb::object Decode(const std::vector<int64_t>& ids) {
    absl::StatusOr<Tensor> t;
    {
      nb::gil_scoped_release release;
      t = session_->Decode(ids);
    }
    return ArrayOf(ValueOrThrow(std::move(t)));
  }
  nb::object Restart(int b, const std::vector<int64_t>& prompt) {
    absl::StatusOr<Tensor> t;
    {
      nb::gil_scoped_release release;
      t = session_->Restart(b, prompt);
    }
    return ArrayOf(ValueOrThrow(std::move(t)));
  }
  void Fork(int src, int dst) { ThrowIfError(session_->Fork(src, dst)); }
  std::vector<int64_t> Lengths() const {
    std::vector<int64_t> out;
    for (int b = 0; b < session_->batch(); ++b) out.push_back(*session_->length(b));
    return out;
  }
  const GenerationSession& session() const { return *session_; }

 private:
  std::unique_ptr<GenerationSession> session_;
};

PyPlan CompilePlan(const std::filesystem::path& model, std::optional<std::filesystem::path> output,
                   std::map<std::string, std::vector<int64_t>> profile,
                   std::map<std::string, std::vector<int64_t>> shapes,
                   std::map<std::string, int64_t> symbols, const std::string& precision,
                   const std::string& target, int opt_level, std::vector<int> cuda_sms,
                   bool allow_tf32, std::vector<std::string> disabled_passes,
                   std::vector<int64_t> decode_context, int64_t kv_block_size,
                   int64_t kv_cache_blocks, std::optional<nb::callable> progress,
                   std::optional<std::string> accept, std::string calib,
                   std::string int8_activations, std::string observer, double percentile,
                   std::string prefill_logits, std::string head_precision) {
  CompileOptions options;
  options.prefill_logits = std::move(prefill_logits);
  options.head_precision = std::move(head_precision);
  options.int8_activations = std::move(int8_activations);
  options.observer = std::move(observer);
  options.percentile = percentile;
  options.target = ParseTarget(target);
  if (opt_level < 0 || opt_level > 3)
    throw StatusError{InvalidArgument(absl::StrCat("opt_level=", opt_level, ": want 0..3"))};
  options.opt_level = opt_level;
  options.precision = precision;
  options.cuda_sms = std::move(cuda_sms);
  options.allow_tf32 = allow_tf32;
  options.input_shapes = std::move(shapes);
  options.symbols = std::move(symbols);
  options.profile = std::move(profile);
  options.disabled_passes = std::move(disabled_passes);
  options.decode_context = std::move(decode_context);
  options.kv_block_size = kv_block_size;
  options.kv_cache_blocks = kv_cache_blocks;
  if (progress) {
    // Called on the compiling thread without the GIL: take it for the call. A callback
    // that raises is reported as unraisable and not called again.
    nb::handle cb = *progress;  // kept alive by `progress` for the whole compile
    auto failed = std::make_shared<bool>(false);
    options.progress = [cb, failed](std::string_view line) {
      nb::gil_scoped_acquire acquire;
      if (*failed) return;
      try {
        cb(nb::str(line.data(), line.size()));
      } catch (nb::python_error& e) {
        *failed = true;
        e.discard_as_unraisable("kiln.compile progress callback");
      }
    };
  }
  // The accuracy gate (kiln/verify.h), as `kiln compile --accept/--calib`.
  VerifyOptions verify;
  verify.calib_dir = options.calib_dir = std::move(calib);
  if (accept) {
    verify.gates = ValueOrThrow(ParseAccuracyGates(*accept));
  } else {
    verify.default_gates = true;
  }
  if (options.target != PlanTarget::kCpu) {
    if (accept && *accept != "none")
      throw StatusError{absl::UnimplementedError(
          "accept: the accuracy gate runs cpu plans; check a cuda plan on a GPU")};
    verify.gates.clear();
    verify.default_gates = false;
  }
  const bool gated = !verify.gates.empty() || (verify.default_gates && precision != "fp32");
  if (!verify.calib_dir.empty() && !gated && precision != "fp16" && precision != "int8")
    throw StatusError{
        InvalidArgument("calib: nothing to calibrate or gate (fp32, or accept=\"none\")")};
  const std::string model_path = model.string();
  if (output) {
    const std::string out = output->string();
    absl::StatusOr<PlanInfo> written;
    {
      nb::gil_scoped_release release;
      written = CompileToFileGated(model_path, out, options, verify);
    }
    ThrowIfError(written.status());
    return PyPlan::Load(*output);
  }
  absl::StatusOr<Plan> plan;
  {
    nb::gil_scoped_release release;
    plan = CompileGated(model_path, options, verify);
  }
  ThrowIfError(plan.status());
  return PyPlan(std::make_shared<const Plan>(*std::move(plan)), "", std::nullopt);
}

nb::dict CudaInfo() {
  const CudaDeviceInfo dev = QueryCudaDevice(0);
  nb::dict d;
  d["built"] = dev.built;
  d["build"] = dev.build;
  d["available"] = dev.available;
  d["reason"] = dev.reason;
  d["name"] = dev.name;
  d["sm"] = dev.sm;
  d["memory_bytes"] = dev.memory_bytes;
  return d;
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln's compiled core; use the `kiln` package, which wraps it.";
  m.attr("__version__") = std::string(kiln::Version());
  // Objects still alive at interpreter exit (a Plan held by a reference cycle, a serving
  // process stopped mid-request) are not bugs worth a page of warnings on every exit.
  nb::set_leak_warnings(false);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const std::string code = absl::StatusCodeToString(e.status.code());
      nb::object cls = nb::module_::import_("kiln._errors").attr("error_class")(code);
      PyErr_SetString(cls.ptr(), std::string(e.status.message()).c_str());
    }
  });

  m.def("cuda_device", &CudaInfo,
        "The CUDA side of this build and machine (device 0): built, available, reason, ...");

  m.def("_compile", &CompilePlan, nb::arg("model"), nb::arg("output").none(), nb::arg("profile"),
        nb::arg("shapes"), nb::arg("symbols"), nb::arg("precision"), nb::arg("target"),
        nb::arg("opt_level"), nb::arg("cuda_sms"), nb::arg("allow_tf32"),
        nb::arg("disabled_passes"), nb::arg("decode_context"), nb::arg("kv_block_size"),
        nb::arg("kv_cache_blocks"), nb::arg("progress").none(), nb::arg("accept").none(),
        nb::arg("calib"), nb::arg("int8_activations"), nb::arg("observer"), nb::arg("percentile"),
        nb::arg("prefill_logits"), nb::arg("head_precision"),
        "Internal: kiln.compile() validates its arguments and calls this.");

  nb::class_<PyPlan>(m, "Plan",
                     "A compiled kiln plan (from kiln.compile or Plan.load). Immutable; any "
                     "number of sessions may share it.")
      .def_static("load", &PyPlan::Load, nb::arg("path"),
                  "Maps a .kiln file read-only and validates it (header, metadata, CRCs). "
                  "Raises kiln.NotFound or kiln.InvalidArgument naming the file.")
      .def("save", &PyPlan::Save, nb::arg("path"),
           "Writes the plan to `path` (through a temporary file renamed over it).")
      .def("info", &PyPlan::Info, nb::sig("def info(self) -> dict[str, typing.Any]"),
           "The plan's description as a dict: the object `kiln plan-info --json` prints "
           "(target, manifest, inputs, outputs, buckets with their arena sizes, ...).")
      .def_prop_ro(
          "inputs", [](const PyPlan& p) -> nb::object { return p.Info()["inputs"]; },
          nb::sig("def inputs(self) -> list[dict[str, typing.Any]]"),
          "The graph inputs: [{name, dtype (\"i64\", \"f32\", ...), dims (int or symbol)}].")
      .def_prop_ro(
          "outputs", [](const PyPlan& p) -> nb::object { return p.Info()["outputs"]; },
          nb::sig("def outputs(self) -> list[dict[str, typing.Any]]"),
          "The graph outputs, as `inputs`.")
      .def_prop_ro(
          "buckets", [](const PyPlan& p) -> nb::object { return p.Info()["buckets"]; },
          nb::sig("def buckets(self) -> list[dict[str, typing.Any]]"),
          "The shape buckets: [{bindings {symbol: value}, steps, arena_bytes, ...}].")
      .def_prop_ro(
          "path",
          [](const PyPlan& p) -> std::optional<std::string> {
            return p.path().empty() ? std::nullopt : std::optional<std::string>(p.path());
          },
          "The file the plan was loaded from, or None for a plan compiled in memory.")
      .def_prop_ro(
          "target",
          [](const PyPlan& p) -> std::string {
            return std::string(kiln::PlanTargetName(p.plan()->target));
          },
          "\"cpu\" or \"cuda\".")
      .def(
          "session",
          [](const PyPlan& p, int threads, std::optional<std::string> device) {
            return new PySession(p, threads, std::move(device));
          },
          nb::arg("threads") = 0, nb::arg("device").none() = nb::none(),
          "Creates a Session that runs this plan. threads: CPU threads per run (0: one per "
          "core). device: \"cpu\", \"cuda\" or \"cuda:N\" (default: the plan's target).")
      .def(
          "generator", [](const PyPlan& p, int threads) { return new PyGenerator(p, threads); },
          nb::arg("threads") = 0,
          "Creates a Generator (KV-cached generation) for a plan compiled with "
          "decode_context. threads: CPU threads per step (0: one per core).")
      .def("__repr__", [](const PyPlan& p) {
        return absl::StrCat(
            "<kiln.Plan target=", std::string(kiln::PlanTargetName(p.plan()->target)),
            " buckets=", p.plan()->buckets.size(),
            p.path().empty() ? "" : absl::StrCat(" path='", p.path(), "'"), ">");
      });

  nb::class_<PyGenerator>(m, "Generator",
                          "KV-cached generation over a plan compiled with decode_context "
                          "(docs/generation.md): owns the K/V caches and appends to them in "
                          "place. Not thread-safe: one generator per thread.")
      .def("prefill", &PyGenerator::Prefill, nb::arg("prompts"),
           "Starts len(prompts) sequences (lists of token ids, lengths may differ) and returns "
           "the logits at each one's last token, f32 [batch, vocab].")
      .def("decode", &PyGenerator::Decode, nb::arg("ids"),
           "Appends ids[b] to sequence b (one per sequence) and returns the logits after it, "
           "f32 [batch, vocab].")
      .def("restart", &PyGenerator::Restart, nb::arg("sequence"), nb::arg("prompt"),
           "Starts one sequence over with a new prompt; returns its logits, f32 [1, vocab].")
      .def("fork", &PyGenerator::Fork, nb::arg("src"), nb::arg("dst"),
           "Sequence dst becomes a copy of sequence src (sharing its cache blocks until one "
           "of the two writes into a shared block).")
      .def_prop_ro("lengths", &PyGenerator::Lengths, "Tokens each sequence holds.")
      .def_prop_ro(
          "capacity", [](const PyGenerator& g) { return g.session().capacity(); },
          "The decode capacity in use (slots per sequence the mask and block table span).")
      .def_prop_ro(
          "block_size", [](const PyGenerator& g) { return g.session().block_size(); },
          "Slots per block of the paged cache.")
      .def_prop_ro(
          "blocks_in_use", [](const PyGenerator& g) { return g.session().blocks_in_use(); },
          "Blocks per K/V pool the sequences hold now (shared blocks counted once).")
      .def_prop_ro(
          "cache_blocks", [](const PyGenerator& g) { return g.session().cache_blocks(); },
          "Blocks per K/V pool (the scratch block excluded).")
      .def_prop_ro(
          "max_context", [](const PyGenerator& g) { return g.session().max_context(); },
          "The plan's largest decode capacity.")
      .def_prop_ro(
          "vocab", [](const PyGenerator& g) { return g.session().vocab(); }, "Logits width.")
      .def_prop_ro(
          "cache_bytes", [](const PyGenerator& g) { return g.session().cache_bytes(); },
          "Bytes of the cache blocks in use, all K/V pools together.");

  nb::class_<PySession>(m, "Session",
                        "Runs one plan. Thread-safe: run() may be called from many threads at "
                        "once (each call gets its own activation arena; the GIL is released "
                        "while kiln runs).")
      .def("run", &PySession::Run, nb::arg("inputs"), nb::arg("outputs") = "auto",
           nb::arg("pack") = true,
           "Runs the plan on `inputs` ({name: array}) and returns {output name: array}. "
           "Arrays are read in place (numpy, or any DLPack tensor such as a torch.Tensor); "
           "they must have the plan's dtype and be C-contiguous. The smallest bucket that fits "
           "is chosen, padding paddable dims (batch, sequence) as needed. outputs: \"host\" "
           "gives numpy arrays; \"device\" (cuda sessions) gives DLPack arrays in device "
           "memory (torch.from_dlpack takes them without a copy); \"auto\" (default) is "
           "device when a cuda session got a device input, else host. pack: on a plan with "
           "a packed program (compiled with profile tokens=...), a batch whose mask rows are "
           "prefixes of ones runs packed, its real tokens end to end, with the outputs in the "
           "padded layout (zeros at the padding); False runs the padded buckets.")
      .def("close", &PySession::Close,
           "Releases the executor; later run() calls raise kiln.FailedPrecondition.")
      .def_prop_ro("closed", &PySession::closed)
      .def_prop_ro("input_names", &PySession::input_names, "The plan's inputs, in order.")
      .def_prop_ro("output_names", &PySession::output_names, "The plan's outputs, in order.")
      .def_prop_ro("device", &PySession::device, "\"cpu\", \"cuda\" or \"cuda:N\".")
      .def_prop_ro("threads", &PySession::threads, "CPU threads per run (0: one per core).")
      .def(
          "__enter__", [](PySession& s) -> PySession& { return s; }, nb::rv_policy::reference)
      .def("__exit__", [](PySession& s, nb::args) { s.Close(); });
}
