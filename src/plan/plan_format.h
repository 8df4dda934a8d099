// Internal: the fixed byte layout of a `.kiln` file header and section table, its
// encoder and its validating decoder (docs/plan-format.md). Shared by the writer, the
// loader, ReadPlanInfo and the tests (which build deliberately bad headers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::plan_internal {

inline constexpr std::string_view kMagic = "KILNPLAN";
inline constexpr uint32_t kHeaderBytes = 96;  // fixed part (32) + 2 entries (32 each)
inline constexpr uint32_t kSectionCount = 2;
inline constexpr uint64_t kWeightsAlignment = 4096;

// Field offsets in the header (all little-endian).
inline constexpr size_t kOffVersion = 8;
inline constexpr size_t kOffHeaderSize = 12;
inline constexpr size_t kOffFlags = 16;
inline constexpr size_t kOffTarget = 20;
inline constexpr size_t kOffSectionCount = 24;
inline constexpr size_t kOffHeaderCrc = 28;
inline constexpr size_t kOffSections = 32;
inline constexpr size_t kSectionEntryBytes = 32;
// Within a section entry.
inline constexpr size_t kEntKind = 0, kEntReserved0 = 4, kEntOffset = 8, kEntSize = 16,
                        kEntCrc = 24, kEntReserved1 = 28;

enum SectionKind : uint32_t { kSectionMetadata = 1, kSectionWeights = 2 };

struct SectionEntry {
  uint32_t kind = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t crc = 0;
};

struct Header {
  uint32_t version = 0;
  uint32_t target = 0;
  SectionEntry metadata;
  SectionEntry weights;
};

std::string_view SectionName(uint32_t kind);  // "metadata", "weights", "unknown"
uint64_t AlignUp(uint64_t v, uint64_t a);

// CRC32C of a 96-byte header with its CRC field taken as zero.
uint32_t HeaderCrc(std::string_view header);

// Writes the 96 header bytes (computing the header CRC).
std::string EncodeHeader(const Header& h);

// Decodes and checks the header in `prefix` (the first min(file_size, 96) bytes of a
// file of `file_size` bytes): magic, version, header size, header CRC, flags, target,
// section count/kinds, reserved zeros, section bounds, overlap and the exact layout
// (metadata right after the header, weights at the next 4 KiB boundary, nothing after).
absl::StatusOr<Header> DecodeHeader(std::string_view prefix, uint64_t file_size);

// Little-endian helpers.
uint32_t LoadU32(std::string_view b, size_t off);
uint64_t LoadU64(std::string_view b, size_t off);
void StoreU32(std::string* b, size_t off, uint32_t v);
void StoreU64(std::string* b, size_t off, uint64_t v);

}  // namespace kiln::plan_internal
