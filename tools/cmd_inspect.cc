// `kiln inspect MODEL.onnx|PLAN.kiln [--json] [--full]`: imports a model and prints its IR
// as text and an op histogram (or one JSON object with --json); for a compiled plan, the
// memory plan and kernel calls of every bucket (read with ReadPlanInfo: no weights).
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/importer.h"
#include "kiln/plan/plan.h"
#include "tools/cli.h"
#include "tools/json.h"
#include "tools/plan_info_json.h"
#include "tools/plan_util.h"
#include "tools/run_inputs.h"

namespace kiln::cli {

namespace {

constexpr char kHelp[] =
    "usage: kiln inspect MODEL.onnx [--json] [--full]\n"
    "       kiln inspect PLAN.kiln [--json] [--full]\n"
    "\n"
    "Imports MODEL.onnx and prints the kiln IR as text followed by an op histogram.\n"
    "  --json   print one JSON object instead: model, opset, inputs, outputs, node count,\n"
    "           op histogram and constant bytes (no IR text)\n"
    "  --full   print large constants in full (hex) instead of eliding them\n"
    "\n"
    "For a plan written by `kiln compile` (recognized by its magic bytes or a .kiln name),\n"
    "prints per bucket: arena bytes, the no-reuse sum and peak live bytes with the ratios\n"
    "arena/no-reuse and arena/peak-live, the step count per kernel id and the ops of the\n"
    "`ref` steps, after the precision notes of a bf16/int8 plan (what stays fp32 and why;\n"
    "static int8 ranges). The weights are not read (see `kiln plan-info`).\n"
    "  --json   one JSON object instead\n"
    "  --full   also list every step: kernel, input and output buffers (kind, dtype, dims),\n"
    "           parameters and provenance (the ONNX nodes it covers)\n";

std::string BufferString(const PlanBucket& b, int32_t index) {
  if (index < 0) return "-";
  if (index >= static_cast<int32_t>(b.buffers.size())) return absl::StrCat("#", index, "?");
  const PlanBuffer& buf = b.buffers[index];
  std::string where;
  switch (buf.kind) {
    case PlanBufferKind::kArena:
    case PlanBufferKind::kWeight:
      where = absl::StrCat("@", buf.offset);
      break;
    case PlanBufferKind::kInput:
    case PlanBufferKind::kOutput:
      where = absl::StrCat(" ", buf.binding);
      break;
  }
  return absl::StrCat("#", index, " ", std::string(PlanBufferKindName(buf.kind)), where, " ",
                      std::string(DTypeName(buf.dtype)), "[", absl::StrJoin(buf.dims, ","), "]");
}

std::string ParamString(const PlanParam& p) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          return absl::StrCat(p.name, "=", v);
        else if constexpr (std::is_same_v<T, double>)
          return absl::StrCat(p.name, "=", absl::StrFormat("%g", v));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return absl::StrCat(p.name, "=[", absl::StrJoin(v, ","), "]");
        else {
          if (v.find('\n') != std::string::npos || v.size() > 60)
            return absl::StrCat(p.name, "=<", v.size(), " chars>");
          return absl::StrCat(p.name, "=", v);
        }
      },
      p.value);
}

// The op of each `ref` step (parsed from its node text; "?" if unparsable), counted: what a
// plan still runs on the reference executor, and so what wants a plan kernel next.
std::map<std::string, int> RefOps(const PlanBucket& b) {
  std::map<std::string, int> ops;
  for (const PlanStep& s : b.steps) {
    if (s.kernel != "ref") continue;
    std::string op = "?";
    for (const PlanParam& p : s.params) {
      const auto* text = std::get_if<std::string>(&p.value);
      if (p.name != "node" || text == nullptr) continue;
      if (auto g = ParseGraph(*text); g.ok())
        for (const auto& n : (*g)->nodes())
          if (!n->is_input() && !n->is_constant())
            op = n->domain().empty() ? n->op() : absl::StrCat(n->domain(), ".", n->op());
    }
    ops[op]++;
  }
  return ops;
}

// a / b, or NaN (JSON null, text "n/a") when b is 0.
double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : NAN; }
std::string RatioText(int64_t a, int64_t b) {
  return b > 0 ? absl::StrFormat("%.3f", Ratio(a, b)) : "n/a";
}

