// LayerNorm, RMSNorm and SkipLayerNorm (both normalizations) on every ISA path against the
// reference LayerNormalization, kiln.RMSNorm and kiln.SkipLayerNorm (double accumulation).
// Tolerance 1e-5 absolute + 1e-5 relative: outputs are O(1)·γ+β; mean and variance are
// fp32 sums whose error grows with the longest sequential chain (h/(2W) adds on the vector
// paths, h/2 on the scalar one): ≤ 1e-5 relative for h ≤ 1100 with random-sign terms, and
// the inputs carry a common offset (mean ≈ 3) to catch a one-pass variance formula.
#include "kernels/cpu/layer_norm.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

constexpr double kTol = 1e-5;

class LayerNormTest : public ::testing::TestWithParam<Isa> {
 protected:
  CpuContext Ctx(int threads = 2) const {
    CpuContext c;
    c.isa = GetParam();
    c.num_threads = threads;
    return c;
  }
};

TEST_P(LayerNormTest, LayerNormMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  for (int64_t h : {1, 7, 16, 33, 384, 768, 1031}) {
    for (int threads : {1, 3}) {
      const int64_t rows = 13;
      auto x = RandomVec(rows * h, 5 + h, 2.0f, 4.0f);
      const auto g = RandomVec(h, 6 + h, 0.5f, 1.5f), b = RandomVec(h, 7 + h);
      for (bool with_beta : {true, false}) {
        std::vector<float> y(x.size());
        ASSERT_TRUE(LayerNorm(Ctx(threads), x.data(), g.data(), with_beta ? b.data() : nullptr,
                              rows, h, 1e-5f, y.data())
                        .ok());
        Tensor xt = F32({rows, h}, x), gt = F32({h}, g), bt = F32({h}, b);
        auto ref = testing::RunReferenceOp("", "LayerNormalization",
                                           {{"axis", int64_t{-1}}, {"epsilon", 1e-5f}},
                                           {&xt, &gt, with_beta ? &bt : nullptr});
        ASSERT_EQ(ref.size(), 1u);
        testing::ExpectClose(y.data(), ref[0], kTol, kTol,
                             absl::StrCat("h=", h, " threads=", threads, " beta=", with_beta));
      }
    }
  }
}

TEST_P(LayerNormTest, InPlace) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  const int64_t rows = 4, h = 45;
  auto x = RandomVec(rows * h, 8);
  const auto g = RandomVec(h, 9), b = RandomVec(h, 10);
  std::vector<float> y(x.size());
  ASSERT_TRUE(LayerNorm(Ctx(), x.data(), g.data(), b.data(), rows, h, 1e-5f, y.data()).ok());
  ASSERT_TRUE(LayerNorm(Ctx(), x.data(), g.data(), b.data(), rows, h, 1e-5f, x.data()).ok());
  EXPECT_EQ(x, y);
}

TEST_P(LayerNormTest, SkipLayerNormMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  const int64_t batch = 3, s = 11;
  for (int64_t h : {5, 32, 384, 771}) {
    const int64_t rows = batch * s;
    const auto x = RandomVec(rows * h, 20 + h, 1.0f, 3.0f), g = RandomVec(h, 21 + h);
    const auto b = RandomVec(h, 22 + h), bias = RandomVec(h, 23 + h);
    for (int64_t skip_rows : {rows, s}) {
      const auto skip = RandomVec(skip_rows * h, 24 + h + skip_rows);
      for (bool with_sum : {true, false}) {
        std::vector<float> y(rows * h), sum(rows * h);
        SkipLayerNormArgs a;
        a.x = x.data();
        a.skip = skip.data();
        a.skip_rows = skip_rows;
        a.gamma = g.data();
        a.beta = b.data();
        a.bias = bias.data();
        a.rows = rows;
        a.h = h;
        a.eps = 1e-6f;
        a.y = y.data();
        a.sum = with_sum ? sum.data() : nullptr;
        ASSERT_TRUE(SkipLayerNorm(Ctx(), a).ok());
        Tensor xt = F32({batch, s, h}, x), gt = F32({h}, g), bt = F32({h}, b),
               biast = F32({h}, bias);
        Tensor st = skip_rows == rows ? F32({batch, s, h}, skip) : F32({s, h}, skip);
        auto ref = testing::RunReferenceOp("kiln", "SkipLayerNorm", {{"epsilon", 1e-6f}},
                                           {&xt, &st, &gt, &bt, &biast}, 2);
        ASSERT_EQ(ref.size(), 2u);
        const std::string what = absl::StrCat("h=", h, " skip_rows=", skip_rows);
        testing::ExpectClose(y.data(), ref[0], kTol, kTol, what + " Y");
        // The residual sum is two fp32 additions of terms with |x| ≤ 3, |skip|, |bias| ≤ 1:
        // |err| ≤ 2·u·(3 + 1 + 1) = 6e-7 (relative to the terms, not the possibly cancelled sum).
        if (with_sum) testing::ExpectClose(sum.data(), ref[1], 6e-7, 0, what + " Sum");
      }
    }
  }
}

