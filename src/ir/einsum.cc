// Einsum equation parsing (kiln/ir/einsum.h).
#include "kiln/ir/einsum.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

absl::Status Bad(std::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("Einsum: ", std::string(msg)));
}

absl::StatusOr<std::vector<int>> ParseTerm(std::string_view s) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.') {
      if (ellipsis || s.substr(i, 3) != "...")
        return Bad(absl::StrCat("term '", std::string(s), "': '.' only as one '...'"));
      ellipsis = true;
      labels.push_back(kEinsumEllipsis);
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      labels.push_back(c);
    } else {
      return Bad(
          absl::StrCat("term '", std::string(s), "': '", std::string(1, c), "' is not a letter"));
    }
  }
  return labels;
}

}  // namespace

bool EinsumHasEllipsis(const std::vector<int>& t) {
  return std::find(t.begin(), t.end(), kEinsumEllipsis) != t.end();
}

absl::StatusOr<EinsumSpec> ParseEinsum(std::string_view equation, size_t num_inputs) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::string_view lhs = std::string_view(eq).substr(0, arrow);
  EinsumSpec spec;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    KILN_ASSIGN_OR_RETURN(
        std::vector<int> t,
        ParseTerm(lhs.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    spec.inputs.push_back(std::move(t));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (spec.inputs.size() != num_inputs)
    return Bad(absl::StrCat("the equation has ", spec.inputs.size(), " terms for ", num_inputs,
                            " inputs"));
  std::vector<int> count(128, 0);
  bool any_ellipsis = false;
  for (const std::vector<int>& t : spec.inputs) {
    any_ellipsis |= EinsumHasEllipsis(t);
    for (int l : t)
      if (l != kEinsumEllipsis) ++count[l];
  }
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(spec.output, ParseTerm(std::string_view(eq).substr(arrow + 2)));
    std::vector<int> seen(128, 0);
    for (int l : spec.output) {
      if (l == kEinsumEllipsis) continue;
      if (count[l] == 0)
        return Bad(absl::StrCat("output '", std::string(1, static_cast<char>(l)),
                                "' names no input axis"));
      if (seen[l]++) return Bad("an output letter repeats");
    }
    if (EinsumHasEllipsis(spec.output) && !any_ellipsis)
      return Bad("the output has '...', no input does");
  } else {
    if (any_ellipsis) spec.output.push_back(kEinsumEllipsis);
    for (int c = 0; c < 128; ++c)
      if (count[c] == 1) spec.output.push_back(c);
  }
  return spec;
}

}  // namespace kiln
