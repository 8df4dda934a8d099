// `kiln bench PLAN.kiln ...`: load time (LoadPlanFile + Executor::Create), one cold run,
// warm-up runs, then timed runs of the plan executor on fixed inputs; prints percentiles,
// throughput and peak RSS, or exactly one JSON object on stdout with --json.
// Limits: one caller thread (kernels use --threads); outputs are preallocated once so the
// timed loop measures Run only; percentile p is the sorted sample at round(p * (n-1)).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/kiln.h"
#include "kiln/support/status.h"
#include "tools/cli.h"
#include "tools/json.h"
#include "tools/plan_util.h"
#include "tools/run_inputs.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln bench PLAN.kiln [options]\n"
    "\n"
    "Measures a compiled plan on the plan executor: load time (LoadPlanFile +\n"
    "Executor::Create), the first (cold) run, then --warmup untimed and --runs timed runs\n"
    "on the same inputs. Prints p50/p90/min/mean/max run time in ms, throughput and peak RSS.\n"
    "\n"
    "options:\n"
    "  --shape SPEC             input dims: NAME=D0xD1... or SYMBOL=N, comma-separated\n"
    "                           (repeatable), e.g. --shape batch=8,sequence=128; symbols\n"
    "                           not given take their value in the plan's first bucket\n"
    "  --input NAME=FILE.npy    bind an input to a NumPy file (repeatable); every other\n"
    "                           input is random (--random-inputs is implied)\n"
    "  --seed N, --vocab N, --int-range NAME=LO:HI   random inputs, as for `kiln run`\n"
    "  --warmup N               untimed runs after the cold run (default 10)\n"
    "  --runs N                 timed runs (default 50, at least 1)\n"
    "  --steps                  after the timed runs, --runs more with a per-step trace:\n"
    "                           per kernel, its steps and median ms per run, and the\n"
    "                           median time of a run spent outside steps (staging,\n"
    "                           the executor's loop, the trace's own bookkeeping)\n"
    "%s%s"
    "  --json                   print exactly one JSON object on stdout and nothing else:\n"
    "                           p50_ms, p90_ms, min_ms, mean_ms, max_ms, throughput_per_s,\n"
    "                           peak_rss_mb, load_ms, first_run_ms, warmup, runs, threads,\n"
    "                           cpu_isa (cpu plans), impls (kernel -> implementation ->\n"
    "                           steps, e.g. linear -> kiln:avx2:4x24 -> 36), bucket,\n"
    "                           bucket_bindings, padded, packed (the batch ran packed:\n"
    "                           bucket is the last packed call's), program, batch,\n"
    "                           inputs (name -> dims);\n"
    "                           with --steps also steps (kernel -> {count, median_ms})\n"
    "                           and between_steps_ms\n"
    "\n"
    "throughput_per_s is batch rows per second: batch / mean run time in seconds, where\n"
    "batch is dim 0 of the first graph input (1 for a scalar input). Percentile p is the\n"
    "sorted run time at index round(p * (runs-1)). peak_rss_mb is the\n"
    "process's peak resident set (getrusage ru_maxrss) in MiB.\n"
    "\n"
    "environment (cpu plans; also read by `kiln run` and the library):\n"
    "  KILN_CPU_ISA=avx2|avx512|scalar   cap the instruction set of every kernel, kiln's\n"
    "                           and oneDNN's (an AVX-512 machine runs as an AVX2 one would)\n"
    "  KILN_GEMM=kiln|onednn    force the Linear GEMM backend (default: the measured\n"
    "                           choice per ISA and batch rows, docs/benchmarks.md)\n";

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The sorted sample at index round(p/100 * (n-1)) (nearest rank on the sorted samples;
// the same definition as bench/benchlib.py's stats(), so the two are comparable).
double Percentile(const std::vector<double>& sorted, double p) {
  const size_t n = sorted.size();
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(n - 1) + 0.5);
  return sorted[std::min(n - 1, i)];
}

}  // namespace

