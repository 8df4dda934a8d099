// kiln.Glu on the CPU (kernels/cpu/activation.h) on every ISA path against the reference
// kernel (double, one rounding): silu, gelu and gelu_tanh, widths that are and are not
// multiples of the vector width, 1 and 3 threads, inputs over [-12, 12] (sigmoid's and
// erf's tails); and the argument checks. Tolerance 2e-6 relative plus an absolute part:
// silu and gelu_tanh are accurate to ~3e-7 relative (sigmoid_row's, the tanh form's), so
// 2e-6 absolute; the erf form's erfc is accurate to 1.5e-7 absolute (Abramowitz–Stegun
// 7.1.26, activation.h), i.e. 0.5·|a|·1.5e-7 ≤ 9e-7 for |a| ≤ 12, times |b| ≤ 12:
// 1.5e-5 absolute.
#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"
#include "kernels/cpu/activation.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

TEST(Glu, MatchesReferenceOnEveryIsa) {
  const std::pair<const char*, GluActivation> acts[] = {{"silu", GluActivation::kSilu},
                                                        {"gelu", GluActivation::kGelu},
                                                        {"gelu_tanh", GluActivation::kGeluTanh}};
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) continue;
    for (const auto& [name, act] : acts)
      for (const auto& [rows, f] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {5, 16}, {4, 100}})
        for (int threads : {1, 3}) {
          Tensor x = F32({rows, 2 * f}, RandomVec(rows * 2 * f, 11 + f, -12.f, 12.f));
          auto want =
              testing::RunReferenceOp("kiln", "Glu", {{"activation", std::string(name)}}, {&x});
          ASSERT_EQ(want.size(), 1u);
          std::vector<float> y(rows * f, std::nanf(""));
          CpuContext ctx;
          ctx.isa = isa;
          ctx.num_threads = threads;
          ASSERT_TRUE(Glu(ctx, x.data<float>(), rows, f, act, y.data()).ok());
          const double atol = act == GluActivation::kGelu ? 1.5e-5 : 2e-6;
          testing::ExpectClose(y.data(), want[0], atol, 2e-6,
                               absl::StrCat(name, " ", rows, "x", f, " threads ", threads));
        }
  }
}

TEST(Glu, RejectsBadArguments) {
  float x[4] = {}, y[2] = {};
  EXPECT_FALSE(Glu(CpuContext{}, x, -1, 2, GluActivation::kSilu, y).ok());
  EXPECT_FALSE(Glu(CpuContext{}, nullptr, 1, 2, GluActivation::kSilu, y).ok());
  EXPECT_TRUE(Glu(CpuContext{}, nullptr, 0, 2, GluActivation::kSilu, nullptr).ok());
}

}  // namespace
}  // namespace kiln::cpu
