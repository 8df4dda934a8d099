// Shared by the libFuzzer targets (fuzz/*_fuzz.cc): a per-process scratch folder for the
// targets whose API reads a file (the .npy reader, the plan loader, the importer's
// external data).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::fuzz {

// A folder of this process's own under $TMPDIR (or /tmp; scripts/fuzz.sh points TMPDIR into
// build-fuzz/), created on first use.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string d = std::string(tmp ? tmp : "/tmp") + "/kiln-fuzz-" + std::to_string(getpid());
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    if (ec) std::abort();
    return d;
  }();
  return dir;
}

// Writes `size` bytes to `name` in the scratch folder; returns its path.
inline std::string WriteScratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) std::abort();
  return path;
}

}  // namespace kiln::fuzz
