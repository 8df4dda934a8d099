// Reference kernels of the quantization ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear (quantize.cc) and MatMulInteger (math.cc), on hand-computed values:
// round half to even, saturation, per-tensor / per-axis / blocked scales, zero points per
// row and column, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/reference/reference_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::I32;
using testing::Make;
using testing::Run1;
using testing::RunOp;
using testing::Values;

using Dims = std::vector<int64_t>;

Tensor U8(Dims d, std::vector<uint8_t> v) { return Make(DType::kU8, std::move(d), std::move(v)); }
Tensor I8(Dims d, std::vector<int8_t> v) { return Make(DType::kI8, std::move(d), std::move(v)); }

TEST(QuantizeLinearTest, PerTensorRoundsHalfToEvenAndSaturates) {
  // x / 2 = 0, 1, 1.5, 2.5, 3.5, 500, -127, -500 -> rne 0 1 2 2 4 500 -127 -500, + 128.
  Tensor y = Run1("QuantizeLinear",
                  {F32({8}, {0, 2, 3, 5, 7, 1000, -254, -1000}), F32({}, {2}), U8({}, {128})});
  EXPECT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(Values<uint8_t>(y), (std::vector<uint8_t>{128, 129, 130, 130, 132, 255, 1, 0}));
  // No zero point: u8, zero point 0.
  Tensor z = Run1("QuantizeLinear", {F32({3}, {-1, 0.4f, 0.6f}), F32({}, {1})});
  EXPECT_EQ(z.dtype(), DType::kU8);
  EXPECT_EQ(Values<uint8_t>(z), (std::vector<uint8_t>{0, 0, 1}));
}

TEST(QuantizeLinearTest, PerAxisBlockedAndOutputDtype) {
  // axis 1: scales [1, 2, 4], zero points [0, 1, -1].
  Tensor y = Run1("QuantizeLinear", {F32({2, 3}, {1, 4, 8, -300, -3, 200}), F32({3}, {1, 2, 4}),
                                     I8({3}, {0, 1, -1})});
  EXPECT_EQ(y.dtype(), DType::kI8);
  EXPECT_EQ(Values<int8_t>(y), (std::vector<int8_t>{1, 3, 1, -128, -1, 49}));
  // Negative axis: -2 is axis 0 of [2, 3].
  Tensor r = Run1("QuantizeLinear", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({2}, {1, 2})},
                  {{"axis", int64_t{-2}}});
  EXPECT_EQ(Values<uint8_t>(r), (std::vector<uint8_t>{1, 2, 3, 2, 2, 3}));
  // Blocks of 2 along axis 1: scales [[1, 3]]; output_dtype INT8 (3).
  Tensor b = Run1("QuantizeLinear", {F32({1, 4}, {2, -4, 9, 12}), F32({1, 2}, {1, 3})},
                  {{"axis", int64_t{1}}, {"block_size", int64_t{2}}, {"output_dtype", int64_t{3}}});
  EXPECT_EQ(b.dtype(), DType::kI8);
  EXPECT_EQ(Values<int8_t>(b), (std::vector<int8_t>{2, -4, 3, 4}));
}

