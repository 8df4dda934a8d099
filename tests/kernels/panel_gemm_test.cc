// kiln's packed-panel GEMM (panel_gemm.h) on every ISA path against a double-precision loop,
// for awkward shapes (M = 1, 7, 33: partial register tiles; N and K not multiples of the
// vector width: partial panels and masked stores) with each epilogue, the residual add
// (also in place, residual == y), several thread counts; and the backend choice table.
// Tolerance: as matmul_test.cc — an fp32 dot product of length K in any order is within
// γ_K·Σ|x·w| (γ_K ≈ K·2⁻²⁴); the activations' polynomial approximations add ≤ 2e-7
// absolute (their documented bounds, isa_impl.inc); the residual add one rounding. Bound:
// 1.2·(K+3)·u·(Σ|x·w| + |b| + |r|) + 8·u·|y| + 1e-6.
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"
#include "kernels/cpu/gemm_choice.h"
#include "kernels/cpu/panel_gemm.h"

namespace kiln::cpu {
namespace {

using testing::RandomVec;

double Act(double v, int act) {
  switch (act) {
    case 1:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case 2:
      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case 3:
      return v > 0 ? v : 0;
    case 4:
      return std::tanh(v);
    default:
      return v;
  }
}

using GemmCase =
    std::tuple<Isa, int64_t /*m*/, int64_t /*k*/, int64_t /*n*/, bool /*trans*/, int /*activation*/,
               bool /*bias*/, int /*residual: 0 no, 1 yes, 2 = y*/>;

class PanelGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(PanelGemmTest, MatchesDoubleLoop) {
  const auto [isa, m, k, n, trans, act, with_bias, residual] = GetParam();
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  const auto x = RandomVec(m * k, 7 + m), w = RandomVec(k * n, 8 + k), b = RandomVec(n, 9 + n);
  const auto r = RandomVec(m * n, 10 + m * n);
  auto g = PanelGemm::Pack(isa, k, n, trans, w.data(), with_bias ? b.data() : nullptr);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->isa(), isa);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    CpuContext ctx;
    ctx.num_threads = threads;
    std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
    if (residual == 2) y = r;
    const float* res = residual == 1 ? r.data() : residual == 2 ? y.data() : nullptr;
    ASSERT_TRUE((*g)->Run(ctx, x.data(), m, y.data(), act, res).ok());
    const double u = std::ldexp(1.0, -24);
    int64_t bad = 0;
    std::string first;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double dot = with_bias ? b[j] : 0.0, mag = with_bias ? std::fabs(b[j]) : 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double t =
              static_cast<double>(x[i * k + p]) * (trans ? w[j * k + p] : w[p * n + j]);
          dot += t;
          mag += std::fabs(t);
        }
        double want = Act(dot, act);
        if (residual) {
          want += r[i * n + j];
          mag += std::fabs(r[i * n + j]);
        }
        const double got = y[i * n + j];
        const double tol = 1.2 * (k + 3) * u * mag + 8 * u * std::fabs(want) + 1e-6;
        if (!(std::fabs(got - want) <= tol) && bad++ == 0)
          first = absl::StrCat("y[", i, ",", j, "] = ", got, " want ", want, " tol ", tol);
      }
    }
    EXPECT_EQ(bad, 0) << bad << " of " << m * n << " out of tolerance, first " << first;
  }
}

std::string GemmCaseName(const ::testing::TestParamInfo<GemmCase>& info) {
  const auto [isa, m, k, n, trans, act, with_bias, residual] = info.param;
  return absl::StrCat(std::string(IsaName(isa)), "_m", m, "k", k, "n", n, trans ? "_trans" : "",
                      "_act", act, with_bias ? "_bias" : "",
                      residual == 1   ? "_res"
                      : residual == 2 ? "_resinplace"
                                      : "");
}

INSTANTIATE_TEST_SUITE_P(
    Awkward, PanelGemmTest,
    ::testing::Combine(::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                       ::testing::Values(1, 7, 33), ::testing::Values(1, 13, 300),
                       ::testing::Values(5, 50, 97), ::testing::Values(false, true),
                       ::testing::Values(0), ::testing::Values(true), ::testing::Values(0)),
    GemmCaseName);

INSTANTIATE_TEST_SUITE_P(
    Epilogues, PanelGemmTest,
    ::testing::Combine(::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                       ::testing::Values(33), ::testing::Values(64), ::testing::Values(77),
                       ::testing::Values(false), ::testing::Values(0, 1, 2, 3, 4),
                       ::testing::Values(false, true), ::testing::Values(0, 1, 2)),
    GemmCaseName);

