// Header + section table of a `.kiln` file: encoding and the validating decoder. Every
// byte of the header is covered by the header CRC and by explicit checks, so no bit
// of it can change without an error.
#include "plan/plan_format.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kiln/plan/plan.h"
#include "plan/crc32c.h"

namespace kiln::plan_internal {

uint32_t LoadU32(std::string_view b, size_t off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(b[off + i])} << (8 * i);
  return v;
}
uint64_t LoadU64(std::string_view b, size_t off) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(b[off + i])} << (8 * i);
  return v;
}
void StoreU32(std::string* b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void StoreU64(std::string* b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::string_view SectionName(uint32_t kind) {
  switch (kind) {
    case kSectionMetadata:
      return "metadata";
    case kSectionWeights:
      return "weights";
    default:
      return "unknown";
  }
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t HeaderCrc(std::string_view header) {
  uint32_t crc = Crc32cExtend(0, header.substr(0, kOffHeaderCrc));
  static constexpr char kZero[4] = {0, 0, 0, 0};
  crc = Crc32cExtend(crc, std::string_view(kZero, 4));
  return Crc32cExtend(crc, header.substr(kOffHeaderCrc + 4, kHeaderBytes - kOffHeaderCrc - 4));
}

std::string EncodeHeader(const Header& h) {
  std::string b(kHeaderBytes, '\0');
  std::memcpy(b.data(), kMagic.data(), kMagic.size());
  StoreU32(&b, kOffVersion, h.version);
  StoreU32(&b, kOffHeaderSize, kHeaderBytes);
  StoreU32(&b, kOffFlags, 0);
  StoreU32(&b, kOffTarget, h.target);
  StoreU32(&b, kOffSectionCount, kSectionCount);
  const SectionEntry* entries[2] = {&h.metadata, &h.weights};
  for (int i = 0; i < 2; ++i) {
    const size_t e = kOffSections + i * kSectionEntryBytes;
    StoreU32(&b, e + kEntKind, entries[i]->kind);
    StoreU64(&b, e + kEntOffset, entries[i]->offset);
    StoreU64(&b, e + kEntSize, entries[i]->size);
    StoreU32(&b, e + kEntCrc, entries[i]->crc);
  }
  StoreU32(&b, kOffHeaderCrc, HeaderCrc(b));
  return b;
}

namespace {

absl::Status Truncated(uint64_t file_size) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "plan file is truncated: %d bytes, the header alone needs %d", file_size, kHeaderBytes));
}

}  // namespace

absl::StatusOr<Header> DecodeHeader(std::string_view prefix, uint64_t file_size) {
  if (file_size < kMagic.size()) return Truncated(file_size);
  if (prefix.substr(0, kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError("not a kiln plan file (bad magic; expected \"KILNPLAN\")");
  }
  if (file_size < kOffVersion + 4) return Truncated(file_size);
  Header h;
  h.version = LoadU32(prefix, kOffVersion);
  if (h.version == 0) {
    return absl::InvalidArgumentError("plan format version 0 is invalid");
  }
  if (h.version > kPlanFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrFormat("plan format version %d is newer than this kiln (knows %d)", h.version,
                        kPlanFormatVersion));
  }
  if (file_size < kHeaderBytes || prefix.size() < kHeaderBytes) return Truncated(file_size);
  const uint32_t header_size = LoadU32(prefix, kOffHeaderSize);
  if (header_size != kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan header size %d is invalid (format version 1 has a %d-byte header)",
                        header_size, kHeaderBytes));
  }
  const uint32_t stored_crc = LoadU32(prefix, kOffHeaderCrc);
  const uint32_t crc = HeaderCrc(prefix);
  if (stored_crc != crc) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan header CRC32C mismatch (stored 0x%08x, computed 0x%08x): the header is corrupt",
        stored_crc, crc));
  }
  const uint32_t flags = LoadU32(prefix, kOffFlags);
  if (flags != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan header has unknown flags 0x%08x (format version 1 defines none)", flags));
  }
  h.target = LoadU32(prefix, kOffTarget);
  if (h.target != static_cast<uint32_t>(PlanTarget::kCpu) &&
      h.target != static_cast<uint32_t>(PlanTarget::kCuda)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan header has unknown target %d (1 = cpu, 2 = cuda)", h.target));
  }
  const uint32_t count = LoadU32(prefix, kOffSectionCount);
  if (count != kSectionCount) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan section table has %d entries; format version 1 has exactly %d (metadata, weights)",
        count, kSectionCount));
  }
  SectionEntry* entries[2] = {&h.metadata, &h.weights};
  const uint32_t expected_kind[2] = {kSectionMetadata, kSectionWeights};
  for (int i = 0; i < 2; ++i) {
    const size_t e = kOffSections + i * kSectionEntryBytes;
    SectionEntry& s = *entries[i];
    s.kind = LoadU32(prefix, e + kEntKind);
    s.offset = LoadU64(prefix, e + kEntOffset);
    s.size = LoadU64(prefix, e + kEntSize);
    s.crc = LoadU32(prefix, e + kEntCrc);
    if (s.kind != expected_kind[i]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("plan section table entry %d has kind %d; expected %d (%s)", i, s.kind,
                          expected_kind[i], SectionName(expected_kind[i])));
    }
    if (LoadU32(prefix, e + kEntReserved0) != 0 || LoadU32(prefix, e + kEntReserved1) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "plan section table entry %d (%s) has non-zero reserved fields", i, SectionName(s.kind)));
    }
    uint64_t end;
    if (__builtin_add_overflow(s.offset, s.size, &end)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("plan section '%s' offset %d + size %d overflows", SectionName(s.kind),
                          s.offset, s.size));
    }
    if (s.offset < kHeaderBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("plan section '%s' at offset %d overlaps the %d-byte header",
                          SectionName(s.kind), s.offset, kHeaderBytes));
    }
    if (end > file_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "plan section '%s' [%d, %d) is outside the file (%d bytes): truncated or corrupt",
          SectionName(s.kind), s.offset, end, file_size));
    }
  }
  const uint64_t meta_end = h.metadata.offset + h.metadata.size;
  const uint64_t weights_end = h.weights.offset + h.weights.size;
  if (h.metadata.offset < weights_end && h.weights.offset < meta_end) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan sections 'metadata' [%d, %d) and 'weights' [%d, %d) overlap",
                        h.metadata.offset, meta_end, h.weights.offset, weights_end));
  }
  if (h.metadata.offset != kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan section 'metadata' starts at %d; it must follow the header at %d",
                        h.metadata.offset, kHeaderBytes));
  }
  if (h.weights.offset != AlignUp(meta_end, kWeightsAlignment)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan section 'weights' starts at %d; it must start at the first 4096-byte boundary "
        "after the metadata (%d)",
        h.weights.offset, AlignUp(meta_end, kWeightsAlignment)));
  }
  if (file_size != weights_end) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan file has %d bytes after its last section (file %d bytes, weights end at %d)",
        file_size - weights_end, file_size, weights_end));
  }
  return h;
}

}  // namespace kiln::plan_internal
