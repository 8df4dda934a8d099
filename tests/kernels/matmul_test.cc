// PackedLinear (oneDNN matmul + fused post-ops) against the reference kiln.Linear, and
// BatchedMatMul against a double-precision loop.
// Tolerance: an fp32 dot product of length K in any summation order has
// |err| ≤ γ_K · Σ|x_i·w_i| with γ_K ≈ K·u, u = 2⁻²⁴ (Higham, Thm 3.1); bias adds one more
// rounding and the activations have derivative ≤ 1.13 (GELU) so they do not amplify it;
// oneDNN's eltwise approximations add a few ulps of the result. Bound per element:
// 1.2·(K+2)·u·(Σ|x·w| + |b|) + 8·u·|y| + 1e-7. For K = 3072 with |x|,|w| ≤ 1 that is
// ≤ 2.2e-4·Σ|x·w| — loose in the worst case, yet a wrong index or layout misses it by
// orders of magnitude (errors ~Σ|x·w|).
#include <cmath>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

const char* ActName(Activation a) {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kGeluErf:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
  }
  return "?";
}

// Checks y[m, n] against the reference Linear with the K·u bound above.
void CheckLinear(const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>* bias, const LinearDesc& d, int64_t m,
                 const std::vector<float>& y) {
  Tensor xt = F32({m, d.k}, x);
  Tensor wt = d.trans_w ? F32({d.n, d.k}, w) : F32({d.k, d.n}, w);
  Tensor bt = bias ? F32({d.n}, *bias) : Tensor();
  std::vector<const Tensor*> in = {&xt, &wt};
  if (bias) in.push_back(&bt);
  auto ref = testing::RunReferenceOp(
      "kiln", "Linear",
      {{"trans_w", int64_t{d.trans_w}}, {"activation", std::string(ActName(d.activation))}}, in);
  ASSERT_EQ(ref.size(), 1u);
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  std::string first;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < d.n; ++c) {
      double s = bias ? std::fabs((*bias)[c]) : 0.0;
      for (int64_t i = 0; i < d.k; ++i)
        s += std::fabs(static_cast<double>(x[r * d.k + i]) *
                       (d.trans_w ? w[c * d.k + i] : w[i * d.n + c]));
      const double want = ref[0].data<float>()[r * d.n + c], got = y[r * d.n + c];
      const double tol = 1.2 * (d.k + 2) * u * s + 8 * u * std::fabs(want) + 1e-7;
      if (!(std::fabs(got - want) <= tol) && bad++ == 0)
        first = absl::StrCat("y[", r, ",", c, "] = ", got, " want ", want, " tol ", tol);
    }
  }
  EXPECT_EQ(bad, 0) << bad << " elements out of tolerance, first " << first;
}

using LinearCase = std::tuple<int64_t /*m*/, int64_t /*k*/, int64_t /*n*/, bool /*trans*/,
                              Activation, bool /*bias*/>;

// Each backend, and kiln's on each instruction-set path (skipped where the CPU lacks it).
struct LinearImpl {
  GemmBackend backend;
  Isa isa;
};
const LinearImpl kLinearImpls[] = {{GemmBackend::kOneDnn, Isa::kAuto},
                                   {GemmBackend::kKiln, Isa::kScalar},
                                   {GemmBackend::kKiln, Isa::kAvx2},
                                   {GemmBackend::kKiln, Isa::kAvx512}};

class LinearTest : public ::testing::TestWithParam<std::tuple<LinearCase, int>> {};

TEST_P(LinearTest, MatchesReference) {
  const auto [m, k, n, trans, act, with_bias] = std::get<0>(GetParam());
  const LinearImpl impl = kLinearImpls[std::get<1>(GetParam())];
  KILN_SKIP_UNSUPPORTED_ISA(impl.isa);
  const LinearDesc d{k, n, trans, act, impl.backend};
  const auto x = RandomVec(m * k, 1 + m + k), w = RandomVec(k * n, 2 + k + n);
  const auto b = RandomVec(n, 3 + n);
  CpuContext ctx;
  ctx.num_threads = 2;
  ctx.isa = impl.isa;
  auto pl = PackedLinear::Create(d, w.data(), with_bias ? b.data() : nullptr, ctx);
  ASSERT_TRUE(pl.ok()) << pl.status();
  EXPECT_EQ((*pl)->backend(), impl.backend);
  auto name = (*pl)->ImplName(ctx, m);
  ASSERT_TRUE(name.ok()) << name.status();
  if (impl.backend == GemmBackend::kKiln)
    EXPECT_TRUE(absl::StartsWith(*name, absl::StrCat("kiln:", std::string(IsaName(impl.isa)), ":")))
        << *name;
  else
    EXPECT_TRUE(absl::StartsWith(*name, "onednn:")) << *name;
  std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
  ASSERT_TRUE((*pl)->Run(ctx, x.data(), m, y.data()).ok());
  CheckLinear(x, w, with_bias ? &b : nullptr, d, m, y);
}

std::string LinearTestName(const ::testing::TestParamInfo<std::tuple<LinearCase, int>>& info) {
  const auto [m, k, n, trans, act, with_bias] = std::get<0>(info.param);
  const LinearImpl impl = kLinearImpls[std::get<1>(info.param)];
  return absl::StrCat(std::string(GemmBackendName(impl.backend)), "_",
                      std::string(IsaName(impl.isa)), "_m", m, "k", k, "n", n,
                      trans ? "_trans" : "", "_", ActName(act), with_bias ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Combine(
        ::testing::Values(LinearCase{1, 3, 5, false, Activation::kNone, false},
                          LinearCase{7, 17, 31, false, Activation::kNone, true},
                          LinearCase{33, 384, 37, true, Activation::kGeluErf, true},
                          LinearCase{128, 384, 1536, false, Activation::kGeluErf, true},
                          LinearCase{65, 768, 384, false, Activation::kGeluTanh, true},
                          LinearCase{19, 100, 77, true, Activation::kRelu, true},
                          LinearCase{19, 100, 77, false, Activation::kTanh, false},
                          LinearCase{5, 3072, 129, false, Activation::kNone, true},
                          LinearCase{9, 3072, 768, true, Activation::kGeluErf, true}),
        ::testing::Range(0, static_cast<int>(std::size(kLinearImpls)))),
    LinearTestName);

// One packed weight serves many batch sizes (a primitive per M, weights packed once or
// re-laid-out on demand) and several thread counts.
class PackedLinearBackends : public ::testing::TestWithParam<GemmBackend> {};

TEST_P(PackedLinearBackends, ReusedAcrossBatchSizesAndThreads) {
  const LinearDesc d{96, 200, false, Activation::kRelu, GetParam()};
  const auto w = RandomVec(d.k * d.n, 11), b = RandomVec(d.n, 12);
  CpuContext ctx;
  auto pl = PackedLinear::Create(d, w.data(), b.data(), ctx, /*typical_m=*/64);
  ASSERT_TRUE(pl.ok()) << pl.status();
  for (int threads : {1, 2, 3}) {
    for (int64_t m : {1, 64, 3, 200, 64}) {
      ctx.num_threads = threads;
      const auto x = RandomVec(m * d.k, 100 + m);
      std::vector<float> y(static_cast<size_t>(m * d.n));
      ASSERT_TRUE((*pl)->Run(ctx, x.data(), m, y.data()).ok());
      SCOPED_TRACE(absl::StrCat("threads=", threads, " m=", m));
      CheckLinear(x, w, &b, d, m, y);
    }
  }
}

TEST_P(PackedLinearBackends, ConcurrentRunsAgree) {
  const LinearDesc d{64, 48, true, Activation::kGeluTanh, GetParam()};
  const auto w = RandomVec(d.k * d.n, 21);
  CpuContext ctx;
  ctx.num_threads = 1;
  auto pl = PackedLinear::Create(d, w.data(), nullptr, ctx);
  ASSERT_TRUE(pl.ok());
  const int64_t m = 37;
  const auto x = RandomVec(m * d.k, 22);
  std::vector<float> y1(m * d.n), y2(m * d.n);
  std::thread t1([&] { ASSERT_TRUE((*pl)->Run(ctx, x.data(), m, y1.data()).ok()); });
  std::thread t2([&] { ASSERT_TRUE((*pl)->Run(ctx, x.data(), m, y2.data()).ok()); });
  t1.join();
  t2.join();
  EXPECT_EQ(y1, y2);
  CheckLinear(x, w, nullptr, d, m, y1);
}

INSTANTIATE_TEST_SUITE_P(Backends, PackedLinearBackends,
                         ::testing::Values(GemmBackend::kOneDnn, GemmBackend::kKiln),
                         [](const auto& info) { return std::string(GemmBackendName(info.param)); });

// kAuto picks per M from the measured table: on the AVX2 path one Linear serves a small M
// with kiln and a large one with oneDNN (each packs on first use), both right.
TEST(PackedLinear, AutoChoosesPerRowCount) {
  KILN_SKIP_UNSUPPORTED_ISA(Isa::kAvx2);  // the AVX2 rules split M between the backends
  const LinearDesc d{16, 24, false, Activation::kGeluErf};
  const auto w = RandomVec(d.k * d.n, 41), b = RandomVec(d.n, 42);
  CpuContext ctx;
  ctx.isa = Isa::kAvx2;
  auto pl = PackedLinear::Create(d, w.data(), b.data(), ctx, /*typical_m=*/1);
  ASSERT_TRUE(pl.ok()) << pl.status();
  const Isa isa = ctx.ResolvedIsa();
  for (int64_t m : {int64_t{1}, int64_t{4096}}) {
    const GemmBackend want = ResolveGemmBackend(GemmBackend::kAuto, isa, m);
    auto name = (*pl)->ImplName(ctx, m);
    ASSERT_TRUE(name.ok()) << name.status();
    EXPECT_TRUE(absl::StartsWith(*name, absl::StrCat(std::string(GemmBackendName(want)), ":")))
        << "m=" << m << ": " << *name;
    const auto x = RandomVec(m * d.k, 43 + m);
    std::vector<float> y(static_cast<size_t>(m * d.n));
    ASSERT_TRUE((*pl)->Run(ctx, x.data(), m, y.data()).ok());
    CheckLinear(x, w, &b, d, m, y);
  }
  // The measured table itself sends these two M to different backends.
  EXPECT_NE(ResolveGemmBackend(GemmBackend::kAuto, isa, 1),
            ResolveGemmBackend(GemmBackend::kAuto, isa, 4096));
}

// bf16 weights (bf16 plans): against the reference Linear with bf16 W, which rounds X to
// bf16 too. The products of bf16 values are exact in fp32, so the fp32 bound above holds
// with x and w the rounded values. Natively on AVX-512 BF16 (oneDNN's bf16 matmul), and
// widened to fp32 on the AVX2 path (the fallback of CPUs without it).
class LinearBf16Test : public ::testing::TestWithParam<std::tuple<LinearCase, Isa>> {};

TEST_P(LinearBf16Test, MatchesReference) {
  const auto [m, k, n, trans, act, with_bias] = std::get<0>(GetParam());
  const Isa isa = std::get<1>(GetParam());
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  LinearDesc d{k, n, trans, act};
  d.bf16_weights = true;
  const auto x = RandomVec(m * k, 5 + m + k), w = RandomVec(k * n, 6 + k + n);
  const auto b = RandomVec(n, 7 + n);
  std::vector<uint16_t> wb(w.size());
  ConvertToBf16(w.data(), static_cast<int64_t>(w.size()), wb.data(), Isa::kScalar);
  CpuContext ctx;
  ctx.num_threads = 2;
  ctx.isa = isa;
  auto pl = PackedLinear::Create(d, wb.data(), with_bias ? b.data() : nullptr, ctx);
  ASSERT_TRUE(pl.ok()) << pl.status();
  auto name = (*pl)->ImplName(ctx, m);
  ASSERT_TRUE(name.ok()) << name.status();
  if (HasAvx512Bf16(ctx.ResolvedIsa()))
    EXPECT_TRUE(absl::StrContains(*name, "bf16") && !absl::StrContains(*name, "widened")) << *name;
  else
    EXPECT_TRUE(absl::EndsWith(*name, " (bf16 widened)")) << *name;
  std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
  ASSERT_TRUE((*pl)->Run(ctx, x.data(), m, y.data()).ok());
  // The reference: bf16 W; the bound: the rounded values, as the kernel multiplies them.
  std::vector<float> xr(x.size()), wr(w.size());
  RoundToBf16(x.data(), static_cast<int64_t>(x.size()), xr.data());
  Bf16ToFloat(wb.data(), static_cast<int64_t>(wb.size()), wr.data());
  Tensor xt = F32({m, k}, x);
  Tensor wt(DType::kBF16, trans ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
  std::copy(wb.begin(), wb.end(), reinterpret_cast<uint16_t*>(wt.raw()));
  Tensor bt = F32({n}, b);
  std::vector<const Tensor*> in = {&xt, &wt};
  if (with_bias) in.push_back(&bt);
  auto ref = testing::RunReferenceOp(
      "kiln", "Linear", {{"trans_w", int64_t{trans}}, {"activation", std::string(ActName(act))}},
      in);
  ASSERT_EQ(ref.size(), 1u);
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double s = with_bias ? std::fabs(b[c]) : 0.0;
      for (int64_t i = 0; i < k; ++i)
        s += std::fabs(double{xr[r * k + i]} * (trans ? wr[c * k + i] : wr[i * n + c]));
      const double want = ref[0].data<float>()[r * n + c], got = y[r * n + c];
      bad += !(std::fabs(got - want) <= 1.2 * (k + 2) * u * s + 8 * u * std::fabs(want) + 1e-7);
    }
  EXPECT_EQ(bad, 0) << *name;
}

std::string LinearBf16Name(const ::testing::TestParamInfo<std::tuple<LinearCase, Isa>>& info) {
  const auto [m, k, n, trans, act, with_bias] = std::get<0>(info.param);
  return absl::StrCat(std::string(IsaName(std::get<1>(info.param))), "_m", m, "k", k, "n", n,
                      trans ? "_trans" : "", "_", ActName(act), with_bias ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearBf16Test,
    ::testing::Combine(::testing::Values(LinearCase{1, 3, 5, false, Activation::kNone, false},
                                         LinearCase{33, 384, 37, true, Activation::kGeluErf, true},
                                         LinearCase{128, 384, 1536, false, Activation::kGeluErf,
                                                    true},
                                         LinearCase{19, 100, 77, false, Activation::kTanh, true}),
                       ::testing::Values(Isa::kAvx2, Isa::kAvx512)),
    LinearBf16Name);

TEST(PackedLinear, RejectsBadSizes) {
  CpuContext ctx;
  const float w = 1.0f;
  EXPECT_EQ(PackedLinear::Create({0, 4, false}, &w, nullptr, ctx).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackedLinear::Create({4, 4, false}, nullptr, nullptr, ctx).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto pl = PackedLinear::Create({1, 1, false}, &w, nullptr, ctx);
  ASSERT_TRUE(pl.ok());
  float y = 0;
  EXPECT_EQ((*pl)->Run(ctx, &w, -1, &y).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*pl)->Run(ctx, nullptr, 1, &y).code(), absl::StatusCode::kInvalidArgument);
}

// Attention-shaped products straight out of a packed [B, S, 3H] buffer: Q·Kᵀ per head.
TEST(BatchedMatMul, StridedHeadsMatchDoubleLoop) {
  // s > dh so that the non-transposed case ([dh, dh] block of the K part) stays in bounds.
  const int64_t batch = 2, s = 29, heads = 3, dh = 24, h = heads * dh;
  const auto qkv = RandomVec(batch * s * 3 * h, 31);
  // One matmul per batch item over heads is not expressible with a single batch stride,
  // so run per batch item with heads as the oneDNN batch dimension.
  for (bool trans : {true, false}) {
    for (int64_t b = 0; b < batch; ++b) {
      BatchedMatMulDesc d;
      d.batch = heads;
      d.m = s;
      d.k = dh;
      d.n = trans ? s : dh;
      d.trans_b = trans;
      d.alpha = 0.125f;
      d.lda = 3 * h;
      d.sa = dh;
      d.ldb = 3 * h;
      d.sb = dh;
      d.ldc = d.n;
      d.sc = s * d.n;
      // trans: C = Q·Kᵀ (B = K rows, [N=s, K=dh]); else C = Q·(first dh rows of K), N=dh.
      const float* a = qkv.data() + b * s * 3 * h;
      const float* bm = a + h;
      if (!trans) d.k = dh;  // V's first dh rows as a [dh, dh] matrix
      std::vector<float> c(static_cast<size_t>(heads * s * d.n));
      CpuContext ctx;
      ctx.num_threads = 2;
      ASSERT_TRUE(BatchedMatMul(ctx, d, a, bm, c.data()).ok());
      for (int64_t n = 0; n < heads; ++n)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < d.n; ++j) {
            double acc = 0, mag = 0;
            for (int64_t kk = 0; kk < d.k; ++kk) {
              const double bv = trans ? bm[j * 3 * h + n * dh + kk] : bm[kk * 3 * h + n * dh + j];
              acc += a[i * 3 * h + n * dh + kk] * bv;
              mag += std::fabs(a[i * 3 * h + n * dh + kk] * bv);
            }
            EXPECT_NEAR(c[(n * s + i) * d.n + j], 0.125 * acc,
                        0.125 * 1.2 * (d.k + 1) * std::ldexp(1.0, -24) * mag + 1e-7)
                << "trans=" << trans << " b=" << b << " head " << n << " (" << i << "," << j << ")";
          }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
