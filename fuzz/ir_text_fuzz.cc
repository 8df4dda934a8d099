// libFuzzer target: the IR text parser (ParseGraph). A graph that parses and verifies
// must print and parse back to the same text (the printer/parser round trip docs/ir.md
// promises); a failure of that is a bug (abort).
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ir/text.h"
#include "kiln/ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto g = kiln::ParseGraph(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!g.ok() || !kiln::VerifyGraph(**g).ok()) return 0;
  const std::string text = kiln::PrintGraph(**g);
  auto again = kiln::ParseGraph(text);
  if (!again.ok() || kiln::PrintGraph(**again) != text) __builtin_trap();
  return 0;
}
