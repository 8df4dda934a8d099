#include "kiln/passes/fusion_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

void FusionReport::Missed(const std::string& kind, const std::vector<const Node*>& nodes,
                          const std::string& reason) {
  FusionMiss miss;
  for (const Node* n : nodes)
    for (const std::string& p : n->provenance()) miss.nodes.push_back(p);
  std::sort(miss.nodes.begin(), miss.nodes.end());
  miss.nodes.erase(std::unique(miss.nodes.begin(), miss.nodes.end()), miss.nodes.end());
  miss.reason = reason;
  auto& missed = kinds_[kind].missed;
  if (std::find(missed.begin(), missed.end(), miss) == missed.end()) missed.push_back(miss);
}

int FusionReport::total_fused() const {
  int n = 0;
  for (const auto& [k, r] : kinds_) n += r.fused;
  return n;
}

int FusionReport::total_missed() const {
  int n = 0;
  for (const auto& [k, r] : kinds_) n += static_cast<int>(r.missed.size());
  return n;
}

std::string FusionReport::ToJson(int nodes_before, int nodes_after) const {
  std::string out = absl::StrCat("{\"nodes_before\": ", nodes_before,
                                 ", \"nodes_after\": ", nodes_after, ", \"fusions\": {");
  std::vector<std::string> kinds = FusionKinds();
  for (const auto& [k, r] : kinds_)
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  bool first = true;
  for (const std::string& k : kinds) {
    auto it = kinds_.find(k);
    const FusionKindReport empty;
    const FusionKindReport& r = it == kinds_.end() ? empty : it->second;
    absl::StrAppend(&out, first ? "" : ", ", Quote(k), ": {\"fused\": ", r.fused,
                    ", \"missed\": [");
    first = false;
    for (size_t i = 0; i < r.missed.size(); ++i) {
      absl::StrAppend(&out, i ? ", " : "", "{\"nodes\": [");
      for (size_t j = 0; j < r.missed[i].nodes.size(); ++j)
        absl::StrAppend(&out, j ? ", " : "", Quote(r.missed[i].nodes[j]));
      absl::StrAppend(&out, "], \"reason\": ", Quote(r.missed[i].reason), "}");
    }
    out += "]}";
  }
  out += "}}\n";
  return out;
}

std::string FusionReport::Summary() const {
  std::string out;
  for (const std::string& k : FusionKinds()) {
    auto it = kinds_.find(k);
    if (it == kinds_.end() || (it->second.fused == 0 && it->second.missed.empty())) continue;
    absl::StrAppend(&out, absl::StrFormat("  %-16s %4d fused, %d missed", k, it->second.fused,
                                          it->second.missed.size()));
    if (!it->second.missed.empty())
      absl::StrAppend(&out, " (first: ", it->second.missed.front().reason, ")");
    out += "\n";
  }
  return out;
}

}  // namespace kiln
