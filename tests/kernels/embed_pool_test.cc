// EmbedLayerNorm and Pool on every ISA path against the reference kiln.EmbedLayerNorm and
// kiln.Pool. Tolerances: EmbedLayerNorm as LayerNorm (1e-5 abs + rel, see
// layer_norm_test.cc); Pool mean is an S-term fp32 sum of values in [-1, 1] divided by the
// count: |err| ≤ S·u·max|h| ≈ 1e-5 for S ≤ 130 — bound 2e-6 abs + 1e-5 rel is what the
// lane-parallel sums need; normalize adds a few ulps.
#include "kernel_test_util.h"
#include "kernels/cpu/embed_layer_norm.h"
#include "kernels/cpu/pool.h"

namespace kiln::cpu {
namespace {

using testing::F32;
using testing::RandomVec;

class EmbedPoolTest : public ::testing::TestWithParam<Isa> {
 protected:
  CpuContext Ctx(int threads = 3) const {
    CpuContext c;
    c.isa = GetParam();
    c.num_threads = threads;
    return c;
  }
};

TEST_P(EmbedPoolTest, EmbedLayerNormMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  const int64_t nb = 3, s = 9, vocab = 50, max_pos = 12, types = 2;
  for (int64_t h : {7, 64, 385}) {
    const auto word = RandomVec(vocab * h, 80 + h), pos = RandomVec(max_pos * h, 81 + h);
    const auto seg = RandomVec(types * h, 82 + h), g = RandomVec(h, 83 + h),
               be = RandomVec(h, 84 + h);
    std::vector<int64_t> ids(nb * s), segs(nb * s), pids(s);
    for (int64_t i = 0; i < nb * s; ++i) {
      ids[i] = (i * 17 + 3) % vocab - (i % 5 == 0 ? vocab : 0);  // some negative ids
      segs[i] = (i / 4) % types;
    }
    for (int64_t t = 0; t < s; ++t) pids[t] = (t * 5 + 2) % max_pos;
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    for (int variant = 0; variant < 3; ++variant) {  // 0: all, 1: no segment/pos, 2: i32 ids
      EmbedLayerNormArgs a;
      if (variant == 2)
        a.input_ids32 = ids32.data();
      else
        a.input_ids = ids.data();
      if (variant != 1) {
        a.segment_ids = segs.data();
        a.segment = seg.data();
        a.segment_rows = types;
        a.position_ids = pids.data();
        a.position_rows = 1;
      }
      a.batch = nb;
      a.seq = s;
      a.hidden = h;
      a.word = word.data();
      a.word_rows = vocab;
      a.pos = pos.data();
      a.pos_rows = max_pos;
      a.gamma = g.data();
      a.beta = be.data();
      a.eps = 1e-12f;
      std::vector<float> y(nb * s * h);
      a.y = y.data();
      ASSERT_TRUE(EmbedLayerNorm(Ctx(), a).ok());
      Tensor it = Tensor::FromI64({nb, s}, ids), st = Tensor::FromI64({nb, s}, segs);
      Tensor pt = Tensor::FromI64({s}, pids);
      Tensor wt = F32({vocab, h}, word), pet = F32({max_pos, h}, pos), set = F32({types, h}, seg);
      Tensor gt = F32({h}, g), bt = F32({h}, be);
      auto ref =
          testing::RunReferenceOp("kiln", "EmbedLayerNorm", {{"epsilon", 1e-12f}},
                                  {&it, variant == 1 ? nullptr : &st, variant == 1 ? nullptr : &pt,
                                   &wt, &pet, variant == 1 ? nullptr : &set, &gt, &bt});
      ASSERT_EQ(ref.size(), 1u);
      testing::ExpectClose(y.data(), ref[0], 1e-5, 1e-5, absl::StrCat("h=", h, " v=", variant));
      // With the Sum output (GPT-2): the same Y, and E = word + pos (+ segment) against the
      // reference's sum rounded once — the kernel rounds after each of its (at most two)
      // f32 additions of O(1) terms: |err| <= 2·u·3 = 3.6e-7.
      std::vector<float> y2(nb * s * h), e(nb * s * h);
      a.y = y2.data();
      a.sum = e.data();
      ASSERT_TRUE(EmbedLayerNorm(Ctx(), a).ok());
      EXPECT_EQ(y2, y) << "h=" << h << " v=" << variant;
      auto ref2 =
          testing::RunReferenceOp("kiln", "EmbedLayerNorm", {{"epsilon", 1e-12f}},
                                  {&it, variant == 1 ? nullptr : &st, variant == 1 ? nullptr : &pt,
                                   &wt, &pet, variant == 1 ? nullptr : &set, &gt, &bt},
                                  2);
      ASSERT_EQ(ref2.size(), 2u);
      testing::ExpectClose(e.data(), ref2[1], 3.6e-7, 0, absl::StrCat("sum h=", h, " v=", variant));
    }
  }
}

TEST_P(EmbedPoolTest, EmbedLayerNormRejectsOutOfRangeIds) {
  const int64_t h = 4;
  const std::vector<float> table(3 * h, 0.5f), g(h, 1.f);
  const std::vector<int64_t> ids = {0, 3};  // 3 is past a 3-row table
  std::vector<float> y(2 * h, -1.f);
  EmbedLayerNormArgs a;
  a.input_ids = ids.data();
  a.batch = 1;
  a.seq = 2;
  a.hidden = h;
  a.word = a.pos = table.data();
  a.word_rows = a.pos_rows = 3;
  a.gamma = a.beta = g.data();
  a.y = y.data();
  auto st = EmbedLayerNorm(Ctx(), a);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input_ids contains 3"), std::string::npos) << st;
  EXPECT_EQ(y[0], -1.f);  // nothing written before the check
  a.seq = 4;              // longer than the position table, implicit positions
  const std::vector<int64_t> ids4 = {0, 1, 2, 1};
  a.input_ids = ids4.data();
  EXPECT_EQ(EmbedLayerNorm(Ctx(), a).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(EmbedPoolTest, PoolMatchesReference) {
  KILN_SKIP_UNSUPPORTED_ISA(GetParam());
  const int64_t nb = 4;
  for (int64_t s : {1, 13, 130}) {
    for (int64_t h : {5, 384, 771}) {
      const auto hid = RandomVec(nb * s * h, 90 + s + h);
      std::vector<int64_t> mask(nb * s);
      for (int64_t i = 0; i < nb * s; ++i) mask[i] = (i % s) < (s * (i / s + 1)) / nb ? 1 : 0;
      std::vector<float> maskf(mask.begin(), mask.end());
      for (int mode = 0; mode < 3; ++mode) {
        for (bool normalize : {false, true}) {
          for (int mask_kind = 0; mask_kind < 3; ++mask_kind) {  // none, f32, i64
            PoolArgs a;
            a.hidden = hid.data();
            if (mask_kind == 1) a.mask = maskf.data();
            if (mask_kind == 2) a.mask_i64 = mask.data();
            a.batch = nb;
            a.seq = s;
            a.hidden_size = h;
            const char* name = mode == 0 ? "mean" : mode == 1 ? "cls" : "last";
            a.mode = mode == 0 ? PoolMode::kMean : mode == 1 ? PoolMode::kCls : PoolMode::kLast;
            a.normalize = normalize;
            std::vector<float> y(nb * h);
            a.y = y.data();
            ASSERT_TRUE(Pool(Ctx(), a).ok());
            Tensor ht = F32({nb, s, h}, hid), mt = Tensor::FromI64({nb, s}, mask);
            auto ref = testing::RunReferenceOp(
                "kiln", "Pool", {{"mode", std::string(name)}, {"normalize", int64_t{normalize}}},
                {&ht, mask_kind == 0 ? nullptr : &mt});
            ASSERT_EQ(ref.size(), 1u);
            testing::ExpectClose(y.data(), ref[0], 2e-6, 1e-5,
                                 absl::StrCat("s=", s, " h=", h, " mode=", mode,
                                              " normalize=", normalize, " mask=", mask_kind));
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, EmbedPoolTest, ::testing::ValuesIn(testing::AllIsas()),
                         testing::IsaParamName);

}  // namespace
}  // namespace kiln::cpu
