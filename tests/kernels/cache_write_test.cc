// kiln.CacheWrite: the cpu kernel (kernels/cpu/cache_write.h) against the reference
// executor's kiln.CacheWrite, exact (both copy rows), out of place and in place (y is the
// cache: only the new rows change, every other slot keeps its bytes); positions outside the
// cache fail before anything is written, on both sides; and the reference's own checks
// (a slot written twice, positions of the wrong shape or dtype).
#include <cstring>

#include "gmock/gmock.h"
#include "kernel_test_util.h"
#include "kernels/cpu/cache_write.h"

namespace kiln::cpu {
namespace {

using ::testing::HasSubstr;
using testing::RandomVec;
using testing::RunReferenceOp;

constexpr int64_t kB = 2, kH = 3, kC = 7, kS = 2, kD = 5;

CacheWriteArgs Args(const Tensor& cache, const Tensor& rows, const Tensor& pos, void* y) {
  CacheWriteArgs a;
  a.cache = cache.raw();
  a.rows = rows.raw();
  a.positions = pos.data<int64_t>();
  a.y = y;
  a.batch = kB;
  a.heads = kH;
  a.slots = kC;
  a.seq = kS;
  a.row_bytes = kD * sizeof(float);
  return a;
}

TEST(CacheWrite, MatchesReferenceOutOfPlaceAndInPlace) {
  CpuContext ctx;
  ctx.num_threads = 2;
  const Tensor cache = Tensor::FromF32({kB, kH, kC, kD}, RandomVec(kB * kH * kC * kD, 1));
  const Tensor rows = Tensor::FromF32({kB, kH, kS, kD}, RandomVec(kB * kH * kS * kD, 2));
  const Tensor pos = Tensor::FromI64({kB, kS}, {3, 4, 6, 0});  // sequence 1 out of order
  const std::vector<Tensor> want = RunReferenceOp("kiln", "CacheWrite", {}, {&cache, &rows, &pos});
  ASSERT_EQ(want.size(), 1u);
  Tensor y(DType::kF32, cache.dims());
  ASSERT_TRUE(CacheWrite(ctx, Args(cache, rows, pos, y.raw())).ok());
  EXPECT_EQ(std::memcmp(y.raw(), want[0].raw(), y.NumBytes()), 0);
  Tensor inplace(DType::kF32, cache.dims());
  std::memcpy(inplace.raw(), cache.raw(), cache.NumBytes());
  ASSERT_TRUE(CacheWrite(ctx, Args(inplace, rows, pos, inplace.raw())).ok());
  EXPECT_EQ(std::memcmp(inplace.raw(), want[0].raw(), y.NumBytes()), 0);
  // The written rows are new's; slot 5 of sequence 0 (never written) is the cache's.
  const float* w = want[0].data<float>();
  EXPECT_EQ(w[((0 * kH + 1) * kC + 4) * kD + 2],
            rows.data<float>()[((0 * kH + 1) * kS + 1) * kD + 2]);
  EXPECT_EQ(w[((0 * kH + 2) * kC + 5) * kD], cache.data<float>()[((0 * kH + 2) * kC + 5) * kD]);
}

TEST(CacheWrite, PositionOutsideTheCacheFailsBeforeWriting) {
  CpuContext ctx;
  const Tensor cache = Tensor::FromF32({kB, kH, kC, kD}, RandomVec(kB * kH * kC * kD, 3));
  const Tensor rows = Tensor::FromF32({kB, kH, kS, kD}, RandomVec(kB * kH * kS * kD, 4));
  for (int64_t bad : {int64_t{-1}, kC}) {
    const Tensor pos = Tensor::FromI64({kB, kS}, {0, 1, 2, bad});
    Tensor y(DType::kF32, cache.dims());
    std::memcpy(y.raw(), cache.raw(), cache.NumBytes());
    const absl::Status s = CacheWrite(ctx, Args(y, rows, pos, y.raw()));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("of sequence 1 is outside the cache's 7 slots"));
    EXPECT_EQ(std::memcmp(y.raw(), cache.raw(), cache.NumBytes()), 0) << "wrote before failing";
    Graph g;
    Node* n = g.AddNode(
        "CacheWrite",
        {g.AddInput("c", Type::Of(cache))->output(), g.AddInput("r", Type::Of(rows))->output(),
         g.AddInput("p", Type::Of(pos))->output()},
        1, "kiln");
    EXPECT_FALSE(EvaluateNode(*n, {&cache, &rows, &pos}).ok());
  }
}

// Paged: a pool of 5 blocks of 2 slots, [5, kH, 2, kD]; sequence 0 holds blocks 3, 1
// (slots 0-3), sequence 1 blocks 4, 2; block 0 (the scratch block) is never named. The
// kernel (in and out of place) equals the reference exactly, each row lands in the block
// its table names, and an id outside the pool fails before anything is written.
TEST(CacheWrite, PagedMatchesReference) {
  CpuContext ctx;
  constexpr int64_t kBlocks = 5, kBs = 2, kWidth = 2;
  const Tensor pool =
      Tensor::FromF32({kBlocks, kH, kBs, kD}, RandomVec(kBlocks * kH * kBs * kD, 7));
  const Tensor rows = Tensor::FromF32({kB, kH, kS, kD}, RandomVec(kB * kH * kS * kD, 8));
  const Tensor pos = Tensor::FromI64({kB, kS}, {1, 2, 3, 0});
  Tensor table = Tensor::FromI64({kB, kWidth}, {3, 1, 4, 2});
  const std::vector<Tensor> want =
      RunReferenceOp("kiln", "CacheWrite", {}, {&pool, &rows, &pos, &table});
  ASSERT_EQ(want.size(), 1u);
  CacheWriteArgs a = Args(pool, rows, pos, nullptr);
  a.slots = kWidth * kBs;
  a.paged = {table.data<int64_t>(), kWidth, kBs, kBlocks};
  Tensor y(DType::kF32, pool.dims());
  a.y = y.raw();
  ASSERT_TRUE(CacheWrite(ctx, a).ok());
  EXPECT_EQ(std::memcmp(y.raw(), want[0].raw(), y.NumBytes()), 0);
  Tensor inplace(DType::kF32, pool.dims());
  std::memcpy(inplace.raw(), pool.raw(), pool.NumBytes());
  a.cache = a.y = inplace.raw();
  ASSERT_TRUE(CacheWrite(ctx, a).ok());
  EXPECT_EQ(std::memcmp(inplace.raw(), want[0].raw(), y.NumBytes()), 0);
  // Sequence 1's row 0 (position 3) is row 1 of block 2; block 0 is untouched.
  const float* w = want[0].data<float>();
  EXPECT_EQ(w[((2 * kH + 1) * kBs + 1) * kD + 3], rows.data<float>()[((1 * kH + 1) * kS) * kD + 3]);
  EXPECT_EQ(std::memcmp(w, pool.raw(), kH * kBs * kD * sizeof(float)), 0);
  table.data<int64_t>()[1] = kBlocks;  // sequence 0's position 2 lands outside the pool
  std::memcpy(inplace.raw(), pool.raw(), pool.NumBytes());
  const absl::Status st = CacheWrite(ctx, a);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("block table entry [0, 1] = 5 is outside the cache's 5"));
  EXPECT_EQ(std::memcmp(inplace.raw(), pool.raw(), pool.NumBytes()), 0);
  Graph g;
  Node* n = g.AddNode(
      "CacheWrite",
      {g.AddInput("c", Type::Of(pool))->output(), g.AddInput("r", Type::Of(rows))->output(),
       g.AddInput("p", Type::Of(pos))->output(), g.AddInput("t", Type::Of(table))->output()},
      1, "kiln");
  EXPECT_THAT(EvaluateNode(*n, {&pool, &rows, &pos, &table}).status().message(),
              HasSubstr("outside the pool's 5 blocks"));
}

TEST(CacheWrite, ReferenceRejectsBadPositions) {
  const Tensor cache = Tensor::FromF32({1, 1, 4, 2}, RandomVec(8, 5));
  const Tensor rows = Tensor::FromF32({1, 1, 2, 2}, RandomVec(4, 6));
  Graph g;
  auto eval = [&](const Tensor& pos) {
    Node* n = g.AddNode(
        "CacheWrite",
        {g.AddInput("c", Type::Of(cache))->output(), g.AddInput("r", Type::Of(rows))->output(),
         g.AddInput("p", Type::Of(pos))->output()},
        1, "kiln");
    return EvaluateNode(*n, {&cache, &rows, &pos}).status();
  };
  EXPECT_THAT(eval(Tensor::FromI64({1, 2}, {2, 2})).message(), HasSubstr("writes slot 2 twice"));
  EXPECT_THAT(eval(Tensor::FromI64({2}, {0, 1})).message(), HasSubstr("positions must be int64"));
  EXPECT_THAT(eval(Tensor::FromF32({1, 2}, {0, 1})).message(),
              HasSubstr("positions must be int64"));
}

}  // namespace
}  // namespace kiln::cpu
