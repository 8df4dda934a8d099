// Portable build of the int8 GEMM's inner loops (qgemm_internal.h): the scalar reference path,
// and what KILN_CPU_ISA=scalar runs.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/qgemm_internal.h"

namespace kiln::cpu::internal {
namespace {

constexpr int kMr = 4, kNr = 4;

float QuantizeRow(const float* x, const float* mul, int64_t k, int64_t k4, float fixed_a,
                  uint8_t* q) {
  auto at = [&](int64_t i) { return mul ? x[i] * mul[i] : x[i]; };
  float a = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < k; ++i) {
    finite &= std::isfinite(at(i));
    a = std::max(a, std::fabs(at(i)));
  }
  if (fixed_a > 0.0f) a = fixed_a;
  std::memset(q, 0, static_cast<size_t>(k4));
  if (!finite) return NAN;
  const float inv = QuantInverse(a);
  for (int64_t i = 0; i < k; ++i)
    q[i] = static_cast<uint8_t>(
        static_cast<int8_t>(std::clamp(std::nearbyint(at(i) * inv), -127.0f, 127.0f)));
  return a / 127.0f;
}

void Tile(const QuantTile& t) {
  for (int r = 0; r < t.mr; ++r) {
    const int8_t* a = reinterpret_cast<const int8_t*>(t.a + r * t.lda);
    int32_t acc[kNr] = {};
    const int8_t* b = t.b;
    for (int64_t g = 0; g < t.k4 / 4; ++g, b += kNr * 4)
      for (int j = 0; j < kNr; ++j)
        for (int u = 0; u < 4; ++u) acc[j] += int32_t{a[4 * g + u]} * b[4 * j + u];
    for (int j = 0; j < t.nr; ++j) {
      float y = static_cast<float>(acc[j]) * (t.a_scale[r] * t.w_scale[j]);
      if (t.bias) y += t.bias[j];
      t.c[r * t.ldc + j] = y;
    }
  }
}

constexpr QuantKernels kTable = {"scalar", kMr, kNr, false, &QuantizeRow, &Tile};

}  // namespace

const QuantKernels& QuantKernelsScalar() { return kTable; }

}  // namespace kiln::cpu::internal
