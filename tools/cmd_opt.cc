// `kiln opt MODEL.onnx ...`: imports a model, runs a pass pipeline and prints the
// optimized IR, or writes it as ONNX (--emit-onnx) or Graphviz (--dot).
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/calibration.h"
#include "kiln/ir/dot.h"
#include "kiln/ir/text.h"
#include "kiln/ir/verifier.h"
#include "kiln/onnx/exporter.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/status.h"
#include "tools/cli.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln opt MODEL.onnx [options]\n"
    "\n"
    "Imports MODEL.onnx, runs an optimization pipeline and prints the optimized IR on\n"
    "stdout, unless --emit-onnx, --dot or --quiet is given (pass dumps, statistics and\n"
    "the final node count go to stderr).\n"
    "\n"
    "options:\n"
    "  -O0 | -O1 | -O2 | -O3     pipeline (default -O1): -O0 import only, -O1 exact\n"
    "                            simplifications, -O2 adds the Transformer fusions; -O3 is\n"
    "                            -O2 until target lowering exists\n"
    "  --passes a,b,c            run exactly these passes once each, instead of -O<n>\n"
    "  --disable-pass NAME       skip a pass wherever the pipeline has it (repeatable)\n"
    "  --print-before NAME|all   dump the IR before a pass (repeatable)\n"
    "  --print-after NAME|all    dump the IR after a pass (repeatable)\n"
    "  --pass-stats              print per pass: runs, time, nodes before/after, counters\n"
    "  --shape SPEC              specialize shapes: NAME=D0xD1... for a graph input or\n"
    "                            SYMBOL=N, comma-separated (repeatable)\n"
    "  --outputs a,b             keep only these graph outputs (and what feeds them)\n"
    "  --fold-limit BYTES        largest constant that folding may create (default 1 GiB)\n"
    "  --precision P             append the precision stage `kiln compile` appends for the\n"
    "                            target (docs/precision.md): cpu bf16|int8 gemm-precision,\n"
    "                            cuda fp16|bf16 numeric-safety and lower-precision, cuda\n"
    "                            int8 those with gemm-precision between them (fp16's\n"
    "                            safety and int8's smoothing calibrated on two seeded\n"
    "                            random valid input sets)\n"
    "  --target cpu|cuda         the target the precision stage is for (default cpu; fp16\n"
    "                            alone implies cuda)\n"
    "  --verify-each             run the IR verifier after every pass\n"
    "  --emit-onnx OUT.onnx      write the optimized graph as an ONNX model (opset 21)\n"
    "  --fusion-report FILE.json write what each fusion kind fused and every near-miss with\n"
    "                            its reason and ONNX node names (the summary also prints\n"
    "                            with --pass-stats)\n"
    "  --dot FILE.dot            write the graph as Graphviz: after the last pass, or after\n"
    "                            the pass named by --print-after\n"
    "  --list-passes             list the registered passes and the -O1 pipeline\n"
    "  --quiet                   do not print the optimized IR (even without --emit-onnx\n"
    "                            or --dot)\n";

std::vector<std::string> SplitList(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipEmpty());
}

void PrintStats(const PassManager& pm) {
  std::fprintf(stderr, "%-24s %5s %8s %10s %8s  %s\n", "pass", "runs", "changed", "time ms",
               "nodes", "counters");
  for (const PassStats& s : pm.stats()) {
    std::vector<std::string> counters;
    for (const auto& [k, v] : s.counters) counters.push_back(absl::StrCat(k, " ", v));
    std::fprintf(stderr, "%-24s %5d %8d %10.2f %4d>%-4d  %s\n", s.pass.c_str(), s.runs,
                 s.changed_runs, s.millis, s.nodes_before, s.nodes_after,
                 absl::StrJoin(counters, ", ").c_str());
  }
}

int ListPasses() {
  std::printf("registered passes:\n");
  for (const std::string& n : RegisteredPassNames())
    std::printf("  %-24s %s\n", n.c_str(), std::string(CreatePass(n)->description()).c_str());
  auto p = StandardPipeline(1);
  std::printf("\n-O1 pipeline:\n");
  for (const PipelineStage& st : p->stages) {
    std::printf("  [%s]%s\n    why: %s\n    order: %s\n", absl::StrJoin(st.passes, ", ").c_str(),
                st.max_iterations > 1 ? absl::StrCat(" x<=", st.max_iterations).c_str() : "",
                st.why.c_str(), st.ordering.c_str());
  }
  return kExitOk;
}

}  // namespace

