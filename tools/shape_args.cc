// Parsing of --shape values, shared by `kiln run` and `kiln opt`.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kiln/support/status.h"
#include "tools/cli.h"

namespace kiln::cli {

absl::Status ParseDims(const std::string& text, std::vector<int64_t>* dims) {
  dims->clear();
  if (text == "scalar" || text.empty()) return absl::OkStatus();
  for (absl::string_view d : absl::StrSplit(text, 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v < 0)
      return absl::InvalidArgumentError(absl::StrCat("bad dims '", text, "' (want e.g. 1x128)"));
    dims->push_back(v);
  }
  return absl::OkStatus();
}

absl::Status ParseShapeSpec(const std::string& spec, const Graph& g,
                            std::map<std::string, std::vector<int64_t>>* inputs,
                            std::map<std::string, int64_t>* symbols) {
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty())
      return absl::InvalidArgumentError(absl::StrCat("--shape: bad entry '", item, "'"));
    bool is_input = false;
    for (const Node* in : g.inputs()) is_input |= in->output_info(0).name == kv.first;
    std::vector<int64_t> dims;
    KILN_RETURN_IF_ERROR(ParseDims(kv.second, &dims));
    if (is_input) {
      (*inputs)[kv.first] = dims;
    } else if (dims.size() == 1) {
      (*symbols)[kv.first] = dims[0];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shape: '", kv.first, "' is neither a graph input nor a single symbolic dim"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::cli
