// MultiHeadAttention on every ISA path against the reference kiln.MultiHeadAttention:
// odd sequence lengths and head sizes (not multiples of 16), additive masks [B,1,1,S],
// [B,1,S,S], [1,N,S,S] and [S,S], bool masks, causal, fully masked rows, 1 and 3 threads.
// Tolerance 2e-5 absolute + 1e-5 relative: scores are D-term fp32 dots of O(1) values
// (|err| ≲ D·u·Σ|q·k|·scale ≈ 1e-6), softmax adds ~2e-7 relative and the output is an
// S-term convex combination of values in [-1, 1] (≤ S/(4W)·u sequential adds).
#include <limits>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

enum class MaskKind { kNone, kPad, kFull, kHeads, kSquare, kBoolPad, kBoolFull };

std::vector<int64_t> MaskDims(MaskKind k, int64_t b, int64_t n, int64_t s) {
  switch (k) {
    case MaskKind::kPad: case MaskKind::kBoolPad: return {b, 1, 1, s};
    case MaskKind::kFull: case MaskKind::kBoolFull: return {b, 1, s, s};
    case MaskKind::kHeads: return {1, n, s, s};
    case MaskKind::kSquare: return {s, s};
    default: return {};
  }
}

using AttnCase = std::tuple<Isa, int64_t /*B*/, int64_t /*S*/, int64_t /*N*/, int64_t /*D*/,
                            MaskKind, bool /*causal*/>;

class AttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionTest, MatchesReference) {
  const auto [isa, nb, s, nh, d, mk, causal] = GetParam();
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  const int64_t h = nh * d;
  const auto qkv = RandomVec(nb * s * 3 * h, 60 + s + d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const std::vector<int64_t> mdims = MaskDims(mk, nb, nh, s);
  int64_t mcount = 1;
  for (int64_t v : mdims) mcount *= v;
  const bool is_bool = mk == MaskKind::kBoolPad || mk == MaskKind::kBoolFull;
  // Additive: -10000 (the exporters' (1 - m)·min) or small offsets, with query row 0 of batch 0
  // fully masked by -inf when the mask has rows; bool: ~25% false, plus one all-false
  // row where the shape allows.
  std::vector<float> madd(mcount);
  std::vector<uint8_t> mbool(mcount);
  const auto r = RandomVec(std::max<int64_t>(mcount, 1), 70 + s, 0.f, 1.f);
  for (int64_t i = 0; i < mcount; ++i) {
    madd[i] = r[i] < 0.25f ? -10000.0f : 0.5f * r[i];
    mbool[i] = r[i] >= 0.25f;
  }
  if (mk == MaskKind::kFull || mk == MaskKind::kSquare)
    for (int64_t j = 0; j < s; ++j) madd[j] = -std::numeric_limits<float>::infinity();
  if (mk == MaskKind::kBoolFull)
    for (int64_t j = 0; j < s; ++j) mbool[j] = 0;

  MultiHeadAttentionArgs a;
  a.qkv = qkv.data();
  a.batch = nb;
  a.seq = s;
  a.num_heads = nh;
  a.head_size = d;
  a.scale = scale;
  a.causal = causal;
  if (mk != MaskKind::kNone) {
    a.mask.dims = mdims;
    if (is_bool) a.mask.boolean = mbool.data(); else a.mask.additive = madd.data();
  }
  Tensor qt = F32({nb, s, 3 * h}, qkv);
  Tensor mt;
  if (mk != MaskKind::kNone) {
    if (is_bool) {
      mt = Tensor(DType::kBool, mdims);
      std::copy(mbool.begin(), mbool.end(), mt.data<uint8_t>());
    } else {
      mt = F32(mdims, madd);
    }
  }
  auto ref = testing::RunReferenceOp(
      "kiln", "MultiHeadAttention",
      {{"num_heads", nh}, {"scale", scale}, {"causal", int64_t{causal}}},
      {&qt, mk == MaskKind::kNone ? nullptr : &mt});
  ASSERT_EQ(ref.size(), 1u);
  for (int threads : {1, 3}) {
    CpuContext ctx;
    ctx.isa = isa;
    ctx.num_threads = threads;
    std::vector<float> y(nb * s * h, std::nanf(""));
    a.y = y.data();
    ASSERT_TRUE(MultiHeadAttention(ctx, a).ok());
    testing::ExpectClose(y.data(), ref[0], 2e-5, 1e-5, absl::StrCat("threads=", threads));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Combine(::testing::ValuesIn(testing::AllIsas()),
                       ::testing::Values(int64_t{1}, int64_t{2}),
                       ::testing::Values(int64_t{1}, int64_t{7}, int64_t{33}, int64_t{77}),
                       ::testing::Values(int64_t{3}),
                       ::testing::Values(int64_t{8}, int64_t{24}, int64_t{64}),
                       ::testing::Values(MaskKind::kNone, MaskKind::kPad, MaskKind::kFull,
                                         MaskKind::kHeads, MaskKind::kSquare, MaskKind::kBoolPad,
                                         MaskKind::kBoolFull),
                       ::testing::Bool()));

TEST(AttentionArgs, RejectsBadMaskAndSizes) {
  const std::vector<float> qkv(2 * 4 * 3 * 8, 0.5f), mask(5, 0.f);
  std::vector<float> y(2 * 4 * 8);
  MultiHeadAttentionArgs a;
  a.qkv = qkv.data();
  a.y = y.data();
  a.batch = 2;
  a.seq = 4;
  a.num_heads = 2;
  a.head_size = 4;
  a.mask.additive = mask.data();
  a.mask.dims = {2, 1, 1, 5};  // 5 does not broadcast to S = 4
  CpuContext ctx;
  EXPECT_EQ(MultiHeadAttention(ctx, a).code(), absl::StatusCode::kInvalidArgument);
  a.mask.dims = {1, 1, 1, 1, 4};  // rank 5
  EXPECT_EQ(MultiHeadAttention(ctx, a).code(), absl::StatusCode::kInvalidArgument);
  a.mask = {};
  a.num_heads = 0;
  EXPECT_EQ(MultiHeadAttention(ctx, a).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
