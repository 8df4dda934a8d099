// Writing and loading `.kiln` files: SerializePlan / ParsePlan on byte images,
// WritePlanFile / LoadPlanFile (read-only mmap, weights viewed in place) and
// ReadPlanInfo (header + metadata only). All checks happen before a Plan is returned.
// One encoder (EncodePlan) writes both the in-memory image and the file; the file path
// streams the weights (one blob or the compiler's pieces) and never holds the image.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "absl/strings/str_format.h"
#include "kiln/plan/plan.h"
#include "kiln/support/status.h"
#include "plan/crc32c.h"
#include "plan/plan_format.h"
#include "plan/plan_metadata.h"

namespace kiln {

using plan_internal::Crc32c;
using plan_internal::Header;
using plan_internal::kHeaderBytes;

PlanWeights PlanWeights::Copy(std::string_view bytes) {
  PlanWeights w;
  if (bytes.empty()) return w;
  constexpr std::align_val_t kAlign{64};
  auto* mem = static_cast<uint8_t*>(::operator new(bytes.size(), kAlign));
  std::memcpy(mem, bytes.data(), bytes.size());
  w.owner_ = std::shared_ptr<const void>(
      mem, [](const void* p) { ::operator delete (const_cast<void*>(p), std::align_val_t{64}); });
  w.data_ = mem;
  w.size_ = bytes.size();
  return w;
}

PlanWeights PlanWeights::View(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                              bool file_mapped) {
  PlanWeights w;
  w.file_mapped_ = file_mapped;
  w.owner_ = std::move(owner);
  w.data_ = data;
  w.size_ = size;
  w.view_ = true;
  return w;
}

std::string_view PlanProgramName(PlanProgram p) {
  switch (p) {
    case PlanProgram::kModel:
      return "model";
    case PlanProgram::kDecode:
      return "decode";
    case PlanProgram::kPacked:
      return "packed";
  }
  return "unknown";
}

PlanIo IoOf(const Plan& plan, PlanProgram program) {
  for (const PlanSignature& s : plan.signatures)
    if (s.program == program) return {s.inputs, s.outputs, s.paddable_symbols};
  return {plan.inputs, plan.outputs, plan.paddable_symbols};
}

bool HasProgram(const Plan& plan, PlanProgram program) {
  for (const PlanBucket& b : plan.buckets)
    if (b.program == program) return true;
  return false;
}

std::string_view PlanTargetName(PlanTarget t) {
  switch (t) {
    case PlanTarget::kCpu:
      return "cpu";
    case PlanTarget::kCuda:
      return "cuda";
  }
  return "unknown";
}

std::string_view PlanBufferKindName(PlanBufferKind k) {
  switch (k) {
    case PlanBufferKind::kArena:
      return "arena";
    case PlanBufferKind::kWeight:
      return "weight";
    case PlanBufferKind::kInput:
      return "input";
    case PlanBufferKind::kOutput:
      return "output";
  }
  return "unknown";
}

namespace {

// Where an encoded plan goes: a string (SerializePlan) or a file (WritePlanFile). The
// header comes first but holds the weights CRC, known only once the weights are written, so
// EncodePlan writes it last, over a placeholder.
class PlanSink {
 public:
  virtual ~PlanSink() = default;
  virtual absl::Status Append(std::string_view bytes) = 0;
  virtual absl::Status Overwrite(uint64_t offset, std::string_view bytes) = 0;
};

class StringSink : public PlanSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  absl::Status Append(std::string_view bytes) override {
    out_->append(bytes);
    return absl::OkStatus();
  }
  absl::Status Overwrite(uint64_t offset, std::string_view bytes) override {
    out_->replace(offset, bytes.size(), bytes);
    return absl::OkStatus();
  }