TEST(QuantizeLinearTest, NaNGivesTheZeroPointAndBadInputsFail) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = Run1("QuantizeLinear", {F32({2}, {nan, 1}), F32({}, {1}), U8({}, {7})});
  EXPECT_EQ(Values<uint8_t>(y), (std::vector<uint8_t>{7, 8}));
  auto wrong_len =
      RunOp("QuantizeLinear", {F32({2, 3}, std::vector<float>(6, 1)), F32({2}, {1, 1})});
  EXPECT_EQ(wrong_len.status().code(), absl::StatusCode::kInvalidArgument);
  auto zp_shape = RunOp("QuantizeLinear", {F32({3}, {1, 2, 3}), F32({}, {1}), U8({2}, {0, 0})});
  EXPECT_EQ(zp_shape.status().code(), absl::StatusCode::kInvalidArgument);
  auto dtype_clash = RunOp("QuantizeLinear", {F32({1}, {1}), F32({}, {1}), U8({}, {0})},
                           {{"output_dtype", int64_t{3}}});
  EXPECT_EQ(dtype_clash.status().code(), absl::StatusCode::kInvalidArgument);
  auto int_scale = RunOp("QuantizeLinear", {F32({1}, {1}), I32({}, {1})});
  EXPECT_EQ(int_scale.status().code(), absl::StatusCode::kUnimplemented);
  // A block as long as int64 allows: one block, no overflow counting them.
  Tensor one = Run1("QuantizeLinear", {F32({1, 4}, {1, 2, 3, 4}), F32({1, 1}, {2})},
                    {{"block_size", std::numeric_limits<int64_t>::max()}});
  EXPECT_EQ(Values<uint8_t>(one), (std::vector<uint8_t>{0, 1, 2, 2}));
  auto blocks = RunOp("QuantizeLinear", {F32({1, 4}, {1, 2, 3, 4}), F32({1, 3}, {1, 1, 1})},
                      {{"block_size", int64_t{2}}});
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DequantizeLinearTest, PerTensorPerAxisInt32AndHalfScales) {
  Tensor y = Run1("DequantizeLinear", {U8({3}, {0, 128, 255}), F32({}, {0.5f}), U8({}, {128})});
  EXPECT_EQ(y.dtype(), DType::kF32);
  EXPECT_EQ(Values<float>(y), (std::vector<float>{-64, 0, 63.5f}));
  Tensor a =
      Run1("DequantizeLinear", {I8({2, 2}, {-128, 1, 2, 3}), F32({2}, {2, 0.25f}), I8({2}, {0, 2})},
           {{"axis", int64_t{0}}});
  EXPECT_EQ(Values<float>(a), (std::vector<float>{-256, 2, 0, 0.25f}));
  Tensor i = Run1("DequantizeLinear", {I32({2}, {1000000, -3}), F32({}, {0.5f})});
  EXPECT_EQ(Values<float>(i), (std::vector<float>{500000, -1.5f}));
  Tensor half_scale(DType::kF16, {});
  half_scale.SetFromDouble(0, 0.5);
  Tensor h = Run1("DequantizeLinear", {U8({2}, {4, 5}), half_scale});
  EXPECT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(h.GetAsDouble(0), 2.0);
  EXPECT_EQ(h.GetAsDouble(1), 2.5);
  auto clash = RunOp("DequantizeLinear", {U8({1}, {1}), F32({}, {1}), I8({}, {0})});
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  auto floats = RunOp("DequantizeLinear", {F32({1}, {1}), F32({}, {1})});
  EXPECT_EQ(floats.status().code(), absl::StatusCode::kUnimplemented);
}

