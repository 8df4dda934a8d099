// MatMul, Gemm, Softmax/LogSoftmax, LayerNormalization and Reduce* reference kernels on
// small hand-computed inputs: numpy matmul shape rules, integer exactness, axis handling,
// keepdims / noop_with_empty_axes, empty reductions. Values that go through sqrt/exp/log
// are compared with EXPECT_FLOAT_EQ (4 ulp): the expected value is computed by a different
// but equivalent double formula, which may differ in the last double bit.
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
using testing::I64;
using testing::Make;
using testing::Run1;
using testing::RunOp;
using testing::Values;

using Dims = std::vector<int64_t>;

const Tensor kA = F32({2, 3}, {1, 2, 3, 4, 5, 6});
const Tensor kB = F32({3, 2}, {7, 8, 9, 10, 11, 12});

TEST(MatMulTest, TwoDAndOneDOperands) {
  Tensor y = Run1("MatMul", {kA, kB});
  EXPECT_EQ(y.dims(), (Dims{2, 2}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{58, 64, 139, 154}));
  Tensor v = Run1("MatMul", {F32({3}, {1, 2, 3}), kB});
  EXPECT_EQ(v.dims(), (Dims{2}));
  EXPECT_EQ(Values<float>(v), (std::vector<float>{58, 64}));
  Tensor w = Run1("MatMul", {kA, F32({3}, {1, 0, -1})});
  EXPECT_EQ(w.dims(), (Dims{2}));
  EXPECT_EQ(Values<float>(w), (std::vector<float>{-2, -2}));
  Tensor s = Run1("MatMul", {F32({3}, {1, 2, 3}), F32({3}, {4, 5, 6})});
  EXPECT_EQ(s.dims(), (Dims{}));
  EXPECT_EQ(Values<float>(s), (std::vector<float>{32}));
}

