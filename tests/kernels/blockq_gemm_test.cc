// BlockQuantGemm (kiln's int4/int8 weight-only GEMM, kernels/cpu/blockq_gemm.h) against the
// reference kiln.BlockQuantLinear, on every instruction-set path, for awkward shapes (M, N
// not multiples of the tile, K not a multiple of the block), 4- and 8-bit codes, with and
// without zero points and bias.
// Tolerance: the reference sums x·w in double, w = (code − zero) · scale rounded to f32. The
// kernel sums in f32, either x·w with one FMA per k (many rows: the weights dequantized
// once) or, with few rows, x·code per block with one FMA per k and then scale · (that −
// zero · Σx): every partial sum is bounded by S' = Σ_k |x[k]|·scale·(code + zero) + |b|, so
// per element |error| ≤ (K + 4)·u·S' + u·|y|, u = 2⁻²⁴ (the recursive-sum bound, plus the
// block epilogue's three roundings). A wrong nibble, block, scale or zero point misses it by
// orders of magnitude.
// Each path does the same f32 operations per element in the same order (the vector lanes
// are independent columns), so the ISAs agree bit for bit, on any thread count, and a row
// gives the same bits whichever other rows share its call (within one path): tested too.
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"
#include "kernels/cpu/blockq_gemm.h"

namespace kiln::cpu {
namespace {

using testing::RandomVec;

std::vector<uint8_t> RandomCodes(int64_t n, uint32_t seed, int bits = 4) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, (1 << bits) - 1);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<uint8_t>(dist(gen));
  return v;
}

struct Problem {
  int64_t m, k, n, block;
  int bits = 4;
  std::vector<float> x;
  std::vector<uint8_t> codes;  // [n, k], one per byte
  std::vector<float> scales;   // [n, kb]
  std::vector<uint8_t> zp;     // [n, kb] or empty
  std::vector<float> fzp;      // [n, kb] float zero points (instead of zp) or empty
  std::vector<float> bias;     // [n] or empty
  int64_t blocks() const { return (k + block - 1) / block; }
  int default_zero() const { return 1 << (bits - 1); }
  DType code_dtype() const { return bits == 8 ? DType::kU8 : DType::kU4; }
  CodeLayout layout() const { return bits == 8 ? CodeLayout::kEightBit : CodeLayout::kOnePerByte; }
};

Problem MakeProblem(int64_t m, int64_t k, int64_t n, int64_t block, bool with_zp, bool with_bias,
                    uint32_t seed, int bits = 4) {
  Problem p{m, k, n, block, bits};
  p.x = RandomVec(m * k, seed);
  p.codes = RandomCodes(n * k, seed + 1, bits);
  p.scales = RandomVec(n * p.blocks(), seed + 2, 1e-3f, 5e-2f);
  if (with_zp) p.zp = RandomCodes(n * p.blocks(), seed + 3, bits);
  if (with_bias) p.bias = RandomVec(n, seed + 4);
  return p;
}

// |x · w| summed the way the codes path bounds it: Σ_k |x[k]|·scale·(code + zero) + |b|.
double Bound(const Problem& p, int64_t r, int64_t j) {
  double s = p.bias.empty() ? 0.0 : std::fabs(p.bias[j]);
  for (int64_t i = 0; i < p.k; ++i) {
    const int64_t b = j * p.blocks() + i / p.block;
    const double zero = !p.fzp.empty() ? std::fabs(p.fzp[b])
                        : p.zp.empty() ? p.default_zero()
                                       : p.zp[b];
    s += std::fabs(double{p.x[r * p.k + i]}) * p.scales[b] * (p.codes[j * p.k + i] + zero);
  }
  return s;
}

std::vector<float> Reference(const Problem& p) {
  Tensor xt = Tensor::FromF32({p.m, p.k}, p.x);
  Tensor wt(p.code_dtype(), {p.n, p.k});
  std::copy(p.codes.begin(), p.codes.end(), wt.data<uint8_t>());
  Tensor st = Tensor::FromF32({p.n, p.blocks()}, p.scales);
  Tensor zt(p.code_dtype(), {p.n, p.blocks()});
  if (!p.zp.empty()) std::copy(p.zp.begin(), p.zp.end(), zt.data<uint8_t>());
  if (!p.fzp.empty()) zt = Tensor::FromF32({p.n, p.blocks()}, p.fzp);
  Tensor bt = Tensor::FromF32({p.n}, p.bias.empty() ? std::vector<float>(p.n) : p.bias);
  std::vector<const Tensor*> in = {&xt, &wt, &st, p.zp.empty() && p.fzp.empty() ? nullptr : &zt,
                                   p.bias.empty() ? nullptr : &bt};
  auto ref = testing::RunReferenceOp("kiln", "BlockQuantLinear", {{"block_size", p.block}}, in);
  if (ref.size() != 1) return {};
  const float* r = ref[0].data<float>();
  return std::vector<float>(r, r + p.m * p.n);
}

std::vector<float> RunGemm(const Problem& p, Isa isa, int threads, std::string* impl = nullptr) {
  auto g = BlockQuantGemm::Pack(
      isa, p.k, p.n, p.block, p.codes.data(), p.scales.data(), p.zp.empty() ? nullptr : p.zp.data(),
      p.bias.empty() ? nullptr : p.bias.data(), p.layout(), p.fzp.empty() ? nullptr : p.fzp.data());
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  if (impl) *impl = (*g)->ImplName();
  CpuContext ctx;
  ctx.num_threads = threads;
  ctx.isa = isa;
  std::vector<float> y(static_cast<size_t>(p.m * p.n), std::nanf(""));
  const absl::Status s = (*g)->Run(ctx, p.x.data(), p.m, y.data());
  EXPECT_TRUE(s.ok()) << s;
  return y;
}

void ExpectMatches(const Problem& p, const std::vector<float>& got, const std::vector<float>& want,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(got.size(), static_cast<size_t>(p.m * p.n)) << what;
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  std::string first;
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t c = 0; c < p.n; ++c) {
      const double w = want[r * p.n + c], g = got[r * p.n + c];
      const double tol = (p.k + 4) * u * Bound(p, r, c) + u * std::fabs(w);
      if (!(std::fabs(g - w) <= tol) && bad++ == 0)
        first = absl::StrCat("y[", r, ",", c, "] = ", g, " want ", w, " tol ", tol);
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance, first " << first;
}

using BCase = std::tuple<int64_t /*m*/, int64_t /*k*/, int64_t /*n*/, int64_t /*block*/,
                         bool /*zp*/, bool /*bias*/>;

using BParam = std::tuple<BCase, Isa, int /*bits*/>;

class BlockQuantGemmTest : public ::testing::TestWithParam<BParam> {};

TEST_P(BlockQuantGemmTest, MatchesReference) {
  const auto [m, k, n, block, zp, bias] = std::get<0>(GetParam());
  const Isa isa = std::get<1>(GetParam());
  const int bits = std::get<2>(GetParam());
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  const Problem p = MakeProblem(m, k, n, block, zp, bias,
                                static_cast<uint32_t>(7 * m + 3 * k + n + block + bits), bits);
  std::string impl;
  const std::vector<float> y = RunGemm(p, isa, 2, &impl);
  EXPECT_TRUE(absl::StartsWith(impl, absl::StrCat("kiln:", std::string(IsaName(isa)), ":")))
      << impl;
  EXPECT_EQ(absl::EndsWith(impl, ":8bit"), bits == 8) << impl;
  ExpectMatches(p, y, Reference(p), impl);
}

std::string BName(const ::testing::TestParamInfo<BParam>& info) {
  const auto [m, k, n, block, zp, bias] = std::get<0>(info.param);
  return absl::StrCat(std::string(IsaName(std::get<1>(info.param))), "_u", std::get<2>(info.param),
                      "_m", m, "k", k, "n", n, "_bs", block, zp ? "_zp" : "", bias ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BlockQuantGemmTest,
    ::testing::Combine(
        ::testing::Values(BCase{1, 16, 1, 16, false, false}, BCase{1, 50, 33, 16, true, true},
                          BCase{3, 96, 70, 32, false, true}, BCase{8, 64, 32, 64, true, false},
                          BCase{9, 200, 31, 32, true, true}, BCase{37, 130, 65, 128, false, false},
                          BCase{1, 896, 1000, 32, false, false},
                          BCase{128, 256, 96, 32, true, true}),
        ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512), ::testing::Values(4, 8)),
    BName);

// The same f32 operations per element on every ISA and thread count: bit-identical, on both
// paths (21 rows: dequantized panels; 7 rows: the codes). And per row on the codes path: 7
// rows in one call equal each row run alone.
TEST(BlockQuantGemm, EveryPathThreadCountAndRowCountAgreesBitForBit) {
  for (int bits : {4, 8}) {
    for (int64_t m : {21, 7}) {
      const Problem p = MakeProblem(m, 300, 77, 32, true, true, 5, bits);
      const std::vector<float> scalar = RunGemm(p, Isa::kScalar, 1);
      for (Isa isa : testing::AllIsas()) {
        if (!IsaSupported(isa)) continue;
        for (int threads : {1, 2, 3})
          EXPECT_EQ(RunGemm(p, isa, threads), scalar)
              << IsaName(isa) << " threads " << threads << " rows " << m << " bits " << bits;
      }
    }
    const Problem p = MakeProblem(7, 300, 77, 32, true, true, 5, bits);
    const std::vector<float> scalar = RunGemm(p, Isa::kScalar, 1);
    for (Isa isa : testing::AllIsas()) {
      if (!IsaSupported(isa)) continue;
      for (int64_t r = 0; r < p.m; ++r) {
        Problem row = p;
        row.m = 1;
        row.x.assign(p.x.begin() + r * p.k, p.x.begin() + (r + 1) * p.k);
        const std::vector<float> want(scalar.begin() + r * p.n, scalar.begin() + (r + 1) * p.n);
        EXPECT_EQ(RunGemm(row, isa, 2), want) << IsaName(isa) << " row " << r << " bits " << bits;
      }
    }
  }
}

// The activation epilogue, against the reference with the same activation; the vector
// approximations add a few ulps (8u·|y| + 1e-7, as the fp32 GEMM test allows).
TEST(BlockQuantGemm, ActivationEpilogue) {
  const char* const names[] = {"none", "gelu", "gelu_tanh", "relu", "tanh"};
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) continue;
    for (int act = 1; act <= 4; ++act) {
      const Problem p = MakeProblem(19, 100, 45, 32, true, true, 13);
      auto g = BlockQuantGemm::Pack(isa, p.k, p.n, p.block, p.codes.data(), p.scales.data(),
                                    p.zp.data(), p.bias.data());
      ASSERT_TRUE(g.ok()) << g.status();
      CpuContext ctx;
      ctx.isa = isa;
      ctx.num_threads = 2;
      std::vector<float> y(static_cast<size_t>(p.m * p.n));
      ASSERT_TRUE((*g)->Run(ctx, p.x.data(), p.m, y.data(), act).ok());
      Tensor xt = Tensor::FromF32({p.m, p.k}, p.x);
      Tensor wt(DType::kU4, {p.n, p.k});
      std::copy(p.codes.begin(), p.codes.end(), wt.data<uint8_t>());
      Tensor st = Tensor::FromF32({p.n, p.blocks()}, p.scales);
      Tensor zt(DType::kU4, {p.n, p.blocks()});
      std::copy(p.zp.begin(), p.zp.end(), zt.data<uint8_t>());
      Tensor bt = Tensor::FromF32({p.n}, p.bias);
      auto ref = testing::RunReferenceOp(
          "kiln", "BlockQuantLinear",
          {{"block_size", p.block}, {"activation", std::string(names[act])}},
          {&xt, &wt, &st, &zt, &bt});
      ASSERT_EQ(ref.size(), 1u);
      const double u = std::ldexp(1.0, -24);
      for (int64_t i = 0; i < p.m * p.n; ++i) {
        const double want = ref[0].data<float>()[i];
        const double s = Bound(p, i / p.n, i % p.n);
        ASSERT_NEAR(y[i], want, (p.k + 4) * u * s + 8 * u * std::fabs(want) + 1e-7)
            << IsaName(isa) << " " << names[act] << " at " << i;
      }
    }
  }
}

// Codes two per byte (the plans' layout: low nibble first, an odd K's last high nibble
// unused) pack into the same panels as one per byte: the results are identical.
TEST(BlockQuantGemm, TwoCodesPerByteMatchOnePerByte) {
  for (const int64_t k : {40, 33}) {
    const Problem p = MakeProblem(7, k, 45, 16, true, true, 21);
    const int64_t row = (k + 1) / 2;
    std::vector<uint8_t> two(static_cast<size_t>(p.n * row), 0xF0);  // junk in unused nibbles
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < k; ++i) {
        uint8_t& b = two[j * row + i / 2];
        const int shift = 4 * (i & 1);
        b = static_cast<uint8_t>((b & ~(15 << shift)) | (p.codes[j * k + i] << shift));
      }
    const std::vector<float> want = RunGemm(p, Isa::kAuto, 2);
    auto g = BlockQuantGemm::Pack(Isa::kAuto, p.k, p.n, p.block, two.data(), p.scales.data(),
                                  p.zp.data(), p.bias.data(), CodeLayout::kTwoPerByte);
    ASSERT_TRUE(g.ok()) << g.status();
    CpuContext ctx;
    ctx.num_threads = 2;
    std::vector<float> y(static_cast<size_t>(p.m * p.n));
    ASSERT_TRUE((*g)->Run(ctx, p.x.data(), p.m, y.data()).ok());
    EXPECT_EQ(y, want) << "k " << k;
  }
}

// Absent zero points are MatMulNBits' default 2^(bits-1) (8, 128), exactly, on both the
// codes path (5 rows) and the dequantized one (40 rows).
TEST(BlockQuantGemm, AbsentZeroPointsAreHalfTheRange) {
  for (int bits : {4, 8})
    for (int64_t m : {5, 40}) {
      Problem p = MakeProblem(m, 100, 40, 32, false, false, 9, bits);
      const std::vector<float> implicit = RunGemm(p, Isa::kAuto, 2);
      p.zp.assign(static_cast<size_t>(p.n * p.blocks()), static_cast<uint8_t>(p.default_zero()));
      EXPECT_EQ(RunGemm(p, Isa::kAuto, 2), implicit) << bits << " bits, " << m << " rows";
      p.zp[0] = static_cast<uint8_t>(p.default_zero() - 1);  // and a zero point is not ignored
      EXPECT_NE(RunGemm(p, Isa::kAuto, 2), implicit) << bits << " bits, " << m << " rows";
    }
}

// Float zero points (onnxruntime's HQQ files: fractional, one per block, w = (code − z) ·
// scale in f32) on both paths (5 rows: the codes; 40: dequantized panels), 4 and 8 bits,
// every ISA, within the stated bound with |z| for the zero point.
TEST(BlockQuantGemm, FloatZeroPointsMatchTheReference) {
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) continue;
    for (int bits : {4, 8})
      for (int64_t m : {1, 5, 40}) {
        Problem p = MakeProblem(m, 130, 45, 32, false, true, 31, bits);
        p.fzp = RandomVec(p.n * p.blocks(), 32, -2.0f, static_cast<float>(1 << bits) + 1);
        ExpectMatches(p, RunGemm(p, isa, 2), Reference(p),
                      absl::StrCat(std::string(IsaName(isa)), " ", bits, " bits, ", m, " rows"));
      }
  }
  // Integer-valued float zero points equal the same zero points as codes, bit for bit.
  Problem p = MakeProblem(5, 100, 40, 32, true, false, 9);
  const std::vector<float> codes = RunGemm(p, Isa::kAuto, 2);
  p.fzp.assign(p.zp.begin(), p.zp.end());
  p.zp.clear();
  EXPECT_EQ(RunGemm(p, Isa::kAuto, 2), codes);
}

TEST(BlockQuantGemm, RefusesBadWeights) {
  const std::vector<uint8_t> codes = {1, 2, 16, 3};
  const std::vector<float> scales = {1, 1};
  auto bad_code =
      BlockQuantGemm::Pack(Isa::kScalar, 2, 2, 16, codes.data(), scales.data(), nullptr, nullptr);
  ASSERT_FALSE(bad_code.ok());
  EXPECT_TRUE(absl::StrContains(bad_code.status().message(), "code [1, 0] is 16"))
      << bad_code.status();
  // The same bytes are fine as 8-bit codes (and zero points).
  EXPECT_TRUE(BlockQuantGemm::Pack(Isa::kScalar, 2, 2, 16, codes.data(), scales.data(),
                                   codes.data(), nullptr, CodeLayout::kEightBit)
                  .ok());
  const std::vector<uint8_t> ok_codes = {1, 2, 3, 4};
  auto bad_block = BlockQuantGemm::Pack(Isa::kScalar, 2, 2, 24, ok_codes.data(), scales.data(),
                                        nullptr, nullptr);
  ASSERT_FALSE(bad_block.ok());
  EXPECT_TRUE(absl::StrContains(bad_block.status().message(), "block size 24"));
  EXPECT_FALSE(
      BlockQuantGemm::Pack(Isa::kScalar, 0, 2, 16, ok_codes.data(), scales.data(), nullptr, nullptr)
          .ok());
}

}  // namespace
}  // namespace kiln::cpu
