// Tests for the activation memory planner: exact offsets on hand-made cases, validation
// errors, invariants on seeded random interval sets, determinism and order independence,
// and the arena/no-reuse ratio on a BERT-layer-like buffer sequence.
#include "compiler/memory_planner.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

BufferRequest Buf(int64_t id, int64_t bytes, int64_t first, int64_t last,
                  std::optional<int64_t> inplace_of = std::nullopt, int64_t alignment = 64) {
  BufferRequest r;
  r.id = id;
  r.bytes = bytes;
  r.first_step = first;
  r.last_step = last;
  r.alignment = alignment;
  r.inplace_of = inplace_of;
  return r;
}

int64_t Aligned(const BufferRequest& r) {
  return (r.bytes + r.alignment - 1) / r.alignment * r.alignment;
}

MemoryPlan PlanOrDie(const std::vector<BufferRequest>& reqs) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(reqs);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : MemoryPlan{};
}

// A -> B -> C: A and C never live together, so C reuses A's slot.
TEST(MemoryPlannerTest, ChainReusesFreedSlot) {
  MemoryPlan p = PlanOrDie({Buf(1, 100, 0, 1), Buf(2, 100, 1, 2), Buf(3, 100, 2, 3)});
  EXPECT_THAT(p.offsets, ElementsAre(0, 128, 0));
  EXPECT_EQ(p.arena_bytes, 256);
  EXPECT_EQ(p.no_reuse_bytes, 384);
  EXPECT_EQ(p.peak_live_bytes, 256);
  EXPECT_THAT(p.inplace, IsEmpty());
}

// A feeds B (step 1) and C (step 2); D = f(B, C) at step 3.
TEST(MemoryPlannerTest, Diamond) {
  MemoryPlan p =
      PlanOrDie({Buf(1, 256, 0, 2), Buf(2, 128, 1, 3), Buf(3, 128, 2, 3), Buf(4, 256, 3, 4)});
  // Order: A(256, step 0), D(256, step 3), B, C. D fits at 0 once A is dead.
  EXPECT_THAT(p.offsets, ElementsAre(0, 256, 384, 0));
  EXPECT_EQ(p.arena_bytes, 512);
  EXPECT_EQ(p.no_reuse_bytes, 768);
  EXPECT_EQ(p.peak_live_bytes, 512);
}

// Two buffers live throughout; short-lived ones alternate between two slots above them.
TEST(MemoryPlannerTest, TwoLongLivedBuffers) {
  std::vector<BufferRequest> reqs = {Buf(100, 1024, 0, 9), Buf(101, 512, 0, 9)};
  for (int i = 0; i < 9; ++i) reqs.push_back(Buf(i, 256, i, i + 1));
  MemoryPlan p = PlanOrDie(reqs);
  EXPECT_EQ(p.offsets[0], 0);
  EXPECT_EQ(p.offsets[1], 1024);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(p.offsets[2 + i], i % 2 == 0 ? 1536 : 1792) << "short buffer " << i;
  }
  EXPECT_EQ(p.arena_bytes, 2048);
  EXPECT_EQ(p.peak_live_bytes, 2048);
  EXPECT_EQ(p.no_reuse_bytes, 1024 + 512 + 9 * 256);
}

// x0 -> relu -> add -> layernorm, each in place of its input: one slot for all four.
TEST(MemoryPlannerTest, InPlaceChainUsesOneSlot) {
  std::vector<BufferRequest> reqs = {Buf(10, 1000, 0, 1), Buf(11, 1000, 1, 2, 10),
                                     Buf(12, 1000, 2, 3, 11), Buf(13, 1000, 3, 4, 12),
                                     Buf(20, 512, 0, 4)};
  MemoryPlan p = PlanOrDie(reqs);
  EXPECT_THAT(p.offsets, ElementsAre(0, 0, 0, 0, 1024));
  EXPECT_THAT(p.inplace, ElementsAre(11, 12, 13));
  EXPECT_EQ(p.arena_bytes, 1536);
  EXPECT_EQ(p.peak_live_bytes, 1536);
  EXPECT_EQ(p.no_reuse_bytes, 4 * 1024 + 512);

  // Without the hints neighbours overlap in time and need two slots.
  for (BufferRequest& r : reqs) r.inplace_of.reset();
  MemoryPlan q = PlanOrDie(reqs);
  EXPECT_THAT(q.offsets, ElementsAre(0, 1024, 0, 1024, 2048));
  EXPECT_EQ(q.arena_bytes, 2560);
  EXPECT_EQ(q.peak_live_bytes, 2560);
}

