// MultiHeadAttention on every ISA path and every execution strategy (attention_internal.h:
// the row kernel, the two oneDNN-GEMM paths, and the automatic choice) against the reference
// kiln.MultiHeadAttention: odd sequence lengths and head sizes (not multiples of 16),
// additive masks [B,1,1,S], [B,1,S,S], [1,N,S,S], [S,S] and [B,1,S,1], bool masks, causal,
// fully masked rows, 1, 2 and 3 threads; BERT-sized head counts (N = 12) split into uneven
// head groups and score blocks over the per-worker budget.
// Tolerance 2e-5 absolute + 1e-5 relative: scores are D-term fp32 dots of O(1) values
// (|err| ≲ D·u·Σ|q·k|·scale ≈ 1e-6), softmax adds ~2e-7 relative and the output is an
// S-term convex combination of values in [-1, 1] (≤ S/(4W)·u sequential adds).
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <tuple>
#include <utility>

#include "gmock/gmock.h"
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
                                       AttentionPath::kGemmHeads, AttentionPath::kGemmBatch,
                                       AttentionPath::kCache};

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
    case AttentionPath::kCache:
      return "cache";
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

// Decoder attention: grouped K/V heads (N = 8 query heads over Nkv = 8, 4, 2 or 1 K/V
// heads) and rotate-half rotary tables over the whole head (R = D) or half of it, shared
// by the batch ([1, S, R]) or per batch item ([B, S, R]), causal with a key-padding mask,
// on every path at 1 and 3 threads, against the reference kiln.MultiHeadAttention with
// num_kv_heads and cos/sin. The tables are real cos/sin of position·frequency, so the
// rotation keeps the norms (same tolerance as above).
using DecoderCase =
    std::tuple<int64_t /*S*/, int64_t /*D*/, int64_t /*Nkv*/, int64_t /*R*/, bool /*per_batch*/>;
class AttentionDecoderTest : public ::testing::TestWithParam<DecoderCase> {};

TEST_P(AttentionDecoderTest, MatchesReference) {
  const auto [s, d, nkv, rot, per_batch] = GetParam();
  const int64_t nb = 2, nh = 8, row = (nh + 2 * nkv) * d;
  const auto qkv = RandomVec(nb * s * row, 90 + s + d + nkv);
  const int64_t tb = per_batch ? nb : 1;
  std::vector<float> cs(tb * s * rot), sn(tb * s * rot);
  for (int64_t b = 0; b < tb; ++b)
    for (int64_t t = 0; t < s; ++t)
      for (int64_t j = 0; j < rot; ++j) {
        // HF's layout: frequency j mod R/2, both halves; batch 1 shifted by 3 positions.
        const double f = std::pow(10000.0, -2.0 * (j % (rot / 2)) / rot);
        const double angle = (t + 3 * b) * f;
        cs[(b * s + t) * rot + j] = static_cast<float>(std::cos(angle));
        sn[(b * s + t) * rot + j] = static_cast<float>(std::sin(angle));
      }
  std::vector<float> mask(nb * s, 0.0f);
  for (int64_t j = s - s / 3; j < s; ++j) mask[s + j] = -std::numeric_limits<float>::infinity();
  MultiHeadAttentionArgs a;
  a.qkv = qkv.data();
  a.batch = nb;
  a.seq = s;
  a.num_heads = nh;
  a.num_kv_heads = nkv;
  a.head_size = d;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.causal = true;
  a.mask.dims = {nb, 1, 1, s};
  a.mask.additive = mask.data();
  a.rotary.cos = cs.data();
  a.rotary.sin = sn.data();
  a.rotary.dim = rot;
  a.rotary.per_batch = per_batch;
  Tensor qt = F32({nb, s, row}, qkv), mt = F32({nb, 1, 1, s}, mask);
  Tensor ct = F32({tb, s, rot}, cs), st = F32({tb, s, rot}, sn);
  auto ref = testing::RunReferenceOp(
      "kiln", "MultiHeadAttention",
      {{"num_heads", nh}, {"num_kv_heads", nkv}, {"scale", a.scale}, {"causal", int64_t{1}}},
      {&qt, &mt, &ct, &st});
  ASSERT_EQ(ref.size(), 1u);
  for (AttentionPath path : kAllPaths)
    for (int t : {1, 3}) {
      CpuContext ctx;
      ctx.num_threads = t;
      std::vector<float> y(nb * s * nh * d, std::nanf(""));
      a.y = y.data();
      const absl::Status status = internal::MultiHeadAttentionWithPath(ctx, a, path);
      ASSERT_TRUE(status.ok()) << PathName(path) << ": " << status;
      testing::ExpectClose(y.data(), ref[0], 2e-5, 1e-5,
                           absl::StrCat(PathName(path), " threads=", t));
    }
}