 private:
  std::string* out_;
};

// Small appends (metadata, padding, small weights) are gathered into one buffer; large ones
// go straight to the file.
class FileSink : public PlanSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  absl::Status Append(std::string_view bytes) override {
    if (buffer_.size() + bytes.size() > kBufferBytes) KILN_RETURN_IF_ERROR(Flush());
    if (bytes.size() >= kBufferBytes) return WriteAt(bytes, offset_);
    buffer_.append(bytes);
    return absl::OkStatus();
  }
  absl::Status Overwrite(uint64_t offset, std::string_view bytes) override {
    KILN_RETURN_IF_ERROR(Flush());
    uint64_t at = offset;
    return WriteAt(bytes, at);
  }
  absl::Status Flush() {
    absl::Status s = WriteAt(buffer_, offset_);
    buffer_.clear();
    return s;
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  // Writes all of `bytes` at `at`, advancing it.
  absl::Status WriteAt(std::string_view bytes, uint64_t& at) {
    while (!bytes.empty()) {
      const ssize_t r = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        return absl::DataLossError(absl::StrFormat("failed writing plan file %s at offset %d: %s",
                                                   path_, at, std::strerror(errno)));
      bytes.remove_prefix(static_cast<size_t>(r));
      at += static_cast<uint64_t>(r);
    }
    return absl::OkStatus();
  }

  int fd_;
  std::string path_;
  std::string buffer_;
  uint64_t offset_ = 0;  // where the buffer's first byte goes
};

absl::Status CheckPieces(std::span<const PlanWeightPiece> pieces, uint64_t weights_bytes) {
  uint64_t end = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const PlanWeightPiece& p = pieces[i];
    if (p.offset < end || p.offset > weights_bytes || p.bytes.size() > weights_bytes - p.offset)
      return absl::InvalidArgumentError(absl::StrFormat(
          "weights piece %d [%d, +%d) overlaps the one before it (which ends at %d) or runs past "
          "the %d-byte weights section",
          i, p.offset, p.bytes.size(), end, weights_bytes));
    end = p.offset + p.bytes.size();
  }
  return absl::OkStatus();
}