TEST(MemoryPlannerTest, InPlaceHintNotTakenWhenIllegalButHarmless) {
  // Larger than its source: not in place.
  MemoryPlan a = PlanOrDie({Buf(1, 64, 0, 1), Buf(2, 128, 1, 2, 1)});
  EXPECT_THAT(a.inplace, IsEmpty());
  EXPECT_THAT(a.offsets, ElementsAre(128, 0));
  // Two claims on one source: the smaller id wins, the other gets its own slot.
  MemoryPlan b = PlanOrDie({Buf(1, 64, 0, 1), Buf(3, 64, 1, 2, 1), Buf(2, 64, 1, 2, 1)});
  EXPECT_THAT(b.inplace, ElementsAre(2));
  EXPECT_EQ(b.offsets[0], b.offsets[2]);
  EXPECT_NE(b.offsets[1], b.offsets[0]);
  // A source written and last read at the same step is not taken over.
  MemoryPlan c = PlanOrDie({Buf(1, 64, 1, 1), Buf(2, 64, 1, 2, 1)});
  EXPECT_THAT(c.inplace, IsEmpty());
  EXPECT_NE(c.offsets[0], c.offsets[1]);
}

TEST(MemoryPlannerTest, AlignmentAndZeroSize) {
  MemoryPlan p = PlanOrDie(
      {Buf(1, 10, 0, 1, std::nullopt, 8), Buf(2, 0, 0, 1), Buf(3, 5, 0, 1, std::nullopt, 256)});
  // Order: 3 (256 bytes) at 0, 1 (16 bytes) at 256, the empty buffer at 0.
  EXPECT_THAT(p.offsets, ElementsAre(256, 0, 0));
  EXPECT_EQ(p.arena_bytes, 272);
  EXPECT_EQ(p.no_reuse_bytes, 272);
}

// Greedy places A (320 B) at 0 and B (align 256) at 512, an arena of 768 B, more than
// the 576 B without reuse; the planner then lays them out back to back, B first.
TEST(MemoryPlannerTest, MixedAlignmentNeverWorseThanNoReuse) {
  MemoryPlan p = PlanOrDie({Buf(1, 320, 0, 1), Buf(2, 256, 0, 1, std::nullopt, 256)});
  EXPECT_THAT(p.offsets, ElementsAre(256, 0));
  EXPECT_EQ(p.arena_bytes, 576);
  EXPECT_EQ(p.no_reuse_bytes, 576);
}

TEST(MemoryPlannerTest, EmptyInput) {
  MemoryPlan p = PlanOrDie({});
  EXPECT_THAT(p.offsets, IsEmpty());
  EXPECT_EQ(p.arena_bytes, 0);
  EXPECT_EQ(p.no_reuse_bytes, 0);
  EXPECT_EQ(p.peak_live_bytes, 0);
}

void ExpectInvalid(const std::vector<BufferRequest>& reqs, const std::string& message) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(reqs);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr(message));
}

TEST(MemoryPlannerTest, ValidationErrors) {
  ExpectInvalid({Buf(1, -1, 0, 1)}, "negative size");
  ExpectInvalid({Buf(1, 8, 2, 1)}, "last_step 1 before first_step 2");
  ExpectInvalid({Buf(1, 8, 0, 1), Buf(1, 8, 2, 3)}, "duplicate buffer id 1");
  ExpectInvalid({Buf(1, 8, 0, 1, std::nullopt, 0)}, "alignment 0");
  ExpectInvalid({Buf(1, 8, 0, 1, std::nullopt, 48)}, "alignment 48");
  ExpectInvalid({Buf(1, 8, 0, 1), Buf(2, 8, 1, 2, 7)}, "unknown buffer 7");
  ExpectInvalid({Buf(1, 8, 0, 1, 1)}, "in place of itself");
  ExpectInvalid({Buf(1, 8, 0, 2), Buf(2, 8, 1, 3, 1)}, "must touch exactly");
  ExpectInvalid({Buf(1, 8, 0, 1), Buf(2, 8, 2, 3, 1)}, "must touch exactly");
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max() - 10;
  ExpectInvalid({Buf(1, kBig, 0, 1)}, "aligned size overflows");
  // Each fits alone but two live together cannot both be addressed.
  const int64_t half = (std::numeric_limits<int64_t>::max() / 2) & ~int64_t{63};
  ExpectInvalid({Buf(1, half, 0, 1), Buf(2, half + 128, 5, 6)}, "no-reuse total overflows");
  ExpectInvalid({Buf(1, half, 0, 1), Buf(2, half, 0, 1), Buf(3, half, 0, 1)}, "overflows");
}

