// Runs pipelines of passes. A pipeline is data: an ordered list of stages, each one pass
// or a fixed-point group of passes repeated until none changes the graph (capped, with a
// graph-hash check that stops a group that cycles between two states). The manager
// records per-pass statistics (runs, time, nodes before/after, the pass's counters) and
// can print the graph before/after chosen passes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pass.h"

namespace kiln {

struct PipelineStage {
  std::vector<std::string> passes;  // one pass, or a fixed-point group
  int max_iterations = 1;           // > 1 for a fixed-point group
  std::string why;                  // one line: why this stage is here
  std::string ordering;             // its ordering constraint, in prose
};

struct Pipeline {
  std::string name;  // "O0" .. "O3", or "custom"
  std::vector<PipelineStage> stages;
};

// -O0 (import only), -O1 (exact simplifications), -O2 (-O1 + the Transformer fusions),
// -O3 (= -O2 for now), for `target` at `precision` (see docs/passes.md). `level` outside
// 0..3 -> InvalidArgument.
absl::StatusOr<Pipeline> StandardPipeline(int level, PlanTarget target = PlanTarget::kCpu,
                                          Precision precision = Precision::kFp32);
// A pipeline running exactly `names` once each, in order (`--passes a,b,c`).
absl::StatusOr<Pipeline> CustomPipeline(const std::vector<std::string>& names);

struct PassStats {
  std::string pass;
  int runs = 0;
  int changed_runs = 0;
  double millis = 0;
  int nodes_before = -1;  // at the first run
  int nodes_after = -1;   // after the last run
  PassCounters counters;  // summed over runs
};

struct PassManagerOptions {
  std::vector<std::string> disabled;      // --disable-pass NAME
  std::vector<std::string> print_before;  // pass names or "all"
  std::vector<std::string> print_after;
  // Receives (header, graph) for every print request; the CLI prints IR text.
  std::function<void(const std::string&, const Graph&)> printer;
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}
  // Runs `pipeline` on `g`. Unknown pass names and disabled passes that do not exist
  // are InvalidArgument. A failing pass's error is prefixed with its name.
  absl::Status Run(const Pipeline& pipeline, Graph& g, const PassContext& ctx);
  // Statistics in first-run order.
  const std::vector<PassStats>& stats() const { return stats_; }

 private:
  PassStats& StatsFor(const std::string& pass);
  PassManagerOptions options_;
  std::vector<PassStats> stats_;
};

// Number of nodes that are neither Input nor Constant (what users think of as "nodes").
int CountComputeNodes(const Graph& g);
// A structural hash of the graph (ops, attributes, edges, types; constant bytes by
// pointer identity) used to detect cycling fixed-point groups.
uint64_t GraphHash(const Graph& g);

}  // namespace kiln
