// Einsum equations (numpy's notation), parsed once for the reference kernel
// (src/reference/linalg.cc) and the shape rule: a term per input naming its axes by
// letters, `...` for the axes no letter names, and the output term - the `->` one, or
// without it the `...` axes followed by the letters that appear exactly once, in ASCII
// order. Spaces are ignored.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

inline constexpr int kEinsumEllipsis = -1;

struct EinsumSpec {
  // Per input, its axes in order: a letter's char code, or kEinsumEllipsis.
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
};

// True when the term has `...`.
bool EinsumHasEllipsis(const std::vector<int>& term);

// Parses `equation` for `num_inputs` inputs: InvalidArgument for a malformed term, a term
// count that differs, an output letter that names no input axis or repeats, or an output
// `...` without an input one.
absl::StatusOr<EinsumSpec> ParseEinsum(std::string_view equation, size_t num_inputs);

}  // namespace kiln
