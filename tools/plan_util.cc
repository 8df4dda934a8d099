// Plan-side helpers shared by the CLI commands (plan_util.h).
#include "tools/plan_util.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/support/status.h"
#include "tools/json.h"

namespace kiln::cli {

absl::Status NamePlan(const absl::Status& s, const std::string& path) {
  if (s.ok() || absl::StrContains(std::string(s.message()), path)) return s;
  return absl::Status(s.code(), absl::StrCat("plan '", path, "': ", std::string(s.message())));
}

absl::StatusOr<PlanInfo> ReadPlanInfoNamed(const std::string& path) {
  auto info = ReadPlanInfo(path);
  if (!info.ok()) return NamePlan(info.status(), path);
  return info;
}

absl::StatusOr<LoadedPlan> LoadPlanAndExecutor(const std::string& path,
                                               const ExecutorOptions& options) {
  auto plan = LoadPlanFile(path);
  if (!plan.ok()) return NamePlan(plan.status(), path);
  auto exec = Executor::Create(std::make_shared<const Plan>(*std::move(plan)), options);
  if (!exec.ok()) return NamePlan(exec.status(), path);
  LoadedPlan out;
  out.executor = *std::move(exec);
  return out;
}

const char kExecutorFlagsHelp[] =
    "  --threads N              cpu plans: kernel threads (default: one per core)\n"
    "  --cuda-device N          cuda plans: the GPU to run on (default 0)\n"
    "  --no-cuda-graph          cuda plans: launch each step instead of replaying the\n"
    "                           bucket's captured CUDA graph (same results, bit for bit)\n";

const char kRunFlagsHelp[] =
    "  --no-pack                plans with a packed program (compiled with --profile\n"
    "                           tokens=...): run the padded buckets even where the batch\n"
    "                           could be packed (for comparison)\n"
    "  --program model|packed   which program the inputs are for (default model); packed\n"
    "                           takes the packed signature (`kiln plan-info` lists it):\n"
    "                           token ids [tokens], sequence_lengths [sequences]\n";

bool ParseRunFlag(Args& args, RunOptions* options, absl::Status* error, bool* given) {
  std::string v;
  if (args.Flag("--no-pack")) {
    options->pack = false;
    *given = true;
    return true;
  }
  if (args.Option("--program", &v)) {
    if (v == "model")
      options->program = PlanProgram::kModel;
    else if (v == "packed")
      options->program = PlanProgram::kPacked;
    else
      *error = absl::InvalidArgumentError(absl::StrCat(
          "--program: '", v, "' is not a program you can run directly (model or packed)"));
    *given = true;
    return true;
  }
  return false;
}

bool ParseExecutorFlag(Args& args, ExecutorOptions* options, absl::Status* error, bool* given) {
  std::string v;
  if (args.Option("--threads", &v)) {
    if (!absl::SimpleAtoi(v, &options->num_threads) || options->num_threads < 1 ||
        options->num_threads > cpu::kMaxThreads)
      *error = absl::InvalidArgumentError(
          absl::StrCat("--threads: bad value '", v, "' (1..", cpu::kMaxThreads, ")"));
    *given = true;
    return true;
  }
  if (args.Option("--cuda-device", &v)) {
    if (!absl::SimpleAtoi(v, &options->cuda_device) || options->cuda_device < 0)
      *error = absl::InvalidArgumentError(absl::StrCat("--cuda-device: bad value '", v, "'"));
    *given = true;
    return true;
  }
  if (args.Flag("--no-cuda-graph")) {
    options->cuda_graphs = false;
    *given = true;
    return true;
  }
  return false;
}

std::vector<InputDecl> PlanInputDecls(const Plan& plan, PlanProgram program) {
  std::vector<InputDecl> decls;
  for (const PlanTensorSig& sig : IoOf(plan, program).inputs) {
    Type t;
    t.dtype = sig.dtype;
    t.shape = sig.dims;
    decls.push_back({sig.name, t});
  }
  return decls;
}

std::vector<TensorView> ViewsOf(const std::vector<Tensor>& tensors) {
  std::vector<TensorView> views;
  for (const Tensor& t : tensors) views.push_back({t.dtype(), t.dims(), t.raw()});
  return views;
}

std::string BucketLabel(const Plan& plan, int index) {
  if (index < 0 || index >= static_cast<int>(plan.buckets.size())) return "";
  std::vector<std::string> parts;
  for (const auto& [sym, v] : plan.buckets[index].bindings)
    parts.push_back(absl::StrCat(sym, "=", v));
  const std::string label = absl::StrJoin(parts, ",");
  return plan.buckets[index].program == PlanProgram::kModel
             ? label
             : absl::StrCat(std::string(PlanProgramName(plan.buckets[index].program)), " ", label);
}

std::string SigString(const PlanTensorSig& sig) {
  Type t;
  t.dtype = sig.dtype;
  t.shape = sig.dims;
  return absl::StrCat(sig.name, " ", t.ToString());
}

std::string HexSha256(const std::array<uint8_t, 32>& h) {
  std::string s;
  for (uint8_t b : h) absl::StrAppend(&s, absl::StrFormat("%02x", b));
  return s;
}

absl::Status WriteChromeTrace(const std::string& path, const Plan& plan, const RunStats& stats) {
  JsonWriter w;
  w.BeginObject();
  w.Key("displayTimeUnit").String("ms");
  w.Key("otherData").BeginObject();
  w.Key("bucket").Int(stats.bucket);
  w.Key("bindings").String(BucketLabel(plan, stats.bucket));
  w.Key("padded").Bool(stats.padded);
  w.EndObject();
  w.Key("traceEvents").BeginArray();
  int step = 0;
  for (const TraceEvent& e : stats.trace) {
    w.BeginObject();
    w.Key("name").String(e.kernel);
    w.Key("cat").String("kernel");
    w.Key("ph").String("X");
    w.Key("ts").Double(static_cast<double>(e.start_ns) / 1e3);
    w.Key("dur").Double(static_cast<double>(e.duration_ns) / 1e3);
    w.Key("pid").Int(1);
    w.Key("tid").Int(1);
    w.Key("args").BeginObject();
    w.Key("step").Int(step++);
    if (!e.impl.empty()) w.Key("impl").String(e.impl);
    w.Key("provenance").BeginArray();
    for (const std::string& p : e.provenance) w.String(p);
    w.EndArray();
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::ofstream f(path, std::ios::trunc);
  if (!(f << w.str() << "\n"))
    return absl::PermissionDeniedError(absl::StrCat("cannot write trace '", path, "'"));
  return absl::OkStatus();
}

}  // namespace kiln::cli
