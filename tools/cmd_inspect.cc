// `kiln inspect MODEL.onnx [--json] [--full]`: imports a model and prints its IR as text
// and an op histogram (or one JSON object with --json).
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/importer.h"
#include "tools/cli.h"
#include "tools/json.h"

namespace kiln::cli {

namespace {

constexpr char kHelp[] =
    "usage: kiln inspect MODEL.onnx [--json] [--full]\n"
    "\n"
    "Imports MODEL.onnx and prints the kiln IR as text followed by an op histogram.\n"
    "  --json   print one JSON object instead: model, opset, inputs, outputs, node count,\n"
    "           op histogram and constant bytes (no IR text)\n"
    "  --full   print large constants in full (hex) instead of eliding them\n";

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
    if (args.Flag("--json")) { json = true; continue; }
    if (args.Flag("--full")) { full = true; continue; }
    if (model.empty() && args.Positional(&model)) continue;
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("inspect: unexpected argument '", args.Next(), "' (see kiln inspect --help)")));
  }
  if (model.empty())
    return Fail(absl::InvalidArgumentError("inspect: no model given (see kiln inspect --help)"));

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