// The narrow targets: int4 saturates to [-8, 7] (held sign-extended, one per byte), float8
// rounds to nearest even and saturates unless `saturate` is 0, and DequantizeLinear reads
// them back.
TEST(QuantizeLinearTest, NarrowTypes) {
  Tensor i4_zp(DType::kI4, {});
  Tensor y = Run1("QuantizeLinear", {F32({5}, {-20, -7.5f, 2.5f, 3.5f, 30}), F32({}, {1}), i4_zp});
  EXPECT_EQ(y.dtype(), DType::kI4);
  EXPECT_EQ(Values<int8_t>(y), (std::vector<int8_t>{-8, -8, 2, 4, 7}));
  Tensor u2 = Run1("QuantizeLinear", {F32({3}, {-1, 1, 9}), F32({}, {1})},
                   {{"output_dtype", int64_t{25}}});  // UINT2
  EXPECT_EQ(Values<uint8_t>(u2), (std::vector<uint8_t>{0, 1, 3}));
  // E4M3FN: 17 / 1 ties to 16; 1000 saturates to 448, or is NaN (0x7f) without saturation.
  Tensor f8_zp(DType::kF8E4M3FN, {});
  Tensor f = Run1("QuantizeLinear", {F32({2}, {17, 1000}), F32({}, {1}), f8_zp});
  EXPECT_EQ(f.GetAsDouble(0), 16.0);
  EXPECT_EQ(f.GetAsDouble(1), 448.0);
  Tensor g =
      Run1("QuantizeLinear", {F32({1}, {1000}), F32({}, {1}), f8_zp}, {{"saturate", int64_t{0}}});
  EXPECT_EQ(Values<uint8_t>(g), (std::vector<uint8_t>{0x7f}));
  Tensor d = Run1("DequantizeLinear", {y, F32({}, {0.5f})});
  EXPECT_EQ(Values<float>(d), (std::vector<float>{-4, -4, 1, 2, 3.5f}));
  Tensor e = Run1("DequantizeLinear", {f, F32({}, {2})});
  EXPECT_EQ(Values<float>(e), (std::vector<float>{32, 896}));
  auto e8m0 =
      RunOp("QuantizeLinear", {F32({1}, {1}), F32({}, {1})}, {{"output_dtype", int64_t{24}}});
  EXPECT_EQ(e8m0.status().code(), absl::StatusCode::kUnimplemented);
}

