// IR as text: a printer and a parser that round-trip exactly. Format (one node per line;
// full grammar and rules in docs/ir.md):
//
//   graph main opset=17 {
//     %0 = Input() : i64[batch,seq] "input_ids"
//     %1 = Constant() {value=tensor<f32[2]>[1, 2.5]} : f32[2] "w"
//     %2, %3 = Split(%1) {axis=0} : f32[1] "a", f32[1] @ "split_0"
//     %4 = kiln.Linear(%0, %1, _) {alpha=1.0, perm=[0, 1]}
//     return "out": %2, "out2": %4
//   }
//
// Values are numbered in print order. A node is `[%results =] [domain.]Op(operands)
// [{attrs}] [: type ["name"], ...] [@ "provenance", ...]`; `_` is an omitted optional
// input; the type list is left out when every output has unknown type and no name.
// Types: `f32[batch,128,?]`, `f32[]` scalar, `f32[*]` unknown rank, `?` unknown. Graph
// inputs are the Input nodes in order. Attributes: `1` int, `1.0` float (always with
// '.', 'e', inf or nan:0xBITS), `"s"` string (escapes \n \t \r \" \\ \xHH), `[1, 2]`
// ints, `[1.0]` floats, `["a"]` strings, `ints[]`/`floats[]`/`strings[]` when empty,
// `tensor<f32[2]>[...]`. Float elements print in shortest exact form and NaNs as their
// bits; large constants print their raw bytes in hex so the round trip is exact. Names
// that are not identifiers are quoted. `//` starts a comment. Operands may refer to
// values defined later (the verifier, not the parser, demands topological order).
// Parse errors are InvalidArgument "IR text LINE:COL: expected ..., found ...".
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
