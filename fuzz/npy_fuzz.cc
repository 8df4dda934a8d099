// libFuzzer target: the .npy reader (ReadNpy) on arbitrary file bytes. A tensor it returns
// must own at least the bytes its dtype and dims say (abort otherwise), and reading its
// last byte must stay inside them (ASan checks).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "kiln/support/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::WriteScratch("input.npy", data, size);
  auto t = kiln::ReadNpy(path);
  if (!t.ok()) return 0;
  if (t->NumBytes() > 0 && (t->storage() == nullptr || t->storage()->size() < t->NumBytes()))
    __builtin_trap();
  if (t->NumBytes() > 0) {
    volatile std::byte last = static_cast<const std::byte*>(t->raw())[t->NumBytes() - 1];
    (void)last;
  }
  return 0;
}
