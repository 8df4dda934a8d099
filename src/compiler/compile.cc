// kiln::Compile: import -> optimize once on the symbolic graph -> per shape bucket
// (cartesian product of the profile values) specialize, re-optimize so every dim is static
// and shape chains fold, and lower (lower.cc) -> one Plan whose weights are shared by all
// buckets. Deterministic: nothing depends on pointer order or time except progress lines.
// CompileToFile streams the weights from the imported constants (external data stays
// mapped, never copied) into the plan file; Compile gathers them into the Plan's blob.
// Limits: the model hash covers the .onnx file bytes, not external data files.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/calibration.h"
#include "compiler/generation.h"
#include "compiler/lower.h"
#include "compiler/packing.h"
#include "compiler/padding.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/ir/verifier.h"
#include "kiln/kiln.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::vector<int64_t> SortedUnique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

absl::Status ValidateOptions(const CompileOptions& o) {
  if (o.target != PlanTarget::kCpu && o.target != PlanTarget::kCuda)
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown compile target %d", static_cast<uint32_t>(o.target)));
  if (o.precision == "auto")
    return absl::InvalidArgumentError(
        "precision 'auto' picks a precision by the accuracy gate: compile with `kiln compile`, "
        "kiln.compile() or CompileToFileGated (kiln/verify.h)");
  const std::optional<Precision> p = PrecisionFromName(o.precision);
  if (!p)
    return absl::InvalidArgumentError(
        absl::StrCat("unknown precision '", o.precision, "' (fp32, fp16, bf16, int8 or auto)"));
  for (const auto& [group, value] : o.gemm_group_precision) {
    if (group != "attention" && group != "ffn")
      return absl::InvalidArgumentError(
          absl::StrCat("GEMM group '", group, "' is not one kiln knows (attention, ffn)"));
    if (value != "bf16" && value != "fp32")
      return absl::InvalidArgumentError(
          absl::StrCat("GEMM group ", group, ": precision '", value, "' (want bf16 or fp32)"));
    if (o.target != PlanTarget::kCpu || (*p != Precision::kInt8 && *p != Precision::kBf16))
      return absl::InvalidArgumentError(
          "GEMM group precisions apply to cpu int8 and bf16 plans only");
  }
  if (!o.head_precision.empty()) {
    if (o.head_precision != "int8" && o.head_precision != "bf16" && o.head_precision != "fp32")
      return absl::InvalidArgumentError(
          absl::StrCat("--head-precision '", o.head_precision, "': give int8, bf16 or fp32"));
    if (o.target != PlanTarget::kCpu || (*p != Precision::kInt8 && *p != Precision::kBf16))
      return absl::InvalidArgumentError(
          "--head-precision applies to cpu int8 and bf16 plans (--precision int8, bf16 or "
          "auto)");
  }
  if (o.int8_activations != "dynamic" && o.int8_activations != "static")
    return absl::InvalidArgumentError(
        absl::StrCat("int8 activations '", o.int8_activations, "': want dynamic or static"));
  if (o.observer != "minmax" && o.observer != "percentile" && o.observer != "entropy")
    return absl::InvalidArgumentError(
        absl::StrCat("activation observer '", o.observer, "': want minmax, percentile or entropy"));
  if (!(o.percentile > 0 && o.percentile <= 100))
    return absl::InvalidArgumentError(
        absl::StrCat("percentile ", o.percentile, " is not in (0, 100]"));
  if (o.int8_activations == "static" && *p != Precision::kInt8)
    return absl::InvalidArgumentError(
        "static int8 activations apply to int8 plans only (--precision int8 or auto)");
  if (*p == Precision::kFp16 && o.target == PlanTarget::kCpu)
    return absl::UnimplementedError(
        "precision 'fp16' is not supported by the cpu target: the CPUs kiln runs on have no "
        "fp16 arithmetic; use bf16 or int8 (docs/precision.md)");
  const char* pass =
      o.target == PlanTarget::kCpu || *p == Precision::kInt8 ? "gemm-precision" : "lower-precision";
  if (*p != Precision::kFp32 && !CreatePass(pass))
    return absl::UnimplementedError(
        absl::StrCat("precision '", o.precision, "' needs the ", pass, " pass"));
  if (o.target == PlanTarget::kCuda && o.opt_level == 0)
    return absl::InvalidArgumentError(
        "a cuda plan needs -O1 or higher: -O0 keeps the graph's shape arithmetic (Shape, "
        "ConstantOfShape, ...), which only the host can evaluate, and a cuda plan has no host "
        "steps");
  if (o.target == PlanTarget::kCpu && o.allow_tf32)
    return absl::InvalidArgumentError("--allow-tf32 applies to cuda plans only");
  if (o.target == PlanTarget::kCpu && !o.cuda_flash_attention)
    return absl::InvalidArgumentError("--no-flash-attention applies to cuda plans only");
  if (o.target == PlanTarget::kCpu && !o.cuda_sms.empty())
    return absl::InvalidArgumentError("CUDA architectures given for a cpu plan");
  for (int sm : o.cuda_sms)
    if (sm < 50 || sm > 200)
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA architecture sm_", sm, " is not one kiln knows (sm_80, sm_90, ...)"));
  for (int64_t c : o.decode_context)
    if (c < 2)
      return absl::InvalidArgumentError(absl::StrCat(
          "--decode-context ", c, ": a decode cache needs at least 2 slots (e.g. 256,1024)"));
  if (o.profile.count(compiler::kTokensSymbol) && !o.decode_context.empty())
    return absl::InvalidArgumentError(
        "--profile tokens=... packs encoders; a generation plan (--decode-context) cannot be "
        "packed");
  if (o.prefill_logits != "last" && o.prefill_logits != "all")
    return absl::InvalidArgumentError(
        absl::StrCat("--prefill-logits '", o.prefill_logits, "': give last (the default) or all"));
  if (o.prefill_logits != "last" && o.decode_context.empty())
    return absl::InvalidArgumentError(
        "--prefill-logits applies to generation plans (--decode-context) only");
  if (o.opt_level < 0 || o.opt_level > 3)
    return absl::InvalidArgumentError(
        absl::StrCat("opt level ", o.opt_level, " is out of range (0..3)"));
  for (const auto& [sym, values] : o.profile) {
    if (values.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("--profile ", sym, ": no values given (e.g. --profile ", sym, "=1:8)"));
    for (int64_t v : values)
      if (v <= 0)
        return absl::InvalidArgumentError(
            absl::StrCat("--profile ", sym, ": value ", v, " must be > 0"));
    if (o.symbols.count(sym))
      return absl::InvalidArgumentError(
          absl::StrCat("symbol '", sym, "' is given both a fixed value (--shape ", sym, "=",
                       o.symbols.at(sym), ") and a profile (--profile); give one"));
  }
  return absl::OkStatus();
}

