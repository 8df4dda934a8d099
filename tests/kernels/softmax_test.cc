// Softmax and Gelu on every ISA path against the reference Softmax and Gelu ops.
// Softmax tolerance 1e-6 absolute + 1e-5 relative: outputs are in [0, 1]; exp has relative
// error ~2e-7 and the row sum ≤ n/(2W) sequential adds. Gelu: the erf approximation
// (A&S 7.1.26) has absolute error ≤ 1.5e-7, so |Δgelu| ≤ 0.5·|x|·1.5e-7 plus a few ulps:
// bound 1e-7·|x| + 1e-6·|y| + 1e-7 (stated per element below).
#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/softmax.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

class SoftmaxTest : public ::testing::TestWithParam<Isa> {
 protected:
  CpuContext Ctx(int threads = 2) const {
    CpuContext c;
    c.isa = GetParam();
    c.num_threads = threads;
    return c;
  }
};

TEST_P(SoftmaxTest, MatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  for (int64_t n : {1, 3, 16, 17, 128, 255, 1000}) {
    const int64_t rows = 9;
    // Wide range: scores of -30..30 exercise the max subtraction and exp's tails.
    auto x = RandomVec(rows * n, 40 + n, -30.f, 30.f);
    x[0] = -std::numeric_limits<float>::infinity();  // a masked position
    std::vector<float> y(x.size());
    ASSERT_TRUE(Softmax(Ctx(3), x.data(), rows, n, y.data()).ok());
    Tensor xt = F32({rows, n}, x);
    auto ref = testing::RunReferenceOp("", "Softmax", {{"axis", int64_t{-1}}}, {&xt});
    ASSERT_EQ(ref.size(), 1u);
    if (n == 1) {
      // The row [-inf] is fully masked: kiln's kernels give 0 where ONNX gives NaN.
      EXPECT_EQ(y[0], 0.0f);
      y[0] = ref[0].data<float>()[0];
      if (std::isnan(y[0])) continue;
    }
    testing::ExpectClose(y.data(), ref[0], 1e-6, 1e-5, absl::StrCat("n=", n));
  }
}

TEST_P(SoftmaxTest, FullyMaskedRowIsZeroAndInPlaceWorks) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> x(2 * 21, ninf);
  for (int j = 0; j < 21; ++j) x[21 + j] = 0.25f * j - 2.0f;
  ASSERT_TRUE(Softmax(Ctx(), x.data(), 2, 21, x.data()).ok());
  double sum = 0;
  for (int j = 0; j < 21; ++j) {
    EXPECT_EQ(x[j], 0.0f) << j;
    sum += x[21 + j];
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_LT(x[21], x[41]);
}

TEST_P(SoftmaxTest, GeluMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  for (bool tanh_form : {false, true}) {
    for (int64_t n : {1, 15, 16, 100003}) {
      const auto x = RandomVec(n, 50 + n, -8.f, 8.f);
      std::vector<float> y(x.size());
      ASSERT_TRUE(Gelu(Ctx(), x.data(), n, tanh_form, y.data()).ok());
      Tensor xt = F32({n}, x);
      auto ref = testing::RunReferenceOp(
          "", "Gelu", {{"approximate", std::string(tanh_form ? "tanh" : "none")}}, {&xt});
      ASSERT_EQ(ref.size(), 1u);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = ref[0].data<float>()[i];
        const double tol = 1e-7 * std::fabs(x[i]) + 1e-6 * std::fabs(want) + 1e-7;
        if (!(std::fabs(y[i] - want) <= tol) && bad++ < 3)
          ADD_FAILURE() << "tanh=" << tanh_form << " x=" << x[i] << " got " << y[i] << " want "
                        << want;
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SoftmaxTest, ::testing::ValuesIn(testing::AllIsas()),
                         testing::IsaParamName);

}  // namespace
}  // namespace kiln::cpu