INSTANTIATE_TEST_SUITE_P(
    Decoder, AttentionDecoderTest,
    ::testing::Values(DecoderCase{7, 16, 8, 16, false}, DecoderCase{7, 16, 4, 16, true},
                      DecoderCase{33, 32, 2, 32, false}, DecoderCase{33, 32, 1, 16, true},
                      DecoderCase{77, 64, 2, 64, true}, DecoderCase{77, 64, 4, 32, false},
                      DecoderCase{130, 24, 2, 24, false}));

// GPT-J's interleaved rotary (pairs (2j, 2j+1), tables holding each angle twice) over R = 8
// of D = 16, every path, against the reference with rotary_interleaved = 1.
TEST(AttentionDecoder, InterleavedRotaryMatchesReference) {
  const int64_t nb = 2, s = 33, nh = 4, d = 16, rot = 8, row = 3 * nh * d;
  const auto qkv = RandomVec(nb * s * row, 7);
  std::vector<float> cs(s * rot), sn(s * rot);
  for (int64_t t = 0; t < s; ++t)
    for (int64_t j = 0; j < rot; ++j) {
      const double angle = t * std::pow(10000.0, -2.0 * (j / 2) / rot);
      cs[t * rot + j] = static_cast<float>(std::cos(angle));
      sn[t * rot + j] = static_cast<float>(std::sin(angle));
    }
  MultiHeadAttentionArgs a;
  a.qkv = qkv.data();
  a.batch = nb;
  a.seq = s;
  a.num_heads = nh;
  a.head_size = d;
  a.scale = 0.25f;
  a.causal = true;
  a.rotary = {cs.data(), sn.data(), rot, false, true};
  Tensor qt = F32({nb, s, row}, qkv), ct = F32({1, s, rot}, cs), st = F32({1, s, rot}, sn);
  auto ref = testing::RunReferenceOp("kiln", "MultiHeadAttention",
                                     {{"num_heads", nh},
                                      {"scale", a.scale},
                                      {"causal", int64_t{1}},
                                      {"rotary_interleaved", int64_t{1}}},
                                     {&qt, nullptr, &ct, &st});
  ASSERT_EQ(ref.size(), 1u);
  auto half = testing::RunReferenceOp(
      "kiln", "MultiHeadAttention", {{"num_heads", nh}, {"scale", a.scale}, {"causal", int64_t{1}}},
      {&qt, nullptr, &ct, &st});
  float moved = 0;  // the pairing matters: rotate-half differs
  for (int64_t i = 0; i < nb * s * nh * d; ++i)
    moved = std::max(moved, std::abs(ref[0].data<float>()[i] - half[0].data<float>()[i]));
  EXPECT_GT(moved, 1e-2f);
  for (AttentionPath path : kAllPaths) {
    std::vector<float> y(nb * s * nh * d, std::nanf(""));
    a.y = y.data();
    ASSERT_TRUE(internal::MultiHeadAttentionWithPath(CpuContext{}, a, path).ok());
    testing::ExpectClose(y.data(), ref[0], 2e-5, 1e-5, PathName(path));
  }
}