// SHA-256 of the model file's bytes, read through a transient private mapping (the import
// parses the file separately, so its bytes are never held beside the parsed model).
absl::StatusOr<std::array<uint8_t, 32>> HashModel(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::NotFoundError(absl::StrCat("cannot open model '", path, "': no such file"));
  if (!std::filesystem::is_regular_file(path, ec))
    return absl::InvalidArgumentError(absl::StrCat("model '", path, "' is not a regular file"));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open model '", path, "'"));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("cannot size model '", path, "'"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return absl::InvalidArgumentError(absl::StrCat("read of model '", path, "' failed"));
  const std::array<uint8_t, 32> hash =
      Sha256(std::string_view(static_cast<const char*>(map), map ? size : 0));
  if (map) ::munmap(map, size);
  return hash;
}

int64_t ConstantBytes(const Graph& g) {
  int64_t total = 0;
  for (const auto& n : g.nodes())
    if (const Tensor* t = n->constant_value()) total += static_cast<int64_t>(t->NumBytes());
  return total;
}

std::string FusionLine(const FusionReport& report) {
  std::vector<std::string> parts;
  for (const std::string& kind : FusionKinds()) {
    auto it = report.kinds().find(kind);
    if (it != report.kinds().end() && it->second.fused > 0)
      parts.push_back(absl::StrCat(kind, " ", it->second.fused));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

std::string BindingsText(const std::map<std::string, int64_t>& b) {
  std::vector<std::string> parts;
  for (const auto& [sym, v] : b) parts.push_back(absl::StrCat(sym, "=", v));
  return absl::StrJoin(parts, " ");
}

// One bucket to compile: the bindings the graph is specialized and optimized with, the
// bindings the plan stores (they differ for decode buckets, whose past input is widened
// from capacity - 1 to the whole cache after optimization), and the program.
struct BucketSpec {
  std::map<std::string, int64_t> specialize, stored;
  PlanProgram program = PlanProgram::kModel;
  int64_t capacity = 0;           // decode: the cache slots
  const Graph* source = nullptr;  // the graph to specialize (null: the model's)
};

absl::StatusOr<PlanTensorSig> InputSig(const Node& in) {
  const std::string& name = in.output_info(0).name;
  const Type& t = in.output_info(0).type;
  PlanTensorSig sig{name, t.dtype, {}};
  if (!t.has_rank())
    return absl::InvalidArgumentError(
        absl::StrCat("graph input '", name, "' has unknown rank; give its shape with --shape ",
                     name, "=D0xD1..."));
  if (t.dtype == DType::kUndefined || t.dtype == DType::kString || DTypeSize(t.dtype) == 0)
    return absl::UnimplementedError(absl::StrCat("graph input '", name, "' has dtype ",
                                                 std::string(DTypeName(t.dtype)),
                                                 ", which plans cannot bind"));
  for (size_t i = 0; i < t.shape->size(); ++i) {
    const Dim& d = (*t.shape)[i];
    if (d.is_unknown())
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", name, "' dim ", i, " is unknown (", t.ToString(),
                       "); give its shape with --shape ", name, "=D0xD1..."));
    sig.dims.push_back(d);
  }
  return sig;
}

