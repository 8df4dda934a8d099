// `kiln run MODEL.onnx|PLAN.kiln ...`: binds inputs (from .npy files or seeded random
// data) and runs an ONNX model on the reference executor, or a compiled plan on the plan
// executor (kiln::Executor, optionally writing a Chrome trace); prints a summary of every
// output and the wall time, and optionally writes each output as OUTDIR/<output name>.npy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/kiln.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/reference/executor.h"
#include "tools/cli.h"
#include "tools/plan_util.h"
#include "tools/run_inputs.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln run MODEL.onnx [options]\n"
    "       kiln run PLAN.kiln [options]\n"
    "\n"
    "Runs MODEL.onnx on kiln's reference executor, or a plan written by `kiln compile` on\n"
    "the plan executor, and prints, for each output, its dtype, shape, min, max and mean,\n"
    "then the wall time. A plan is recognized by its magic bytes (or a .kiln name).\n"
    "\n"
    "options:\n"
    "  --input NAME=FILE.npy    bind graph input NAME to a NumPy file (repeatable)\n"
    "  --shape SPEC             concrete dims for random inputs (repeatable; SPEC is a\n"
    "                           comma-separated list of NAME=D0xD1... for a graph input, or\n"
    "                           SYMBOL=N for a symbolic dim, e.g. --shape batch=1,sequence=128;\n"
    "                           for a plan, symbols of its input signature)\n"
    "  --random-inputs          generate inputs not given with --input (seeded)\n"
    "  --seed N                 seed for --random-inputs (default 0)\n"
    "  --vocab N                integer inputs are drawn from [0, N) (default 100)\n"
    "  --int-range NAME=LO:HI   integer input NAME is drawn from [LO, HI) instead (repeatable).\n"
    "                           Defaults: inputs whose name contains 'mask' (any case) are\n"
    "                           all 1 (1.0, true) whatever their dtype, 'token_type' or\n"
    "                           'segment' inputs are all 0\n"
    "  --output-dir DIR         write each output to DIR/<output name>.npy\n"
    "  -O0 | -O1 | -O2          ONNX models only: optimize the graph before running it\n"
    "                           (default -O0): the pipeline of `kiln opt`, specialized to the\n"
    "                           bound inputs' shapes; outputs must not change beyond float\n"
    "                           rounding, except that -O2 runs a quantized model's MatMuls\n"
    "                           on its dequantized weights (docs/precision.md). A plan is\n"
    "                           already optimized: -O is refused\n"
    "%s%s"
    "  --trace FILE.json        plans only: write a Chrome trace (chrome://tracing, Perfetto)\n"
    "                           with one event per kernel call, args.provenance = its ONNX nodes\n"
    "  --quiet                  print only the time line\n"
    "\n"
    "A plan runs in the smallest bucket that fits the inputs (padding paddable symbols);\n"
    "inputs outside every bucket are an error (exit 2) naming the input.\n";

struct Options {
  std::string model;
  InputOptions in;
  std::string output_dir;
  bool quiet = false;
  int opt_level = -1;  // -1: not given (-O0 for ONNX models; refused for plans)
  ExecutorOptions exec;
  bool exec_flags = false;  // an executor flag was given
  RunOptions run;
  std::string trace_file;
};

int RunOnnx(Options& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto imported = ImportOnnxFile(o.model);
  if (!imported.ok()) return Fail(imported.status());
  Graph& g = **imported;
  const auto t1 = Clock::now();
  // A feed for an initializer the model also declares as a graph input overrides it (the
  // ONNX IR's rule): it becomes an input of this run.
  for (const auto& [name, file] : o.in.input_files)
    if (g.overridable_initializers().count(name))
      if (absl::Status s = g.PromoteToInput(name); !s.ok()) return Fail(s);
  std::vector<InputDecl> decls;
  for (const Node* in : g.inputs())
    decls.push_back({in->output_info(0).name, in->output_info(0).type});
  auto bound = BindInputs(decls, &o.in);
  if (!bound.ok()) return Fail(bound.status());
  absl::flat_hash_map<std::string, Tensor> feeds;
  for (size_t i = 0; i < decls.size(); ++i) feeds[decls[i].name] = (*bound)[i];

  std::string opt_line;
  if (o.opt_level > 0) {
    const auto o0 = Clock::now();
    PassContext ctx;
    for (const auto& [name, t] : feeds) ctx.input_shapes[name] = t.dims();
    auto pipeline = StandardPipeline(o.opt_level);
    if (!pipeline.ok()) return Fail(pipeline.status());
    const int before = CountComputeNodes(g);
    std::vector<std::string> warnings;
    ctx.warnings = &warnings;
    PassManager pm;
    if (absl::Status s = pm.Run(*pipeline, g, ctx); !s.ok()) return Fail(s);
    for (const std::string& w : warnings) std::fprintf(stderr, "kiln: warning: %s\n", w.c_str());
    opt_line = absl::StrFormat(", optimize -O%d %.1f ms (%d -> %d nodes)", o.opt_level,
                               std::chrono::duration<double, std::milli>(Clock::now() - o0).count(),
                               before, CountComputeNodes(g));
  }
  const auto t2 = Clock::now();
  auto outputs = RunReference(g, feeds);
  if (!outputs.ok()) return Fail(outputs.status());
  const auto t3 = Clock::now();

  std::vector<std::string> names;
  for (const auto& out : g.outputs()) names.push_back(out.name);
  if (!o.quiet)
    for (size_t i = 0; i < outputs->size(); ++i) PrintOutputSummary(names[i], (*outputs)[i]);
  if (!o.output_dir.empty())
    if (absl::Status s = WriteOutputs(o.output_dir, names, *outputs); !s.ok()) return Fail(s);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("import %.1f ms%s, run %.1f ms (reference executor, %zu outputs)\n", ms(t1 - t0),
              opt_line.c_str(), ms(t3 - t2), outputs->size());
  return kExitOk;
}

