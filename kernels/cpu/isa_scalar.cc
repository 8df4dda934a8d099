// Portable build of the inner loops in isa_impl.inc: a one-lane "vector" of plain floats,
// compiled for the baseline target. The fallback on CPUs without AVX2, and the path tests
// force to check the vector ones.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu::internal {
namespace {

struct V {
  static constexpr int W = 1;
  using T = float;
  static T Zero() { return 0.0f; }
  static T Set1(float f) { return f; }
  static T Load(const float* p) { return *p; }
  static void Store(float* p, T v) { *p = v; }
  static T LoadN(const float* p, int64_t n, float fill) { return n > 0 ? *p : fill; }
  static void StoreN(float* p, T v, int64_t n) {
    if (n > 0) *p = v;
  }
  static T Add(T a, T b) { return a + b; }
  static T Sub(T a, T b) { return a - b; }
  static T Mul(T a, T b) { return a * b; }
  static T Div(T a, T b) { return a / b; }
  static T Fma(T a, T b, T c) { return std::fma(a, b, c); }
  static T Max(T a, T b) { return a > b ? a : b; }
  static T Min(T a, T b) { return a < b ? a : b; }
  static T Abs(T a) { return std::fabs(a); }
  static T Round(T a) { return std::nearbyint(a); }
  static T Pow2Scale(T v, T n) { return std::ldexp(v, static_cast<int>(n)); }
  static T ZeroIfBelow(T v, T x, T t) { return x < t ? 0.0f : v; }
  static T SelectNonNeg(T x, T a, T b) { return x >= 0 ? a : b; }
  static float ReduceAdd(T v) { return v; }
  static float ReduceMax(T v) { return v; }
  // lo = p[0] & 15, hi = p[0] >> 4, as floats.
  static void Nibbles(const uint8_t* p, T& lo, T& hi) {
    lo = static_cast<float>(p[0] & 15);
    hi = static_cast<float>(p[0] >> 4);
  }
  // lo = p[0], hi = p[1], as floats.
  static void Bytes(const uint8_t* p, T& lo, T& hi) {
    lo = static_cast<float>(p[0]);
    hi = static_cast<float>(p[1]);
  }
};

#include "kernels/cpu/isa_impl.inc"

}  // namespace

const IsaKernels& ScalarKernels() { return kKernels; }

const IsaKernels& KernelsFor(const CpuContext& ctx) {
  switch (ctx.ResolvedIsa()) {
    case Isa::kAvx512:
      return Avx512Kernels();
    case Isa::kAvx2:
      return Avx2Kernels();
    default:
      return ScalarKernels();
  }
}

}  // namespace kiln::cpu::internal