// Output dims: known, a symbol, or (an expression / unknown) the dim's text as a symbol;
// the executor takes an output's dims from the chosen bucket, never from this signature.
PlanTensorSig OutputSig(const GraphOutput& out) {
  const Type& t = out.value.type();
  PlanTensorSig sig{out.name, t.dtype, {}};
  if (t.shape)
    for (const Dim& d : *t.shape)
      sig.dims.push_back(d.is_known() || d.is_symbol() ? d : Dim::Symbol(d.ToString()));
  return sig;
}

// The buckets' bindings: the cartesian product of the profile values, in ascending
// lexicographic order over the sorted symbol names (the last symbol varies fastest).
std::vector<std::map<std::string, int64_t>> Buckets(
    const std::map<std::string, std::vector<int64_t>>& profile) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> axes;
  for (const auto& [sym, values] : profile) axes.emplace_back(sym, SortedUnique(values));
  std::vector<std::map<std::string, int64_t>> out;
  std::vector<size_t> idx(axes.size(), 0);
  while (true) {
    std::map<std::string, int64_t> b;
    for (size_t i = 0; i < axes.size(); ++i) b[axes[i].first] = axes[i].second[idx[i]];
    out.push_back(std::move(b));
    int i = static_cast<int>(axes.size()) - 1;
    while (i >= 0 && ++idx[i] == axes[i].second.size()) idx[i--] = 0;
    if (i < 0) break;
  }
  return out;
}

// Lowering needs every value typed, whatever the pipeline ran (-O0 runs nothing, and
// --disable-pass may drop shape inference): one more shape-inference run, which changes
// nothing after a pipeline that already ended with it.
absl::Status InferShapes(Graph& g, const PassContext& ctx) {
  std::unique_ptr<Pass> pass = CreatePass("shape-inference");
  if (!pass) return KILN_INTERNAL("the shape-inference pass is not registered");
  return pass->Run(g, ctx).status();
}

}  // namespace

std::string_view Version() { return KILN_VERSION; }

std::string CompileOptionsString(const CompileOptions& o) {
  std::vector<std::string> shapes, symbols, profile;
  for (const auto& [name, dims] : o.input_shapes)
    shapes.push_back(absl::StrCat(name, "=", absl::StrJoin(dims, "x")));
  for (const auto& [sym, v] : o.symbols) symbols.push_back(absl::StrCat(sym, "=", v));
  for (const auto& [sym, values] : o.profile)
    profile.push_back(absl::StrCat(sym, "=", absl::StrJoin(SortedUnique(values), ":")));
  std::vector<std::string> disabled = o.disabled_passes;
  std::sort(disabled.begin(), disabled.end());
  disabled.erase(std::unique(disabled.begin(), disabled.end()), disabled.end());
  std::string sms;
  if (o.target == PlanTarget::kCuda) {
    std::vector<int> v = o.cuda_sms.empty() ? std::vector<int>{80, 90} : o.cuda_sms;
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    sms = absl::StrCat(" cuda_sms={", absl::StrJoin(v, ","), "}", o.allow_tf32 ? " allow_tf32" : "",
                       o.cuda_flash_attention ? "" : " no_flash_attention");
  }
  return absl::StrCat(
      "target=", std::string(PlanTargetName(o.target)), sms, " opt_level=", o.opt_level,
      " precision=", o.precision, " shapes={", absl::StrJoin(shapes, ","), "} symbols={",
      absl::StrJoin(symbols, ","), "} profile={", absl::StrJoin(profile, ","),
      "} disabled_passes={", absl::StrJoin(disabled, ","), "}",
      o.calib_dir.empty() ? "" : absl::StrCat(" calib=", o.calib_dir),
      o.int8_activations == "static"
          ? absl::StrCat(" int8_activations=static observer=", o.observer,
                         o.observer == "percentile" ? absl::StrCat(":", o.percentile) : "")
          : "",
      o.gemm_group_precision.empty()
          ? ""
          : absl::StrCat(" gemm_groups={",
                         absl::StrJoin(o.gemm_group_precision, ",", absl::PairFormatter("=")), "}"),
      o.decode_context.empty()
          ? ""
          : absl::StrCat(" decode_context={", absl::StrJoin(SortedUnique(o.decode_context), ","),
                         "}"),
      o.prefill_logits == "last" ? "" : absl::StrCat(" prefill_logits=", o.prefill_logits),
      o.head_precision.empty() ? "" : absl::StrCat(" head_precision=", o.head_precision));
}

