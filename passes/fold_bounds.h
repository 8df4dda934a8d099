// Constant folding's size limit, before evaluation: the exact bytes of an output whose
// type is static, else an upper bound from the node's constant inputs. Ops whose outputs
// can hold more elements than their inputs say so in the op catalogue (OpInfo::grows,
// include/kiln/ir/ops.h) and have a bound rule here; kBroadcasting ops are bounded by the
// broadcast of their inputs; every other op by the sum of its inputs' elements.
// FoldBoundsTest checks that the catalogue and the rules agree.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/ops.h"

namespace kiln::fold {

// Exact bytes of output `i` when its stored type is static with a known dtype.
std::optional<int64_t> StaticOutputBytes(const Node& n, int i);

// An upper bound on the bytes of the node's largest output, from its constant inputs
// (`ins[i]` null when omitted). Saturates at INT64_MAX; 0 when the kernel will reject
// the inputs before allocating.
int64_t BoundOutputBytes(const Node& n, const OpInfo* info, const std::vector<const Tensor*>& ins);

// True when (domain, op) has a bound rule of its own (the ops with OpInfo::grows).
bool HasBoundRule(std::string_view domain, std::string_view op);

}  // namespace kiln::fold