// The whole `.kiln` layout into `sink`: header (a placeholder until the weights CRC is
// known), metadata, zero padding to the 4 KiB boundary, then the weights section assembled
// from `pieces` with zero gaps, its CRC32C extended chunk by chunk as it is written.
absl::Status EncodePlan(const Plan& plan, uint64_t weights_bytes,
                        std::span<const PlanWeightPiece> pieces, PlanSink& sink) {
  KILN_RETURN_IF_ERROR(plan_internal::ValidatePlan(plan, weights_bytes));
  KILN_RETURN_IF_ERROR(CheckPieces(pieces, weights_bytes));
  KILN_ASSIGN_OR_RETURN(std::string meta, plan_internal::EncodeMetadata(plan, weights_bytes));
  Header h;
  h.version = kPlanFormatVersion;
  h.target = static_cast<uint32_t>(plan.target);
  h.metadata = {plan_internal::kSectionMetadata, kHeaderBytes, meta.size(), Crc32c(meta)};
  const uint64_t weights_offset =
      plan_internal::AlignUp(kHeaderBytes + meta.size(), plan_internal::kWeightsAlignment);
  h.weights = {plan_internal::kSectionWeights, weights_offset, weights_bytes, 0};
  KILN_RETURN_IF_ERROR(sink.Append(plan_internal::EncodeHeader(h)));
  KILN_RETURN_IF_ERROR(sink.Append(meta));

  static constexpr char kZeros[4096] = {};
  uint32_t crc = 0;
  // `n` bytes of weights (or, with `in_weights` false, of padding) from `data`, or zeros.
  auto emit = [&](const char* data, uint64_t n, bool in_weights) -> absl::Status {
    constexpr uint64_t kChunk = uint64_t{1} << 20;  // CRC then write while it is in cache
    while (n > 0) {
      const std::string_view chunk =
          data ? std::string_view(data, std::min(n, kChunk))
               : std::string_view(kZeros, std::min<uint64_t>(n, sizeof(kZeros)));
      if (in_weights) crc = plan_internal::Crc32cExtend(crc, chunk);
      KILN_RETURN_IF_ERROR(sink.Append(chunk));
      if (data) data += chunk.size();
      n -= chunk.size();
    }
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(emit(nullptr, weights_offset - kHeaderBytes - meta.size(), false));
  uint64_t at = 0;
  for (const PlanWeightPiece& p : pieces) {
    KILN_RETURN_IF_ERROR(emit(nullptr, p.offset - at, true));
    KILN_RETURN_IF_ERROR(emit(p.bytes.data(), p.bytes.size(), true));
    at = p.offset + p.bytes.size();
  }
  KILN_RETURN_IF_ERROR(emit(nullptr, weights_bytes - at, true));
  h.weights.crc = crc;
  return sink.Overwrite(0, plan_internal::EncodeHeader(h));
}

std::vector<PlanWeightPiece> WholeBlob(const PlanWeights& w) {
  if (w.size() == 0) return {};
  return {PlanWeightPiece{0, w.bytes()}};
}

// Written to a temporary file beside `path` and renamed over it, so a process that has the
// old plan mapped (LoadPlanFile) keeps reading the old inode instead of seeing a truncated
// or half-written file, and a failed write never leaves a partial plan at `path`.
absl::Status WriteEncodedPlan(const Plan& plan, uint64_t weights_bytes,
                              std::span<const PlanWeightPiece> pieces, const std::string& path) {
  const std::string tmp = absl::StrFormat("%s.tmp%d", path, static_cast<int>(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return absl::NotFoundError(absl::StrFormat("cannot write plan file %s: cannot create %s: %s",
                                               path, tmp, std::strerror(errno)));
  FileSink sink(fd, tmp);
  absl::Status s = EncodePlan(plan, weights_bytes, pieces, sink);
  if (s.ok()) s = sink.Flush();
  if (::close(fd) != 0 && s.ok())
    s = absl::DataLossError(absl::StrFormat("failed writing plan file %s", tmp));
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = absl::NotFoundError(absl::StrFormat("cannot replace %s: %s", path, std::strerror(errno)));
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

}  // namespace

absl::StatusOr<std::string> SerializePlan(const Plan& plan) {
  std::string out;
  StringSink sink(&out);
  KILN_RETURN_IF_ERROR(EncodePlan(plan, plan.weights.size(), WholeBlob(plan.weights), sink));
  return out;
}

absl::Status WritePlanFile(const Plan& plan, const std::string& path) {
  return WriteEncodedPlan(plan, plan.weights.size(), WholeBlob(plan.weights), path);
}

absl::Status WritePlanFile(const Plan& plan, uint64_t weights_bytes,
                           std::span<const PlanWeightPiece> pieces, const std::string& path) {
  if (plan.weights.size() != 0)
    return absl::InvalidArgumentError(
        "WritePlanFile with weight pieces: the plan's own weights must be empty");
  return WriteEncodedPlan(plan, weights_bytes, pieces, path);
}

namespace {

absl::Status CheckCrc(const plan_internal::SectionEntry& s, std::string_view bytes) {
  const uint32_t crc = Crc32c(bytes);
  if (crc != s.crc) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CRC32C mismatch in plan section '%s' (stored 0x%08x, computed 0x%08x): the file is "
        "corrupt",
        plan_internal::SectionName(s.kind), s.crc, crc));
  }
  return absl::OkStatus();
}

// Requires the bytes between the end of the metadata and the weights to be zero.
absl::Status CheckPadding(std::string_view padding, uint64_t at) {
  for (size_t i = 0; i < padding.size(); ++i) {
    if (padding[i] != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "plan file has a non-zero byte in the padding before the weights (offset %d)", at + i));
    }
  }
  return absl::OkStatus();
}

// Parses the (CRC-checked) metadata into `plan` and checks it against the header.
absl::Status DecodeCheckedMetadata(const Header& h, std::string_view meta, Plan* plan) {
  KILN_ASSIGN_OR_RETURN(uint64_t recorded, plan_internal::DecodeMetadata(meta, plan));
  if (recorded != h.weights.size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan metadata records %d weight bytes but the weights section has %d",
                        recorded, h.weights.size));
  }
  if (static_cast<uint32_t>(plan->target) != h.target) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan header target %d disagrees with the metadata target %d", h.target,
                        static_cast<uint32_t>(plan->target)));
  }
  KILN_RETURN_IF_ERROR(plan_internal::ValidatePlan(*plan, h.weights.size));
  return absl::OkStatus();
}

