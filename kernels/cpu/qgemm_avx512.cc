// AVX-512 VNNI build of the int8 GEMM's inner loops (qgemm_internal.h): u8 rows (q + 128)
// times s8 weights through vpdpbusd, the compensation 128·Σw subtracted in the epilogue.
// Tile 8 rows × 48 channels: 24 accumulators, 3 weight vectors and the broadcast row (28
// of 32 registers), the shape of kiln's fp32 tile (gemm_impl.inc). Only reached when the
// CPU has AVX-512 VNNI (HasAvx512Vnni).
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/cpu/qgemm_internal.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")

namespace kiln::cpu::internal {
namespace {

constexpr int kMr = 8, kNv = 3, kNr = kNv * 16;

__mmask16 Mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// The lanes `m` of x[i ..] times mul's (when there is one); zeros elsewhere.
inline __m512 Load16(const float* x, const float* mul, int64_t i, __mmask16 m) {
  const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
  return mul ? _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, mul + i)) : v;
}

float QuantizeRow(const float* x, const float* mul, int64_t k, int64_t k4, float fixed_a,
                  uint8_t* q) {
  __m512 amax = _mm512_setzero_ps(), bad = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? static_cast<__mmask16>(0xffff) : Mask(k - i);
    const __m512 v = Load16(x, mul, i, m);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
    bad = _mm512_add_ps(bad, _mm512_sub_ps(v, v));  // NaN once any value is inf or NaN
  }
  const float a = fixed_a > 0.0f ? fixed_a : _mm512_reduce_max_ps(amax);
  const float b = _mm512_reduce_add_ps(bad);
  std::memset(q, 128, static_cast<size_t>(k4));
  if (b != 0.0f) return NAN;  // also NaN != 0
  const __m512 inv = _mm512_set1_ps(QuantInverse(a));
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512i shift = _mm512_set1_epi32(128);
  for (i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? static_cast<__mmask16>(0xffff) : Mask(k - i);
    __m512 v = _mm512_mul_ps(Load16(x, mul, i, m), inv);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i n = _mm512_add_epi32(_mm512_cvtps_epi32(v), shift);  // rne, then q + 128
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, n);
  }
  return a / 127.0f;
}

// acc += Σ4 a·b through inline asm: with the intrinsic, GCC 12 kept copies of the 24
// accumulators on the stack every iteration (vpdpbusd overwrites its accumulator) and ran
// at 40 % of this tile's speed (BM_QuantLinear, 200 vs 470 GOP/s on one Zen 4 core).
inline __m512i Dpbusd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

inline __m512i Zero() {
  __m512i z;
  asm("vpxord %0, %0, %0" : "=v"(z));  // one register per accumulator, none shared
  return z;
}

template <int MR>
void TileT(const QuantTile& t) {
  __m512i acc[MR][kNv];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kNv; ++v) acc[r][v] = Zero();
  const int8_t* b = t.b;
  const int64_t groups = t.k4 / 4;
  const uint8_t* a = t.a;
  const int64_t lda = t.lda;
  for (int64_t g = 0; g < groups; ++g, b += kNr * 4) {
    __m512i bv[kNv];
    for (int v = 0; v < kNv; ++v) bv[v] = _mm512_loadu_si512(b + v * 64);
    for (int r = 0; r < MR; ++r) {
      int32_t a4;
      std::memcpy(&a4, a + r * lda + 4 * g, 4);
      const __m512i av = _mm512_set1_epi32(a4);
      for (int v = 0; v < kNv; ++v) acc[r][v] = Dpbusd(acc[r][v], av, bv[v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    const __m512 as = _mm512_set1_ps(t.a_scale[r]);
    float* c = t.c + r * t.ldc;
    for (int v = 0; v < kNv; ++v) {
      const int lanes = t.nr - v * 16;
      if (lanes <= 0) break;
      const __m512i s = _mm512_sub_epi32(acc[r][v], _mm512_loadu_si512(t.comp + v * 16));
      const __m512 scale = _mm512_mul_ps(as, _mm512_loadu_ps(t.w_scale + v * 16));
      const __m512 bias = t.bias ? _mm512_loadu_ps(t.bias + v * 16) : _mm512_setzero_ps();
      const __m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, bias);
      if (lanes >= 16)
        _mm512_storeu_ps(c + v * 16, y);
      else
        _mm512_mask_storeu_ps(c + v * 16, Mask(lanes), y);
    }
  }
}

template <int... R>
constexpr auto MakeTable(std::integer_sequence<int, R...>) {
  return std::array<void (*)(const QuantTile&), sizeof...(R)>{&TileT<R + 1>...};
}
constexpr auto kTiles = MakeTable(std::make_integer_sequence<int, kMr>{});

void Tile(const QuantTile& t) { kTiles[t.mr - 1](t); }

constexpr QuantKernels kTable = {"avx512_vnni", kMr, kNr, true, &QuantizeRow, &Tile};

}  // namespace

const QuantKernels& QuantKernelsAvx512Vnni() { return kTable; }

}  // namespace kiln::cpu::internal

#pragma GCC pop_options
