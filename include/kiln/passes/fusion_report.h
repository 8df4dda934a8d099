// What the fusion passes did and, above all, what they did not do and why. Each fusion
// kind ("attention", "layernorm", ...) counts the patterns it fused and lists every
// near-miss with its reason and the ONNX node names involved (provenance), so a user can
// see why a block of their model was not fused. `kiln opt|compile --fusion-report F.json`
// writes it; --pass-stats prints the summary.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln {

struct FusionMiss {
  std::vector<std::string> nodes;  // ONNX node names (provenance) of the nodes involved
  std::string reason;
  bool operator==(const FusionMiss& o) const { return nodes == o.nodes && reason == o.reason; }
};

struct FusionKindReport {
  int fused = 0;
  std::vector<FusionMiss> missed;
};

// The report kinds, in print order. Fusion passes use exactly these names.
inline const std::vector<std::string>& FusionKinds() {
  static const auto* kinds = new std::vector<std::string>{
      "linear", "gelu",      "layernorm",       "rmsnorm", "skip_layernorm",
      "qkv",    "attention", "embed_layernorm", "pooling"};
  return *kinds;
}

class FusionReport {
 public:
  void Fused(const std::string& kind, int n = 1) { kinds_[kind].fused += n; }
  // Records a miss. `nodes` are IR nodes; their provenance names are stored (sorted,
  // deduplicated). The same miss recorded twice (a pass run again) is kept once.
  void Missed(const std::string& kind, const std::vector<const Node*>& nodes,
              const std::string& reason);
  const std::map<std::string, FusionKindReport>& kinds() const { return kinds_; }
  int total_fused() const;
  int total_missed() const;

  // {"nodes_before": N, "nodes_after": M, "fusions": {"attention": {"fused": 6,
  //  "missed": [{"nodes": [...], "reason": "..."}]}, ...}} with every kind present.
  std::string ToJson(int nodes_before, int nodes_after) const;
  // One line per kind with something to say: "attention: 6 fused, 1 missed (reason ...)".
  std::string Summary() const;

 private:
  std::map<std::string, FusionKindReport> kinds_;
};

}  // namespace kiln
