// MultiHeadAttention on every ISA path and every execution strategy (attention_internal.h:
// the row kernel, the two oneDNN-GEMM paths, and the automatic choice) against the reference
// kiln.MultiHeadAttention: odd sequence lengths and head sizes (not multiples of 16),
// additive masks [B,1,1,S], [B,1,S,S], [1,N,S,S], [S,S] and [B,1,S,1], bool masks, causal,
// fully masked rows, 1, 2 and 3 threads; BERT-sized head counts (N = 12) split into uneven
// head groups and score blocks over the per-worker budget.
// Tolerance 2e-5 absolute + 1e-5 relative: scores are D-term fp32 dots of O(1) values
// (|err| ≲ D·u·Σ|q·k|·scale ≈ 1e-6), softmax adds ~2e-7 relative and the output is an
// S-term convex combination of values in [-1, 1] (≤ S/(4W)·u sequential adds).
#include <initializer_list>
#include <limits>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_internal.h"

namespace kiln::cpu {
namespace {

using internal::AttentionPath;
using testing::F32;
using testing::RandomVec;

enum class MaskKind { kNone, kPad, kFull, kHeads, kSquare, kBoolPad, kBoolFull, kQueryCol };

constexpr AttentionPath kAllPaths[] = {AttentionPath::kAuto, AttentionPath::kRows,
                                       AttentionPath::kGemmHeads, AttentionPath::kGemmBatch};

const char* PathName(AttentionPath p) {
  switch (p) {
    case AttentionPath::kAuto:
      return "auto";
    case AttentionPath::kRows:
      return "rows";
    case AttentionPath::kGemmHeads:
      return "gemm-heads";
    case AttentionPath::kGemmBatch:
      return "gemm-batch";
  }
  return "?";
}

std::vector<int64_t> MaskDims(MaskKind k, int64_t b, int64_t n, int64_t s) {
  switch (k) {
    case MaskKind::kPad:
    case MaskKind::kBoolPad:
      return {b, 1, 1, s};
    case MaskKind::kFull:
    case MaskKind::kBoolFull:
      return {b, 1, s, s};
    case MaskKind::kHeads:
      return {1, n, s, s};
    case MaskKind::kSquare:
      return {s, s};
    case MaskKind::kQueryCol:
      return {b, 1, s, 1};
    default:
      return {};
  }
}

using AttnCase = std::tuple<Isa, int64_t /*B*/, int64_t /*S*/, int64_t /*N*/, int64_t /*D*/,
                            MaskKind, bool /*causal*/>;

// Runs every path at each thread count in `threads` and compares with the reference.
void CheckAgainstReference(Isa isa, int64_t nb, int64_t s, int64_t nh, int64_t d, MaskKind mk,
                           bool causal, std::initializer_list<int> threads) {
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
  // One value per query row shifts the whole row: no -10000 there, whose fp32 sum with a
  // score rounds by ~5e-4 (ulp(10000)), an error of fp32 itself, not of the kernel.
  if (mk == MaskKind::kQueryCol) {
    for (int64_t i = 0; i < mcount; ++i) madd[i] = 0.5f * r[i];
    madd[0] = -std::numeric_limits<float>::infinity();
  }
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
    if (is_bool)
      a.mask.boolean = mbool.data();
    else
      a.mask.additive = madd.data();
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
  auto ref =
      testing::RunReferenceOp("kiln", "MultiHeadAttention",
                              {{"num_heads", nh}, {"scale", scale}, {"causal", int64_t{causal}}},
                              {&qt, mk == MaskKind::kNone ? nullptr : &mt});
  ASSERT_EQ(ref.size(), 1u);
  for (AttentionPath path : kAllPaths) {
    for (int t : threads) {
      CpuContext ctx;
      ctx.isa = isa;
      ctx.num_threads = t;
      std::vector<float> y(nb * s * h, std::nanf(""));
      a.y = y.data();
      const absl::Status st = internal::MultiHeadAttentionWithPath(ctx, a, path);
      ASSERT_TRUE(st.ok()) << PathName(path) << ": " << st;
      testing::ExpectClose(y.data(), ref[0], 2e-5, 1e-5,
                           absl::StrCat(PathName(path), " threads=", t));
    }
  }
}

class AttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionTest, MatchesReference) {
  const auto [isa, nb, s, nh, d, mk, causal] = GetParam();
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  CheckAgainstReference(isa, nb, s, nh, d, mk, causal, {1, 3});
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
                                         MaskKind::kBoolFull, MaskKind::kQueryCol),
                       ::testing::Bool()));

// Encoder-sized heads (N = 12) on the default ISA: head groups that do not divide the heads
// evenly per thread (B = 1 on 2 and 3 threads); S = 129, where the score budget (64K floats)
// caps a work item at 3 heads; S = 300 and 600, past the budget for one head, so kGemmHeads
// splits query rows into blocks (218 + 82 rows; 5 × 109 + 55 rows).
using BigCase = std::tuple<int64_t /*B*/, int64_t /*S*/, int64_t /*D*/, MaskKind, bool>;
class AttentionBigTest : public ::testing::TestWithParam<BigCase> {};

TEST_P(AttentionBigTest, MatchesReference) {
  const auto [nb, s, d, mk, causal] = GetParam();
  CheckAgainstReference(Isa::kAuto, nb, s, 12, d, mk, causal, {1, 2, 3});
}

INSTANTIATE_TEST_SUITE_P(Encoder, AttentionBigTest,
                         ::testing::Values(BigCase{1, 33, 40, MaskKind::kPad, false},
                                           BigCase{1, 129, 32, MaskKind::kBoolPad, false},
                                           BigCase{3, 64, 64, MaskKind::kPad, true},
                                           BigCase{1, 300, 8, MaskKind::kPad, false},
                                           BigCase{2, 300, 24, MaskKind::kBoolFull, true},
                                           BigCase{1, 600, 8, MaskKind::kFull, true}));

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
