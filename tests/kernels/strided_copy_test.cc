// cpu::StridedCopy and the shared CollapseCopy (kernels/strided_copy.h) against a plain
// element-by-element loop over the uncollapsed box: seeded random boxes of rank 1-6 with
// permuted, negative (reversed slices) and zero (broadcast) source strides, offsets into
// larger buffers, element sizes 1, 2, 3, 4 and 8, at 1 and 2 threads, and boxes large
// enough (≥ 64 KiB) that the second thread starts its odometer mid-box. Exact: a copy moves
// bytes, so every byte of the destination — the ones outside the box included, which must
// keep their fill — is compared.
#include "kernels/cpu/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::cpu {
namespace {

using kernels::CollapseCopy;
using kernels::CopyBox;
using Dims = std::vector<int64_t>;

// The box, uncollapsed: dims and element strides, with offsets.
struct Spec {
  Dims dims, ss, ds;
  int64_t so = 0, dof = 0;
};

// dst[...] = src[...] for every element of `s`, one element at a time.
void NaiveCopy(const Spec& s, int64_t es, const std::byte* src, std::byte* dst) {
  int64_t total = 1;
  for (int64_t d : s.dims) total *= d;
  for (int64_t e = 0; e < total; ++e) {
    int64_t so = s.so, dof = s.dof, r = e;
    for (size_t j = s.dims.size(); j-- > 0;) {
      so += (r % s.dims[j]) * s.ss[j];
      dof += (r % s.dims[j]) * s.ds[j];
      r /= s.dims[j];
    }
    std::memcpy(dst + dof * es, src + so * es, es);
  }
}

// Strides over `dims` laid out row-major in the order `order` (outermost first) with
// `pad` spare elements per row of the innermost dim, and the element count they span.
int64_t Layout(const Dims& dims, const std::vector<size_t>& order, int64_t pad, Dims* strides) {
  strides->assign(dims.size(), 0);
  int64_t step = 1;
  for (size_t i = order.size(); i-- > 0;) {
    (*strides)[order[i]] = step;
    step *= dims[order[i]] + (i + 1 == order.size() ? pad : 0);
  }
  return step;
}

// Runs `s` through CollapseCopy + StridedCopy and through NaiveCopy on the same buffers.
void Check(const Spec& s, int64_t src_elems, int64_t dst_elems, int64_t es, int threads,
           uint32_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  std::mt19937 gen(seed);
  std::vector<std::byte> src(static_cast<size_t>(src_elems * es));
  for (std::byte& b : src) b = static_cast<std::byte>(gen());
  std::vector<std::byte> got(static_cast<size_t>(dst_elems * es), std::byte{0x5a});
  std::vector<std::byte> want = got;
  CopyBox box;
  box.src_offset = s.so;
  box.dst_offset = s.dof;
  ASSERT_TRUE(CollapseCopy(s.dims, s.ss, s.ds, &box));
  const CpuContext ctx{.num_threads = threads};
  ASSERT_TRUE(StridedCopy(ctx, box, es, src.data(), got.data()).ok());
  NaiveCopy(s, es, src.data(), want.data());
  size_t first_bad = got.size();
  for (size_t i = 0; i < got.size() && first_bad == got.size(); ++i)
    if (got[i] != want[i]) first_bad = i;
  EXPECT_EQ(first_bad, got.size()) << "first wrong byte " << first_bad << " (element "
                                   << first_bad / es << ") of " << got.size();
}

TEST(StridedCopy, RandomBoxesMatchTheElementLoop) {
  std::mt19937 gen(7);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  };
  int large = 0;
  for (int trial = 0; trial < 300; ++trial) {
    // Every tenth box holds ≥ 17 rows of ≥ 8000 bytes: ≥ 2 × 64 KiB, so that the second
    // thread takes a range of rows starting mid-box.
    const bool big = trial % 10 == 0;
    const int rank = static_cast<int>(pick(big ? 2 : 1, big ? 3 : 6));
    Spec s;
    for (int j = 0; j < rank; ++j) s.dims.push_back(pick(0, 9) == 0 ? 1 : pick(1, big ? 3 : 7));
    if (big) s.dims.front() = pick(17, 24), s.dims.back() = pick(2000, 6000);
    // The source: the box's dims in a random order (a transpose), padded rows, then per
    // dim either reversed (a negative-step slice) or broadcast (stride 0).
    std::vector<size_t> order(static_cast<size_t>(rank));
    for (int j = 0; j < rank; ++j) order[j] = j;
    if (pick(0, 1)) std::shuffle(order.begin(), order.end(), gen);
    const int64_t src_elems = Layout(s.dims, order, pick(0, 3), &s.ss);
    for (int j = 0; j < rank; ++j) {
      const int64_t kind = pick(0, 5);
      if (kind == 0) {  // reversed: start at the far end of this dim
        s.so += (s.dims[j] - 1) * s.ss[j];
        s.ss[j] = -s.ss[j];
      } else if (kind == 1) {
        s.ss[j] = 0;
      }
    }
    // The destination: row-major in a larger buffer (a concat's sub-box), at an offset.
    std::vector<size_t> ident(static_cast<size_t>(rank));
    for (int j = 0; j < rank; ++j) ident[j] = j;
    const int64_t dst_pad = pick(0, 2), dst_elems = Layout(s.dims, ident, dst_pad, &s.ds) + 5;
    s.dof = pick(0, 5);
    const int64_t es = std::vector<int64_t>{1, 2, 3, 4, 8}[pick(big ? 3 : 0, 4)];
    int64_t total = 1;
    for (int64_t d : s.dims) total *= d;
    large += big && total * es >= (int64_t{128} << 10);
    for (int threads : {1, 2})
      Check(s, src_elems, dst_elems, es, threads, trial,
            "trial " + std::to_string(trial) + " threads " + std::to_string(threads));
    if (HasFailure()) break;
  }
  EXPECT_EQ(large, 30);  // the multi-thread split was exercised
}

TEST(StridedCopy, RankZeroEmptyAndRankEight) {
  Check({{}, {}, {}, 3, 1}, 4, 2, 4, 1, 1, "rank 0 moves one element");
  Check({{4, 0, 3}, {1, 12, 4}, {0, 3, 1}}, 16, 4, 4, 2, 2, "an empty box writes nothing");
  // Eight dims of 2, the source transposed so that no two merge.
  Spec s;
  s.dims.assign(8, 2);
  const std::vector<size_t> order = {7, 6, 5, 4, 3, 2, 1, 0};
  const int64_t n = Layout(s.dims, order, 0, &s.ss);
  Layout(s.dims, {0, 1, 2, 3, 4, 5, 6, 7}, 0, &s.ds);
  Check(s, n, n, 2, 2, 3, "rank 8");
}

TEST(StridedCopy, CollapseDropsUnitDimsAndMergesContiguousOnes) {
  CopyBox box;
  // [2,1,3,4] row-major on both sides: one run of 24.
  ASSERT_TRUE(CollapseCopy({2, 1, 3, 4}, {12, 12, 4, 1}, {12, 12, 4, 1}, &box));
  EXPECT_EQ(box.rank, 1);
  EXPECT_EQ(box.dims[0], 24);
  EXPECT_EQ(box.src_strides[0], 1);
  // A transpose of the last two dims keeps them apart; the outer dim merges into neither.
  ASSERT_TRUE(CollapseCopy({2, 3, 4}, {12, 1, 3}, {12, 4, 1}, &box));
  EXPECT_EQ(box.rank, 3);
  // A concat input: contiguous in x, rows of 4 of a row of 10 in y: [2,3,4] -> [6,4].
  ASSERT_TRUE(CollapseCopy({2, 3, 4}, {12, 4, 1}, {30, 10, 1}, &box));
  EXPECT_EQ(box.rank, 2);
  EXPECT_EQ(box.dims[0], 6);
  EXPECT_EQ(box.dst_strides[0], 10);
  ASSERT_TRUE(CollapseCopy({2, 3, 4}, {12, 4, 1}, {12, 4, 1}, &box));
  EXPECT_EQ(box.rank, 1);
  // Nine dims that do not merge are refused.
  Dims d(9, 2), st(9);
  for (int j = 0; j < 9; ++j) st[j] = int64_t{1} << j;  // reversed order: never contiguous
  EXPECT_FALSE(CollapseCopy(d, st, st, &box));
}

TEST(StridedCopy, RejectsBadArguments) {
  CopyBox box;
  box.rank = 9;
  const CpuContext ctx;
  int x = 0, y = 0;
  EXPECT_FALSE(StridedCopy(ctx, box, 4, &x, &y).ok());
  box.rank = 1;
  box.dims[0] = -1;
  EXPECT_FALSE(StridedCopy(ctx, box, 4, &x, &y).ok());
  box.dims[0] = 1;
  EXPECT_FALSE(StridedCopy(ctx, box, 0, &x, &y).ok());
  EXPECT_FALSE(StridedCopy(ctx, box, 4, nullptr, &y).ok());
}

}  // namespace
}  // namespace kiln::cpu
