// Structural checks of a Graph: SSA (each value defined once, every operand defined by a
// node of this graph before its use), acyclicity, use lists consistent with operands in
// both directions, graph outputs defined, Input/Constant nodes well formed, and stored
// output types consistent with constant values. Returns the first violation found.
#pragma once

#include "absl/status/status.h"
#include "kiln/ir/graph.h"

namespace kiln {

absl::Status VerifyGraph(const Graph& g);

}  // namespace kiln