TEST(MatMulTest, BatchDimsBroadcast) {
  Tensor a = F32({2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor b = F32({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  Tensor y = Run1("MatMul", {a, b});
  EXPECT_EQ(y.dims(), (Dims{2, 3, 1, 1}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 2, 3, 3, 4, 7}));
  auto r = RunOp("MatMul", {F32({2, 2, 3}, std::vector<float>(12, 1)),
                            F32({3, 3, 1}, std::vector<float>(9, 1))});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = RunOp("MatMul", {kA, kA});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("n_MatMul"), std::string::npos);
}

TEST(MatMulTest, IntegersAreExactAndWrap) {
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(Values<int64_t>(Run1("MatMul", {I64({1, 2}, {big, 2}), I64({2, 1}, {1, 1})})),
            (std::vector<int64_t>{big + 2}));
  Tensor a = Make<int32_t>(DType::kI32, {1, 1}, {65536});
  EXPECT_EQ(Values<int32_t>(Run1("MatMul", {a, a})), (std::vector<int32_t>{0}));  // 2^32 wraps
}

TEST(GemmTest, TransposesScalesAndBroadcastsC) {
  Tensor bt = F32({2, 3}, {7, 9, 11, 8, 10, 12});  // kB transposed
  Tensor at = F32({3, 2}, {1, 4, 2, 5, 3, 6});     // kA transposed
  EXPECT_EQ(Values<float>(Run1("Gemm", {kA, kB})), (std::vector<float>{58, 64, 139, 154}));
  EXPECT_EQ(Values<float>(Run1(
                "Gemm", {at, bt, F32({2}, {1, -1})},
                {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.f}})),
            (std::vector<float>{31, 30, 71.5f, 75}));
  EXPECT_EQ(Values<float>(Run1("Gemm", {kA, kB, F32({}, {10})})),
            (std::vector<float>{68, 74, 149, 164}));
  EXPECT_EQ(Values<float>(Run1("Gemm", {kA, kB, F32({2, 1}, {1, 2})})),
            (std::vector<float>{59, 65, 141, 156}));
  EXPECT_EQ(RunOp("Gemm", {kA, kB, F32({3}, {1, 2, 3})}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Gemm", {kA, kA}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SoftmaxTest, AxisDefaultNegativeAndStable) {
  Tensor x = F32({2, 2}, {0, 0, 1000, 1000});
  EXPECT_EQ(Values<float>(Run1("Softmax", {x})), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  // Along axis 0 each column is softmax(0, 1000) = (e^-1000 ~ 0, 1).
  EXPECT_EQ(Values<float>(Run1("Softmax", {x}, {{"axis", int64_t{0}}})),
            (std::vector<float>{0, 0, 1, 1}));
  EXPECT_EQ(Values<float>(Run1("Softmax", {x}, {{"axis", int64_t{-2}}})),
            (std::vector<float>{0, 0, 1, 1}));
  const float ln2 = static_cast<float>(-std::log(2.0));
  EXPECT_EQ(Values<float>(Run1("LogSoftmax", {x})), (std::vector<float>{ln2, ln2, ln2, ln2}));
  std::vector<float> ls = Values<float>(Run1("LogSoftmax", {x}, {{"axis", int64_t{0}}}));
  EXPECT_EQ(ls[0], -1000.f);  // no -inf: computed as x - max - log(sum)
  EXPECT_EQ(ls[2], 0.f);
  std::vector<float> p = Values<float>(Run1("Softmax", {F32({3}, {1, 2, 3})}));
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_FLOAT_EQ(p[0], std::exp(1.0) / s);
  EXPECT_FLOAT_EQ(p[2], std::exp(3.0) / s);
  EXPECT_EQ(RunOp("Softmax", {x}, {{"axis", int64_t{2}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LayerNormTest, ScaleBiasAndStatistics) {
  Tensor x = F32({2, 3}, {1, 2, 3, 2, 4, 6});
  auto r = RunOp("LayerNormalization", {x, F32({3}, {1, 2, 3}), F32({3}, {0, 1, -1})},
                 {{"epsilon", 0.f}}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  // Row 1: mean 2, var 2/3; row 2: mean 4, var 8/3. Both normalize to (-k, 0, k) with
  // k = sqrt(1.5).
  const double k = std::sqrt(1.5);
  std::vector<float> y = Values<float>((*r)[0]);
  const std::vector<double> want = {-k, 1, 3 * k - 1, -k, 1, 3 * k - 1};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
  EXPECT_EQ((*r)[1].dims(), (Dims{2, 1}));
  EXPECT_EQ((*r)[1].dtype(), DType::kF32);
  EXPECT_EQ(Values<float>((*r)[1]), (std::vector<float>{2, 4}));
  std::vector<float> inv = Values<float>((*r)[2]);
  EXPECT_FLOAT_EQ(inv[0], std::sqrt(1.5));
  EXPECT_FLOAT_EQ(inv[1], std::sqrt(0.375));
}

TEST(LayerNormTest, AxisZeroAndNoBias) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r =
      RunOp("LayerNormalization", {x, F32({}, {2})}, {{"axis", int64_t{0}}, {"epsilon", 0.f}}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[1].dims(), (Dims{1, 1}));
  EXPECT_EQ(Values<float>((*r)[1]), (std::vector<float>{3.5f}));
  // var = 17.5 / 6; y = 2 (x - 3.5) / sqrt(var)
  std::vector<float> y = Values<float>((*r)[0]);
  EXPECT_FLOAT_EQ(y[0], 2 * -2.5 / std::sqrt(17.5 / 6));
  EXPECT_FLOAT_EQ(y[5], 2 * 2.5 / std::sqrt(17.5 / 6));
  // Default epsilon 1e-5 changes the result measurably for a tiny variance.
  std::vector<float> e =
      Values<float>(Run1("LayerNormalization", {F32({2}, {0, 0.002f}), F32({2}, {1, 1})}));
  const double h = static_cast<double>(0.002f) / 2;  // mean; also |x - mean|
  EXPECT_FLOAT_EQ(e[1], h / std::sqrt(h * h + static_cast<double>(1e-5f)));
  EXPECT_EQ(RunOp("LayerNormalization", {x, F32({2}, {1, 1})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

Tensor Axes(std::vector<int64_t> a) { return I64({static_cast<int64_t>(a.size())}, a); }

TEST(ReduceTest, AxesKeepdimsAndDefaults) {
  EXPECT_EQ(Values<float>(Run1("ReduceSum", {kA, Axes({1})})), (std::vector<float>{6, 15}));
  EXPECT_EQ(Run1("ReduceSum", {kA, Axes({1})}).dims(), (Dims{2, 1}));
  Tensor k0 = Run1("ReduceSum", {kA, Axes({1})}, {{"keepdims", int64_t{0}}});
  EXPECT_EQ(k0.dims(), (Dims{2}));
  Tensor neg = Run1("ReduceSum", {kA, Axes({-2})});
  EXPECT_EQ(neg.dims(), (Dims{1, 3}));
  EXPECT_EQ(Values<float>(neg), (std::vector<float>{5, 7, 9}));
  Tensor all = Run1("ReduceSum", {kA});
  EXPECT_EQ(all.dims(), (Dims{1, 1}));
  EXPECT_EQ(Values<float>(all), (std::vector<float>{21}));
  Tensor scalar = Run1("ReduceSum", {kA, Axes({})}, {{"keepdims", int64_t{0}}});
  EXPECT_EQ(scalar.dims(), (Dims{}));
  EXPECT_EQ(Values<float>(scalar), (std::vector<float>{21}));
  Tensor noop = Run1("ReduceSum", {kA, Axes({})}, {{"noop_with_empty_axes", int64_t{1}}});
  EXPECT_EQ(noop.dims(), (Dims{2, 3}));
  EXPECT_EQ(Values<float>(noop), Values<float>(kA));
  Tensor sq = Run1("ReduceSumSquare", {kA}, {{"noop_with_empty_axes", int64_t{1}}});
  EXPECT_EQ(Values<float>(sq), (std::vector<float>{1, 4, 9, 16, 25, 36}));
  EXPECT_EQ(RunOp("ReduceSum", {kA, Axes({1, -1})}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("ReduceSum", {kA, Axes({2})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReduceTest, EachOperation) {
  auto r = [](const std::string& op, const Tensor& x, std::vector<int64_t> axes) {
    return Values<float>(Run1(op, {x, Axes(axes)}));
  };
  EXPECT_EQ(r("ReduceMean", kA, {0}), (std::vector<float>{2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(r("ReduceMax", kA, {1}), (std::vector<float>{3, 6}));
  EXPECT_EQ(r("ReduceMin", kA, {1}), (std::vector<float>{1, 4}));
  EXPECT_EQ(r("ReduceProd", kA, {1}), (std::vector<float>{6, 120}));
  EXPECT_EQ(r("ReduceL1", F32({2, 3}, {-1, 2, -3, 4, 5, -6}), {1}), (std::vector<float>{6, 15}));
  EXPECT_EQ(r("ReduceL2", F32({2}, {3, -4}), {0}), (std::vector<float>{5}));
  EXPECT_EQ(r("ReduceSumSquare", F32({3}, {1, 2, 3}), {0}), (std::vector<float>{14}));
  EXPECT_EQ(r("ReduceLogSum", kA, {0, 1}),
            (std::vector<float>{static_cast<float>(std::log(21.0))}));
  EXPECT_EQ(r("ReduceLogSumExp", F32({2}, {1000, 1000}), {0}),
            (std::vector<float>{static_cast<float>(1000 + std::log(2.0))}));
  std::vector<float> nan_max = r("ReduceMax", F32({3}, {1, NAN, 3}), {0});
  EXPECT_TRUE(std::isnan(nan_max[0]));
}

TEST(ReduceTest, EmptySetsGiveIdentities) {
  Tensor e = F32({2, 0}, {});
  auto r = [&](const std::string& op) {
    Tensor t = Run1(op, {e, Axes({1})});
    EXPECT_EQ(t.dims(), (Dims{2, 1})) << op;
    return Values<float>(t);
  };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(r("ReduceSum"), (std::vector<float>{0, 0}));
  EXPECT_EQ(r("ReduceProd"), (std::vector<float>{1, 1}));
  EXPECT_EQ(r("ReduceMax"), (std::vector<float>{-inf, -inf}));
  EXPECT_EQ(r("ReduceMin"), (std::vector<float>{inf, inf}));
  EXPECT_EQ(r("ReduceLogSumExp"), (std::vector<float>{-inf, -inf}));
  EXPECT_EQ(r("ReduceL2"), (std::vector<float>{0, 0}));
  EXPECT_TRUE(std::isnan(r("ReduceMean")[0]));
  // A zero-sized dim that is not reduced gives an empty output.
  Tensor z = Run1("ReduceSum", {F32({0, 3}, {}), Axes({1})}, {{"keepdims", int64_t{0}}});
  EXPECT_EQ(z.dims(), (Dims{0}));
  EXPECT_EQ(Values<int64_t>(Run1("ReduceMax", {I64({1, 0}, {}), Axes({1})})),
            (std::vector<int64_t>{INT64_MIN}));
}

TEST(ReduceTest, IntegerAndBool) {
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(Values<int64_t>(Run1("ReduceSum", {I64({2}, {big, 2})})),
            (std::vector<int64_t>{big + 2}));
  EXPECT_EQ(Values<int64_t>(Run1("ReduceMean", {I64({2, 2}, {7, -8, -7, -8}), Axes({1})})),
            (std::vector<int64_t>{0, -7}));  // -0.5 and -7.5 truncate toward zero
  EXPECT_EQ(Values<int64_t>(Run1("ReduceMin", {I64({3}, {5, -9, INT64_MAX})})),
            (std::vector<int64_t>{-9}));
  EXPECT_EQ(
      Values<uint64_t>(Run1("ReduceMax", {Make<uint64_t>(DType::kU64, {2}, {1, UINT64_MAX})})),
      (std::vector<uint64_t>{UINT64_MAX}));
  Tensor b = Bool({2, 2}, {0, 1, 0, 0});
  Tensor mx = Run1("ReduceMax", {b, Axes({1})});
  EXPECT_EQ(mx.dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>(mx), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1("ReduceMin", {b, Axes({1})})), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(RunOp("ReduceSum", {b}).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln
