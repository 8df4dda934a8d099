// Resize reference kernel (resize.cc) on hand-computed values: each mode's weights, the
// coordinate transformations that differ, axes and the aspect policy, integer rounding,
// and the errors. The ONNX backend tests (tests/conformance) cover the full matrix.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/reference/reference_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::I64;
using testing::Make;
using testing::RunOp;
using testing::Values;

Tensor Eval(std::vector<Tensor> ins, std::map<std::string, Attribute> a = {}) {
  return testing::Run1("Resize", std::move(ins), std::move(a));
}

const Tensor kNone;  // an omitted input

TEST(ResizeTest, NearestUpscaleByScales) {
  // [1, 2] x2 half_pixel, round_prefer_floor: sources -0.25, 0.25, 0.75, 1.25 -> 0 0 1 1.
  Tensor y = Eval({F32({1, 2}, {1, 2}), kNone, F32({2}, {1, 2})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 1, 2, 2}));
}

TEST(ResizeTest, LinearHalfPixelAndAlignCorners) {
  // half_pixel x2 of [0, 4]: sources -0.25 (clamped: 0), 0.25, 0.75, 1.25 (clamped: 4).
  Tensor y = Eval({F32({2}, {0, 4}), kNone, F32({1}, {2})}, {{"mode", std::string("linear")}});
  EXPECT_EQ(Values<float>(y), (std::vector<float>{0, 1, 3, 4}));
  // align_corners to 3: sources 0, 0.5, 1.
  Tensor a = Eval({F32({2}, {0, 4}), kNone, kNone, I64({1}, {3})},
                  {{"mode", std::string("linear")},
                   {"coordinate_transformation_mode", std::string("align_corners")}});
  EXPECT_EQ(Values<float>(a), (std::vector<float>{0, 2, 4}));
}

TEST(ResizeTest, CubicWeightsSumToOne) {
  // A constant signal stays constant under any interpolation whose weights sum to 1.
  Tensor y =
      Eval({F32({4}, {5, 5, 5, 5}), kNone, F32({1}, {1.5f})}, {{"mode", std::string("cubic")}});
  ASSERT_EQ(y.NumElements(), 6);
  for (float v : Values<float>(y)) EXPECT_NEAR(v, 5.0f, 1e-6f);
  // A linear ramp is reproduced exactly in the interior by cubic (A = -0.75 keeps
  // degree-1 polynomials): asymmetric x2 of 0..3 at source 1.5 gives 1.5.
  Tensor r = Eval({F32({4}, {0, 1, 2, 3}), kNone, F32({1}, {2})},
                  {{"mode", std::string("cubic")},
                   {"coordinate_transformation_mode", std::string("asymmetric")}});
  EXPECT_NEAR(Values<float>(r)[3], 1.5f, 1e-6f);
}

TEST(ResizeTest, AxesAndAspectPolicy) {
  // [1, 2, 4] resized on axis 2 only, to 2: half_pixel sources 0.5 and 2.5 -> rows of 4.
  Tensor y = Eval({F32({1, 2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}), kNone, kNone, I64({1}, {2})},
                  {{"mode", std::string("linear")}, {"axes", std::vector<int64_t>{-1}}});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{0.5f, 2.5f, 4.5f, 6.5f}));
  // not_larger: sizes (4, 4) for a 2x4 image keeps the aspect: scale min(2, 1) = 1.
  Tensor n = Eval({F32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}), kNone, kNone, I64({2}, {4, 4})},
                  {{"keep_aspect_ratio_policy", std::string("not_larger")}});
  EXPECT_EQ(n.dims(), (std::vector<int64_t>{2, 4}));
}

TEST(ResizeTest, IntegersRoundHalfToEvenAndSaturate) {
  // u8 linear x2 of [0, 5]: 0, 1.25, 3.75, 5 -> 0, 1, 4, 5.
  Tensor y = Eval({Make<uint8_t>(DType::kU8, {2}, {0, 5}), kNone, F32({1}, {2})},
                  {{"mode", std::string("linear")}});
  EXPECT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(Values<uint8_t>(y), (std::vector<uint8_t>{0, 1, 4, 5}));
  // Cubic over- and undershoots next to a step (255 · (1 - c(1.25)) ≈ 282 at output 5,
  // 255 · c(1.25) ≈ -27 at output 2): u8 saturates both.
  Tensor f =
      Eval({F32({4}, {0, 0, 255, 255}), kNone, F32({1}, {2})}, {{"mode", std::string("cubic")}});
  EXPECT_GT(Values<float>(f)[5], 255.0f);
  EXPECT_LT(Values<float>(f)[2], 0.0f);
  Tensor c = Eval({Make<uint8_t>(DType::kU8, {4}, {0, 0, 255, 255}), kNone, F32({1}, {2})},
                  {{"mode", std::string("cubic")}});
  EXPECT_EQ(Values<uint8_t>(c)[5], 255);
  EXPECT_EQ(Values<uint8_t>(c)[2], 0);
}

TEST(ResizeTest, TfCropAndResizeExtrapolates) {
  // roi [0.5, 1.5] of [0, 2]: sources 0.5 and 1.5 (outside -> extrapolation_value).
  Tensor y = Eval({F32({2}, {0, 2}), F32({2}, {0.5f, 1.5f}), kNone, I64({1}, {2})},
                  {{"mode", std::string("linear")},
                   {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                   {"extrapolation_value", 9.0f}});
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 9}));
}

TEST(ResizeTest, Errors) {
  const Tensor x = F32({2}, {0, 1});
  auto both = RunOp("Resize", {x, kNone, F32({1}, {2}), I64({1}, {4})});
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  auto neither = RunOp("Resize", {x});
  EXPECT_EQ(neither.status().code(), absl::StatusCode::kInvalidArgument);
  auto zero = RunOp("Resize", {x, kNone, F32({1}, {0})});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  auto count = RunOp("Resize", {x, kNone, F32({2}, {1, 2})});
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  auto aa = RunOp("Resize", {x, kNone, F32({1}, {2})}, {{"antialias", int64_t{1}}});
  EXPECT_EQ(aa.status().code(), absl::StatusCode::kInvalidArgument);
  auto mode = RunOp("Resize", {x, kNone, F32({1}, {2})}, {{"mode", std::string("area")}});
  EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
  auto huge = RunOp("Resize", {x, kNone, kNone, I64({1}, {int64_t{1} << 40})});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  // A small output through a huge intermediate (axis 0 up 2^16, axis 1 down 2^16).
  auto through = RunOp("Resize", {F32({1, 65536}, std::vector<float>(65536, 1)), kNone,
                                  F32({2}, {65536, 1.0f / 65536})});
  EXPECT_EQ(through.status().code(), absl::StatusCode::kResourceExhausted) << through.status();
}

}  // namespace
}  // namespace kiln