// The rotated values really enter the scores: the same qkv without the tables differs.
TEST(AttentionDecoder, RotaryAndGroupsChangeTheResult) {
  const int64_t nb = 1, s = 9, nh = 4, d = 8;
  const auto qkv = RandomVec(nb * s * (nh + 2 * 2) * d, 5);
  std::vector<float> cs(s * d), sn(s * d);
  for (int64_t t = 0; t < s; ++t)
    for (int64_t j = 0; j < d; ++j) {
      cs[t * d + j] = static_cast<float>(std::cos(0.7 * t));
      sn[t * d + j] = static_cast<float>(std::sin(0.7 * t));
    }
  MultiHeadAttentionArgs a;
  a.qkv = qkv.data();
  a.batch = nb;
  a.seq = s;
  a.num_heads = nh;
  a.num_kv_heads = 2;
  a.head_size = d;
  a.scale = 0.35f;
  std::vector<float> plain(nb * s * nh * d), rotated(plain.size());
  a.y = plain.data();
  ASSERT_TRUE(MultiHeadAttention(CpuContext{}, a).ok());
  a.rotary = {cs.data(), sn.data(), d, false};
  a.y = rotated.data();
  ASSERT_TRUE(MultiHeadAttention(CpuContext{}, a).ok());
  float diff = 0;
  for (size_t i = 0; i < plain.size(); ++i) diff = std::max(diff, std::abs(plain[i] - rotated[i]));
  EXPECT_GT(diff, 1e-2f);
  // Bad group counts and rotary dims are refused, not run.
  a.num_kv_heads = 3;
  EXPECT_FALSE(MultiHeadAttention(CpuContext{}, a).ok());
  a.num_kv_heads = 2;
  a.rotary.dim = 7;
  EXPECT_FALSE(MultiHeadAttention(CpuContext{}, a).ok());
  a.rotary.dim = 2 * d;
  EXPECT_FALSE(MultiHeadAttention(CpuContext{}, a).ok());
}

// kiln.Attention (Q, K, V as heads, S queries over L keys: a KV cache's prefill chunk or
// decode step). Built from one packed qkv of L tokens: q = the heads of its last S tokens,
// k / v = the heads of all L; then every path and ISA at 1 and 3 threads must match the
// packed kiln.MultiHeadAttention reference over all L tokens on its last S rows — causal
// there is exactly bottom-right causal here — with a key-padding mask [B, 1, 1, L]
// (0: none, 1: HF's float32-min fill, 2: bool) and grouped K/V heads. L = 600, 700 and
// 2100 (CacheChunks) split the keys into chunks on the kCache path, merged by their row
// max; the cache path must not read the masked tail of the cache at all. Same tolerance
// as above.
using HeadCase = std::tuple<Isa, std::pair<int64_t, int64_t> /*S, L*/, int64_t /*Nkv*/,
                            int64_t /*D*/, int /*mask*/, bool /*causal*/>;
class HeadAttentionTest : public ::testing::TestWithParam<HeadCase> {};

