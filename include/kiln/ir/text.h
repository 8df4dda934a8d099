// IR as text: a printer and a parser that round-trip. Format (one node per line):
//
//   graph main opset=17 {
//     %0 = Input() {name="input_ids"} : i64[batch,seq]
//     %1 = Constant() {value=tensor<f32[2]>[1, 2]} : f32[2]
//     %2, %3 = Split(%1) {axis=0} : f32[1], f32[1]  @ "onnx_node_name"
//     %4 = kiln.Linear(%0, %1, _) {...} : ...
//     return "out": %2, "out2": %3
//   }
//
// Values are numbered in print order; `_` is an omitted optional input; `@ "a","b"` lists
// provenance. Large constants print their bytes in hex so the round-trip is exact.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"

namespace kiln {

struct PrintOptions {
  // Constants with more elements than this print as `tensor<f32[384]>#<hex bytes>`
  // when exact, or `tensor<f32[384]>...` (not parseable) when `elide_large_constants`.
  bool elide_large_constants = false;
  int max_inline_elements = 16;
};

std::string PrintGraph(const Graph& g, const PrintOptions& options = {});
absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(std::string_view text);

}  // namespace kiln
