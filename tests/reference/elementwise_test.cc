// Elementwise reference kernels on small hand-computed inputs: broadcasting, integer
// semantics (wrap-around, truncating division, exactness beyond 2^53), f16 rounding,
// Cast edge cases, NaN propagation and dtype errors. Float expectations are exact: the
// kernels compute in double and round once, so the expected value is the double formula
// rounded to the output type.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/ir/graph.h"
#include "kiln/reference/executor.h"
#include "tests/reference/reference_test_util.h"

namespace kiln {
namespace {

using testing::Bool;
using testing::F32;
using testing::I32;
using testing::I64;
using testing::Make;
using testing::Run1;
using testing::RunOp;
using testing::Values;

TEST(ElementwiseTest, AddBroadcastsBothWays) {
  Tensor y = Run1("Add", {F32({2, 1}, {10, 20}), F32({1, 3}, {1, 2, 3})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{11, 12, 13, 21, 22, 23}));
  Tensor z = Run1("Sub", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({}, {1})});
  EXPECT_EQ(Values<float>(z), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  Tensor w = Run1("Mul", {F32({3}, {1, 2, 3}), F32({2, 1, 1}, {2, -1})});
  EXPECT_EQ(w.dims(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(Values<float>(w), (std::vector<float>{2, 4, 6, -1, -2, -3}));
}

TEST(ElementwiseTest, IncompatibleShapesAndDTypesFail) {
  auto r = RunOp("Add", {F32({2}, {1, 2}), F32({3}, {1, 2, 3})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("n_Add"), std::string::npos) << r.status();
  r = RunOp("Add", {F32({1}, {1}), I64({1}, {1})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = RunOp("Add", {Bool({1}, {1}), Bool({1}, {1})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("bool"), std::string::npos) << r.status();
  r = RunOp("Sqrt", {I32({1}, {4})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("i32"), std::string::npos) << r.status();
}

TEST(ElementwiseTest, EmptyTensorsBroadcast) {
  Tensor y = Run1("Add", {F32({0, 3}, {}), F32({3}, {1, 2, 3})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(y.NumElements(), 0);
}

TEST(ElementwiseTest, IntegerArithmeticIsExactAndWraps) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable in double
  EXPECT_EQ(Values<int64_t>(Run1("Add", {I64({1}, {big}), I64({1}, {1})})),
            (std::vector<int64_t>{big + 1}));
  EXPECT_EQ(Values<int64_t>(Run1("Add", {I64({1}, {INT64_MAX}), I64({1}, {1})})),
            (std::vector<int64_t>{INT64_MIN}));
  EXPECT_EQ(Values<int8_t>(Run1("Add", {Make<int8_t>(DType::kI8, {2}, {127, -128}),
                                        Make<int8_t>(DType::kI8, {2}, {1, -1})})),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<uint16_t>(Run1("Mul", {Make<uint16_t>(DType::kU16, {1}, {65535}),
                                          Make<uint16_t>(DType::kU16, {1}, {65535})})),
            (std::vector<uint16_t>{1}));  // 65535^2 mod 2^16
  EXPECT_EQ(Values<int64_t>(Run1("Mul", {I64({1}, {big}), I64({1}, {3})})),
            (std::vector<int64_t>{3 * big}));
}

TEST(ElementwiseTest, IntegerDivTruncatesTowardZero) {
  EXPECT_EQ(Values<int32_t>(Run1("Div", {I32({4}, {7, -7, 7, -7}), I32({4}, {2, 2, -2, -2})})),
            (std::vector<int32_t>{3, -3, -3, 3}));
  EXPECT_EQ(Values<int32_t>(Run1("Div", {I32({1}, {INT32_MIN}), I32({1}, {-1})})),
            (std::vector<int32_t>{INT32_MIN}));
  auto r = RunOp("Div", {I32({2}, {1, 2}), I32({2}, {1, 0})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos);
  Tensor f = Run1("Div", {F32({2}, {1, -1}), F32({2}, {0, 0})});
  EXPECT_EQ(Values<float>(f), (std::vector<float>{INFINITY, -INFINITY}));
}

TEST(ElementwiseTest, ModFollowsDivisorOrDividendSign) {
  Tensor a = I32({4}, {5, -5, 5, -5}), b = I32({4}, {3, 3, -3, -3});
  EXPECT_EQ(Values<int32_t>(Run1("Mod", {a, b})),
            (std::vector<int32_t>{2, 1, -1, -2}));  // Python %
  EXPECT_EQ(Values<int32_t>(Run1("Mod", {a, b}, {{"fmod", int64_t{1}}})),
            (std::vector<int32_t>{2, -2, 2, -2}));
  EXPECT_EQ(
      Values<float>(Run1("Mod", {F32({2}, {5.5f, -5.5f}), F32({1}, {2})}, {{"fmod", int64_t{1}}})),
      (std::vector<float>{1.5f, -1.5f}));
  EXPECT_EQ(RunOp("Mod", {F32({1}, {1}), F32({1}, {1})}).status().code(),
            absl::StatusCode::kInvalidArgument);  // floats need fmod=1
}

TEST(ElementwiseTest, PowTakesTheBaseDType) {
  Tensor y = Run1("Pow", {F32({2}, {2, 3}), I64({2}, {3, 2})});
  EXPECT_EQ(y.dtype(), DType::kF32);
  EXPECT_EQ(Values<float>(y), (std::vector<float>{8, 9}));
  Tensor i = Run1("Pow", {I64({4}, {3, 2, 1, -1}), I64({4}, {39, -1, -3, -3})});
  EXPECT_EQ(Values<int64_t>(i), (std::vector<int64_t>{4052555153018976267, 0, 1, -1}));
  Tensor h = Run1("Pow", {I32({2}, {4, 10}), F32({1}, {0.5f})});
  EXPECT_EQ(h.dtype(), DType::kI32);
  EXPECT_EQ(Values<int32_t>(h), (std::vector<int32_t>{2, 3}));  // sqrt(10) truncates
}

TEST(ElementwiseTest, FloatUnaryMatchesDoubleRoundedOnce) {
  Tensor x = F32({4}, {0.f, 1.f, -2.5f, 0.25f});
  auto check = [&](const std::string& op, double (*f)(double)) {
    std::vector<float> got = Values<float>(Run1(op, {x}));
    const std::vector<float> in = Values<float>(x);
    ASSERT_EQ(got.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const float want = static_cast<float>(f(in[i]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << op << " at " << in[i];
      } else {
        EXPECT_EQ(got[i], want) << op << " at " << in[i];
      }
    }
  };
  check("Exp", [](double v) { return std::exp(v); });
  check("Log", [](double v) { return std::log(v); });
  check("Erf", [](double v) { return std::erf(v); });
  check("Tanh", [](double v) { return std::tanh(v); });
  check("Sqrt", [](double v) { return std::sqrt(v); });
  check("Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  check("Reciprocal", [](double v) { return 1.0 / v; });
  check("Sin", [](double v) { return std::sin(v); });
  check("Cos", [](double v) { return std::cos(v); });
  check("Floor", [](double v) { return std::floor(v); });
  check("Ceil", [](double v) { return std::ceil(v); });
  check("Softplus", [](double v) { return std::log(1.0 + std::exp(v)); });
  check("Abs", [](double v) { return std::fabs(v); });
  check("Neg", [](double v) { return -v; });
  check("Relu", [](double v) { return v > 0 ? v : 0.0; });
  EXPECT_EQ(Values<float>(Run1("Sigmoid", {F32({2}, {-1000, 1000})})), (std::vector<float>{0, 1}));
  EXPECT_EQ(Values<float>(Run1("Round", {F32({5}, {2.5f, -2.5f, 3.5f, 0.4f, -0.6f})})),
            (std::vector<float>{2, -2, 4, 0, -1}));
}

TEST(ElementwiseTest, IntegerUnary) {
  EXPECT_EQ(Values<int32_t>(Run1("Relu", {I32({3}, {-3, 0, 5})})), (std::vector<int32_t>{0, 0, 5}));
  EXPECT_EQ(Values<int8_t>(Run1("Neg", {Make<int8_t>(DType::kI8, {2}, {-128, 5})})),
            (std::vector<int8_t>{-128, -5}));
  EXPECT_EQ(Values<int64_t>(Run1("Abs", {I64({2}, {-5, 7})})), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(Values<int64_t>(Run1("Sign", {I64({3}, {-5, 0, 7})})),
            (std::vector<int64_t>{-1, 0, 1}));
}

TEST(ElementwiseTest, F16ComputesInFloatAndRoundsToNearestEven) {
  auto h = [](std::vector<float> v) {
    std::vector<uint16_t> b;
    for (float f : v) b.push_back(FloatToHalf(f));
    return Make<uint16_t>(DType::kF16, {static_cast<int64_t>(v.size())}, b);
  };
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1.
  // 1 + 3 * 2^-12 is above halfway: rounds up to 1 + 2^-10.
  Tensor y = Run1("Add", {h({1.f, 1.f}), h({0x1p-11f, 0x3p-12f})});
  EXPECT_EQ(y.dtype(), DType::kF16);
  EXPECT_EQ(Values<uint16_t>(y), (std::vector<uint16_t>{0x3C00, 0x3C01}));
}

TEST(ElementwiseTest, CastEdgeCases) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F32({5}, {1.9f, -1.9f, nan, 1e10f, -1e10f});
  EXPECT_EQ(Values<int32_t>(Run1("Cast", {x}, {{"to", int64_t{6}}})),
            (std::vector<int32_t>{1, -1, 0, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(Values<uint8_t>(Run1("Cast", {F32({3}, {0, 0.5f, nan})}, {{"to", int64_t{9}}})),
            (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(Values<float>(Run1("Cast", {Bool({2}, {1, 0})}, {{"to", int64_t{1}}})),
            (std::vector<float>{1, 0}));
  EXPECT_EQ(Values<int32_t>(Run1("Cast", {I64({2}, {4294967297, -1})}, {{"to", int64_t{6}}})),
            (std::vector<int32_t>{1, -1}));  // wraps modulo 2^32
  EXPECT_EQ(Values<uint16_t>(Run1("Cast", {F32({1}, {1.f / 3})}, {{"to", int64_t{10}}})),
            (std::vector<uint16_t>{0x3555}));
  EXPECT_EQ(
      Values<double>(Run1("Cast", {I64({1}, {(int64_t{1} << 53) + 1})}, {{"to", int64_t{11}}})),
      (std::vector<double>{9007199254740992.0}));
  EXPECT_EQ(Values<int64_t>(Run1("Cast", {Make<uint64_t>(DType::kU64, {1}, {1ull << 63})},
                                 {{"to", int64_t{7}}})),
            (std::vector<int64_t>{INT64_MIN}));
  auto r = RunOp("Cast", {x}, {{"to", int64_t{8}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  Tensor like = Run1("CastLike", {F32({1}, {2.7f}), I64({0}, {})});
  EXPECT_EQ(Values<int64_t>(like), (std::vector<int64_t>{2}));
}

// Casts to and from the narrow types: float -> int4 truncates then wraps (as the onnx test
// data does); float8 saturates by default and not with saturate=0; e8m0 follows
// round_mode; narrow sources widen exactly.
TEST(ElementwiseTest, CastNarrowTypes) {
  Tensor x = F32({4}, {-9, 8, 2.7f, -2.7f});
  Tensor i4 = Run1("Cast", {x}, {{"to", int64_t{22}}});
  EXPECT_EQ(i4.dtype(), DType::kI4);
  EXPECT_EQ(Values<int8_t>(i4), (std::vector<int8_t>{7, -8, 2, -2}));
  EXPECT_EQ(Values<int8_t>(Run1("Cast", {i4}, {{"to", int64_t{3}}})),
            (std::vector<int8_t>{7, -8, 2, -2}));
  Tensor big = F32({2}, {1000, -0.3f});
  EXPECT_EQ(Values<uint8_t>(Run1("Cast", {big}, {{"to", int64_t{17}}})),
            (std::vector<uint8_t>{0x7e, 0xaa}));  // 448, -0.3125
  EXPECT_EQ(Values<uint8_t>(Run1("Cast", {big}, {{"to", int64_t{17}}, {"saturate", int64_t{0}}})),
            (std::vector<uint8_t>{0x7f, 0xaa}));  // NaN
  EXPECT_EQ(Values<uint8_t>(Run1("Cast", {big}, {{"to", int64_t{19}}})),
            (std::vector<uint8_t>{0x64, 0xb5}));  // E5M2: 1000 -> 1024, -0.3 -> -0.3125
  EXPECT_EQ(Values<uint8_t>(
                Run1("Cast", {F32({1}, {1e6f})}, {{"to", int64_t{19}}, {"saturate", int64_t{0}}})),
            (std::vector<uint8_t>{0x7c}));  // E5M2 overflows to inf
  Tensor three = F32({1}, {3});
  EXPECT_EQ(Values<uint8_t>(Run1("Cast", {three}, {{"to", int64_t{24}}})),
            (std::vector<uint8_t>{129}));  // up: 4
  EXPECT_EQ(Values<uint8_t>(
                Run1("Cast", {three}, {{"to", int64_t{24}}, {"round_mode", std::string("down")}})),
            (std::vector<uint8_t>{128}));
  auto bad = RunOp("Cast", {three}, {{"to", int64_t{24}}, {"round_mode", std::string("odd")}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  Tensor back =
      Run1("Cast", {Make<uint8_t>(DType::kF8E4M3FN, {2}, {0x7e, 0x7f})}, {{"to", int64_t{10}}});
  EXPECT_EQ(back.GetAsDouble(0), 448.0);
  EXPECT_TRUE(std::isnan(back.GetAsDouble(1)));
  // CastLike takes the target from its second input, saturate too.
  Tensor like = Run1("CastLike", {big, Tensor(DType::kF8E4M3FNUZ, {0})});
  EXPECT_EQ(like.dtype(), DType::kF8E4M3FNUZ);
  EXPECT_EQ(like.GetAsDouble(0), 240.0);
}

TEST(ElementwiseTest, WhereBroadcastsThreeWays) {
  Tensor y = Run1("Where", {Bool({2, 1}, {1, 0}), F32({1, 3}, {1, 2, 3}), F32({}, {-1})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  Tensor z = Run1("Where", {Bool({3}, {0, 1, 0}), I64({3}, {1, 2, 3}), I64({3}, {7, 8, 9})});
  EXPECT_EQ(Values<int64_t>(z), (std::vector<int64_t>{7, 2, 9}));
  EXPECT_FALSE(RunOp("Where", {F32({1}, {1}), F32({1}, {1}), F32({1}, {1})}).ok());
}

TEST(ElementwiseTest, ComparisonsAndLogic) {
  Tensor a = F32({2, 2}, {1, 2, 3, 4}), b = F32({2}, {2, 3});
  EXPECT_EQ(Values<uint8_t>(Run1("Equal", {a, b})), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("Less", {a, b})), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("Greater", {a, b})), (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1("LessOrEqual", {a, F32({}, {2})})),
            (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("GreaterOrEqual", {a, F32({}, {2})})),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(Values<uint8_t>(Run1("Equal", {I64({1}, {big}), I64({1}, {big - 1})})),
            (std::vector<uint8_t>{0}));  // would compare equal through double
  Tensor p = Bool({4}, {0, 0, 1, 1}), q = Bool({4}, {0, 1, 0, 1});
  EXPECT_EQ(Values<uint8_t>(Run1("Equal", {p, q})), (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1("And", {p, q})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1("Or", {p, q})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1("Xor", {p, q})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("Not", {p})), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(RunOp("Less", {p, q}).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RunOp("And", {a, a}).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ElementwiseTest, VariadicMinMaxSumMean) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = F32({2, 2}, {1, 5, 3, nan}), b = F32({2}, {2, 4}), c = F32({}, {3});
  std::vector<float> mx = Values<float>(Run1("Max", {a, b, c}));
  EXPECT_EQ(std::vector<float>(mx.begin(), mx.begin() + 3), (std::vector<float>{3, 5, 3}));
  EXPECT_TRUE(std::isnan(mx[3]));  // NaN propagates
  std::vector<float> mn = Values<float>(Run1("Min", {a, b, c}));
  EXPECT_EQ(std::vector<float>(mn.begin(), mn.begin() + 3), (std::vector<float>{1, 3, 2}));
  EXPECT_EQ(Values<float>(Run1("Sum", {F32({2}, {1, 2}), F32({2}, {10, 20}), F32({}, {100})})),
            (std::vector<float>{111, 122}));
  EXPECT_EQ(Values<float>(Run1("Mean", {F32({2}, {1, 2}), F32({2}, {3, 6})})),
            (std::vector<float>{2, 4}));
  Tensor single = Run1("Max", {I64({2}, {4, -1})});
  EXPECT_EQ(Values<int64_t>(single), (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(Values<int64_t>(Run1("Min", {I64({2}, {4, -1}), I64({1}, {0})})),
            (std::vector<int64_t>{0, -1}));
  EXPECT_EQ(RunOp("Mean", {I64({1}, {1})}).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ElementwiseTest, ClipWithOptionalBounds) {
  Tensor x = F32({4}, {-2, 0, 3, 9});
  EXPECT_EQ(Values<float>(Run1("Clip", {x, F32({}, {-1}), F32({}, {4})})),
            (std::vector<float>{-1, 0, 3, 4}));
  EXPECT_EQ(Values<float>(Run1("Clip", {x, Tensor(), F32({}, {1})})),
            (std::vector<float>{-2, 0, 1, 1}));
  EXPECT_EQ(Values<float>(Run1("Clip", {x, F32({}, {1})})), (std::vector<float>{1, 1, 3, 9}));
  EXPECT_EQ(Values<float>(Run1("Clip", {x})), (std::vector<float>{-2, 0, 3, 9}));
  // min > max: every value becomes max.
  EXPECT_EQ(Values<float>(Run1("Clip", {x, F32({}, {5}), F32({}, {2})})),
            (std::vector<float>{2, 2, 2, 2}));
  EXPECT_EQ(Values<int64_t>(Run1("Clip", {I64({3}, {INT64_MIN, 5, INT64_MAX}), I64({}, {0}),
                                          I64({}, {INT64_MAX - 1})})),
            (std::vector<int64_t>{0, 5, INT64_MAX - 1}));
}

TEST(ElementwiseTest, GeluExactAndTanh) {
  Tensor x = F32({3}, {1.f, -0.5f, 2.f});
  std::vector<float> exact = Values<float>(Run1("Gelu", {x}));
  std::vector<float> approx =
      Values<float>(Run1("Gelu", {x}, {{"approximate", std::string("tanh")}}));
  const std::vector<float> in = Values<float>(x);
  for (size_t i = 0; i < in.size(); ++i) {
    const double v = in[i];
    EXPECT_EQ(exact[i], static_cast<float>(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))));
    EXPECT_EQ(approx[i],
              static_cast<float>(
                  0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))));
  }
  EXPECT_EQ(exact[0], static_cast<float>(0.8413447460685429));
  EXPECT_FALSE(RunOp("Gelu", {x}, {{"approximate", std::string("fast")}}).ok());
}

TEST(ElementwiseTest, ActivationsWithAttributes) {
  Tensor x = F32({3}, {-2, 0, 3});
  EXPECT_EQ(Values<float>(Run1("LeakyRelu", {x}, {{"alpha", 0.5f}})),
            (std::vector<float>{-1, 0, 3}));
  EXPECT_EQ(Values<float>(Run1("LeakyRelu", {x})),
            (std::vector<float>{static_cast<float>(-2 * static_cast<double>(0.01f)), 0, 3}));
  // 0.5 - 2 * 0.2f is 0.099999994f (0.2f is slightly above 0.2), not 0.1f.
  EXPECT_EQ(
      Values<float>(Run1("HardSigmoid", {x})),
      (std::vector<float>{static_cast<float>(0.5 - 2 * static_cast<double>(0.2f)), 0.5f, 1.f}));
  EXPECT_EQ(Values<float>(Run1("Elu", {x}, {{"alpha", 2.f}})),
            (std::vector<float>{static_cast<float>(2 * std::expm1(-2.0)), 0, 3}));
  std::vector<float> selu = Values<float>(Run1("Selu", {x}));
  EXPECT_EQ(selu[2], static_cast<float>(3 * static_cast<double>(1.05070102214813232421875f)));
  EXPECT_EQ(selu[1], 0.f);
  EXPECT_EQ(Values<float>(Run1("PRelu", {x, F32({1}, {0.25f})})),
            (std::vector<float>{-0.5f, 0, 3}));
}

TEST(ElementwiseTest, NaNInfChecksAndBitShift) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F32({4}, {nan, INFINITY, -INFINITY, 1});
  EXPECT_EQ(Values<uint8_t>(Run1("IsNaN", {x})), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("IsInf", {x})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("IsInf", {x}, {{"detect_negative", int64_t{0}}})),
            (std::vector<uint8_t>{0, 1, 0, 0}));
  Tensor a = Make<uint8_t>(DType::kU8, {3}, {16, 1, 255});
  Tensor s = Make<uint8_t>(DType::kU8, {3}, {1, 8, 4});
  EXPECT_EQ(Values<uint8_t>(Run1("BitShift", {a, s}, {{"direction", std::string("LEFT")}})),
            (std::vector<uint8_t>{32, 0, 240}));
  EXPECT_EQ(Values<uint8_t>(Run1("BitShift", {a, s}, {{"direction", std::string("RIGHT")}})),
            (std::vector<uint8_t>{8, 0, 15}));
  EXPECT_EQ(RunOp("BitShift", {I32({1}, {1}), I32({1}, {1})}, {{"direction", std::string("LEFT")}})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln
