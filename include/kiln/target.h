// What a compile is for: the executor target and the arithmetic precision. Shared by the
// plan format (kiln/plan/plan.h), the pass context (passes that depend on either read
// it) and the public API (kiln/kiln.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class PlanTarget : uint32_t { kCpu = 1, kCuda = 2 };

// fp32: the model's own float type everywhere. fp16 / bf16: on cuda the compute path's
// activations and weights in 16 bits (statistics, softmax and GEMM accumulation stay fp32
// inside the kernels); on cpu (bf16 only) the GEMMs' weights and inputs in bf16 with fp32
// accumulation, everything else fp32. int8 (cpu): the GEMMs with per-output-channel s8
// weights and activations quantized per row at run time, everything else fp32. Graph I/O
// is always in the model's own dtypes (docs/precision.md).
enum class Precision : uint8_t { kFp32, kFp16, kBf16, kInt8 };

inline std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
  }
  return "?";
}

inline std::optional<Precision> PrecisionFromName(std::string_view s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "fp16") return Precision::kFp16;
  if (s == "bf16") return Precision::kBf16;
  if (s == "int8") return Precision::kInt8;
  return std::nullopt;
}

}  // namespace kiln
