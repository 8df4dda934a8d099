// Internal: the per-instruction-set inner loops of kiln's int8 GEMM (qgemm.h). Three builds,
// each with its own target pragma: AVX-512 VNNI (qgemm_avx512.cc), AVX2 (qgemm_avx2.cc) and
// portable scalar (qgemm_scalar.cc); QuantGemm picks one table per CPU.
//
// The arithmetic is exact on every path, so the integer sums — and the outputs up to the
// float epilogue — are the same on every CPU:
//   - activations are s8 in [-127, 127] (quantize_row); VNNI stores them as u8 = q + 128
//     and the epilogue subtracts the weights' compensation 128·Σ_k w[n,k] (vpdpbusd
//     multiplies u8 by s8 and accumulates in s32 without saturation);
//   - AVX2 has no VNNI, and vpmaddubsw saturates its s16 pair sums (255·127·2 > 32767):
//     it multiplies |q| (u8 ≤ 127) by w with q's sign (vpsignb), so a pair sum is at most
//     2·127·127 = 32258 and never saturates, then widens pairs with vpmaddwd.
#pragma once

#include <cstdint>
#include <limits>

namespace kiln::cpu::internal {

// The quantizer's multiplier 127 / a for a row whose max |x| is a: 0 where a is 0 or so
// small (below ~3.7e-37) that 127 / a overflows, so such a row quantizes to zeros instead
// of inf · 0 = NaN.
inline float QuantInverse(float a) {
  const float inv = 127.0f / a;
  return a > 0.0f && inv <= std::numeric_limits<float>::max() ? inv : 0.0f;
}

// The packed weights: panels of `nr` output channels, [k4 / 4][nr][4] s8 each (four
// consecutive k of one channel per 32-bit lane), zero past N and K.
struct QuantTile {
  const uint8_t* a = nullptr;  // quantized row r at a + r * lda (k4 bytes)
  int64_t lda = 0;
  const int8_t* b = nullptr;       // one packed panel
  const int32_t* comp = nullptr;   // the panel's nr compensations (VNNI), else null
  const float* w_scale = nullptr;  // the panel's nr scales (zero past N)
  const float* bias = nullptr;     // the panel's nr biases, or null
  const float* a_scale = nullptr;  // row r's scale at a_scale[r]
  float* c = nullptr;              // row r at c + r * ldc
  int64_t ldc = 0;
  int64_t k4 = 0;  // K rounded up to a multiple of 4
  int mr = 0;      // 1 .. rows of the table's tile
  int nr = 0;      // 1 .. the table's nr valid columns
};

struct QuantKernels {
  const char* name;  // "avx512_vnni", "avx2", "scalar"
  int mr, nr;        // register tile
  bool u8_rows;      // quantize_row stores q + 128 (and tiles need comp)
  // Quantizes x̃ = x ⊙ mul (mul [k] may be null: ones) into q[0, k4) (padding: 0, or 128 for
  // u8 rows) and returns the row's scale a / 127, a = max |x̃| (or fixed_a when it is > 0: a
  // static range from calibration, values beyond it clamped): q = clamp(rne(x̃ · (127 / a)),
  // ±127), all f32 arithmetic; zeros when a is 0 or tiny (QuantInverse). A row holding inf
  // or NaN gives zeros and returns NaN (its outputs are NaN).
  float (*quantize_row)(const float* x, const float* mul, int64_t k, int64_t k4, float fixed_a,
                        uint8_t* q);
  // c[r, j] = (Σ q[r]·w[j] − comp[j]) · a_scale[r] · w_scale[j] + bias[j], r < mr, j < nr.
  void (*tile)(const QuantTile& t);
};

const QuantKernels& QuantKernelsScalar();
const QuantKernels& QuantKernelsAvx2();
const QuantKernels& QuantKernelsAvx512Vnni();

}  // namespace kiln::cpu::internal