// Checks every guarantee of a plan against its requests, independently of the planner.
void CheckPlan(const std::vector<BufferRequest>& reqs, const MemoryPlan& p) {
  ASSERT_EQ(p.offsets.size(), reqs.size());
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) index[reqs[i].id] = i;
  std::vector<bool> taken_over(reqs.size(), false);  // some buffer is in place of it
  std::vector<bool> in_place(reqs.size(), false);
  for (int64_t id : p.inplace) {
    const size_t i = index.at(id);
    ASSERT_TRUE(reqs[i].inplace_of.has_value());
    const size_t src = index.at(*reqs[i].inplace_of);
    EXPECT_FALSE(taken_over[src]) << "two buffers in place of " << reqs[src].id;
    taken_over[src] = true;
    in_place[i] = true;
    EXPECT_EQ(p.offsets[i], p.offsets[src]);
    EXPECT_LE(Aligned(reqs[i]), Aligned(reqs[src]));
    EXPECT_EQ(reqs[src].last_step, reqs[i].first_step);
  }
  int64_t no_reuse = 0, arena = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % reqs[i].alignment, 0) << "buffer " << reqs[i].id;
    EXPECT_GE(p.offsets[i], 0);
    no_reuse += Aligned(reqs[i]);
    arena = std::max(arena, p.offsets[i] + Aligned(reqs[i]));
  }
  EXPECT_EQ(p.no_reuse_bytes, no_reuse);
  EXPECT_EQ(p.arena_bytes, arena);
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      const BufferRequest &a = reqs[i], &b = reqs[j];
      if (a.last_step < b.first_step || b.last_step < a.first_step) continue;
      if (Aligned(a) == 0 || Aligned(b) == 0) continue;
      const bool pair =
          (in_place[j] && *b.inplace_of == a.id) || (in_place[i] && *a.inplace_of == b.id);
      if (pair) continue;
      const bool disjoint =
          p.offsets[i] + Aligned(a) <= p.offsets[j] || p.offsets[j] + Aligned(b) <= p.offsets[i];
      EXPECT_TRUE(disjoint) << "buffers " << a.id << " and " << b.id << " overlap";
    }
  }
  // Peak live bytes by brute force over every step.
  int64_t lo = 0, hi = -1;
  for (const BufferRequest& r : reqs) {
    lo = std::min(lo, r.first_step);
    hi = std::max(hi, r.last_step);
  }
  int64_t peak = 0;
  for (int64_t t = lo; t <= hi; ++t) {
    int64_t live = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const int64_t last = taken_over[i] ? reqs[i].last_step - 1 : reqs[i].last_step;
      if (reqs[i].first_step <= t && t <= last) live += Aligned(reqs[i]);
    }
    peak = std::max(peak, live);
  }
  EXPECT_EQ(p.peak_live_bytes, peak);
  EXPECT_GE(p.arena_bytes, p.peak_live_bytes);
  EXPECT_LE(p.arena_bytes, p.no_reuse_bytes);
}

std::vector<BufferRequest> RandomRequests(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t alignments[] = {1, 4, 64, 256};
  const int n = static_cast<int>(uniform(1, 40));
  std::vector<BufferRequest> reqs;
  for (int i = 0; i < n; ++i) {
    BufferRequest r;
    r.id = 1000 - 7 * i;  // ids not in input order
    // Sizes from a small set half the time, to exercise ties.
    r.bytes = uniform(0, 1) == 0 ? 256 * uniform(0, 4) : uniform(0, 5000);
    r.alignment = alignments[uniform(0, 3)];
    if (i > 0 && uniform(0, 9) < 4) {
      const BufferRequest& src = reqs[uniform(0, i - 1)];
      r.first_step = src.last_step;
      r.inplace_of = src.id;
    } else {
      r.first_step = uniform(0, 30);
    }
    r.last_step = r.first_step + uniform(0, 10);
    reqs.push_back(r);
  }
  return reqs;
}

std::map<int64_t, int64_t> OffsetsById(const std::vector<BufferRequest>& reqs,
                                       const MemoryPlan& p) {
  std::map<int64_t, int64_t> m;
  for (size_t i = 0; i < reqs.size(); ++i) m[reqs[i].id] = p.offsets[i];
  return m;
}

TEST(MemoryPlannerTest, RandomIntervalSetsKeepInvariantsAndAreOrderIndependent) {
  constexpr int kCases = 500;
  int64_t with_inplace = 0, with_reuse = 0;
  for (uint32_t seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::vector<BufferRequest> reqs = RandomRequests(seed);
    MemoryPlan p = PlanOrDie(reqs);
    CheckPlan(reqs, p);
    if (!p.inplace.empty()) ++with_inplace;
    if (p.arena_bytes < p.no_reuse_bytes) ++with_reuse;

    MemoryPlan again = PlanOrDie(reqs);
    EXPECT_EQ(again.offsets, p.offsets);
    EXPECT_EQ(again.arena_bytes, p.arena_bytes);

    std::vector<BufferRequest> shuffled = reqs;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(seed * 31 + 7));
    MemoryPlan s = PlanOrDie(shuffled);
    EXPECT_EQ(OffsetsById(shuffled, s), OffsetsById(reqs, p));
    EXPECT_EQ(s.arena_bytes, p.arena_bytes);
    EXPECT_EQ(s.peak_live_bytes, p.peak_live_bytes);
    EXPECT_EQ(s.inplace, p.inplace);
  }
  // The generator must actually exercise reuse and in-place sharing.
  EXPECT_GT(with_inplace, kCases / 2);
  EXPECT_GT(with_reuse, kCases / 2);
}

