// Internal: the two SHA-256 paths behind kiln::Sha256 (include/kiln/plan/plan.h), exposed
// so tests can check the SHA-NI path against the portable one.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::plan_internal {

// True when this CPU has the SHA extensions (and SSSE3/SSE4.1) that kiln::Sha256 uses.
bool Sha256HasShaNi();
// The portable implementation, whatever the CPU.
std::array<uint8_t, 32> Sha256Portable(std::string_view bytes);

}  // namespace kiln::plan_internal
