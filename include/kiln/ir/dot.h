// Graphviz rendering of a Graph, so a person can look at what kiln did. Nodes are
// labelled with op, output types and provenance; inputs and outputs are drawn apart;
// constants are small grey boxes with their type.
#pragma once

#include <string>

#include "kiln/ir/graph.h"

namespace kiln {

std::string GraphToDot(const Graph& g);

}  // namespace kiln