namespace {

// kiln::Compile but for gathering the weights: the plan with empty weights, and `weights`,
// which its weight buffers index. The graphs are gone when it returns: `weights` then
// holds the only references to the constants it kept.
absl::StatusOr<Plan> CompileWithoutWeights(const std::string& model_path,
                                           const CompileOptions& options,
                                           compiler::WeightTable& weights) {
  KILN_RETURN_IF_ERROR(ValidateOptions(options));
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };

  Plan plan;
  plan.target = options.target;
  plan.manifest.kiln_version = std::string(Version());
  if (options.target == PlanTarget::kCuda) {
    plan.cuda_sms = options.cuda_sms.empty()
                        ? std::vector<int32_t>{80, 90}
                        : std::vector<int32_t>(options.cuda_sms.begin(), options.cuda_sms.end());
    std::sort(plan.cuda_sms.begin(), plan.cuda_sms.end());
    plan.cuda_sms.erase(std::unique(plan.cuda_sms.begin(), plan.cuda_sms.end()),
                        plan.cuda_sms.end());
    // The toolkit this kiln was built with ("" when built without CUDA: the plan is a
    // cross-compile the manifest cannot vouch for).
    plan.manifest.cuda_toolkit_version = KILN_CUDA_TOOLKIT_VERSION;
    plan.manifest.cublas_version = KILN_CUBLAS_VERSION;
  }
  plan.compile_options = CompileOptionsString(options);

  auto t0 = Clock::now();
  std::unique_ptr<Graph> graph;
  KILN_ASSIGN_OR_RETURN(plan.model_sha256, HashModel(model_path));
  KILN_ASSIGN_OR_RETURN(graph, ImportOnnxFile(model_path));
  const int imported_nodes = CountComputeNodes(*graph);
  say(absl::StrFormat("import: %d nodes, %.1f MiB of weights (%.2f s)", imported_nodes,
                      MiB(ConstantBytes(*graph)), Seconds(t0)));

  // Optimize once on the symbolic graph: this fixes the signature and what buckets need.
  t0 = Clock::now();
  const Precision precision = *PrecisionFromName(options.precision);  // ValidateOptions checked
  KILN_ASSIGN_OR_RETURN(const Pipeline pipeline,
                        StandardPipeline(options.opt_level, options.target, precision));
  PassManagerOptions pmo;
  pmo.disabled = options.disabled_passes;
  FusionReport report;
  PrecisionReport precision_report;
  // fp16: numeric-safety runs the fused graph on valid inputs (compiler/calibration.h);
  // int8: gemm-precision does, to smooth each Linear.
  std::vector<absl::flat_hash_map<std::string, Tensor>> calibration;
  if (precision == Precision::kFp16 || precision == Precision::kInt8) {
    t0 = Clock::now();
    // A generation compile calibrates on prefill inputs (an empty past); a model that is
    // not a KV-cache decoder fails below with the reason.
    std::optional<compiler::KvSignature> kv_calib;
    if (!options.decode_context.empty())
      if (absl::StatusOr<compiler::KvSignature> sig = compiler::FindKvSignature(*graph); sig.ok())
        kv_calib = *std::move(sig);
    KILN_ASSIGN_OR_RETURN(
        calibration, compiler::CalibrationSets(*graph, options, kv_calib ? &*kv_calib : nullptr));
    say(absl::StrFormat("calibration: %d input sets (%s)", calibration.size(),
                        options.calib_dir.empty() ? "seeded random, the smallest profile shape"
                                                  : options.calib_dir));
    if (options.int8_activations == "static" && options.calib_dir.empty())
      say("warning: static int8 ranges from seeded random inputs (no --calib): give input "
          "sets like the ones the plan will see");
  }
  PassContext ctx;
  if (!calibration.empty()) ctx.calibration_inputs = &calibration;
  ctx.target = options.target;
  ctx.precision = precision;
  ctx.precision_report = &precision_report;
  ctx.kv_cache_f32 = !options.decode_context.empty();
  for (const auto& [group, value] : options.gemm_group_precision)
    ctx.gemm_group_precision[group] = *PrecisionFromName(value);
  if (!options.head_precision.empty())
    ctx.head_precision = *PrecisionFromName(options.head_precision);
  ctx.static_activations.enabled = options.int8_activations == "static";
  ctx.static_activations.observer = options.observer;
  ctx.static_activations.percentile = options.percentile;
  ctx.symbol_values = options.symbols;
  ctx.input_shapes = options.input_shapes;
  ctx.fusion_report = &report;
  std::vector<std::string> warnings;
  ctx.warnings = &warnings;
  {
    PassManager pm(pmo);
    KILN_RETURN_IF_ERROR(pm.Run(pipeline, *graph, ctx));
    KILN_RETURN_IF_ERROR(InferShapes(*graph, ctx));
  }
  for (const std::string& w : warnings) say(absl::StrCat("warning: ", w));
  if (absl::Status s = VerifyGraph(*graph); !s.ok())
    return absl::InternalError(
        absl::StrCat("optimized graph fails verification: ", std::string(s.message())));
  say(absl::StrFormat("-O%d: %d -> %d nodes (%.2f s); fused: %s", options.opt_level, imported_nodes,
                      CountComputeNodes(*graph), Seconds(t0), FusionLine(report)));