int RunPlan(Options& o) {
  using Clock = std::chrono::steady_clock;
  if (o.opt_level >= 0)
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("run: -O", o.opt_level, " applies to ONNX models; '", o.model,
                     "' is a compiled plan (choose -O at `kiln compile`)")));
  const auto t0 = Clock::now();
  auto loaded = LoadPlanAndExecutor(o.model, o.exec);
  if (!loaded.ok()) return Fail(loaded.status());
  const Executor& exec = *loaded->executor;
  const Plan& plan = exec.plan();
  const auto t1 = Clock::now();

  if (o.run.program == PlanProgram::kPacked && !HasProgram(plan, PlanProgram::kPacked))
    return Fail(absl::InvalidArgumentError(
        "--program packed: the plan has no packed program (compile an encoder with --profile "
        "tokens=... to get one)"));
  for (const PlanBucket& b : plan.buckets)  // a packed program's random inputs fill a bucket
    if (o.run.program == PlanProgram::kPacked && b.program == o.run.program) {
      o.in.default_symbols = b.bindings;
      break;
    }
  std::vector<InputDecl> decls = PlanInputDecls(plan, o.run.program);
  auto inputs = BindInputs(decls, &o.in);
  if (!inputs.ok()) return Fail(inputs.status());
  std::vector<TensorView> views = ViewsOf(*inputs);
  RunStats stats;
  stats.collect_trace = !o.trace_file.empty();
  const auto t2 = Clock::now();
  auto outputs = exec.Run(views, &stats, o.run);
  if (!outputs.ok()) return Fail(outputs.status());
  const auto t3 = Clock::now();

  std::vector<std::string> names;
  for (const PlanTensorSig& sig : IoOf(plan, o.run.program).outputs) names.push_back(sig.name);
  if (!o.quiet)
    for (size_t i = 0; i < outputs->size(); ++i) PrintOutputSummary(names[i], (*outputs)[i]);
  if (!o.output_dir.empty())
    if (absl::Status s = WriteOutputs(o.output_dir, names, *outputs); !s.ok()) return Fail(s);
  if (!o.trace_file.empty())
    if (absl::Status s = WriteChromeTrace(o.trace_file, plan, stats); !s.ok()) return Fail(s);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf(
      "load %.1f ms, run %.1f ms (%s executor, bucket %d [%s]%s, %zu outputs)\n", ms(t1 - t0),
      ms(t3 - t2), std::string(PlanTargetName(plan.target)).c_str(), stats.bucket,
      BucketLabel(plan, stats.bucket).empty() ? "static" : BucketLabel(plan, stats.bucket).c_str(),
      stats.packed && o.run.program == PlanProgram::kModel ? ", packed"
      : stats.padded                                       ? ", padded"
                                                           : "",
      outputs->size());
  return kExitOk;
}

}  // namespace

int RunRun(int argc, char** argv) {
  Args args(argc, argv, 2);
  Options o;
  std::string v;
  absl::Status flag_error;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::printf(kHelp, kExecutorFlagsHelp, kRunFlagsHelp);
      return kExitOk;
    }
    if (ParseInputFlag(args, &o.in, &flag_error)) {
      if (!flag_error.ok()) return Fail(flag_error);
      continue;
    }
    if (args.Flag("--quiet")) {
      o.quiet = true;
      continue;
    }
    if (args.Flag("-O0")) {
      o.opt_level = 0;
      continue;
    }
    if (args.Flag("-O1")) {
      o.opt_level = 1;
      continue;
    }
    if (args.Flag("-O2")) {
      o.opt_level = 2;
      continue;
    }
    if (args.Option("--output-dir", &v)) {
      o.output_dir = v;
      continue;
    }
    if (args.Option("--trace", &v)) {
      o.trace_file = v;
      continue;
    }
    if (absl::Status e; ParseRunFlag(args, &o.run, &e, &o.exec_flags)) {
      if (!e.ok()) return Fail(e);
      continue;
    }
    if (absl::Status e; ParseExecutorFlag(args, &o.exec, &e, &o.exec_flags)) {
      if (!e.ok()) return Fail(e);
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (o.model.empty() && args.Positional(&o.model)) continue;
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("run: unexpected argument '", args.Next(), "' (see kiln run --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (o.model.empty())
    return Fail(absl::InvalidArgumentError("run: no model given (see kiln run --help)"));
  if (LooksLikePlan(o.model)) return RunPlan(o);
  if (o.exec_flags || !o.trace_file.empty())
    return Fail(absl::InvalidArgumentError(
        "run: --threads, --cuda-device, --no-cuda-graph and --trace apply to compiled plans "
        "(see kiln compile)"));
  return RunOnnx(o);
}

}  // namespace kiln::cli
