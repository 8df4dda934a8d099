// kiln.Rotary on the CPU (kernels/cpu/rotary.h) against the reference kernel (double, one
// rounding): full and partial rotary dims, tables shared by the batch and heads, tables per
// batch row, a rank-2 x, rotate-half and interleaved (GPT-J) pairs; the interleaved
// reference on hand-computed values; and the argument checks. Tolerance 1e-6 absolute + 1e-6
// relative: each output is two f32 products and a sum of O(1) values (≤ 3 roundings, ~2e-7 each).
#include "kernels/cpu/rotary.h"

#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

int64_t Prod(const std::vector<int64_t>& d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

TEST(Rotary, MatchesReference) {
  struct Case {
    std::vector<int64_t> x, table;
  };
  const Case cases[] = {
      {{2, 4, 7, 16}, {1, 1, 7, 16}},  // LLaMA: [B, N, S, D], tables [1, 1, S, D]
      {{2, 4, 7, 16}, {2, 1, 7, 16}},  // position ids per batch row
      {{2, 4, 7, 16}, {1, 1, 7, 8}},   // partial rotary (GPT-NeoX rotary_pct = 0.5)
      {{3, 10}, {3, 10}},              // rank 2, one table row per row
      {{5, 64}, {64}},                 // one table row for all
  };
  for (const Case& c : cases)
    for (bool interleaved : {false, true})
      for (int threads : {1, 2}) {
        Tensor x = F32(c.x, RandomVec(Prod(c.x), 1, -2, 2));
        Tensor cs = F32(c.table, RandomVec(Prod(c.table), 2));
        Tensor sn = F32(c.table, RandomVec(Prod(c.table), 3));
        auto want = testing::RunReferenceOp(
            "kiln", "Rotary", {{"interleaved", int64_t{interleaved}}}, {&x, &cs, &sn});
        ASSERT_EQ(want.size(), 1u);
        RotaryArgs a;
        a.x = x.data<float>();
        a.cos = cs.data<float>();
        a.sin = sn.data<float>();
        std::vector<float> y(Prod(c.x));
        a.y = y.data();
        a.d = c.x.back();
        a.r = c.table.back();
        a.interleaved = interleaved;
        const std::vector<int64_t> xl(c.x.begin(), c.x.end() - 1),
            tl(c.table.begin(), c.table.end() - 1);
        ASSERT_TRUE(kernels::ComputeBroadcastLayout(xl, {xl, tl, tl}, &a.rows));
        CpuContext ctx;
        ctx.num_threads = threads;
        ASSERT_TRUE(Rotary(ctx, a).ok());
        testing::ExpectClose(y.data(), want[0], 1e-6, 1e-6,
                             absl::StrCat("x rank ", c.x.size(), " r ", a.r, " threads ", threads,
                                          interleaved ? " interleaved" : ""));
      }
}

// GPT-J's rotate_every_two: pairs (0, 1) and (2, 3) rotated by their angle, element 4 kept.
TEST(Rotary, InterleavedPairsByHand) {
  Tensor x = F32({1, 5}, {1, 2, 3, 4, 5});
  Tensor cs = F32({1, 4}, {0.5f, 0.5f, 0.25f, 0.25f}), sn = F32({1, 4}, {2, 2, 4, 4});
  auto y = testing::RunReferenceOp("kiln", "Rotary", {{"interleaved", int64_t{1}}}, {&x, &cs, &sn});
  ASSERT_EQ(y.size(), 1u);
  const std::vector<float> want = {1 * 0.5f - 2 * 2, 2 * 0.5f + 1 * 2, 3 * 0.25f - 4 * 4,
                                   4 * 0.25f + 3 * 4, 5};
  testing::ExpectClose(want.data(), y[0], 0, 0, "reference");
}

TEST(Rotary, RejectsBadArguments) {
  float v[4] = {1, 2, 3, 4};
  RotaryArgs a;
  a.x = a.cos = a.sin = v;
  a.y = v + 2;
  a.d = 2;
  a.r = 3;  // odd
  ASSERT_TRUE(kernels::ComputeBroadcastLayout({1}, {{1}, {1}, {1}}, &a.rows));
  EXPECT_EQ(Rotary(CpuContext(), a).code(), absl::StatusCode::kInvalidArgument);
  a.r = 4;  // wider than the row
  EXPECT_EQ(Rotary(CpuContext(), a).code(), absl::StatusCode::kInvalidArgument);
  // The reference refuses an odd rotary dim and a table that does not broadcast.
  Tensor x = F32({2, 4}, RandomVec(8, 4)), odd = F32({3}, RandomVec(3, 5)),
         wide = F32({3, 4}, RandomVec(12, 6));
  auto bad = [](const Tensor& x, const Tensor& t) {
    Graph g;
    g.set_opset(21);
    std::vector<Value> ops;
    for (const Tensor* in : {&x, &t, &t})
      ops.push_back(g.AddInput("in" + std::to_string(ops.size()), Type::Of(*in))->output());
    Node* n = g.AddNode("Rotary", ops, 1, "kiln");
    return EvaluateNode(*n, {&x, &t, &t}).status();
  };
  EXPECT_EQ(bad(x, odd).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(x, wide).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
