// libFuzzer target: ONNX import of ModelProto bytes (ImportOnnxBytes), with a model folder
// holding one external-data file ("weights.bin", 64 KiB of a fixed pattern) so that
// external-data entries resolve, read at fuzzed offsets and lengths, and paths that leave
// the folder are refused. Anything imported is verified: an imported graph that fails
// the IR verifier is a bug (abort).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kiln/ir/verifier.h"
#include "kiln/onnx/importer.h"

namespace {

const std::string& ModelDir() {
  static const std::string dir = [] {
    std::vector<uint8_t> w(64 * 1024);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 131 + 7);
    kiln::fuzz::WriteScratch("weights.bin", w.data(), w.size());
    return kiln::fuzz::ScratchDir();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::ImportOptions options;
  options.max_tensor_bytes = int64_t{64} << 20;  // keep one run's memory small
  options.max_total_bytes = int64_t{256} << 20;
  options.max_nodes = 100000;
  auto g = kiln::ImportOnnxBytes(std::string_view(reinterpret_cast<const char*>(data), size),
                                 ModelDir(), options);
  if (g.ok() && !kiln::VerifyGraph(**g).ok()) __builtin_trap();
  return 0;
}