// Activations of a BERT encoder (fp32) in execution order; one step per kernel call.
// Transposes are kept as separate buffers (a pessimistic lowering).
class BertLikeBuilder {
 public:
  // Appends a buffer written at the next step that reads `inputs`; returns its id.
  int64_t Op(int64_t bytes, std::vector<int64_t> inputs, bool in_place_of_first = false) {
    const int64_t step = next_step_++;
    for (int64_t in : inputs) reqs_[in].last_step = step;
    BufferRequest r = Buf(static_cast<int64_t>(reqs_.size()), bytes, step, step);
    if (in_place_of_first) r.inplace_of = inputs.at(0);
    reqs_.push_back(r);
    return r.id;
  }
  int64_t Layer(int64_t x, int64_t b, int64_t s, int64_t h, int64_t heads, int64_t ff) {
    const int64_t bsh = b * s * h * 4, scores = b * heads * s * s * 4, bsf = b * s * ff * 4;
    const int64_t q = Op(bsh, {x}), k = Op(bsh, {x}), v = Op(bsh, {x});
    const int64_t qt = Op(bsh, {q}), kt = Op(bsh, {k}), vt = Op(bsh, {v});
    int64_t sc = Op(scores, {qt, kt});
    sc = Op(scores, {sc}, true);  // scale
    sc = Op(scores, {sc}, true);  // + mask
    sc = Op(scores, {sc}, true);  // softmax
    const int64_t ctx = Op(bsh, {sc, vt});
    const int64_t ctxt = Op(bsh, {ctx});
    const int64_t attn = Op(bsh, {ctxt});
    int64_t r1 = Op(bsh, {attn, x}, true);  // residual add
    r1 = Op(bsh, {r1}, true);               // LayerNorm
    int64_t f = Op(bsf, {r1});
    f = Op(bsf, {f}, true);  // GELU
    const int64_t f2 = Op(bsh, {f});
    const int64_t r2 = Op(bsh, {f2, r1}, true);
    return Op(bsh, {r2}, true);  // LayerNorm
  }
  std::vector<BufferRequest>& requests() { return reqs_; }

 private:
  std::vector<BufferRequest> reqs_;
  int64_t next_step_ = 0;
};

void PlanBert(int layers, double* ratio, double* over_peak) {
  constexpr int64_t kB = 8, kS = 128, kH = 768, kHeads = 12, kFf = 3072;
  BertLikeBuilder builder;
  int64_t x = builder.Op(kB * kS * kH * 4, {});  // embeddings
  for (int i = 0; i < layers; ++i) x = builder.Layer(x, kB, kS, kH, kHeads, kFf);
  builder.Op(kB * kS * kH * 4, {x});  // pooled/copied output
  MemoryPlan p = PlanOrDie(builder.requests());
  CheckPlan(builder.requests(), p);
  *ratio = static_cast<double>(p.arena_bytes) / p.no_reuse_bytes;
  *over_peak = static_cast<double>(p.arena_bytes) / p.peak_live_bytes;
  std::cout << "BERT-like, " << layers
            << " layer(s), batch 8, seq 128: " << builder.requests().size() << " buffers, arena "
            << p.arena_bytes << " B, no-reuse " << p.no_reuse_bytes << " B, peak live "
            << p.peak_live_bytes << " B, in place " << p.inplace.size() << ", arena/no-reuse "
            << *ratio << ", arena/peak " << *over_peak << "\n";
}

TEST(MemoryPlannerTest, BertLikeLayerMeetsHalfOfNoReuse) {
  double ratio = 0, over_peak = 0;
  // The target is arena <= 0.5 x no-reuse. The second bound is a regression
  // guard on plan quality: greedy gets 7 slots of 3 MiB where the lower bound is 6
  // (1.17x); 1.25x allows no extra slot.
  PlanBert(1, &ratio, &over_peak);
  EXPECT_LE(ratio, 0.5);
  EXPECT_LE(over_peak, 1.25);
  PlanBert(12, &ratio, &over_peak);
  EXPECT_LE(ratio, 0.5);
  EXPECT_LE(over_peak, 1.25);
}

}  // namespace
}  // namespace kiln::compiler
