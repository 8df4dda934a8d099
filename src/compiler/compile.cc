// Compile(): import -> optimize -> per-bucket lowering -> Plan. STUB until lowering lands.
#include "kiln/kiln.h"

namespace kiln {

std::string_view Version() { return KILN_VERSION; }

std::string CompileOptionsString(const CompileOptions& options) { return ""; }

absl::StatusOr<Plan> Compile(const std::string& model_path, const CompileOptions& options) {
  return absl::UnimplementedError("kiln::Compile: lowering is not implemented yet");
}

}  // namespace kiln
