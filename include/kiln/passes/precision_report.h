// What a precision pass decided for each compute op of a plan below fp32: the precision
// it runs at and, for an op kept higher than the plan's precision, why (a LayerNorm's
// statistics, a classifier head). The compiler stores the notes in the plan
// (Plan::precision_notes, docs/precision.md) and `kiln plan-info` prints them.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/graph.h"

namespace kiln {

struct PrecisionNote {
  std::string op;                  // "kiln.Linear", "LayerNormalization"
  std::string precision;           // "int8", "bf16", "fp32"
  std::string reason;              // why not the plan's precision; empty when it is
  std::vector<std::string> nodes;  // ONNX node names (provenance), sorted
  std::string value;               // the node's first output's name (with `nodes`, its identity)
  double x_absmax = 0;             // static int8 activations: the calibrated range; else 0
  bool operator==(const PrecisionNote&) const = default;
};

class PrecisionReport {
 public:
  // Records `n`'s decision. A node seen again (the pipeline re-runs per shape bucket) is
  // recorded once: the first decision stands.
  void Note(const Node& n, std::string precision, std::string reason, double x_absmax = 0) {
    PrecisionNote note;
    note.op = n.domain().empty() ? n.op() : absl::StrCat(n.domain(), ".", n.op());
    note.nodes = n.provenance();
    std::sort(note.nodes.begin(), note.nodes.end());
    note.nodes.erase(std::unique(note.nodes.begin(), note.nodes.end()), note.nodes.end());
    note.value = n.num_outputs() > 0 ? n.output_info(0).name : "";
    for (const PrecisionNote& o : notes_)
      if (o.op == note.op && o.nodes == note.nodes && o.value == note.value) return;
    note.precision = std::move(precision);
    note.reason = std::move(reason);
    note.x_absmax = x_absmax;
    notes_.push_back(std::move(note));
  }
  const std::vector<PrecisionNote>& notes() const { return notes_; }

  // The numeric-safety pass's verdict: `n` stays fp32 in a 16-bit plan, and why. Kept by
  // the node's identity (op, provenance, first output's name), so it holds in the
  // per-bucket re-runs of the pipeline, whose graphs are copies.
  void ForceF32(const Node& n, std::string reason) { forced_[Key(n)] = std::move(reason); }
  const std::string* ForcedF32(const Node& n) const {
    auto it = forced_.find(Key(n));
    return it == forced_.end() ? nullptr : &it->second;
  }
  int num_forced() const { return static_cast<int>(forced_.size()); }

 private:
  static std::string Key(const Node& n) {
    std::vector<std::string> p = n.provenance();
    std::sort(p.begin(), p.end());
    return absl::StrCat(n.domain(), ".", n.op(), "|", absl::StrJoin(p, ","), "|",
                        n.num_outputs() > 0 ? n.output_info(0).name : "");
  }
  std::vector<PrecisionNote> notes_;
  std::map<std::string, std::string> forced_;
};

// One line per (precision, op, reason) with its count, lowered groups first:
// "int8: 24 kiln.QuantLinear", "fp32: 12 kiln.SkipLayerNorm (normalization: ...)".
inline std::vector<std::string> PrecisionSummary(const std::vector<PrecisionNote>& notes) {
  std::map<std::tuple<bool, std::string, std::string, std::string>, int> groups;
  for (const PrecisionNote& n : notes) ++groups[{!n.reason.empty(), n.precision, n.op, n.reason}];
  std::vector<std::string> lines;
  for (const auto& [key, count] : groups) {
    const auto& [kept, precision, op, reason] = key;
    lines.push_back(
        absl::StrCat(precision, ": ", count, " ", op, kept ? absl::StrCat(" (", reason, ")") : ""));
  }
  return lines;
}

}  // namespace kiln