// The QLinear ops: integer products exact, the scale a_scale·b_scale/y_scale in f32, round
// half to even, saturate; ConvInteger's int32 sums of zero-point-shifted operands.
TEST(QLinearOpsTest, MatMulConvAndConvInteger) {
  // (A - 0)·(B - 1) = [2, 4]·[0, 2] = 8; · 0.5·1/2 = 2; + 10 = 12.
  Tensor y =
      Run1("QLinearMatMul", {U8({1, 2}, {2, 4}), F32({}, {0.5f}), U8({}, {0}), U8({2, 1}, {1, 3}),
                             F32({}, {1}), U8({}, {1}), F32({}, {2}), U8({}, {10})});
  EXPECT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(Values<uint8_t>(y), (std::vector<uint8_t>{12}));
  Tensor sat = Run1("QLinearMatMul",
                    {U8({1, 2}, {200, 200}), F32({}, {1}), U8({}, {0}), U8({2, 1}, {200, 200}),
                     F32({}, {1}), U8({}, {0}), F32({}, {1}), U8({}, {250})});
  EXPECT_EQ(Values<uint8_t>(sat), (std::vector<uint8_t>{255}));
  // ConvInteger: x - 1 = [0, 1, 2, 3] times a 1x1 kernel of 2.
  const Tensor x = U8({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor ci = Run1("ConvInteger", {x, U8({1, 1, 1, 1}, {2}), U8({}, {1})});
  EXPECT_EQ(ci.dtype(), DType::kI32);
  EXPECT_EQ(Values<int32_t>(ci), (std::vector<int32_t>{0, 2, 4, 6}));
  // QLinearConv: the same sums · 1·1/2: 0, 1, 2, 3 (1 and 3 are exact halves... of 2 and 6).
  Tensor qc = Run1("QLinearConv", {x, F32({}, {1}), U8({}, {1}), U8({1, 1, 1, 1}, {2}),
                                   F32({}, {1}), U8({}, {0}), F32({}, {2}), U8({}, {0})});
  EXPECT_EQ(Values<uint8_t>(qc), (std::vector<uint8_t>{0, 1, 2, 3}));
  auto mixed = RunOp("ConvInteger", {x, U8({1, 1, 1, 1}, {2}), I8({}, {1})});
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  // Zero points: x's is one value (never empty, never per row); a float y_zero_point is
  // refused rather than saturating everything to 0.
  auto empty_zp = RunOp("ConvInteger", {x, U8({1, 1, 1, 1}, {2}), U8({0}, {})});
  EXPECT_EQ(empty_zp.status().code(), absl::StatusCode::kInvalidArgument);
  auto one_zp = RunOp("ConvInteger", {x, U8({1, 1, 1, 1}, {2}), U8({1}, {1})});
  EXPECT_TRUE(one_zp.ok()) << one_zp.status();  // one value, as a 1-element vector
  auto float_zp =
      RunOp("QLinearMatMul", {U8({1, 2}, {2, 4}), F32({}, {0.5f}), U8({}, {0}), U8({2, 1}, {1, 3}),
                              F32({}, {1}), U8({}, {1}), F32({}, {2}), F32({}, {10})});
  EXPECT_EQ(float_zp.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DynamicQuantizeLinearTest, SpecExampleZerosAndInf) {
  // The ONNX operator documentation's example: range [-3, 2], scale 5/255, zero point 153.
  auto r = RunOp("DynamicQuantizeLinear", {F32({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f})}, {}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<uint8_t>((*r)[0]), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_EQ(Values<float>((*r)[1]), (std::vector<float>{5.0f / 255.0f}));
  EXPECT_EQ(Values<uint8_t>((*r)[2]), (std::vector<uint8_t>{153}));
  EXPECT_EQ((*r)[1].rank(), 0);
  // All zeros: scale 1 (onnxruntime's choice; the spec would divide by zero).
  auto z = RunOp("DynamicQuantizeLinear", {F32({2}, {0, 0})}, {}, 3);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(Values<uint8_t>((*z)[0]), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(Values<float>((*z)[1]), (std::vector<float>{1}));
  // A range so small that (max - min) / 255 underflows: as all zeros.
  auto tiny = RunOp("DynamicQuantizeLinear", {F32({2}, {1e-44f, 0})}, {}, 3);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(Values<uint8_t>((*tiny)[0]), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(Values<float>((*tiny)[1]), (std::vector<float>{1}));
  auto inf = RunOp("DynamicQuantizeLinear", {F32({2}, {0, std::numeric_limits<float>::infinity()})},
                   {}, 3);
  EXPECT_EQ(inf.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MatMulIntegerTest, ZeroPointsPerTensorRowAndColumn) {
  // The ONNX operator documentation's example.
  Tensor a = U8({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor b = U8({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor y = Run1("MatMulInteger", {a, b, U8({}, {12}), U8({}, {0})});
  EXPECT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.dims(), (Dims{4, 2}));
  EXPECT_EQ(Values<int32_t>(y), (std::vector<int32_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
  // A's zero point per row [1, -1], B's per column [1, 2]: [[0, 1], [4, 5]] · [[0, 0], [2, 2]].
  Tensor p = Run1("MatMulInteger", {I8({2, 2}, {1, 2, 3, 4}), I8({2, 2}, {1, 2, 3, 4}),
                                    I8({2}, {1, -1}), I8({2}, {1, 2})});
  EXPECT_EQ(Values<int32_t>(p), (std::vector<int32_t>{2, 2, 10, 10}));
  // Batched A, no zero points, mixed signedness.
  Tensor q = Run1("MatMulInteger", {U8({2, 1, 2}, {255, 1, 2, 3}), I8({2, 1}, {-128, 1})});
  EXPECT_EQ(q.dims(), (Dims{2, 1, 1}));
  EXPECT_EQ(Values<int32_t>(q), (std::vector<int32_t>{-32639, -253}));
  auto clash = RunOp("MatMulInteger", {U8({1, 1}, {1}), U8({1, 1}, {1}), I8({}, {0})});
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  auto per_row = RunOp("MatMulInteger", {U8({2, 1}, {1, 1}), U8({1, 1}, {1}), U8({3}, {0, 0, 0})});
  EXPECT_EQ(per_row.status().code(), absl::StatusCode::kInvalidArgument);
  auto floats = RunOp("MatMulInteger", {F32({1, 1}, {1}), F32({1, 1}, {1})});
  EXPECT_EQ(floats.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln
