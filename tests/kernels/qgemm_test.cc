// QuantGemm (kiln's int8 GEMM, kernels/cpu/qgemm.h) against the reference kiln.QuantLinear,
// on every instruction-set path, for awkward shapes (M, K, N not multiples of the tiles),
// every activation, with and without bias, and the rows the quantizer treats specially (all
// zeros, a NaN, huge values).
// Tolerance: the integer sums are exact on every path (the reference sums in int64), so what
// differs is the float epilogue: acc converted to f32 (exact below 2²⁴, else one rounding),
// sx·w_scale (one rounding), the FMA with the bias (one), then the activation's vector
// approximation (a few ulps, as the fp32 GEMM test allows). Bound per element, with
// S = w_scale[n]·max|x|·Σ_k |w[n,k]| ≥ |acc·sx·w_scale|: 4u·S + u·|b| + 8u·|y| + 1e-7, u =
// 2⁻²⁴. A wrong row scale, index or compensation misses it by orders of magnitude.
#include <cmath>
#include <map>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"
#include "kernels/cpu/qgemm.h"
#include "kiln/ir/ops.h"

namespace kiln::cpu {
namespace {

using testing::RandomVec;

const char* const kActs[] = {"none", "gelu", "gelu_tanh", "relu", "tanh"};

std::vector<int8_t> RandomS8(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-127, 127);
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int8_t>(dist(gen));
  return v;
}

struct Problem {
  int64_t m, k, n;
  std::vector<float> x;
  std::vector<int8_t> w;  // [n, k]
  std::vector<float> w_scale, bias;
  bool with_bias;
  int act;
  std::vector<float> x_mul;  // [k] or empty
  float x_absmax = 0;        // > 0: static activations
};

Problem MakeProblem(int64_t m, int64_t k, int64_t n, bool with_bias, int act, uint32_t seed,
                    bool with_mul = false) {
  return Problem{m,
                 k,
                 n,
                 RandomVec(m * k, seed),
                 RandomS8(n * k, seed + 1),
                 RandomVec(n, seed + 2, 1e-3f, 2e-2f),
                 RandomVec(n, seed + 3),
                 with_bias,
                 act,
                 with_mul ? RandomVec(k, seed + 4, 0.05f, 4.0f) : std::vector<float>()};
}

std::vector<float> Reference(const Problem& p) {
  Tensor xt = Tensor::FromF32({p.m, p.k}, p.x);
  Tensor wt(DType::kI8, {p.n, p.k});
  std::copy(p.w.begin(), p.w.end(), wt.data<int8_t>());
  Tensor st = Tensor::FromF32({p.n}, p.w_scale);
  Tensor bt = Tensor::FromF32({p.n}, p.bias);
  Tensor mt = Tensor::FromF32({p.k}, p.x_mul.empty() ? std::vector<float>(p.k, 1.0f) : p.x_mul);
  std::vector<const Tensor*> in = {&xt, &wt, &st, p.with_bias ? &bt : nullptr};
  if (!p.x_mul.empty()) in.push_back(&mt);
  std::map<std::string, Attribute> attrs = {{"activation", std::string(kActs[p.act])},
                                            {"x_quant", std::string("dynamic_row")}};
  if (p.x_absmax > 0) {
    attrs["x_quant"] = std::string("static");
    attrs["x_absmax"] = p.x_absmax;
  }
  auto ref = testing::RunReferenceOp("kiln", "QuantLinear", attrs, in);
  if (ref.size() != 1) return {};
  const float* r = ref[0].data<float>();
  return std::vector<float>(r, r + p.m * p.n);
}

std::vector<float> RunGemm(const Problem& p, Isa isa, int threads, std::string* impl = nullptr) {
  auto g = QuantGemm::Pack(isa, p.k, p.n, p.w.data(), p.w_scale.data(),
                           p.with_bias ? p.bias.data() : nullptr,
                           p.x_mul.empty() ? nullptr : p.x_mul.data(), p.x_absmax);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  if (impl) *impl = (*g)->ImplName();
  CpuContext ctx;
  ctx.num_threads = threads;
  ctx.isa = isa;
  std::vector<float> y(static_cast<size_t>(p.m * p.n), std::nanf(""));
  const absl::Status s = (*g)->Run(ctx, p.x.data(), p.m, y.data(), p.act);
  EXPECT_TRUE(s.ok()) << s;
  return y;
}

void ExpectMatches(const Problem& p, const std::vector<float>& got, const std::vector<float>& want,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  std::string first;
  for (int64_t r = 0; r < p.m; ++r) {
    double amax = 0;
    for (int64_t i = 0; i < p.k; ++i)
      amax = std::max(
          amax, std::fabs(double{p.x[r * p.k + i]} * (p.x_mul.empty() ? 1.0 : double{p.x_mul[i]})));
    amax = std::max(amax, double{p.x_absmax});
    for (int64_t c = 0; c < p.n; ++c) {
      double sw = 0;
      for (int64_t i = 0; i < p.k; ++i) sw += std::abs(int{p.w[c * p.k + i]});
      const double s = p.w_scale[c] * amax * sw;
      const double b = p.with_bias ? std::fabs(p.bias[c]) : 0.0;
      const double w = want[r * p.n + c], g = got[r * p.n + c];
      const double tol = 4 * u * s + u * b + 8 * u * std::fabs(w) + 1e-7;
      const bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= tol;
      if (!ok && bad++ == 0)
        first = absl::StrCat("y[", r, ",", c, "] = ", g, " want ", w, " tol ", tol);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance, first " << first;
}

using QCase = std::tuple<int64_t /*m*/, int64_t /*k*/, int64_t /*n*/, int /*act*/, bool /*bias*/>;

class QuantGemmTest : public ::testing::TestWithParam<std::tuple<QCase, Isa>> {};

TEST_P(QuantGemmTest, MatchesReference) {
  const auto [m, k, n, act, with_bias] = std::get<0>(GetParam());
  const Isa isa = std::get<1>(GetParam());
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  const Problem p = MakeProblem(m, k, n, with_bias, act, static_cast<uint32_t>(7 * m + 3 * k + n));
  std::string impl;
  const std::vector<float> y = RunGemm(p, isa, 2, &impl);
  if (isa == Isa::kAvx512)
    EXPECT_TRUE(impl == "kiln:avx512_vnni:8x48" || impl == "kiln:avx2:4x16") << impl;
  else
    EXPECT_TRUE(absl::StartsWith(impl, absl::StrCat("kiln:", std::string(IsaName(isa)), ":")))
        << impl;
  ExpectMatches(p, y, Reference(p), impl);
}

std::string QName(const ::testing::TestParamInfo<std::tuple<QCase, Isa>>& info) {
  const auto [m, k, n, act, with_bias] = std::get<0>(info.param);
  return absl::StrCat(std::string(IsaName(std::get<1>(info.param))), "_m", m, "k", k, "n", n, "_",
                      kActs[act], with_bias ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QuantGemmTest,
    ::testing::Combine(::testing::Values(QCase{1, 1, 1, 0, false}, QCase{1, 3, 5, 0, true},
                                         QCase{7, 17, 49, 1, true}, QCase{33, 64, 100, 2, false},
                                         QCase{9, 130, 47, 3, true}, QCase{16, 384, 48, 4, true},
                                         QCase{128, 384, 1536, 1, true},
                                         QCase{65, 1536, 384, 0, true}),
                       ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512)),
    QName);

// x_mul (the compile's smoothing): each row times it before it is quantized, on every path.
TEST(QuantGemm, RowsTimesXMul) {
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) continue;
    const Problem p = MakeProblem(19, 100, 53, true, 1, 31, /*with_mul=*/true);
    ExpectMatches(p, RunGemm(p, isa, 2), Reference(p), std::string(IsaName(isa)));
  }
}

// Static activations (a calibrated range): every row quantized with x_absmax / 127, the
// values beyond it clamped to ±127; a row holding NaN is still NaN.
TEST(QuantGemm, StaticRangeQuantizesEveryRowAlike) {
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) continue;
    Problem p = MakeProblem(7, 45, 19, true, 1, 41, /*with_mul=*/true);
    double amax = 0;
    for (int64_t i = 0; i < p.m * p.k; ++i)
      amax = std::max(amax, std::fabs(double{p.x[i]} * p.x_mul[i % p.k]));
    p.x_absmax = static_cast<float>(amax / 2);  // about half the values clamp
    p.x[3 * p.k + 7] = std::nanf("");
    const std::vector<float> y = RunGemm(p, isa, 2);
    const std::vector<float> want = Reference(p);
    ExpectMatches(p, y, want, std::string(IsaName(isa)));
    for (int64_t c = 0; c < p.n; ++c) EXPECT_TRUE(std::isnan(y[3 * p.n + c])) << IsaName(isa);
    // Not the dynamic result: the range changed the scale.
    Problem dyn = p;
    dyn.x_absmax = 0;
    EXPECT_NE(RunGemm(dyn, isa, 2), y) << IsaName(isa);
  }
  EXPECT_FALSE(QuantGemm::Pack(Isa::kScalar, 1, 1, std::vector<int8_t>{1}.data(),
                               std::vector<float>{1}.data(), nullptr, nullptr, -1.0f)
                   .ok());
}

// The integer sums are the same on every path, so their outputs agree to the epilogue's
// rounding (the same bound as against the reference).
TEST(QuantGemm, EveryPathComputesTheSameSums) {
  const Problem p = MakeProblem(37, 200, 77, true, 0, 11);
  const std::vector<float> scalar = RunGemm(p, Isa::kScalar, 1);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    ExpectMatches(p, RunGemm(p, isa, 2), scalar, std::string(IsaName(isa)));
  }
}

// Rows the quantizer treats specially: all zeros (scale 0: the output is act(bias)), a NaN
// (that row is NaN, the others unaffected), values near f32's range, values so small (a
// denormal max) that 127 / max overflows (zeros, as an all-zero row, not inf · 0 = NaN).
TEST(QuantGemm, SpecialRows) {
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) continue;
    Problem p = MakeProblem(5, 21, 9, true, 0, 5);
    for (int64_t i = 0; i < p.k; ++i) {
      p.x[0 * p.k + i] = 0.0f;
      p.x[2 * p.k + i] *= 1e30f;
      p.x[4 * p.k + i] = i % 3 == 0 ? 0.0f : (i % 2 ? 1e-39f : -2e-39f);
    }
    p.x[1 * p.k + 5] = std::nanf("");
    p.x[3 * p.k + 20] = std::numeric_limits<float>::infinity();
    const std::vector<float> y = RunGemm(p, isa, 2);
    for (int64_t c = 0; c < p.n; ++c) {
      EXPECT_EQ(y[0 * p.n + c], p.bias[c]) << IsaName(isa);
      EXPECT_TRUE(std::isnan(y[1 * p.n + c])) << IsaName(isa);
      EXPECT_TRUE(std::isfinite(y[2 * p.n + c])) << IsaName(isa);
      EXPECT_TRUE(std::isnan(y[3 * p.n + c])) << IsaName(isa);
      EXPECT_EQ(y[4 * p.n + c], p.bias[c]) << IsaName(isa);
    }
    ExpectMatches(p, y, Reference(p), std::string(IsaName(isa)));
  }
}

// Each call quantizes into its own thread's scratch: concurrent calls with different inputs
// give what each gives alone.
TEST(QuantGemm, ConcurrentRunsAgree) {
  const Problem a = MakeProblem(40, 96, 60, true, 1, 21);
  Problem b = MakeProblem(40, 96, 60, true, 1, 22);
  b.w = a.w;
  b.w_scale = a.w_scale;
  b.bias = a.bias;
  auto g = QuantGemm::Pack(Isa::kAuto, a.k, a.n, a.w.data(), a.w_scale.data(), a.bias.data());
  ASSERT_TRUE(g.ok()) << g.status();
  CpuContext ctx;
  ctx.num_threads = 1;
  std::vector<float> ya(a.m * a.n), yb(b.m * b.n);
  ASSERT_TRUE((*g)->Run(ctx, a.x.data(), a.m, ya.data(), a.act).ok());
  ASSERT_TRUE((*g)->Run(ctx, b.x.data(), b.m, yb.data(), b.act).ok());
  for (int round = 0; round < 20; ++round) {
    std::vector<float> ca(ya.size()), cb(yb.size());
    std::thread t1([&] { ASSERT_TRUE((*g)->Run(ctx, a.x.data(), a.m, ca.data(), a.act).ok()); });
    std::thread t2([&] { ASSERT_TRUE((*g)->Run(ctx, b.x.data(), b.m, cb.data(), b.act).ok()); });
    t1.join();
    t2.join();
    ASSERT_EQ(ca, ya);
    ASSERT_EQ(cb, yb);
  }
}

TEST(QuantGemm, RejectsBadArguments) {
  const std::vector<int8_t> w(12, 1);
  const std::vector<float> s(3, 1.0f);
  EXPECT_EQ(QuantGemm::Pack(Isa::kAuto, 0, 3, w.data(), s.data(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantGemm::Pack(Isa::kAuto, 4, 3, nullptr, s.data(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // -128 (no s8 negation: the AVX2 sign trick would get it wrong), on every path.
  std::vector<int8_t> w128 = w;
  w128[7] = -128;
  for (Isa isa : testing::AllIsas()) {
    auto bad = QuantGemm::Pack(isa, 4, 3, w128.data(), s.data(), nullptr);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << IsaName(isa);
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "weight [1, 3] is -128")) << bad.status();
  }
  // K above the int32 sums' exact range (255 · 127 · K < 2³¹).
  const int64_t big_k = kQuantLinearMaxK + 4;
  const std::vector<int8_t> wide(static_cast<size_t>(big_k), 1);
  EXPECT_EQ(QuantGemm::Pack(Isa::kAuto, big_k, 1, wide.data(), s.data(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto g = QuantGemm::Pack(Isa::kAuto, 4, 3, w.data(), s.data(), nullptr);
  ASSERT_TRUE(g.ok());
  CpuContext ctx;
  std::vector<float> x(8, 1.0f), y(6);
  EXPECT_EQ((*g)->Run(ctx, x.data(), -1, y.data(), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->Run(ctx, x.data(), 2, y.data(), 9).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*g)->Run(ctx, nullptr, 0, nullptr, 0).ok());  // M = 0: nothing to do
}

}  // namespace
}  // namespace kiln::cpu