TEST_P(HeadAttentionTest, MatchesPackedReferenceOnTheLastRows) {
  const auto [isa, sl, nkv, d, masked, causal] = GetParam();
  const auto [s, l] = sl;
  KILN_SKIP_UNSUPPORTED_ISA(isa);
  const int64_t nb = 2, nh = 8, row = (nh + 2 * nkv) * d;
  const auto qkv = RandomVec(nb * l * row, 110 + s + l + d + nkv);
  std::vector<float> q(nb * nh * s * d), k(nb * nkv * l * d), v(k.size());
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t t = 0; t < l; ++t)
      for (int64_t c = 0; c < d; ++c) {
        const float* r = qkv.data() + (b * l + t) * row;
        for (int64_t n = 0; n < nkv; ++n) {
          k[((b * nkv + n) * l + t) * d + c] = r[(nh + n) * d + c];
          v[((b * nkv + n) * l + t) * d + c] = r[(nh + nkv + n) * d + c];
        }
        if (t >= l - s)
          for (int64_t n = 0; n < nh; ++n)
            q[((b * nh + n) * s + t - (l - s)) * d + c] = r[n * d + c];
      }
  // Batch item 1 pads its last l / 3 keys (never all: causal row 0 sees key 0).
  std::vector<float> mask(nb * l, 0.0f);
  for (int64_t j = l - l / 3; j < l; ++j) mask[l + j] = std::numeric_limits<float>::lowest();
  std::vector<uint8_t> keep(nb * l, 1);
  for (int64_t j = l - l / 3; j < l; ++j) keep[l + j] = 0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor qt = F32({nb, l, row}, qkv), mt = F32({nb, 1, 1, l}, mask);
  if (masked == 2) {
    mt = Tensor(DType::kBool, {nb, 1, 1, l});
    std::copy(keep.begin(), keep.end(), mt.data<uint8_t>());
  }
  auto ref = testing::RunReferenceOp(
      "kiln", "MultiHeadAttention",
      {{"num_heads", nh}, {"num_kv_heads", nkv}, {"scale", scale}, {"causal", int64_t{causal}}},
      {&qt, masked ? &mt : nullptr});
  ASSERT_EQ(ref.size(), 1u);
  // The reference kiln.Attention itself, then the kernel, against the last S rows.
  std::vector<float> want;
  for (int64_t b = 0; b < nb; ++b)
    want.insert(want.end(), ref[0].data<float>() + (b * l + l - s) * nh * d,
                ref[0].data<float>() + (b + 1) * l * nh * d);
  Tensor q4 = F32({nb, nh, s, d}, q), k4 = F32({nb, nkv, l, d}, k), v4 = F32({nb, nkv, l, d}, v);
  auto head_ref =
      testing::RunReferenceOp("kiln", "Attention", {{"scale", scale}, {"causal", int64_t{causal}}},
                              {&q4, &k4, &v4, masked ? &mt : nullptr});
  ASSERT_EQ(head_ref.size(), 1u);
  const Tensor want_t = F32({nb, s, nh * d}, want);
  testing::ExpectClose(head_ref[0].data<float>(), want_t, 1e-6, 1e-6, "reference kiln.Attention");
  AttentionArgs a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.batch = nb;
  a.seq = s;
  a.kv_seq = l;
  a.num_heads = nh;
  a.num_kv_heads = nkv;
  a.head_size = d;
  a.scale = scale;
  a.causal = causal;
  if (masked) {
    a.mask.dims = {nb, 1, 1, l};
    if (masked == 2)
      a.mask.boolean = keep.data();
    else
      a.mask.additive = mask.data();
  }
  for (AttentionPath path : kAllPaths)
    for (int t : {1, 3}) {
      CpuContext ctx;
      ctx.isa = isa;
      ctx.num_threads = t;
      std::vector<float> y(nb * s * nh * d, std::nanf(""));
      a.y = y.data();
      const absl::Status status = internal::AttentionWithPath(ctx, a, path);
      ASSERT_TRUE(status.ok()) << PathName(path) << ": " << status;
      testing::ExpectClose(y.data(), want_t, 2e-5, 1e-5,
                           absl::StrCat(PathName(path), " threads=", t));
    }
  // Paged: the same keys and values in a pool of blocks, shuffled, through a block table
  // (the largest block size up to 16 dividing L); block 0 holds NaN and no entry names it.
  {
    int64_t bs = 16;
    while (l % bs != 0) bs /= 2;
    const int64_t width = l / bs, blocks = nb * width + 1;
    std::vector<int64_t> table(nb * width);
    for (int64_t i = 0; i < nb * width; ++i) table[i] = 1 + (i * 7919) % (nb * width);
    std::sort(table.begin(), table.end());
    ASSERT_EQ(std::unique(table.begin(), table.end()), table.end()) << "not a permutation";
    for (int64_t i = 0; i < nb * width; ++i) table[i] = 1 + (i * 7919) % (nb * width);
    std::vector<float> kp(blocks * nkv * bs * d, std::nanf("")), vp(kp.size(), std::nanf(""));
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t n = 0; n < nkv; ++n)
        for (int64_t t = 0; t < l; ++t)
          for (int64_t c = 0; c < d; ++c) {
            const int64_t at = ((table[b * width + t / bs] * nkv + n) * bs + t % bs) * d + c;
            kp[at] = k[((b * nkv + n) * l + t) * d + c];
            vp[at] = v[((b * nkv + n) * l + t) * d + c];
          }
    Tensor kpt = F32({blocks, nkv, bs, d}, kp), vpt = F32({blocks, nkv, bs, d}, vp);
    Tensor tt = Tensor::FromI64({nb, width}, table);
    auto paged_ref = testing::RunReferenceOp("kiln", "Attention",
                                             {{"scale", scale}, {"causal", int64_t{causal}}},
                                             {&q4, &kpt, &vpt, masked ? &mt : nullptr, &tt});
    ASSERT_EQ(paged_ref.size(), 1u);
    testing::ExpectClose(paged_ref[0].data<float>(), want_t, 1e-6, 1e-6, "paged reference");
    AttentionArgs pa = a;
    pa.k = kp.data();
    pa.v = vp.data();
    pa.paged = {table.data(), width, bs, blocks};
    for (int t : {1, 3}) {
      CpuContext ctx;
      ctx.isa = isa;
      ctx.num_threads = t;
      std::vector<float> y(nb * s * nh * d, std::nanf(""));
      pa.y = y.data();
      ASSERT_TRUE(Attention(ctx, pa).ok());
      testing::ExpectClose(y.data(), want_t, 2e-5, 1e-5, absl::StrCat("paged threads=", t));
    }
    table[width - 1] = blocks;  // batch item 0's last block: outside the pool
    CpuContext ctx;
    const absl::Status bad = Attention(ctx, pa);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("outside the cache's"));
    EXPECT_EQ(internal::AttentionWithPath(ctx, pa, AttentionPath::kRows).code(),
              absl::StatusCode::kInvalidArgument);
  }
  // The cache path does not read the keys and values a mask excludes at the end of the
  // cache (batch item 1's last l / 3: a static cache's free slots): NaN there changes
  // nothing.
  if (masked) {
    for (int64_t n = 0; n < nkv; ++n)
      for (int64_t t = l - l / 3; t < l; ++t)
        for (int64_t c = 0; c < d; ++c)
          k[((nkv + n) * l + t) * d + c] = v[((nkv + n) * l + t) * d + c] = std::nanf("");
    CpuContext ctx;
    ctx.isa = isa;
    std::vector<float> y(nb * s * nh * d, std::nanf(""));
    a.y = y.data();
    ASSERT_TRUE(internal::AttentionWithPath(ctx, a, AttentionPath::kCache).ok());
    testing::ExpectClose(y.data(), want_t, 2e-5, 1e-5, "cache path, NaN in the masked tail");
  }
}

using SL = std::pair<int64_t, int64_t>;
INSTANTIATE_TEST_SUITE_P(Cache, HeadAttentionTest,
                         ::testing::Combine(::testing::ValuesIn(testing::AllIsas()),
                                            ::testing::Values(SL{1, 1}, SL{1, 9}, SL{3, 12},
                                                              SL{7, 7}, SL{1, 130}, SL{70, 100}),
                                            ::testing::Values(int64_t{8}, int64_t{2}),
                                            ::testing::Values(int64_t{16}, int64_t{40}),
                                            ::testing::Values(0, 1, 2), ::testing::Bool()));
// Long caches on the default ISA only (the packed reference costs O(L²) per case).
INSTANTIATE_TEST_SUITE_P(CacheChunks, HeadAttentionTest,
                         ::testing::Combine(::testing::Values(Isa::kAuto),
                                            ::testing::Values(SL{1, 600}, SL{3, 700}, SL{2, 2100}),
                                            ::testing::Values(int64_t{2}),
                                            ::testing::Values(int64_t{16}), ::testing::Values(1, 2),
                                            ::testing::Bool()));

}  // namespace
}  // namespace kiln::cpu
