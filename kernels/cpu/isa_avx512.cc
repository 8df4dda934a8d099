// AVX-512 (F/BW/VL/DQ) build of the inner loops in isa_impl.inc. Every function in this file
// is compiled for AVX-512 by the target pragma below; all other headers are included before
// it so that no shared inline function gets an AVX-512 body. Only reached when
// IsaSupported(kAvx512).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/cpu/isa_kernels.h"

// GCC 12's avx512fintrin.h reductions read an intentionally undefined vector and warn.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")

namespace kiln::cpu::internal {
namespace {

struct V {
  static constexpr int W = 16;
  using T = __m512;
  static T Zero() { return _mm512_setzero_ps(); }
  static T Set1(float f) { return _mm512_set1_ps(f); }
  static T Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static __mmask16 Mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static T LoadN(const float* p, int64_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), Mask(n), p);
  }
  static void StoreN(float* p, T v, int64_t n) { _mm512_mask_storeu_ps(p, Mask(n), v); }
  static T Add(T a, T b) { return _mm512_add_ps(a, b); }
  static T Sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T Mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T Div(T a, T b) { return _mm512_div_ps(a, b); }
  static T Fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T Max(T a, T b) { return _mm512_max_ps(a, b); }
  static T Min(T a, T b) { return _mm512_min_ps(a, b); }
  static T Abs(T a) { return _mm512_abs_ps(a); }
  static T Round(T a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static T Pow2Scale(T v, T n) { return _mm512_scalef_ps(v, n); }
  static T ZeroIfBelow(T v, T x, T t) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, t, _CMP_NLT_UQ), v);
  }
  static T SelectNonNeg(T x, T a, T b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), b, a);
  }
  static float ReduceAdd(T v) { return _mm512_reduce_add_ps(v); }
  static float ReduceMax(T v) { return _mm512_reduce_max_ps(v); }
  // lo[i] = p[i] & 15, hi[i] = p[i] >> 4 for the W bytes at p, as floats.
  static void Nibbles(const uint8_t* p, T& lo, T& hi) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)));
    hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
  }
  // lo[i] = p[i], hi[i] = p[W + i] for the 2·W bytes at p, as floats.
  static void Bytes(const uint8_t* p, T& lo, T& hi) {
    lo = _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    hi = _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))));
  }
};

#include "kernels/cpu/isa_impl.inc"

}  // namespace

const IsaKernels& Avx512Kernels() { return kKernels; }

}  // namespace kiln::cpu::internal

#pragma GCC pop_options
