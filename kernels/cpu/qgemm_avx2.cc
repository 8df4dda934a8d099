// AVX2 build of the int8 GEMM's inner loops (qgemm_internal.h): s8 rows, |q|·sign(w, q) through
// vpmaddubsw (no saturation: |q|, |w| ≤ 127) and vpmaddwd. Tile 4 rows × 16 channels: 8
// accumulators, 2 weight vectors, the broadcast row, its absolute value, a ones vector and a
// temporary fill the 16 registers. Only reached when IsaSupported(kAvx2).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/qgemm_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace kiln::cpu::internal {
namespace {

constexpr int kMr = 4, kNv = 2, kNr = kNv * 8;

// x[i .. i+8) times mul's (when there is one).
inline __m256 Load8(const float* x, const float* mul, int64_t i) {
  const __m256 v = _mm256_loadu_ps(x + i);
  return mul ? _mm256_mul_ps(v, _mm256_loadu_ps(mul + i)) : v;
}

float QuantizeRow(const float* x, const float* mul, int64_t k, int64_t k4, float fixed_a,
                  uint8_t* q) {
  auto at = [&](int64_t i) { return mul ? x[i] * mul[i] : x[i]; };
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 v = Load8(x, mul, i);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
    bad = _mm256_add_ps(bad, _mm256_sub_ps(v, v));  // NaN once any value is inf or NaN
  }
  float a = 0.0f, b = 0.0f;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  for (float l : lanes) a = std::max(a, l);
  _mm256_store_ps(lanes, bad);
  for (float l : lanes) b += l;
  for (; i < k; ++i) {
    a = std::max(a, std::fabs(at(i)));
    b += at(i) - at(i);
  }
  if (fixed_a > 0.0f) a = fixed_a;
  std::memset(q, 0, static_cast<size_t>(k4));
  if (b != 0.0f || std::isnan(b)) return NAN;
  const __m256 inv = _mm256_set1_ps(QuantInverse(a));
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (i = 0; i + 8 <= k; i += 8) {
    __m256 v = _mm256_mul_ps(Load8(x, mul, i), inv);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i n = _mm256_cvtps_epi32(v);  // round to nearest even (MXCSR default)
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(n), _mm256_extracti128_si256(n, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(w16, w16));
  }
  const float s = QuantInverse(a);
  for (; i < k; ++i)
    q[i] = static_cast<uint8_t>(
        static_cast<int8_t>(std::fmin(std::fmax(std::nearbyint(at(i) * s), -127.0f), 127.0f)));
  return a / 127.0f;
}

// acc += p through inline asm, each accumulator zeroed on its own: with the intrinsics GCC
// 12 kept copies of the accumulators on the stack every iteration (as with vpdpbusd,
// qgemm_avx512.cc).
inline __m256i AddTo(__m256i acc, __m256i p) {
  asm("vpaddd %1, %0, %0" : "+x"(acc) : "x"(p));
  return acc;
}

inline __m256i Zero() {
  __m256i z;
  asm("vpxor %0, %0, %0" : "=x"(z));
  return z;
}

template <int MR>
void TileT(const QuantTile& t) {
  __m256i acc[MR][kNv];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kNv; ++v) acc[r][v] = Zero();
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* b = t.b;
  const int64_t groups = t.k4 / 4;
  for (int64_t g = 0; g < groups; ++g, b += kNr * 4) {
    __m256i bv[kNv];
    for (int v = 0; v < kNv; ++v)
      bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + v * 32));
    for (int r = 0; r < MR; ++r) {
      int32_t a4;
      std::memcpy(&a4, t.a + r * t.lda + 4 * g, 4);
      const __m256i av = _mm256_set1_epi32(a4);
      const __m256i aa = _mm256_abs_epi8(av);
      for (int v = 0; v < kNv; ++v) {
        const __m256i p = _mm256_maddubs_epi16(aa, _mm256_sign_epi8(bv[v], av));
        acc[r][v] = AddTo(acc[r][v], _mm256_madd_epi16(p, ones));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    const __m256 as = _mm256_set1_ps(t.a_scale[r]);
    float* c = t.c + r * t.ldc;
    for (int v = 0; v < kNv; ++v) {
      const int lanes = t.nr - v * 8;
      if (lanes <= 0) break;
      const __m256 scale = _mm256_mul_ps(as, _mm256_loadu_ps(t.w_scale + v * 8));
      const __m256 bias = t.bias ? _mm256_loadu_ps(t.bias + v * 8) : _mm256_setzero_ps();
      const __m256 y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][v]), scale, bias);
      if (lanes >= 8) {
        _mm256_storeu_ps(c + v * 8, y);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, y);
        std::memcpy(c + v * 8, tmp, static_cast<size_t>(lanes) * sizeof(float));
      }
    }
  }
}

void Tile(const QuantTile& t) {
  switch (t.mr) {
    case 1:
      return TileT<1>(t);
    case 2:
      return TileT<2>(t);
    case 3:
      return TileT<3>(t);
    default:
      return TileT<4>(t);
  }
}

constexpr QuantKernels kTable = {"avx2", kMr, kNr, false, &QuantizeRow, &Tile};

}  // namespace

const QuantKernels& QuantKernelsAvx2() { return kTable; }

}  // namespace kiln::cpu::internal

#pragma GCC pop_options
