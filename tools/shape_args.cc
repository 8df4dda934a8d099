// Parsing of --shape and --profile values, shared by `kiln run`, `opt`, `compile`, `bench`.
#include <algorithm>

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
  std::vector<std::string> names;
  for (const Node* in : g.inputs()) names.push_back(in->output_info(0).name);
  return ParseShapeSpec(spec, names, inputs, symbols);
}

absl::Status ParseShapeSpec(const std::string& spec, const std::vector<std::string>& input_names,
                            std::map<std::string, std::vector<int64_t>>* inputs,
                            std::map<std::string, int64_t>* symbols) {
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty())
      return absl::InvalidArgumentError(absl::StrCat("--shape: bad entry '", item, "'"));
    bool is_input = false;
    for (const std::string& name : input_names) is_input |= name == kv.first;
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

absl::Status ParseProfileSpec(const std::string& spec,
                              std::map<std::string, std::vector<int64_t>>* profile) {
  auto bad = [&](absl::string_view item, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--profile: bad entry '", item, "': ", why,
                                                   " (want SYMBOL=a:b:c or SYMBOL=lo..hi)"));
  };
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty()) return bad(item, "no SYMBOL=VALUES");
    std::vector<int64_t> values;
    if (const size_t dots = kv.second.find(".."); dots != std::string::npos) {
      int64_t lo, hi;
      if (!absl::SimpleAtoi(kv.second.substr(0, dots), &lo) ||
          !absl::SimpleAtoi(kv.second.substr(dots + 2), &hi))
        return bad(item, "range bounds are not integers");
      if (lo < 1 || hi < lo) return bad(item, "want 1 <= lo <= hi");
      values.push_back(lo);
      // Powers of two strictly inside (lo, hi); stop before overflow.
      for (int64_t p = 1; p < hi && p <= (int64_t{1} << 61); p *= 2)
        if (p > lo) values.push_back(p);
      values.push_back(hi);
    } else {
      for (absl::string_view v : absl::StrSplit(kv.second, ':')) {
        int64_t x;
        if (!absl::SimpleAtoi(v, &x) || x < 1) return bad(item, "values must be integers >= 1");
        values.push_back(x);
      }
    }
    std::vector<int64_t>& dst = (*profile)[kv.first];
    dst.insert(dst.end(), values.begin(), values.end());
    std::sort(dst.begin(), dst.end());
    dst.erase(std::unique(dst.begin(), dst.end()), dst.end());
  }
  return absl::OkStatus();
}

}  // namespace kiln::cli