  // `--profile tokens=...` asks for a packed program, unless the model has a symbol of that
  // name itself; the model's buckets come from the rest of the profile.
  std::map<std::string, std::vector<int64_t>> profile = options.profile;
  std::vector<int64_t> packed_tokens;
  if (auto it = profile.find(compiler::kTokensSymbol); it != profile.end()) {
    bool model_symbol = false;
    for (const Node* in : graph->inputs())
      if (const auto& sh = in->output_info(0).type.shape)
        for (const Dim& d : *sh) model_symbol |= d.is_symbol() && d.symbol() == it->first;
    if (!model_symbol) {
      packed_tokens = SortedUnique(it->second);
      profile.erase(it);
    }
  }

  // A generation plan: the decoder's cache signature, whose past and total lengths kiln
  // binds itself (prefill: an empty past; decode: the capacities).
  std::optional<compiler::KvSignature> kv;
  std::set<std::string> derived;
  if (!options.decode_context.empty()) {
    KILN_ASSIGN_OR_RETURN(kv, compiler::FindKvSignature(*graph));
    // (After the pipeline:) the cpu has widened an fp16 or bf16 file's caches to f32
    // (widen-fp16, -O2 and above); a cuda plan keeps the model's 16-bit values; the
    // generation session pages f32 caches only.
    for (const PlanInPlace& pair : kv->caches) {
      const Node* past = graph->inputs()[pair.input];
      const DType dt = past->output_info(0).type.dtype;
      if (dt != DType::kF32)
        return absl::UnimplementedError(absl::StrCat(
            "--decode-context: the KV cache '", past->output_info(0).name, "' is ",
            std::string(DTypeName(dt)), "; generation plans page f32 caches only (",
            options.target == PlanTarget::kCuda
                ? "cuda keeps a 16-bit model's cache 16-bit: compile it for the cpu, which "
                  "computes a 16-bit file in f32, or export the model in f32 and compile "
                  "with --precision fp16)"
                : "the cpu computes fp16 and bf16 files in f32 at -O2 and above, not f64 "
                  "ones: export the model in f32 or 16 bits)"));
    }
    derived.insert(kv->past);
    if (!kv->total.empty()) derived.insert(kv->total);
    for (const std::string& sym : derived)
      if (profile.count(sym) || options.symbols.count(sym))
        return absl::InvalidArgumentError(absl::StrCat(
            "--decode-context: symbol '", sym,
            "' is the cache length, which kiln binds (an "
            "empty past for prefill, the capacities for decode); do not give it a value"));
    say(absl::StrFormat("generation: %d cached K/V, past '%s', decode capacities %s",
                        kv->caches.size(), kv->past, absl::StrJoin(options.decode_context, ",")));
  }

