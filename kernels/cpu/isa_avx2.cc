// AVX2 + FMA build of the inner loops in isa_impl.inc (see isa_avx512.cc for the pragma
// discipline). Only reached when IsaSupported(kAvx2).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/cpu/isa_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace kiln::cpu::internal {
namespace {

struct V {
  static constexpr int W = 8;
  using T = __m256;
  static T Zero() { return _mm256_setzero_ps(); }
  static T Set1(float f) { return _mm256_set1_ps(f); }
  static T Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static __m256i Mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static T LoadN(const float* p, int64_t n, float fill) {
    const __m256i m = Mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void StoreN(float* p, T v, int64_t n) { _mm256_maskstore_ps(p, Mask(n), v); }
  static T Add(T a, T b) { return _mm256_add_ps(a, b); }
  static T Sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T Mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T Div(T a, T b) { return _mm256_div_ps(a, b); }
  static T Fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T Max(T a, T b) { return _mm256_max_ps(a, b); }
  static T Min(T a, T b) { return _mm256_min_ps(a, b); }
  static T Abs(T a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
  static T Round(T a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // n is integer-valued in [-126, 127] (Exp clamps its argument).
  static T Pow2Scale(T v, T n) {
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(v, _mm256_castsi256_ps(e));
  }
  static T ZeroIfBelow(T v, T x, T t) { return _mm256_and_ps(v, _mm256_cmp_ps(x, t, _CMP_NLT_UQ)); }
  static T SelectNonNeg(T x, T a, T b) {
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
  }
  static float ReduceAdd(T v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float ReduceMax(T v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // lo[i] = p[i] & 15, hi[i] = p[i] >> 4 for the W bytes at p, as floats.
  static void Nibbles(const uint8_t* p, T& lo, T& hi) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(15)));
    hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
  }
  // lo[i] = p[i], hi[i] = p[W + i] for the 2·W bytes at p, as floats.
  static void Bytes(const uint8_t* p, T& lo, T& hi) {
    lo = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    hi = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8))));
  }
};

#include "kernels/cpu/isa_impl.inc"

}  // namespace

const IsaKernels& Avx2Kernels() { return kKernels; }

}  // namespace kiln::cpu::internal

#pragma GCC pop_options
