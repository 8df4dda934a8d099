// Narrow element types (kiln/ir/narrow.h): every code of every float format decodes and
// re-encodes to itself, the formats' extreme values are the ones the ONNX spec tables
// give, rounding is to nearest even, and saturation / overflow go where the spec says.
// Sub-byte packing round-trips and sign-extends. Exact: these are bit-level conversions.
#include "kiln/ir/narrow.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr DType kFloat8[] = {DType::kF8E4M3FN, DType::kF8E4M3FNUZ, DType::kF8E5M2,
                             DType::kF8E5M2FNUZ, DType::kF4E2M1};

int Codes(DType t) { return t == DType::kF4E2M1 ? 16 : 256; }

TEST(Narrow, EveryCodeRoundTrips) {
  for (DType t : kFloat8) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    int nans = 0;
    for (int c = 0; c < Codes(t); ++c) {
      const float v = NarrowToFloat(static_cast<uint8_t>(c), t);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(NarrowToFloat(NarrowFromDouble(v, t), t)));
        continue;
      }
      EXPECT_EQ(NarrowFromDouble(v, t, /*saturate=*/false), c) << "value " << v;
    }
    // NaN codes: E4M3FN S.1111.111 (2), FNUZ 0x80 (1), E5M2 S.11111.{01,10,11} (6), E2M1 none.
    const int want = t == DType::kF8E4M3FN ? 2
                     : t == DType::kF8E5M2 ? 6
                     : t == DType::kF4E2M1 ? 0
                                           : 1;
    EXPECT_EQ(nans, want);
  }
}

TEST(Narrow, ExtremesMatchTheSpec) {
  struct Row {
    DType t;
    float max, min_subnormal;
  };
  for (Row r : {Row{DType::kF8E4M3FN, 448.0f, std::ldexp(1.0f, -9)},
                Row{DType::kF8E4M3FNUZ, 240.0f, std::ldexp(1.0f, -10)},
                Row{DType::kF8E5M2, 57344.0f, std::ldexp(1.0f, -16)},
                Row{DType::kF8E5M2FNUZ, 57344.0f, std::ldexp(1.0f, -17)},
                Row{DType::kF4E2M1, 6.0f, 0.5f}}) {
    SCOPED_TRACE(std::string(DTypeName(r.t)));
    float max = 0, min_sub = std::numeric_limits<float>::infinity();
    for (int c = 0; c < Codes(r.t); ++c) {
      const float v = NarrowToFloat(static_cast<uint8_t>(c), r.t);
      if (std::isfinite(v)) max = std::max(max, v);
      if (std::isfinite(v) && v > 0) min_sub = std::min(min_sub, v);
    }
    EXPECT_EQ(max, r.max);
    EXPECT_EQ(min_sub, r.min_subnormal);
    // Saturation: beyond the range and infinities go to +-max.
    EXPECT_EQ(NarrowToFloat(NarrowFromDouble(1e30, r.t, true), r.t), r.max);
    EXPECT_EQ(NarrowToFloat(NarrowFromDouble(-INFINITY, r.t, true), r.t), -r.max);
    // Half the smallest subnormal is a tie with 0: to even, i.e. 0.
    EXPECT_EQ(NarrowToFloat(NarrowFromDouble(r.min_subnormal / 2, r.t), r.t), 0.0f);
    EXPECT_EQ(NarrowToFloat(NarrowFromDouble(r.min_subnormal * 0.75, r.t), r.t), r.min_subnormal);
  }
}

TEST(Narrow, OverflowWithoutSaturation) {
  // E5M2 has Inf; E4M3FN and the FNUZ types give NaN; E2M1 always saturates.
  EXPECT_TRUE(
      std::isinf(NarrowToFloat(NarrowFromDouble(1e6, DType::kF8E5M2, false), DType::kF8E5M2)));
  EXPECT_EQ(NarrowFromDouble(-INFINITY, DType::kF8E5M2, false), 0xfc);
  EXPECT_EQ(NarrowFromDouble(470.0, DType::kF8E4M3FN, false), 0x7f);  // rounds to 480: NaN
  EXPECT_EQ(NarrowFromDouble(-470.0, DType::kF8E4M3FN, false), 0xff);
  EXPECT_EQ(NarrowFromDouble(250.0, DType::kF8E4M3FNUZ, false), 0x80);
  EXPECT_EQ(NarrowFromDouble(1e6, DType::kF4E2M1, false), 0x7);
  EXPECT_EQ(NarrowFromDouble(std::nan(""), DType::kF4E2M1), 0x8);  // as ml_dtypes
}