// Validates header, padding, CRCs and metadata of a whole-file image; fills `plan` but
// its weights. Returns the header.
absl::StatusOr<Header> ParseImage(std::string_view bytes, Plan* plan) {
  KILN_ASSIGN_OR_RETURN(Header h, plan_internal::DecodeHeader(bytes, bytes.size()));
  const uint64_t meta_end = h.metadata.offset + h.metadata.size;
  KILN_RETURN_IF_ERROR(CheckPadding(bytes.substr(meta_end, h.weights.offset - meta_end), meta_end));
  const std::string_view meta = bytes.substr(h.metadata.offset, h.metadata.size);
  KILN_RETURN_IF_ERROR(CheckCrc(h.metadata, meta));
  KILN_RETURN_IF_ERROR(CheckCrc(h.weights, bytes.substr(h.weights.offset, h.weights.size)));
  KILN_RETURN_IF_ERROR(DecodeCheckedMetadata(h, meta, plan));
  return h;
}

// Closes a descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

absl::StatusOr<int> OpenReadOnly(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open plan file %s: %s", path, std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrFormat("%s is not a regular file", path));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

absl::Status ReadAt(int fd, uint64_t offset, size_t n, std::string* out, const std::string& path) {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, out->data() + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return absl::DataLossError(
          absl::StrFormat("reading plan file %s failed at offset %d", path, offset + done));
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> ParsePlan(std::string_view bytes) {
  Plan plan;
  KILN_ASSIGN_OR_RETURN(Header h, ParseImage(bytes, &plan));
  plan.weights = PlanWeights::Copy(bytes.substr(h.weights.offset, h.weights.size));
  return plan;
}

absl::StatusOr<Plan> LoadPlanFile(const std::string& path) {
  uint64_t size = 0;
  KILN_ASSIGN_OR_RETURN(int fd, OpenReadOnly(path, &size));
  FdCloser closer{fd};
  if (size < kHeaderBytes) {
    // Too small to map usefully; read it so the decoder names the precise problem.
    std::string small;
    KILN_RETURN_IF_ERROR(ReadAt(fd, 0, size, &small, path));
    return ParsePlan(small);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    return absl::InternalError(
        absl::StrFormat("cannot map plan file %s: %s", path, std::strerror(errno)));
  }
  std::shared_ptr<const void> mapping(
      map, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  const std::string_view bytes(static_cast<const char*>(map), size);
  Plan plan;
  KILN_ASSIGN_OR_RETURN(Header h, ParseImage(bytes, &plan));
  plan.weights =
      PlanWeights::View(reinterpret_cast<const uint8_t*>(bytes.data()) + h.weights.offset,
                        h.weights.size, std::move(mapping), /*file_mapped=*/true);
  return plan;
}

absl::StatusOr<PlanInfo> ReadPlanInfo(const std::string& path) {
  uint64_t size = 0;
  KILN_ASSIGN_OR_RETURN(int fd, OpenReadOnly(path, &size));
  FdCloser closer{fd};
  std::string header;
  KILN_RETURN_IF_ERROR(ReadAt(fd, 0, std::min<uint64_t>(size, kHeaderBytes), &header, path));
  KILN_ASSIGN_OR_RETURN(Header h, plan_internal::DecodeHeader(header, size));
  // Metadata plus the (< 4 KiB) zero padding after it; never the weights.
  std::string meta_and_pad;
  KILN_RETURN_IF_ERROR(
      ReadAt(fd, h.metadata.offset, h.weights.offset - h.metadata.offset, &meta_and_pad, path));
  const std::string_view meta = std::string_view(meta_and_pad).substr(0, h.metadata.size);
  KILN_RETURN_IF_ERROR(CheckPadding(std::string_view(meta_and_pad).substr(h.metadata.size),
                                    h.metadata.offset + h.metadata.size));
  KILN_RETURN_IF_ERROR(CheckCrc(h.metadata, meta));
  PlanInfo info;
  KILN_RETURN_IF_ERROR(DecodeCheckedMetadata(h, meta, &info.plan));
  info.format_version = h.version;
  info.file_bytes = size;
  info.metadata_bytes = h.metadata.size;
  info.weights_offset = h.weights.offset;
  info.weights_bytes = h.weights.size;
  return info;
}

}  // namespace kiln