int InspectPlan(const std::string& path, bool json, bool full) {
  auto info = ReadPlanInfoNamed(path);
  if (!info.ok()) return Fail(info.status());
  const Plan& plan = info->plan;
  if (json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("plan").String(path);
    w.Key("target").String(std::string(PlanTargetName(plan.target)));
    w.Key("weights_bytes").Int(static_cast<int64_t>(info->weights_bytes));
    w.Key("precision").BeginArray();
    for (const std::string& line : PrecisionLines(plan)) w.String(line);
    w.EndArray();
    w.Key("buckets").BeginArray();
    for (size_t i = 0; i < plan.buckets.size(); ++i) {
      const PlanBucket& b = plan.buckets[i];
      w.BeginObject();
      w.Key("bindings").BeginObject();
      for (const auto& [sym, val] : b.bindings) w.Key(sym).Int(val);
      w.EndObject();
      w.Key("arena_bytes").Int(b.arena_bytes);
      w.Key("no_reuse_bytes").Int(b.no_reuse_bytes);
      w.Key("peak_live_bytes").Int(b.peak_live_bytes);
      w.Key("arena_over_no_reuse").Double(Ratio(b.arena_bytes, b.no_reuse_bytes));
      w.Key("arena_over_peak_live").Double(Ratio(b.arena_bytes, b.peak_live_bytes));
      w.Key("buffers").Int(static_cast<int64_t>(b.buffers.size()));
      w.Key("steps").Int(static_cast<int64_t>(b.steps.size()));
      std::map<std::string, int> by_kernel;
      for (const PlanStep& s : b.steps) by_kernel[s.kernel]++;
      w.Key("steps_by_kernel").BeginObject();
      for (const auto& [k, n] : by_kernel) w.Key(k).Int(n);
      w.EndObject();
      w.Key("ref_ops").BeginObject();
      for (const auto& [op, n] : RefOps(b)) w.Key(op).Int(n);
      w.EndObject();
      if (full) {
        w.Key("step_list").BeginArray();
        for (const PlanStep& s : b.steps) {
          w.BeginObject();
          w.Key("kernel").String(s.kernel);
          w.Key("inputs").BeginArray();
          for (int32_t x : s.inputs) w.Int(x);
          w.EndArray();
          w.Key("outputs").BeginArray();
          for (int32_t x : s.outputs) w.Int(x);
          w.EndArray();
          w.Key("params").BeginArray();
          for (const PlanParam& p : s.params) w.String(ParamString(p));
          w.EndArray();
          w.Key("provenance").BeginArray();
          for (const std::string& p : s.provenance) w.String(p);
          w.EndArray();
          w.EndObject();
        }
        w.EndArray();
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("plan %s: target %s, %zu bucket%s, weights %s\n", path.c_str(),
              std::string(PlanTargetName(plan.target)).c_str(), plan.buckets.size(),
              plan.buckets.size() == 1 ? "" : "s",
              HumanBytes(static_cast<int64_t>(info->weights_bytes)).c_str());
  for (const std::string& line : PrecisionLines(plan))
    std::printf("  precision %s\n", line.c_str());
  for (size_t i = 0; i < plan.buckets.size(); ++i) {
    const PlanBucket& b = plan.buckets[i];
    const std::string label = BucketLabel(plan, static_cast<int>(i));
    std::printf("\nbucket %zu [%s]: %zu steps, %zu buffers\n", i,
                label.empty() ? "static" : label.c_str(), b.steps.size(), b.buffers.size());
    std::printf(
        "  arena %s, no-reuse %s (arena/no-reuse %s), peak live %s "
        "(arena/peak-live %s)\n",
        HumanBytes(b.arena_bytes).c_str(), HumanBytes(b.no_reuse_bytes).c_str(),
        RatioText(b.arena_bytes, b.no_reuse_bytes).c_str(), HumanBytes(b.peak_live_bytes).c_str(),
        RatioText(b.arena_bytes, b.peak_live_bytes).c_str());
    std::map<std::string, int> by_kernel;
    for (const PlanStep& s : b.steps) by_kernel[s.kernel]++;
    std::multimap<int, std::string, std::greater<int>> by_count;
    for (const auto& [k, n] : by_kernel) by_count.emplace(n, k);
    for (const auto& [n, k] : by_count) std::printf("  %6d  %s\n", n, k.c_str());
    if (const auto ops = RefOps(b); !ops.empty()) {
      std::vector<std::string> parts;
      for (const auto& [op, n] : ops) parts.push_back(absl::StrCat(op, " ", n));
      std::printf("  ref steps by op: %s\n", absl::StrJoin(parts, ", ").c_str());
    }
    if (!full) continue;
    for (size_t j = 0; j < b.steps.size(); ++j) {
      const PlanStep& s = b.steps[j];
      std::vector<std::string> ins, outs, params;
      for (int32_t x : s.inputs) ins.push_back(BufferString(b, x));
      for (int32_t x : s.outputs) outs.push_back(BufferString(b, x));
      for (const PlanParam& p : s.params) params.push_back(ParamString(p));
      std::printf("  step %zu %s\n    in:  %s\n    out: %s\n", j, s.kernel.c_str(),
                  absl::StrJoin(ins, "; ").c_str(), absl::StrJoin(outs, "; ").c_str());
      if (!params.empty()) std::printf("    params: %s\n", absl::StrJoin(params, " ").c_str());
      std::printf("    from: %s\n", absl::StrJoin(s.provenance, ", ").c_str());
    }
  }
  return kExitOk;
}

}  // namespace

int RunInspect(int argc, char** argv) {
  Args args(argc, argv, 2);
  std::string model;
  bool json = false, full = false;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (args.Flag("--json")) {
      json = true;
      continue;
    }
    if (args.Flag("--full")) {
      full = true;
      continue;
    }
    if (model.empty() && args.Positional(&model)) continue;
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "inspect: unexpected argument '", args.Next(), "' (see kiln inspect --help)")));
  }
  if (model.empty())
    return Fail(absl::InvalidArgumentError("inspect: no model given (see kiln inspect --help)"));

  if (LooksLikePlan(model)) return InspectPlan(model, json, full);
  auto graph = ImportOnnxFile(model);
  if (!graph.ok()) return Fail(graph.status());
  const Graph& g = **graph;

  std::map<std::string, int> histogram;
  int64_t constant_bytes = 0;
  for (const auto& n : g.nodes()) {
    if (n->is_input()) continue;
    if (n->is_constant()) {
      constant_bytes += static_cast<int64_t>(n->constant_value()->NumBytes());
      continue;
    }
    histogram[n->domain().empty() ? n->op() : n->domain() + "." + n->op()]++;
  }
  int compute_nodes = 0;
  for (const auto& [op, count] : histogram) compute_nodes += count;

  if (json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("model").String(model);
    w.Key("graph").String(g.name());
    w.Key("opset").Int(g.opset());
    w.Key("inputs").BeginArray();
    for (const Node* in : g.inputs()) {
      w.BeginObject();
      w.Key("name").String(in->output_info(0).name);
      w.Key("type").String(in->output_info(0).type.ToString());
      w.EndObject();
    }
    w.EndArray();
    w.Key("outputs").BeginArray();
    for (const auto& o : g.outputs()) {
      w.BeginObject();
      w.Key("name").String(o.name);
      w.Key("type").String(o.value.type().ToString());
      w.EndObject();
    }
    w.EndArray();
    w.Key("nodes").Int(compute_nodes);
    w.Key("constant_bytes").Int(constant_bytes);
    w.Key("op_histogram").BeginObject();
    for (const auto& [op, count] : histogram) w.Key(op).Int(count);
    w.EndObject();
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }

  PrintOptions po;
  po.elide_large_constants = !full;
  std::fputs(PrintGraph(g, po).c_str(), stdout);
  std::printf("\n%d nodes, %zu distinct ops, %s of constants\n", compute_nodes, histogram.size(),
              HumanBytes(constant_bytes).c_str());
  std::multimap<int, std::string, std::greater<int>> by_count;
  for (const auto& [op, count] : histogram) by_count.emplace(count, op);
  for (const auto& [count, op] : by_count) std::printf("  %6d  %s\n", count, op.c_str());
  return kExitOk;
}

}  // namespace kiln::cli