  // Signature, and the symbols the profile must bind.
  std::set<std::string> symbols;
  std::vector<std::string> input_names;
  for (const Node* in : graph->inputs()) {
    KILN_ASSIGN_OR_RETURN(PlanTensorSig sig, InputSig(*in));
    for (const Dim& d : sig.dims) {
      const std::optional<std::set<std::string>> syms = SymbolsOfDim(d);
      if (!syms)
        return absl::InvalidArgumentError(absl::StrCat(
            "graph input '", sig.name, "' has symbolic dim '", d.ToString(), "' (",
            in->output_info(0).type.ToString(),
            "), which is not an expression kiln can bind (symbols, integers, + - * and / by "
            "an integer)"));
      for (const std::string& sym : *syms) {
        if (derived.count(sym)) continue;
        if (!profile.count(sym))
          return absl::InvalidArgumentError(absl::StrCat(
              "graph input '", sig.name, "' has symbolic dim '", sym, "' (",
              in->output_info(0).type.ToString(),
              ") that nothing binds: give it a value or a profile (kiln compile --shape ", sym,
              "=N or --profile ", sym, "=a:b; kiln.compile(symbols={'", sym, "': N}) or profile={'",
              sym, "': [a, b]})"));
        symbols.insert(sym);
      }
    }
    input_names.push_back(sig.name);
    plan.inputs.push_back(std::move(sig));
  }
  for (const auto& [sym, values] : profile)
    if (!symbols.count(sym))
      return absl::InvalidArgumentError(
          absl::StrCat("--profile names symbol '", sym, "', which no graph input has (",
                       symbols.empty() ? "the inputs have no symbolic dims"
                                       : absl::StrCat("symbols: ", absl::StrJoin(symbols, ", ")),
                       ")"));
  for (const GraphOutput& out : graph->outputs()) plan.outputs.push_back(OutputSig(out));
  plan.paddable_symbols = compiler::PaddableSymbols(plan, *graph, symbols);
  // A generation plan's prefill gives the logits at each sequence's last token only
  // (RewriteForLastToken, per bucket below): [batch, 1, vocab].
  const int logits_output = kv ? compiler::LogitsOutput(*graph) : -1;
  const bool last_token_logits = logits_output >= 0 && options.prefill_logits == "last";
  if (last_token_logits) {
    std::vector<Dim>& dims = plan.outputs[logits_output].dims;
    if (dims.size() != 3)
      return absl::InvalidArgumentError(
          absl::StrCat("--decode-context: output 'logits' has ", dims.size(),
                       " dims, not [batch, sequence, vocab] (or compile with --prefill-logits "
                       "all)"));
    dims[1] = Dim::Known(1);
  }