// Transformer-sized cases per ISA: full tiles, many panels, threads splitting panels; and
// K = 3072, where a row block holds only 32 rows of X, so M = 97 is four blocks, the last
// partial (the block-major item order and the block tail).
INSTANTIATE_TEST_SUITE_P(Large, PanelGemmTest,
                         ::testing::Combine(::testing::Values(Isa::kAvx2, Isa::kAvx512),
                                            ::testing::Values(128), ::testing::Values(768),
                                            ::testing::Values(384), ::testing::Values(false),
                                            ::testing::Values(1), ::testing::Values(true),
                                            ::testing::Values(0)),
                         GemmCaseName);
INSTANTIATE_TEST_SUITE_P(
    ManyRowBlocks, PanelGemmTest,
    ::testing::Combine(::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                       ::testing::Values(97), ::testing::Values(3072), ::testing::Values(50),
                       ::testing::Values(false, true), ::testing::Values(0),
                       ::testing::Values(true), ::testing::Values(1)),
    GemmCaseName);

TEST(PanelGemm, RejectsBadArguments) {
  const float w = 1.0f;
  EXPECT_EQ(PanelGemm::Pack(Isa::kAuto, 0, 4, false, &w, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PanelGemm::Pack(Isa::kAuto, 4, 4, false, nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto g = PanelGemm::Pack(Isa::kAuto, 1, 1, false, &w, nullptr);
  ASSERT_TRUE(g.ok());
  CpuContext ctx;
  float y = 0;
  EXPECT_EQ((*g)->Run(ctx, &w, -1, &y, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->Run(ctx, nullptr, 1, &y, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->Run(ctx, &w, 1, &y, 9).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*g)->Run(ctx, &w, 0, &y, 0).ok());
}

// The choice reads the table it is given: first matching rule wins; no match is oneDNN.
TEST(GemmChoice, FirstMatchingRuleOfAFixedTable) {
  const GemmRule rules[] = {
      {Isa::kAvx2, 1, 15, GemmBackend::kOneDnn, "small"},
      {Isa::kAvx2, 1, INT64_MAX, GemmBackend::kKiln, "rest"},
      {Isa::kAvx512, 64, 4096, GemmBackend::kKiln, "mid"},
  };
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx2, 1), GemmBackend::kOneDnn);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx2, 15), GemmBackend::kOneDnn);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx2, 16), GemmBackend::kKiln);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx512, 63), GemmBackend::kOneDnn);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx512, 64), GemmBackend::kKiln);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx512, 4097), GemmBackend::kOneDnn);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kScalar, 128), GemmBackend::kOneDnn);
  EXPECT_EQ(ChooseGemmBackend({}, Isa::kAvx2, 128), GemmBackend::kOneDnn);
}

// A rule with min_weight applies to large weights only; smaller ones fall through to the
// M rules. The measured table sends a decoder's large weights to oneDNN at decode (M 1)
// and prefill (M 128) alike, so they are packed once.
TEST(GemmChoice, LargeWeightRules) {
  const GemmRule rules[] = {
      {Isa::kAvx512, 1, INT64_MAX, GemmBackend::kOneDnn, "large", 1000},
      {Isa::kAvx512, 1, 64, GemmBackend::kKiln, "small"},
  };
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx512, 1, 999), GemmBackend::kKiln);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx512, 1, 1000), GemmBackend::kOneDnn);
  EXPECT_EQ(ChooseGemmBackend(rules, Isa::kAvx512, 1), GemmBackend::kKiln);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    for (int64_t m : {1, 128}) {
      EXPECT_EQ(ChooseGemmBackend(MeasuredGemmRules(), isa, m, 896 * 4864), GemmBackend::kOneDnn)
          << IsaName(isa) << " m " << m;
      EXPECT_EQ(ChooseGemmBackend(MeasuredGemmRules(), isa, m, 384 * 1536),
                ChooseGemmBackend(MeasuredGemmRules(), isa, m))
          << IsaName(isa) << " m " << m;
    }
}

// The measured table covers every M on both vector ISAs (no gap that falls through by
// accident) and an explicit request is never overridden.
TEST(GemmChoice, MeasuredTableHasNoGapsAndRequestsWin) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    int64_t covered_to = 0;
    for (const GemmRule& r : MeasuredGemmRules()) {
      if (r.isa != isa || r.min_weight > 0) continue;  // the M rules cover every M
      EXPECT_EQ(r.min_m, covered_to + 1) << IsaName(isa);
      EXPECT_FALSE(r.why.empty());
      covered_to = r.max_m;
    }
    EXPECT_EQ(covered_to, INT64_MAX) << IsaName(isa);
  }
  EXPECT_EQ(ResolveGemmBackend(GemmBackend::kOneDnn, Isa::kAvx2, 128), GemmBackend::kOneDnn);
  EXPECT_EQ(ResolveGemmBackend(GemmBackend::kKiln, Isa::kScalar, 128), GemmBackend::kKiln);
}

}  // namespace
}  // namespace kiln::cpu
