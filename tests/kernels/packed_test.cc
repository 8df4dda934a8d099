// The packed-token kernels (kernels/cpu/packed.h) against the reference executor's
// kiln.PackedAttention / PackedPool / PackedPositions / PackedCumSum, and against the padded
// kernels run on each sequence alone: tokens of sequences of lengths 5, 0, 1, 9 (an empty one, a
// single token) laid end to end in T = 20 rows, 5 of them after the last sequence. Tolerances: vs
// the reference (double accumulation) 2e-5 absolute on O(1) values (fp32 dot products of 16 terms
// and softmax sums); vs the padded kernel on one sequence, exact: the packed kernel runs the same
// strategy on the same rows.
#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cumsum.h"
#include "kernels/cpu/packed.h"

namespace kiln::cpu {
namespace {

using ::testing::HasSubstr;
using testing::RandomVec;
using testing::RunReferenceOp;

constexpr int64_t kT = 20, kN = 4, kHeads = 4, kKv = 2, kD = 16;
const std::vector<int64_t> kLengths = {5, 0, 1, 9};  // 15 tokens; 5 belong to none

float MaxDiff(const float* a, const float* b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(PackedAttention, MatchesReferenceAndEachSequenceAlone) {
  CpuContext ctx;
  ctx.num_threads = 2;
  const int64_t ld = (kHeads + 2 * kKv) * kD, h = kHeads * kD;
  const Tensor qkv = Tensor::FromF32({1, kT, ld}, RandomVec(kT * ld, 7));
  const Tensor lengths = Tensor::FromI64({kN}, kLengths);
  const std::vector<Tensor> want = RunReferenceOp(
      "kiln", "PackedAttention", {{"num_heads", kHeads}, {"num_kv_heads", kKv}, {"scale", 0.25f}},
      {&qkv, &lengths});
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(want[0].dims(), (std::vector<int64_t>{1, kT, h}));
  std::vector<float> y(kT * h, 7.0f);  // tokens of no sequence must come out zero
  PackedAttentionArgs a;
  a.qkv = qkv.data<float>();
  a.lengths = lengths.data<int64_t>();
  a.tokens = kT;
  a.sequences = kN;
  a.num_heads = kHeads;
  a.num_kv_heads = kKv;
  a.head_size = kD;
  a.scale = 0.25f;
  a.y = y.data();
  ASSERT_TRUE(PackedAttention(ctx, a).ok());
  EXPECT_LT(MaxDiff(y.data(), want[0].data<float>(), kT * h), 2e-5f);
  for (int64_t i = 15 * h; i < kT * h; ++i) ASSERT_EQ(y[i], 0.0f) << i;
  int64_t off = 0;
  for (int64_t len : kLengths) {
    if (len > 0) {
      std::vector<float> alone(len * h);
      MultiHeadAttentionArgs m;
      m.qkv = qkv.data<float>() + off * ld;
      m.batch = 1;
      m.seq = len;
      m.num_heads = kHeads;
      m.num_kv_heads = kKv;
      m.head_size = kD;
      m.scale = 0.25f;
      m.y = alone.data();
      ASSERT_TRUE(MultiHeadAttention(ctx, m).ok());
      EXPECT_EQ(std::memcmp(alone.data(), y.data() + off * h, alone.size() * sizeof(float)), 0)
          << "sequence at " << off;
    }
    off += len;
  }
}

TEST(PackedPool, MatchesReferenceAndThePaddedKernel) {
  CpuContext ctx;
  ctx.num_threads = 2;
  constexpr int64_t kH = 24;
  const Tensor hidden = Tensor::FromF32({1, kT, kH}, RandomVec(kT * kH, 8));
  const Tensor lengths = Tensor::FromI64({kN}, kLengths);
  for (const char* mode : {"mean", "cls"})
    for (int64_t normalize : {0, 1}) {
      const std::vector<Tensor> want = RunReferenceOp(
          "kiln", "PackedPool", {{"mode", std::string(mode)}, {"normalize", normalize}},
          {&hidden, &lengths});
      ASSERT_EQ(want[0].dims(), (std::vector<int64_t>{kN, kH}));
      std::vector<float> y(kN * kH, 7.0f);
      PackedPoolArgs a;
      a.hidden = hidden.data<float>();
      a.lengths = lengths.data<int64_t>();
      a.tokens = kT;
      a.sequences = kN;
      a.hidden_size = kH;
      a.mode = std::string(mode) == "cls" ? PoolMode::kCls : PoolMode::kMean;
      a.normalize = normalize != 0;
      a.y = y.data();
      ASSERT_TRUE(PackedPool(ctx, a).ok());
      EXPECT_LT(MaxDiff(y.data(), want[0].data<float>(), kN * kH), 2e-6f) << mode << normalize;
      for (int64_t j = 0; j < kH; ++j) ASSERT_EQ(y[kH + j], 0.0f) << "the empty sequence";
      // The padded kernel on sequence 3 (9 tokens at row 6) padded to 12 with a 0/1 mask.
      std::vector<float> padded(12 * kH, 0.5f), mask(12, 0.0f), alone(kH);
      std::memcpy(padded.data(), hidden.data<float>() + 6 * kH, 9 * kH * sizeof(float));
      std::fill(mask.begin(), mask.begin() + 9, 1.0f);
      PoolArgs p;
      p.hidden = padded.data();
      p.mask = mask.data();
      p.batch = 1;
      p.seq = 12;
      p.hidden_size = kH;
      p.mode = a.mode;
      p.normalize = a.normalize;
      p.y = alone.data();
      ASSERT_TRUE(Pool(ctx, p).ok());
      EXPECT_EQ(std::memcmp(alone.data(), y.data() + 3 * kH, kH * sizeof(float)), 0) << mode;
    }
}

TEST(PackedPositions, MatchesReference) {
  const Tensor lengths = Tensor::FromI64({kN}, kLengths);
  const Tensor tokens = Tensor::FromI64({1, kT}, std::vector<int64_t>(kT, 3));
  const std::vector<Tensor> want =
      RunReferenceOp("kiln", "PackedPositions", {}, {&lengths, &tokens});
  const std::vector<int64_t> expect = {0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0};
  ASSERT_EQ(want[0].dims(), (std::vector<int64_t>{1, kT}));
  EXPECT_EQ(std::vector<int64_t>(want[0].data<int64_t>(), want[0].data<int64_t>() + kT), expect);
  std::vector<int64_t> y(kT, 99);
  ASSERT_TRUE(PackedPositions(lengths.data<int64_t>(), kN, kT, y.data()).ok());
  EXPECT_EQ(y, expect);
}

// CumSum along each sequence (RoBERTa's position ids): the reference's per-sequence sums, and
// the padded CumSum kernel on each sequence alone bit for bit (f32: the same sequential
// sum), exclusive and inclusive, i32 / i64 / f32; tokens of no sequence 0; int32 wraps.
TEST(PackedCumSum, MatchesReferenceAndThePaddedKernel) {
  CpuContext ctx;
  const Tensor lengths = Tensor::FromI64({kN}, kLengths);
  const std::vector<float> xf = RandomVec(kT, 11);
  for (const DType dt : {DType::kI32, DType::kI64, DType::kF32})
    for (const int exclusive : {0, 1}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + (exclusive ? " exclusive" : ""));
      Tensor x(dt, {1, kT});
      for (int64_t i = 0; i < kT; ++i)
        x.SetFromDouble(i, dt == DType::kF32 ? xf[i] : i == 2 ? 2147483600.0 : (i * 7) % 5);
      if (dt == DType::kI64) x.data<int64_t>()[2] = int64_t{1} << 62;
      const std::vector<Tensor> want = RunReferenceOp(
          "kiln", "PackedCumSum", {{"exclusive", int64_t{exclusive}}}, {&x, &lengths});
      ASSERT_EQ(want[0].dims(), (std::vector<int64_t>{1, kT}));
      Tensor got(dt, {1, kT});
      std::memset(got.raw(), 0x5a, got.NumBytes());
      PackedCumSumArgs a;
      a.x = x.raw();
      a.lengths = lengths.data<int64_t>();
      a.tokens = kT;
      a.sequences = kN;
      a.dtype = dt;
      a.exclusive = exclusive != 0;
      a.y = got.raw();
      ASSERT_TRUE(PackedCumSum(ctx, a).ok());
      EXPECT_EQ(std::memcmp(got.raw(), want[0].raw(), got.NumBytes()), 0);
      // By hand for sequence 3 (tokens 6..14) and the tail.
      double run = 0;
      for (int64_t i = 6; i < 15; ++i) {
        if (exclusive) EXPECT_EQ(got.GetAsDouble(i), dt == DType::kF32 ? float(run) : run);
        run = dt == DType::kF32 ? float(run + x.GetAsDouble(i)) : run + x.GetAsDouble(i);
        if (!exclusive) EXPECT_EQ(got.GetAsDouble(i), run);
      }
      for (int64_t i = 15; i < kT; ++i) EXPECT_EQ(got.GetAsDouble(i), 0.0);
      // Each sequence alone through the padded kernel.
      int64_t t = 0;
      for (int64_t s = 0; s < kN; t += kLengths[s], ++s) {
        if (kLengths[s] == 0) continue;
        Tensor alone(dt, {kLengths[s]});
        CumSumArgs c;
        c.x = static_cast<const std::byte*>(x.raw()) + t * DTypeSize(dt);
        c.y = alone.raw();
        c.dtype = dt;
        c.outer = c.inner = 1;
        c.len = kLengths[s];
        c.exclusive = exclusive != 0;
        ASSERT_TRUE(CumSum(ctx, c).ok());
        EXPECT_EQ(
            std::memcmp(alone.raw(), static_cast<const std::byte*>(got.raw()) + t * DTypeSize(dt),
                        alone.NumBytes()),
            0)
            << "sequence " << s;
      }
    }
}

TEST(Packed, BadLengthsFailBeforeWriting) {
  CpuContext ctx;
  const int64_t ld = 3 * kD;
  const std::vector<float> qkv = RandomVec(kT * ld, 9);
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{5, -1, 1, 2}, std::vector<int64_t>{10, 10, 1, 0}}) {
    std::vector<float> y(kT * kD, 7.0f);
    PackedAttentionArgs a;
    a.qkv = qkv.data();
    a.lengths = bad.data();
    a.tokens = kT;
    a.sequences = kN;
    a.num_heads = 1;
    a.head_size = kD;
    a.y = y.data();
    const absl::Status s = PackedAttention(ctx, a);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(bad[1] < 0 ? "sequence 1 has a negative length (-1)"
                                                  : "add up to more than the 20 tokens"));
    for (float v : y) ASSERT_EQ(v, 7.0f) << "wrote before failing";
    std::vector<int64_t> pos(kT, 99);
    EXPECT_FALSE(PackedPositions(bad.data(), kN, kT, pos.data()).ok());
    for (int64_t v : pos) ASSERT_EQ(v, 99);
    const std::vector<int64_t> ids(kT, 3);
    PackedCumSumArgs cs;
    cs.x = ids.data();
    cs.lengths = bad.data();
    cs.tokens = kT;
    cs.sequences = kN;
    cs.dtype = DType::kI64;
    cs.y = pos.data();
    EXPECT_FALSE(PackedCumSum(ctx, cs).ok());
    for (int64_t v : pos) ASSERT_EQ(v, 99);
    PackedPoolArgs p;
    p.hidden = qkv.data();
    p.lengths = bad.data();
    p.tokens = kT;
    p.sequences = kN;
    p.hidden_size = kD;
    p.y = y.data();
    EXPECT_FALSE(PackedPool(ctx, p).ok());
    for (float v : y) ASSERT_EQ(v, 7.0f);
    // The reference refuses them too.
    const Tensor t = Tensor::FromF32({1, kT, ld}, qkv);
    const Tensor l = Tensor::FromI64({kN}, bad);
    Graph g;
    Node* n =
        g.AddNode("PackedAttention",
                  {g.AddInput("x", Type::Of(t))->output(), g.AddInput("l", Type::Of(l))->output()},
                  1, "kiln");
    n->set_attr("num_heads", int64_t{1});
    n->set_attr("scale", 1.0f);
    EXPECT_FALSE(EvaluateNode(*n, {&t, &l}).ok());
  }
}

}  // namespace
}  // namespace kiln::cpu