  // One bucket per profile point (generation plans: prefill with an empty past, then one
  // decode bucket per capacity and profile point without the sequence): specialize,
  // re-optimize, lower.
  std::vector<BucketSpec> buckets;
  for (std::map<std::string, int64_t>& point : Buckets(profile)) {
    BucketSpec spec;
    if (kv) {
      point[kv->past] = 0;
      if (!kv->total.empty()) {
        if (point.count(kv->sequence))
          point[kv->total] = point[kv->sequence];
        else if (options.symbols.count(kv->sequence))
          point[kv->total] = options.symbols.at(kv->sequence);
      }
    }
    spec.specialize = spec.stored = std::move(point);
    buckets.push_back(std::move(spec));
  }
  compiler::KvPaging paging;
  if (kv) {
    std::map<std::string, std::vector<int64_t>> decode_profile = profile;
    decode_profile.erase(kv->sequence);
    const std::vector<int64_t> capacities = SortedUnique(options.decode_context);
    int64_t max_batch = 0;
    if (kv->batch.empty()) {
      max_batch = plan.inputs[kv->input_ids].dims[0].value();
    } else if (auto it = profile.find(kv->batch); it != profile.end()) {
      max_batch = *std::max_element(it->second.begin(), it->second.end());
    } else if (auto sym = options.symbols.find(kv->batch); sym != options.symbols.end()) {
      max_batch = sym->second;
    }
    if (max_batch <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("--decode-context: the batch '", kv->batch, "' has no value"));
    KILN_ASSIGN_OR_RETURN(paging,
                          compiler::ChooseKvPaging(capacities, max_batch, options.kv_block_size,
                                                   options.kv_cache_blocks));
    for (int64_t capacity : capacities)
      for (std::map<std::string, int64_t>& point : Buckets(decode_profile)) {
        BucketSpec spec;
        spec.program = PlanProgram::kDecode;
        spec.capacity = capacity;
        point[kv->sequence] = 1;
        spec.specialize = spec.stored = point;
        spec.specialize[kv->past] = capacity - 1;
        spec.stored[kv->past] = capacity;
        if (!kv->total.empty()) spec.specialize[kv->total] = spec.stored[kv->total] = capacity;
        spec.stored[compiler::kBlocksSymbol] = capacity / paging.block_size;
        buckets.push_back(std::move(spec));
      }
    KILN_ASSIGN_OR_RETURN(PlanSignature sig, DecodeSignature(plan, *kv, paging));
    plan.signatures.push_back(std::move(sig));
    say(absl::StrFormat("generation: paged cache, blocks of %d slots, %d blocks per K/V pool",
                        paging.block_size, paging.blocks));
  }
  // A packed program (docs/packing.md): the encoder over the real tokens of a batch, one
  // bucket per token count and sequence count (the batch profile's values). Where the proof
  // fails the plan keeps padded execution only, and the progress says why.
  std::unique_ptr<Graph> packed;
  if (!packed_tokens.empty()) {
    absl::StatusOr<compiler::PackedSignature> psig = compiler::FindPackedSignature(*graph);
    absl::StatusOr<std::unique_ptr<Graph>> pg =
        psig.ok() ? compiler::PackGraph(*graph, *psig)
                  : absl::StatusOr<std::unique_ptr<Graph>>(psig.status());
    absl::Status s = pg.status();
    PassContext strict = ctx;  // a contradiction in the packed graph is kiln's, not the file's
    strict.warnings = nullptr;
    if (s.ok()) s = InferShapes(**pg, strict);
    if (s.ok()) s = compiler::CheckPacked(**pg);
    if (s.ok() && !VerifyGraph(**pg).ok())
      s = absl::InternalError(absl::StrCat("the packed graph fails verification: ",
                                           std::string(VerifyGraph(**pg).message())));
    if (!s.ok() && s.code() != absl::StatusCode::kFailedPrecondition) return s;
    if (!s.ok()) {
      say(absl::StrCat("warning: not packed (padded execution only): ", std::string(s.message())));
    } else {
      packed = *std::move(pg);
      PlanSignature sig;
      sig.program = PlanProgram::kPacked;
      for (const Node* in : packed->inputs()) {
        KILN_ASSIGN_OR_RETURN(PlanTensorSig in_sig, InputSig(*in));
        sig.inputs.push_back(std::move(in_sig));
      }
      for (const GraphOutput& out : packed->outputs()) sig.outputs.push_back(OutputSig(out));
      // Zero padding is invisible by construction: extra tokens belong to no sequence,
      // extra sequences are empty.
      sig.paddable_symbols = {compiler::kSequencesSymbol, compiler::kTokensSymbol};
      plan.signatures.push_back(std::move(sig));
      std::vector<int64_t> seqs = {psig->fixed_batch};
      if (!psig->batch.empty()) {
        auto it = profile.find(psig->batch);
        if (it == profile.end())
          return KILN_INTERNAL("packing: batch symbol '%s' has no profile", psig->batch);
        seqs = SortedUnique(it->second);
      }
      for (int64_t t : packed_tokens)
        for (int64_t n : seqs) {
          if (n > t && n != seqs.front()) continue;  // more sequences than tokens: all empty
          BucketSpec spec;
          spec.program = PlanProgram::kPacked;
          spec.specialize =
              spec.stored = {{compiler::kTokensSymbol, t}, {compiler::kSequencesSymbol, n}};
          spec.source = packed.get();
          buckets.push_back(std::move(spec));
        }
      say(absl::StrFormat("packing: %d packed buckets (tokens %s x sequences %s)",
                          static_cast<int>(std::count_if(buckets.begin(), buckets.end(),
                                                         [](const BucketSpec& b) {
                                                           return b.program == PlanProgram::kPacked;
                                                         })),
                          absl::StrJoin(packed_tokens, ","), absl::StrJoin(seqs, ",")));
    }
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    t0 = Clock::now();
    const std::string label =
        absl::StrCat(buckets[b].program == PlanProgram::kModel
                         ? ""
                         : absl::StrCat(std::string(PlanProgramName(buckets[b].program)), " "),
                     BindingsText(buckets[b].stored));
    const std::string where = label.empty() ? "" : absl::StrCat("bucket ", label, ": ");
    const Graph& source = buckets[b].source ? *buckets[b].source : *graph;
    std::unique_ptr<Graph> bg = source.Clone();
    PassContext bctx;
    bctx.target = options.target;
    bctx.precision = precision;
    bctx.precision_report = &precision_report;  // a fusion only a bucket's shapes allow
    bctx.gemm_group_precision = ctx.gemm_group_precision;
    bctx.head_precision = ctx.head_precision;
    bctx.kv_cache_f32 = ctx.kv_cache_f32;
    bctx.symbol_values = options.symbols;
    for (const auto& [sym, v] : buckets[b].specialize) bctx.symbol_values[sym] = v;
    bctx.input_shapes = options.input_shapes;
    PassManager pm(pmo);
    absl::Status s = pm.Run(pipeline, *bg, bctx);
    if (s.ok()) s = InferShapes(*bg, bctx);
    if (s.ok() && buckets[b].program == PlanProgram::kDecode) {
      s = compiler::RewriteForDecode(*bg, *kv, buckets[b].capacity, paging);
      if (s.ok()) s = InferShapes(*bg, bctx);
    }
    std::string last_token;
    if (s.ok() && last_token_logits && buckets[b].program == PlanProgram::kModel) {
      absl::StatusOr<compiler::LastTokenRewrite> r = compiler::RewriteForLastToken(*bg, *kv);
      s = r.status();
      if (s.ok()) s = InferShapes(*bg, bctx);
      if (r.ok())
        last_token = r->nodes == 0
                         ? ", logits: the last row of the full logits (nothing before them "
                           "runs per row)"
                         : absl::StrFormat(", logits: %d nodes on the last token", r->nodes);
    }
    if (s.ok() && !VerifyGraph(*bg).ok())
      s = absl::InternalError(absl::StrCat("the specialized graph fails verification: ",
                                           std::string(VerifyGraph(*bg).message())));
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, std::string(s.message())));
    if (bg->outputs().size() != source.outputs().size())
      return KILN_INTERNAL("%sthe specialized graph has %d outputs, the symbolic one %d", where,
                           bg->outputs().size(), source.outputs().size());
    std::vector<std::string> bucket_inputs = input_names;
    if (buckets[b].program == PlanProgram::kDecode)
      bucket_inputs.push_back(compiler::kBlockTableInput);
    if (buckets[b].source) {
      bucket_inputs.clear();
      for (const Node* in : source.inputs()) bucket_inputs.push_back(in->output_info(0).name);
    }
    absl::StatusOr<PlanBucket> lowered =
        compiler::LowerBucket(*bg, bucket_inputs,
                              {options.target, /*optimized_kernels=*/options.opt_level > 0,
                               options.allow_tf32, options.cuda_flash_attention},
                              weights);
    if (!lowered.ok())
      return absl::Status(lowered.status().code(),
                          absl::StrCat(where, std::string(lowered.status().message())));
    lowered->bindings = buckets[b].stored;
    lowered->program = buckets[b].program;
    if (buckets[b].program == PlanProgram::kDecode) lowered->in_place = kv->caches;
    say(absl::StrFormat(
        "bucket %d (%d of %d)%s: %d steps, arena %.2f MiB (no reuse %.2f MiB)%s "
        "(%.2f s)",
        b, b + 1, buckets.size(), label.empty() ? "" : " " + label, lowered->steps.size(),
        MiB(lowered->arena_bytes), MiB(lowered->no_reuse_bytes), last_token, Seconds(t0)));
    plan.buckets.push_back(*std::move(lowered));
  }
  say(absl::StrFormat("weights: %d unique constants, %.1f MiB", weights.num_unique(),
                      MiB(weights.size())));
  for (const PrecisionNote& n : precision_report.notes())
    plan.precision_notes.push_back({n.op, n.precision, n.reason, n.nodes, n.x_absmax});
  if (precision != Precision::kFp32 || !precision_report.notes().empty())
    say(absl::StrCat("precision ", std::string(PrecisionName(precision)), ": ",
                     absl::StrJoin(PrecisionSummary(precision_report.notes()), "; ")));
  return plan;
}

}  // namespace

absl::StatusOr<Plan> Compile(const std::string& model_path, const CompileOptions& options) {
  compiler::WeightTable weights;
  KILN_ASSIGN_OR_RETURN(Plan plan, CompileWithoutWeights(model_path, options, weights));
  plan.weights = weights.Build();
  return plan;
}

absl::StatusOr<PlanInfo> CompileToFile(const std::string& model_path, const std::string& plan_path,
                                       const CompileOptions& options) {
  compiler::WeightTable weights;
  KILN_ASSIGN_OR_RETURN(const Plan plan, CompileWithoutWeights(model_path, options, weights));
  KILN_RETURN_IF_ERROR(
      WritePlanFile(plan, static_cast<uint64_t>(weights.size()), weights.Pieces(), plan_path));
  return ReadPlanInfo(plan_path);
}

}  // namespace kiln
