// Narrow element types (see kiln/ir/narrow.h). The float formats share one decoder and one
// encoder driven by a small table: exponent and mantissa widths, bias, the largest finite
// code, and which special values the format has. Encoding works in double, so an f32, f16
// or f64 input is rounded once (no double rounding through f32).
#include "kiln/ir/narrow.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

// kIeee: all-ones exponent is Inf (mantissa 0) or NaN (E5M2). kFn: only S.1111.111 is NaN,
// no Inf (E4M3FN). kFnuz: 0x80 is the one NaN, no Inf, no -0. kNone: no NaN or Inf (E2M1).
enum class Specials { kIeee, kFn, kFnuz, kNone };

struct Format {
  int bits;      // total bits
  int exp_bits;  // exponent width
  int man_bits;  // mantissa width
  int bias;      //
  int max_exp;   // exponent field of the largest finite value
  int max_man;   // its mantissa field
  Specials specials;
};

const Format* FormatOf(DType t) {
  static constexpr Format kE4M3FN{8, 4, 3, 7, 15, 6, Specials::kFn};
  static constexpr Format kE4M3FNUZ{8, 4, 3, 8, 15, 7, Specials::kFnuz};
  static constexpr Format kE5M2{8, 5, 2, 15, 30, 3, Specials::kIeee};
  static constexpr Format kE5M2FNUZ{8, 5, 2, 16, 31, 3, Specials::kFnuz};
  static constexpr Format kE2M1{4, 2, 1, 1, 3, 1, Specials::kNone};
  switch (t) {
    case DType::kF8E4M3FN:
      return &kE4M3FN;
    case DType::kF8E4M3FNUZ:
      return &kE4M3FNUZ;
    case DType::kF8E5M2:
      return &kE5M2;
    case DType::kF8E5M2FNUZ:
      return &kE5M2FNUZ;
    case DType::kF4E2M1:
      return &kE2M1;
    default:
      return nullptr;
  }
}

double MaxFinite(const Format& f) {
  return std::ldexp(1.0 + std::ldexp(f.max_man, -f.man_bits), f.max_exp - f.bias);
}

uint8_t SignBit(const Format& f) { return static_cast<uint8_t>(1u << (f.bits - 1)); }

uint8_t Encode(const Format& f, bool negative, int exp_field, int man_field) {
  const uint8_t code = static_cast<uint8_t>((exp_field << f.man_bits) | man_field);
  return negative ? static_cast<uint8_t>(code | SignBit(f)) : code;
}

uint8_t NaNCode(const Format& f, bool negative) {
  switch (f.specials) {
    case Specials::kIeee:  // quiet NaN: all-ones exponent, top mantissa bit
      return Encode(f, negative, (1 << f.exp_bits) - 1, 1 << (f.man_bits - 1));
    case Specials::kFn:
      return Encode(f, negative, (1 << f.exp_bits) - 1, (1 << f.man_bits) - 1);
    case Specials::kFnuz:
      return SignBit(f);
    case Specials::kNone:
      return SignBit(f);  // -0, as ml_dtypes converts NaN to E2M1
  }
  return 0;
}

// The code for a value too large for the format (or an infinity).
uint8_t OverflowCode(const Format& f, bool negative, bool saturate) {
  if (saturate || f.specials == Specials::kNone) return Encode(f, negative, f.max_exp, f.max_man);
  if (f.specials == Specials::kIeee) return Encode(f, negative, (1 << f.exp_bits) - 1, 0);
  return NaNCode(f, negative);
}

uint8_t Zero(const Format& f, bool negative) {
  return negative && f.specials != Specials::kFnuz ? SignBit(f) : 0;
}

}  // namespace

bool IsNarrowFloat(DType t) { return FormatOf(t) != nullptr || t == DType::kF8E8M0; }

bool IsNarrowInt(DType t) {
  return t == DType::kI4 || t == DType::kU4 || t == DType::kI2 || t == DType::kU2;
}

int DTypeBits(DType t) {
  switch (t) {
    case DType::kF4E2M1:
    case DType::kI4:
    case DType::kU4:
      return 4;
    case DType::kI2:
    case DType::kU2:
      return 2;
    default:
      return static_cast<int>(DTypeSize(t) * 8);
  }
}

bool IsSubByte(DType t) { return IsNarrowInt(t) || t == DType::kF4E2M1; }

int64_t PackedBytes(DType t, int64_t n) {
  const int bits = DTypeBits(t);
  if (bits == 0) return 0;  // string, undefined
  if (bits >= 8) return n * (bits / 8);
  const int64_t per_byte = 8 / bits;
  return n / per_byte + (n % per_byte != 0 ? 1 : 0);
}

