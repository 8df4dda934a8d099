// libFuzzer target: the plan loader (LoadPlanFile: header, metadata, CRCs, every
// structural rule of the format) on arbitrary file bytes.
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "kiln/plan/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::WriteScratch("input.kiln", data, size);
  auto plan = kiln::LoadPlanFile(path);
  (void)plan;
  return 0;
}
