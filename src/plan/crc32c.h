// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used per section of a plan
// file. Uses the SSE4.2 crc32 instruction when the CPU has it (checked at run time),
// else a slicing-by-8 table. Check value: Crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::plan_internal {

// Extends `crc` (the CRC of some earlier bytes, 0 for none) with `bytes`.
uint32_t Crc32cExtend(uint32_t crc, std::string_view bytes);
inline uint32_t Crc32c(std::string_view bytes) { return Crc32cExtend(0, bytes); }

// The two implementations, exposed so tests can check they agree.
uint32_t Crc32cExtendPortable(uint32_t crc, std::string_view bytes);
// Returns false (and leaves *out alone) when the CPU lacks SSE4.2.
bool Crc32cExtendHardware(uint32_t crc, std::string_view bytes, uint32_t* out);

}  // namespace kiln::plan_internal