int RunOpt(int argc, char** argv) {
  Args args(argc, argv, 2);
  std::string model, v, emit_onnx, dot_file, report_file;
  int level = 1;
  std::vector<std::string> pass_list, shape_specs;
  bool pass_stats = false, quiet = false, custom = false;
  PassManagerOptions pmo;
  PassContext ctx;
  bool target_given = false;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (args.Flag("--list-passes")) return ListPasses();
    bool matched_level = false;
    for (int l = 0; l <= 3; ++l)
      if (args.Flag(absl::StrCat("-O", l))) level = l, matched_level = true;
    if (matched_level) continue;
    if (args.Flag("--pass-stats")) {
      pass_stats = true;
      continue;
    }
    if (args.Flag("--verify-each")) {
      ctx.verify_each = true;
      continue;
    }
    if (args.Flag("--quiet")) {
      quiet = true;
      continue;
    }
    if (args.Option("--passes", &v)) {
      pass_list = SplitList(v);
      custom = true;
      continue;
    }
    if (args.Option("--disable-pass", &v)) {
      pmo.disabled.push_back(v);
      continue;
    }
    if (args.Option("--print-before", &v)) {
      pmo.print_before.push_back(v);
      continue;
    }
    if (args.Option("--print-after", &v)) {
      pmo.print_after.push_back(v);
      continue;
    }
    if (args.Option("--shape", &v)) {
      shape_specs.push_back(v);
      continue;
    }
    if (args.Option("--outputs", &v)) {
      ctx.keep_outputs = SplitList(v);
      continue;
    }
    if (args.Option("--emit-onnx", &v)) {
      emit_onnx = v;
      continue;
    }
    if (args.Option("--dot", &v)) {
      dot_file = v;
      continue;
    }
    if (args.Option("--fusion-report", &v)) {
      report_file = v;
      continue;
    }
    if (args.Option("--precision", &v)) {
      const std::optional<Precision> p = PrecisionFromName(v);
      if (!p)
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--precision: unknown precision '", v, "' (fp32, fp16, bf16 or int8)")));
      ctx.precision = *p;
      continue;
    }
    if (args.Option("--target", &v)) {
      if (v != "cpu" && v != "cuda")
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--target: unknown target '", v, "' (want cpu or cuda)")));
      ctx.target = v == "cpu" ? PlanTarget::kCpu : PlanTarget::kCuda;
      target_given = true;
      continue;
    }
    if (args.Option("--fold-limit", &v)) {
      if (!absl::SimpleAtoi(v, &ctx.fold_limit_bytes) || ctx.fold_limit_bytes < 0)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--fold-limit: bad value '", v, "'")));
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (model.empty() && args.Positional(&model)) continue;
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("opt: unexpected argument '", args.Next(), "' (see kiln opt --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (model.empty())
    return Fail(absl::InvalidArgumentError("opt: no model given (see kiln opt --help)"));

  auto imported = ImportOnnxFile(model);
  if (!imported.ok()) return Fail(imported.status());
  Graph& g = **imported;
  for (const std::string& spec : shape_specs)
    if (absl::Status s = ParseShapeSpec(spec, g, &ctx.input_shapes, &ctx.symbol_values); !s.ok())
      return Fail(s);

  if (ctx.precision == Precision::kFp16 && !target_given) ctx.target = PlanTarget::kCuda;
  PrecisionReport precision_report;
  ctx.precision_report = &precision_report;
  std::vector<absl::flat_hash_map<std::string, Tensor>> calibration;
  // As kiln compile: fp16's numeric-safety and int8's smoothing run the graph on these.
  if (ctx.precision == Precision::kFp16 || ctx.precision == Precision::kInt8) {
    CompileOptions co;
    co.symbols = ctx.symbol_values;
    co.input_shapes = ctx.input_shapes;
    absl::StatusOr<std::vector<absl::flat_hash_map<std::string, Tensor>>> sets =
        compiler::CalibrationSets(g, co);
    if (!sets.ok()) return Fail(sets.status());
    calibration = *std::move(sets);
    ctx.calibration_inputs = &calibration;
  }
  auto pipeline =
      custom ? CustomPipeline(pass_list) : StandardPipeline(level, ctx.target, ctx.precision);
  if (!pipeline.ok()) return Fail(pipeline.status());

  // --dot after a specific --print-after pass: capture that pass's last dump.
  std::string dot_after =
      pmo.print_after.size() == 1 && pmo.print_after[0] != "all" ? pmo.print_after[0] : "";
  std::string dot_text;
  PrintOptions po;
  po.elide_large_constants = true;
  pmo.printer = [&](const std::string& header, const Graph& graph) {
    std::fprintf(stderr, "// ----- %s -----\n%s", header.c_str(), PrintGraph(graph, po).c_str());
    if (!dot_after.empty() && header == "IR after " + dot_after) dot_text = GraphToDot(graph);
  };
  const int nodes_before = CountComputeNodes(g);
  FusionReport report;
  ctx.fusion_report = &report;
  std::vector<std::string> warnings;
  ctx.warnings = &warnings;
  PassManager pm(pmo);
  if (absl::Status s = pm.Run(*pipeline, g, ctx); !s.ok()) return Fail(s);
  for (const std::string& w : warnings) std::fprintf(stderr, "kiln: warning: %s\n", w.c_str());
  if (absl::Status s = VerifyGraph(g); !s.ok())
    return Fail(
        absl::InternalError(absl::StrCat("optimized graph fails verification: ", s.message())));
  if (pass_stats) {
    PrintStats(pm);
    const std::string summary = report.Summary();
    std::fprintf(stderr, "fusions:%s", summary.empty() ? " none\n" : ("\n" + summary).c_str());
    for (const std::string& line : PrecisionSummary(precision_report.notes()))
      std::fprintf(stderr, "precision: %s\n", line.c_str());
  }
  if (!report_file.empty()) {
    std::ofstream f(report_file, std::ios::trunc);
    if (!(f << report.ToJson(nodes_before, CountComputeNodes(g))))
      return Fail(absl::PermissionDeniedError(absl::StrCat("cannot write '", report_file, "'")));
  }

  if (!dot_file.empty()) {
    if (dot_text.empty()) dot_text = GraphToDot(g);
    std::ofstream f(dot_file, std::ios::trunc);
    if (!(f << dot_text))
      return Fail(absl::PermissionDeniedError(absl::StrCat("cannot write '", dot_file, "'")));
  }
  if (!emit_onnx.empty())
    if (absl::Status s = ExportOnnxFile(g, emit_onnx); !s.ok()) return Fail(s);
  if (!quiet && emit_onnx.empty() && dot_file.empty())
    std::fputs(PrintGraph(g, po).c_str(), stdout);
  std::fprintf(stderr, "kiln opt -%s: %d -> %d nodes\n",
               custom ? "-passes" : absl::StrCat("O", level).c_str(), nodes_before,
               CountComputeNodes(g));
  return kExitOk;
}

}  // namespace kiln::cli