TEST(Narrow, RoundsToNearestEven) {
  // E4M3FN: 464 lies halfway between 448 (mantissa 110) and 480: even is 448. 17 lies
  // halfway between 16 and 18: even is 16; 19 between 18 and 20: 20.
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(464.0, DType::kF8E4M3FN), DType::kF8E4M3FN), 448.0f);
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(17.0, DType::kF8E4M3FN), DType::kF8E4M3FN), 16.0f);
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(19.0, DType::kF8E4M3FN), DType::kF8E4M3FN), 20.0f);
  // Rounding up across a binade: 15.5 in E4M3FN (steps of 1 in [8, 16)) ties to 16.
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(15.5, DType::kF8E4M3FN), DType::kF8E4M3FN), 16.0f);
  // E2M1: 2.5 ties between 2 and 3 -> 2; 5 between 4 and 6 -> 4; 0.25 between 0 and 0.5 -> 0.
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(2.5, DType::kF4E2M1), DType::kF4E2M1), 2.0f);
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(5.0, DType::kF4E2M1), DType::kF4E2M1), 4.0f);
  EXPECT_EQ(NarrowToFloat(NarrowFromDouble(0.25, DType::kF4E2M1), DType::kF4E2M1), 0.0f);
  // FNUZ types have no -0.
  EXPECT_EQ(NarrowFromDouble(-0.0, DType::kF8E5M2FNUZ), 0);
  EXPECT_EQ(NarrowFromDouble(-0.0, DType::kF8E5M2), 0x80);
}

TEST(Narrow, E8M0Rounding) {
  EXPECT_EQ(NarrowToFloat(127, DType::kF8E8M0), 1.0f);
  EXPECT_EQ(NarrowToFloat(0, DType::kF8E8M0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(NarrowToFloat(0xff, DType::kF8E8M0)));
  EXPECT_EQ(E8M0FromFloat(3.0f, true, E8M0Rounding::kUp), 129);    // 4
  EXPECT_EQ(E8M0FromFloat(3.0f, true, E8M0Rounding::kDown), 128);  // 2
  EXPECT_EQ(E8M0FromFloat(3.0f, true, E8M0Rounding::kNearest), 129);
  EXPECT_EQ(E8M0FromFloat(2.5f, true, E8M0Rounding::kNearest), 128);
  EXPECT_EQ(E8M0FromFloat(-4.0f, true, E8M0Rounding::kUp), 129);  // the sign is dropped
  EXPECT_EQ(E8M0FromFloat(INFINITY, true, E8M0Rounding::kUp), 0xff);
  const float big = std::ldexp(1.5f, 127);  // exponent field 0xfe with a fraction
  EXPECT_EQ(E8M0FromFloat(big, true, E8M0Rounding::kUp), 0xfe);
  EXPECT_EQ(E8M0FromFloat(big, false, E8M0Rounding::kUp), 0xff);
}

TEST(Narrow, IntegersWrapAndPack) {
  EXPECT_EQ(static_cast<int8_t>(WrapNarrowInt(8, DType::kI4)), -8);
  EXPECT_EQ(static_cast<int8_t>(WrapNarrowInt(-9, DType::kI4)), 7);
  EXPECT_EQ(WrapNarrowInt(-1, DType::kU2), 3);
  EXPECT_EQ(static_cast<int8_t>(WrapNarrowInt(2, DType::kI2)), -2);
  EXPECT_EQ(WrapNarrowInt(16, DType::kU4), 0);

  for (DType t : {DType::kI4, DType::kU4, DType::kF4E2M1, DType::kI2, DType::kU2}) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    const int bits = DTypeBits(t);
    for (int64_t n : {0, 1, 2, 3, 5, 8, 9}) {
      std::vector<uint8_t> in(n);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = (i * 7 + 3) % (int64_t{1} << bits);
        in[i] = t == DType::kF4E2M1 ? static_cast<uint8_t>(v) : WrapNarrowInt(v, t);
      }
      std::vector<uint8_t> packed(PackedBytes(t, n) + 1, 0xaa);  // a guard byte
      PackSubByte(in.data(), n, t, packed.data());
      EXPECT_EQ(packed.back(), 0xaa) << "wrote past PackedBytes";
      std::vector<uint8_t> out(n);
      UnpackSubByte(packed.data(), n, t, out.data());
      EXPECT_EQ(out, in) << n;
    }
  }
  EXPECT_EQ(PackedBytes(DType::kI4, 3), 2);
  EXPECT_EQ(PackedBytes(DType::kU2, 5), 2);
  EXPECT_EQ(PackedBytes(DType::kF8E5M2, 5), 5);
  EXPECT_EQ(PackedBytes(DType::kF32, 5), 20);
}

}  // namespace
}  // namespace kiln
