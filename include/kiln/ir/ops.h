// The one op catalogue. Passes and the importer ask it about an op (is it elementwise,
// pure, layout-only; how many inputs and outputs) instead of keeping their own lists.
// An op is known to kiln iff it is registered here; the importer rejects the others.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum OpTrait : unsigned {
  kTraitNone = 0,
  kPure = 1u << 0,              // no side effects, same inputs -> same outputs
  kElementwise = 1u << 1,       // output[i] depends on broadcast input[i] only
  kLayoutOnly = 1u << 2,        // moves or reinterprets data, no arithmetic
  kCommutative = 1u << 3,       // binary op whose operands may be swapped
  kBroadcasting = 1u << 4,      // multidirectional (numpy) broadcasting of inputs
};

struct OpInfo {
  std::string_view domain;  // "" for the ONNX default domain
  std::string_view name;
  int min_inputs;
  int max_inputs;  // -1 = variadic
  int min_outputs;
  int max_outputs;
  unsigned traits;
  // Earliest default-domain opset for which kiln accepts the op (0 = any in 13..21).
  int since_opset = 0;
};

// nullptr if the op is not in the catalogue.
const OpInfo* FindOp(std::string_view domain, std::string_view name);
inline bool HasTrait(const OpInfo* info, OpTrait t) { return info && (info->traits & t); }
const std::vector<OpInfo>& AllOps();

// Default-domain opsets the importer accepts.
inline constexpr int kMinOpset = 13;
inline constexpr int kMaxOpset = 21;

}  // namespace kiln