int RunBench(int argc, char** argv) {
  Args args(argc, argv, 2);
  std::string plan_path, v;
  InputOptions in;
  in.random_inputs = true;
  int warmup = 10, runs = 50;
  ExecutorOptions exec_options;
  RunOptions run_options;
  bool exec_flags = false;
  bool json = false, per_step = false;
  absl::Status flag_error;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::printf(kHelp, kExecutorFlagsHelp, kRunFlagsHelp);
      return kExitOk;
    }
    if (ParseInputFlag(args, &in, &flag_error)) {
      if (!flag_error.ok()) return Fail(flag_error);
      continue;
    }
    if (args.Flag("--json")) {
      json = true;
      continue;
    }
    if (args.Flag("--steps")) {
      per_step = true;
      continue;
    }
    if (args.Option("--warmup", &v)) {
      if (!absl::SimpleAtoi(v, &warmup) || warmup < 0)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--warmup: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--runs", &v)) {
      if (!absl::SimpleAtoi(v, &runs) || runs < 1)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--runs: bad value '", v, "'")));
      continue;
    }
    if (absl::Status e; ParseRunFlag(args, &run_options, &e, &exec_flags)) {
      if (!e.ok()) return Fail(e);
      continue;
    }
    if (absl::Status e; ParseExecutorFlag(args, &exec_options, &e, &exec_flags)) {
      if (!e.ok()) return Fail(e);
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (plan_path.empty() && args.Positional(&plan_path)) continue;
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("bench: unexpected argument '", args.Next(), "' (see kiln bench --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (plan_path.empty())
    return Fail(absl::InvalidArgumentError("bench: no plan given (see kiln bench --help)"));

  const auto t0 = Clock::now();
  auto loaded = LoadPlanAndExecutor(plan_path, exec_options);
  if (!loaded.ok()) return Fail(loaded.status());
  const double load_ms = Ms(Clock::now() - t0);
  const Executor& exec = *loaded->executor;
  const Plan& plan = exec.plan();

  if (run_options.program == PlanProgram::kPacked && !HasProgram(plan, PlanProgram::kPacked))
    return Fail(absl::InvalidArgumentError(
        "--program packed: the plan has no packed program (compile an encoder with --profile "
        "tokens=... to get one)"));
  for (const PlanBucket& b : plan.buckets)
    if (b.program == run_options.program) {
      in.default_symbols = b.bindings;
      break;
    }
  const PlanIo io = IoOf(plan, run_options.program);
  auto inputs = BindInputs(PlanInputDecls(plan, run_options.program), &in);
  if (!inputs.ok()) return Fail(inputs.status());
  std::vector<TensorView> views = ViewsOf(*inputs);
  std::vector<std::vector<int64_t>> input_dims;
  for (const Tensor& t : *inputs) input_dims.push_back(t.dims());
  auto out_dims = exec.OutputDims(input_dims, run_options.program);
  if (!out_dims.ok()) return Fail(out_dims.status());
  std::vector<Tensor> outputs;
  std::vector<MutableTensorView> out_views;
  for (size_t i = 0; i < out_dims->size(); ++i) {
    auto t = Tensor::Create(io.outputs[i].dtype, (*out_dims)[i]);
    if (!t.ok()) return Fail(t.status());
    outputs.push_back(*std::move(t));
  }
  for (Tensor& t : outputs) out_views.push_back({t.dtype(), t.dims(), t.raw()});

  RunStats stats;
  stats.collect_trace = true;  // the cold run says which implementation ran each step
  const auto c0 = Clock::now();
  if (absl::Status s = exec.Run(views, out_views, &stats, run_options); !s.ok()) return Fail(s);
  const double first_run_ms = Ms(Clock::now() - c0);
  for (int i = 0; i < warmup; ++i)
    if (absl::Status s = exec.Run(views, out_views, nullptr, run_options); !s.ok()) return Fail(s);
  std::vector<double> times;
  times.reserve(runs);
  for (int i = 0; i < runs; ++i) {
    const auto r0 = Clock::now();
    if (absl::Status s = exec.Run(views, out_views, nullptr, run_options); !s.ok()) return Fail(s);
    times.push_back(Ms(Clock::now() - r0));
  }
  std::sort(times.begin(), times.end());
  // --steps: per kernel, the median over traced runs of its summed step time per run.
  struct KernelTime {
    int count = 0;
    std::vector<double> ms;  // per traced run
    double median_ms = 0;
  };
  std::map<std::string, KernelTime> step_times;
  double between_ms = 0;  // median over traced runs of (run wall time - its steps' sum)
  if (per_step) {
    RunStats traced;
    traced.collect_trace = true;
    std::vector<double> outside;
    for (int i = 0; i < runs; ++i) {
      const auto r0 = Clock::now();
      if (absl::Status s = exec.Run(views, out_views, &traced, run_options); !s.ok())
        return Fail(s);
      const double wall_ms = Ms(Clock::now() - r0);
      std::map<std::string, double> run_ms;
      std::map<std::string, int> run_count;
      double in_steps_ms = 0;
      for (const TraceEvent& e : traced.trace) {
        run_ms[e.kernel] += static_cast<double>(e.duration_ns) / 1e6;
        in_steps_ms += static_cast<double>(e.duration_ns) / 1e6;
        ++run_count[e.kernel];
      }
      outside.push_back(wall_ms - in_steps_ms);
      for (const auto& [kernel, ms] : run_ms) {
        step_times[kernel].ms.push_back(ms);
        step_times[kernel].count = run_count[kernel];
      }
    }
    for (auto& [kernel, kt] : step_times) {
      std::sort(kt.ms.begin(), kt.ms.end());
      kt.median_ms = Percentile(kt.ms, 50);
    }
    std::sort(outside.begin(), outside.end());
    between_ms = Percentile(outside, 50);
  }
  const double mean = std::accumulate(times.begin(), times.end(), 0.0) / times.size();
  const double p50 = Percentile(times, 50), p90 = Percentile(times, 90);
  // Rows = dim 0 of the first input; for the packed program the sequences (dim 0 of
  // sequence_lengths), not the tokens.
  size_t rows_input = 0;
  for (size_t i = 0; i < io.inputs.size(); ++i)
    if (run_options.program == PlanProgram::kPacked && io.inputs[i].name == "sequence_lengths")
      rows_input = i;
  const int64_t batch =
      (*inputs).empty() || (*inputs)[rows_input].rank() == 0 ? 1 : (*inputs)[rows_input].dims()[0];
  const double throughput = mean > 0 ? static_cast<double>(batch) / (mean / 1e3) : 0;
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const double peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
  const int used_threads =
      exec_options.num_threads > 0 ? exec_options.num_threads : cpu::DefaultNumThreads();
  const std::string bindings = BucketLabel(plan, stats.bucket);
  // kernel -> implementation -> steps, for the kernels that have several (cpu linear).
  std::map<std::string, std::map<std::string, int>> impls;
  for (const TraceEvent& e : stats.trace)
    if (!e.impl.empty()) ++impls[e.kernel][e.impl];
  const bool cpu_plan = plan.target == PlanTarget::kCpu;

  if (json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("plan").String(plan_path);
    w.Key("p50_ms").Double(p50);
    w.Key("p90_ms").Double(p90);
    w.Key("min_ms").Double(times.front());
    w.Key("mean_ms").Double(mean);
    w.Key("max_ms").Double(times.back());
    w.Key("throughput_per_s").Double(throughput);
    w.Key("peak_rss_mb").Double(peak_rss_mb);
    w.Key("load_ms").Double(load_ms);
    w.Key("first_run_ms").Double(first_run_ms);
    w.Key("warmup").Int(warmup);
    w.Key("runs").Int(runs);
    w.Key("threads").Int(used_threads);
    if (cpu_plan) w.Key("cpu_isa").String(std::string(cpu::IsaName(cpu::DetectIsa())));
    w.Key("impls").BeginObject();
    for (const auto& [kernel, by_impl] : impls) {
      w.Key(kernel).BeginObject();
      for (const auto& [impl, n] : by_impl) w.Key(impl).Int(n);
      w.EndObject();
    }
    w.EndObject();
    w.Key("bucket").Int(stats.bucket);
    w.Key("bucket_bindings").String(bindings);
    w.Key("padded").Bool(stats.padded);
    w.Key("packed").Bool(stats.packed);
    w.Key("program").String(std::string(PlanProgramName(run_options.program)));
    w.Key("batch").Int(batch);
    w.Key("inputs").BeginObject();
    for (size_t i = 0; i < io.inputs.size(); ++i) {
      w.Key(io.inputs[i].name).BeginArray();
      for (int64_t d : input_dims[i]) w.Int(d);
      w.EndArray();
    }
    w.EndObject();
    if (per_step) {
      w.Key("steps").BeginObject();
      for (const auto& [kernel, kt] : step_times) {
        w.Key(kernel).BeginObject();
        w.Key("count").Int(kt.count);
        w.Key("median_ms").Double(kt.median_ms);
        w.EndObject();
      }
      w.EndObject();
      w.Key("between_steps_ms").Double(between_ms);
    }
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::vector<std::string> shapes;
  for (size_t i = 0; i < io.inputs.size(); ++i)
    shapes.push_back(absl::StrCat(io.inputs[i].name, "[", absl::StrJoin(input_dims[i], ","), "]"));
  std::printf("plan %s, inputs %s\n", plan_path.c_str(), absl::StrJoin(shapes, " ").c_str());
  std::printf("bucket %d [%s]%s, %d threads\n", stats.bucket,
              bindings.empty() ? "static" : bindings.c_str(),
              stats.packed && run_options.program == PlanProgram::kModel ? " (packed)"
              : stats.padded                                             ? " (padded)"
                                                                         : "",
              used_threads);
  if (cpu_plan) std::printf("cpu isa %s\n", std::string(cpu::IsaName(cpu::DetectIsa())).c_str());
  for (const auto& [kernel, by_impl] : impls) {
    std::vector<std::string> parts;
    for (const auto& [impl, n] : by_impl) parts.push_back(absl::StrCat(n, " x ", impl));
    std::printf("%s steps: %s\n", kernel.c_str(), absl::StrJoin(parts, ", ").c_str());
  }
  std::printf("load %.2f ms, first run %.3f ms\n", load_ms, first_run_ms);
  std::printf(
      "%d runs (after %d warm-up): p50 %.3f ms  p90 %.3f ms  min %.3f ms  mean %.3f ms  "
      "max %.3f ms\n",
      runs, warmup, p50, p90, times.front(), mean, times.back());
  std::printf("throughput %.1f rows/s (batch %lld), peak RSS %.1f MiB\n", throughput,
              static_cast<long long>(batch), peak_rss_mb);
  if (per_step) {
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [kernel, kt] : step_times) order.emplace_back(-kt.median_ms, kernel);
    std::sort(order.begin(), order.end());
    std::printf("per kernel, median of %d traced runs (%% of the untraced p50):\n", runs);
    std::printf("  %-22s %6s %10s %7s\n", "kernel", "steps", "ms/run", "%");
    for (const auto& [neg, kernel] : order) {
      const KernelTime& kt = step_times[kernel];
      std::printf("  %-22s %6d %10.3f %6.1f%%\n", kernel.c_str(), kt.count, kt.median_ms,
                  p50 > 0 ? 100.0 * kt.median_ms / p50 : 0.0);
    }
    std::printf("  %-22s %6s %10.3f %6.1f%%\n", "between steps", "", between_ms,
                p50 > 0 ? 100.0 * between_ms / p50 : 0.0);
  }
  return kExitOk;
}

}  // namespace kiln::cli