// RMSNorm's only statistic is Σx², the same fp32 chain as the variance sum: the 1e-5 bound
// above holds (no cancellation at all, so the offset inputs are not needed for it).
TEST_P(LayerNormTest, RmsNormMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  for (int64_t h : {1, 7, 16, 33, 64, 896, 1031}) {
    for (int threads : {1, 3}) {
      const int64_t rows = 13;
      auto x = RandomVec(rows * h, 30 + h, -3.0f, 2.0f);
      const auto g = RandomVec(h, 31 + h, 0.5f, 1.5f);
      std::vector<float> y(x.size());
      ASSERT_TRUE(RmsNorm(Ctx(threads), x.data(), g.data(), rows, h, 1e-6f, y.data()).ok());
      Tensor xt = F32({rows, h}, x), gt = F32({h}, g);
      auto ref = testing::RunReferenceOp("kiln", "RMSNorm", {{"epsilon", 1e-6f}}, {&xt, &gt});
      ASSERT_EQ(ref.size(), 1u);
      testing::ExpectClose(y.data(), ref[0], kTol, kTol,
                           absl::StrCat("h=", h, " threads=", threads));
      // In place gives the same bits.
      ASSERT_TRUE(RmsNorm(Ctx(threads), x.data(), g.data(), rows, h, 1e-6f, x.data()).ok());
      EXPECT_EQ(x, y) << "h=" << h;
    }
  }
}

// SkipLayerNorm with rms: the residual sum, then RMSNorm of it — checked against the sum
// the same kernel writes fed to the reference kiln.RMSNorm, and the sum itself against
// x + skip + bias in fp32 (bit-exact: the same two additions in the same order).
TEST_P(LayerNormTest, SkipRmsNormMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  const int64_t batch = 2, s = 9;
  for (int64_t h : {5, 64, 771}) {
    const int64_t rows = batch * s;
    const auto x = RandomVec(rows * h, 40 + h), skip = RandomVec(s * h, 41 + h);
    const auto g = RandomVec(h, 42 + h, 0.5f, 1.5f), bias = RandomVec(h, 43 + h);
    std::vector<float> y(rows * h), sum(rows * h);
    SkipLayerNormArgs a;
    a.x = x.data();
    a.skip = skip.data();
    a.skip_rows = s;
    a.gamma = g.data();
    a.bias = bias.data();
    a.rows = rows;
    a.h = h;
    a.eps = 1e-6f;
    a.y = y.data();
    a.sum = sum.data();
    a.rms = true;
    ASSERT_TRUE(SkipLayerNorm(Ctx(), a).ok());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < h; ++j)
        ASSERT_EQ(sum[r * h + j], x[r * h + j] + skip[(r % s) * h + j] + bias[j])
            << "h=" << h << " r=" << r << " j=" << j;
    Tensor st = F32({rows, h}, sum), gt = F32({h}, g);
    auto ref = testing::RunReferenceOp("kiln", "RMSNorm", {{"epsilon", 1e-6f}}, {&st, &gt});
    ASSERT_EQ(ref.size(), 1u);
    testing::ExpectClose(y.data(), ref[0], kTol, kTol, absl::StrCat("h=", h));
    // Without `sum` the residual lands in y and is normalized in place: the same y.
    std::vector<float> y2(rows * h);
    a.y = y2.data();
    a.sum = nullptr;
    ASSERT_TRUE(SkipLayerNorm(Ctx(), a).ok());
    EXPECT_EQ(y2, y) << "h=" << h;
  }
}

TEST_P(LayerNormTest, RejectsBadArguments) {
  const float v = 1.0f;
  float y = 0;
  EXPECT_FALSE(LayerNorm(Ctx(), &v, &v, nullptr, -1, 1, 1e-5f, &y).ok());
  EXPECT_FALSE(LayerNorm(Ctx(), nullptr, &v, nullptr, 1, 1, 1e-5f, &y).ok());
  EXPECT_FALSE(RmsNorm(Ctx(), &v, &v, 1, -1, 1e-5f, &y).ok());
  EXPECT_FALSE(RmsNorm(Ctx(), &v, nullptr, 1, 1, 1e-5f, &y).ok());
  SkipLayerNormArgs a;
  a.x = a.skip = a.gamma = &v;
  a.y = &y;
  a.rows = 3;
  a.h = 1;
  a.skip_rows = 2;  // does not divide rows
  EXPECT_EQ(SkipLayerNorm(Ctx(), a).code(), absl::StatusCode::kInvalidArgument);
  a.skip_rows = 3;
  a.rms = true;
  a.beta = &v;  // RMSNorm has no beta
  EXPECT_EQ(SkipLayerNorm(Ctx(), a).code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Isas, LayerNormTest, ::testing::ValuesIn(testing::AllIsas()),
                         testing::IsaParamName);

}  // namespace
}  // namespace kiln::cpu