float NarrowToFloat(uint8_t code, DType t) {
  if (t == DType::kF8E8M0) {
    if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(code) - 127);
  }
  const Format* f = FormatOf(t);
  if (f == nullptr) return 0.0f;
  const int exp_all = (1 << f->exp_bits) - 1;
  const int man_all = (1 << f->man_bits) - 1;
  const bool negative = (code & SignBit(*f)) != 0;
  const int exp_field = (code >> f->man_bits) & exp_all;
  const int man_field = code & man_all;
  if (f->specials == Specials::kFnuz && code == SignBit(*f))
    return std::numeric_limits<float>::quiet_NaN();
  if (f->specials == Specials::kFn && exp_field == exp_all && man_field == man_all)
    return std::numeric_limits<float>::quiet_NaN();
  if (f->specials == Specials::kIeee && exp_field == exp_all) {
    if (man_field != 0) return std::numeric_limits<float>::quiet_NaN();
    return negative ? -std::numeric_limits<float>::infinity()
                    : std::numeric_limits<float>::infinity();
  }
  double v;
  if (exp_field == 0) {
    v = std::ldexp(static_cast<double>(man_field), 1 - f->bias - f->man_bits);
  } else {
    v = std::ldexp(static_cast<double>(man_field + (1 << f->man_bits)),
                   exp_field - f->bias - f->man_bits);
  }
  return static_cast<float>(negative ? -v : v);
}

uint8_t NarrowFromDouble(double v, DType t, bool saturate) {
  if (t == DType::kF8E8M0) return E8M0FromFloat(static_cast<float>(v), saturate, E8M0Rounding::kUp);
  const Format* f = FormatOf(t);
  if (f == nullptr) return 0;
  const bool negative = std::signbit(v);
  if (std::isnan(v)) return NaNCode(*f, negative);
  if (std::isinf(v)) return OverflowCode(*f, negative, saturate);
  const double a = std::fabs(v);
  if (a == 0.0) return Zero(*f, negative);
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the unbiased exponent is e - 1
  const int emin = 1 - f->bias;
  int quantum = std::max(e - 1, emin) - f->man_bits;   // value of one mantissa step
  double r = std::nearbyint(std::ldexp(a, -quantum));  // round half to even (default mode)
  if (r == 0.0) return Zero(*f, negative);
  if (std::ldexp(r, quantum) > MaxFinite(*f)) return OverflowCode(*f, negative, saturate);
  const double implicit = std::ldexp(1.0, f->man_bits);
  if (r < implicit) return Encode(*f, negative, 0, static_cast<int>(r));  // subnormal
  if (r >= 2 * implicit) {  // rounded up into the next binade
    r /= 2;
    ++quantum;
  }
  return Encode(*f, negative, quantum + f->man_bits + f->bias, static_cast<int>(r - implicit));
}

uint8_t E8M0FromFloat(float v, bool saturate, E8M0Rounding rounding) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xffu) return 0xff;
  bool round_up = false;
  switch (rounding) {
    case E8M0Rounding::kUp:
      round_up = (bits & 0x7fffffu) != 0;
      break;
    case E8M0Rounding::kNearest: {
      // The onnx reference's rule: guard bit set and (round bit, sticky bits or a
      // non-zero exponent).
      const bool guard = (bits & 0x400000u) != 0;
      const bool round = (bits & 0x200000u) != 0;
      const bool sticky = (bits & 0x1fffffu) != 0;
      round_up = guard && (round || sticky || exponent > 0);
      break;
    }
    case E8M0Rounding::kDown:
      break;
  }
  if (saturate && exponent == 0xfeu) round_up = false;
  exponent += round_up ? 1 : 0;
  return static_cast<uint8_t>(exponent);  // 0xfe + 1 without saturation is 0xff: NaN
}

uint8_t WrapNarrowInt(int64_t v, DType t) {
  const int bits = DTypeBits(t);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if ((t == DType::kI4 || t == DType::kI2) && (u >> (bits - 1)) != 0) u |= ~mask;
  return static_cast<uint8_t>(u);
}

void UnpackSubByte(const uint8_t* packed, int64_t n, DType t, uint8_t* out) {
  const int bits = DTypeBits(t);
  const int per_byte = 8 / bits;
  const bool sign_extend = t == DType::kI4 || t == DType::kI2;
  const unsigned mask = (1u << bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const unsigned u = (packed[i / per_byte] >> ((i % per_byte) * bits)) & mask;
    out[i] = sign_extend ? WrapNarrowInt(u, t) : static_cast<uint8_t>(u);
  }
}

void PackSubByte(const uint8_t* in, int64_t n, DType t, uint8_t* packed) {
  const int bits = DTypeBits(t);
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  std::memset(packed, 0, static_cast<size_t>(PackedBytes(t, n)));
  for (int64_t i = 0; i < n; ++i)
    packed[i / per_byte] |= static_cast<uint8_t>((in[i] & mask) << ((i % per_byte) * bits));
}

}  // namespace kiln
