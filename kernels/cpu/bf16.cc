// bf16 conversions (bf16.h): portable loops, and vcvtneps2bf16 where the CPU has it
// (bf16_avx512.cc).
#include "kernels/cpu/bf16.h"

#include <cstring>

namespace kiln::cpu {
namespace internal {
void ConvertToBf16Avx512(const float* x, int64_t n, uint16_t* y);  // bf16_avx512.cc
}

namespace {

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float FromBf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

void ConvertToBf16(const float* x, int64_t n, uint16_t* y, Isa isa) {
  if (HasAvx512Bf16(isa)) return internal::ConvertToBf16Avx512(x, n, y);
  for (int64_t i = 0; i < n; ++i) y[i] = ToBf16(x[i]);
}

void RoundToBf16(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = FromBf16(ToBf16(x[i]));
}

void Bf16ToFloat(const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = FromBf16(x[i]);
}

}  // namespace kiln::cpu
