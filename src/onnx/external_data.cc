// External tensor data (TensorProto.data_location == EXTERNAL). The file named by the
// `location` key is resolved strictly beneath the model's folder: absolute paths, `..`
// components, backslashes, symlinks in ANY component and non-regular files are rejected.
// The walk uses openat/fstatat with O_NOFOLLOW one component at a time, so a component
// swapped for a symlink after the check still cannot be followed. offset/length must be
// plain decimal numbers; the range must lie inside the file; only those bytes are used.
// A range of kMapMinBytes or more whose offset is a multiple of the element size is mapped
// (MAP_PRIVATE: writes are copy-on-write, never reach the file; the mapping goes when the
// last Tensor sharing it does), so importing a multi-GB model costs address space, not a
// copy; smaller or misaligned ranges, and any range the kernel refuses to map, are read.
// Like a mapped plan (LoadPlanFile), a data file truncated by another process while a
// compile reads it may raise SIGBUS. The `checksum` key is accepted but not verified
// (documented in docs/importer.md).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kiln/support/status.h"
#include "src/onnx/import_internal.h"

namespace kiln::onnx_import {
namespace {

absl::Status Invalid(std::string_view what, std::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), ": external data: ", std::string(msg)));
}

// Strict non-negative decimal int64 ("0", "4096"); no sign, spaces or hex.
absl::StatusOr<int64_t> ParseCount(const std::string& key, const std::string& s,
                                   std::string_view what) {
  if (s.empty()) return Invalid(what, absl::StrCat(key, " is empty"));
  if (s[0] == '-') return Invalid(what, absl::StrCat(key, " is negative (", s, ")"));
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return Invalid(what, absl::StrCat(key, " '", s, "' is not a decimal number"));
    if (MulOverflows(v, 10, &v) || AddOverflows(v, c - '0', &v))
      return Invalid(what, absl::StrCat(key, " ", s, " overflows int64"));
  }
  return v;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Below this a tensor is read: a mapping costs a syscall, a VMA and up to two partly used
// pages, which only pays for itself on large tensors.
constexpr int64_t kMapMinBytes = int64_t{64} << 10;

// [off, off + nbytes) of `fd` as a private mapping, or null when mmap refuses.
std::shared_ptr<Storage> MapRange(int fd, int64_t off, int64_t nbytes) {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return nullptr;
  const int64_t start = off / page * page;
  const size_t len = static_cast<size_t>(nbytes + (off - start));
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, start);
  if (p == MAP_FAILED) return nullptr;
  std::shared_ptr<void> mapping(p, [len](void* q) { munmap(q, len); });
  return Storage::View(static_cast<std::byte*>(p) + (off - start), static_cast<size_t>(nbytes),
                       std::move(mapping));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Storage>> ReadExternalData(const onnx::TensorProto& tp,
                                                          int64_t nbytes, size_t element_bytes,
                                                          std::string_view what,
                                                          const std::string& model_dir) {
  if (model_dir.empty())
    return Invalid(what, "not allowed: the model was given as bytes without a model folder");
  std::string location;
  std::optional<int64_t> offset, length;
  bool seen_location = false, seen_checksum = false;
  for (const auto& kv : tp.external_data()) {
    const std::string& key = kv.key();
    if (key == "location") {
      if (seen_location) return Invalid(what, "duplicate key 'location'");
      seen_location = true;
      location = kv.value();
    } else if (key == "offset") {
      if (offset) return Invalid(what, "duplicate key 'offset'");
      KILN_ASSIGN_OR_RETURN(offset, ParseCount("offset", kv.value(), what));
    } else if (key == "length") {
      if (length) return Invalid(what, "duplicate key 'length'");
      KILN_ASSIGN_OR_RETURN(length, ParseCount("length", kv.value(), what));
    } else if (key == "checksum") {
      if (seen_checksum) return Invalid(what, "duplicate key 'checksum'");
      seen_checksum = true;
    } else {
      return Invalid(what, absl::StrCat("unknown key '", key, "'"));
    }
  }
  if (!seen_location || location.empty()) return Invalid(what, "no 'location' given");
  if (location.find('\0') != std::string::npos)
    return Invalid(what, "location contains a NUL byte");
  if (location[0] == '/')
    return Invalid(what, absl::StrCat("location '", location, "' is an absolute path"));
  if (location.find('\\') != std::string::npos)
    return Invalid(what, absl::StrCat("location '", location, "' contains a backslash"));
  std::vector<std::string> parts;
  for (absl::string_view p : absl::StrSplit(location, '/')) {
    if (p == "..")
      return Invalid(what, absl::StrCat("location '", location, "' has a '..' component"));
    if (p.empty() || p == ".") continue;
    parts.emplace_back(p);
  }
  if (parts.empty()) return Invalid(what, absl::StrCat("location '", location, "' names no file"));
  const int64_t off = offset.value_or(0);
  if (length && *length != nbytes)
    return Invalid(
        what, absl::StrCat("length ", *length, " does not match the tensor's ", nbytes, " bytes"));

  Fd dir(open(model_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0)
    return Invalid(
        what, absl::StrCat("cannot open model folder '", model_dir, "': ", std::strerror(errno)));
  Fd file;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    struct stat st;
    if (fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return Invalid(what, absl::StrCat("cannot stat '", location, "' (component '", parts[i],
                                        "'): ", std::strerror(errno)));
    if (S_ISLNK(st.st_mode))
      return Invalid(
          what, absl::StrCat("location '", location, "' component '", parts[i], "' is a symlink"));
    if (!last && !S_ISDIR(st.st_mode))
      return Invalid(what, absl::StrCat("location '", location, "' component '", parts[i],
                                        "' is not a directory"));
    if (last && !S_ISREG(st.st_mode))
      return Invalid(what, absl::StrCat("location '", location, "' is not a regular file"));
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY);
    const int fd = openat(dir.get(), parts[i].c_str(), flags);
    if (fd < 0)
      return Invalid(what, absl::StrCat("cannot open '", location, "' (component '", parts[i],
                                        "'): ", std::strerror(errno)));
    if (last)
      file.reset(fd);
    else
      dir.reset(fd);
  }
  struct stat st;
  if (fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Invalid(what, absl::StrCat("location '", location, "' is not a regular file"));
  int64_t end;
  if (AddOverflows(off, nbytes, &end)) return Invalid(what, "offset + length overflows int64");
  if (end > static_cast<int64_t>(st.st_size))
    return Invalid(what, absl::StrCat("range [", off, ", ", end, ") is past the end of '", location,
                                      "' (", static_cast<int64_t>(st.st_size), " bytes)"));
  const bool aligned = element_bytes > 0 && off % static_cast<int64_t>(element_bytes) == 0;
  if (nbytes >= kMapMinBytes && aligned)
    if (std::shared_ptr<Storage> mapped = MapRange(file.get(), off, nbytes)) return mapped;
  std::shared_ptr<Storage> storage = Storage::Allocate(static_cast<size_t>(nbytes));
  if (!storage)
    return absl::ResourceExhaustedError(absl::StrCat(std::string(what), ": out of memory"));
  int64_t done = 0;
  while (done < nbytes) {
    const ssize_t r =
        pread(file.get(), storage->data() + done, static_cast<size_t>(nbytes - done), off + done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return Invalid(what, absl::StrCat("read of '", location, "' failed at byte ", off + done,
                                        r == 0 ? ": unexpected end of file"
                                               : absl::StrCat(": ", std::strerror(errno))));
    done += r;
  }
  return storage;
}

}  // namespace kiln::onnx_import
