// The host-side halves of the CUDA kernels, on the CPU (no GPU needed): the broadcast
// layout of the eltwise kernel (EltwiseLayout) checked element by element against a
// direct numpy-broadcast index computation on random shapes, the strided copy's dim
// collapsing (CollapseCopy) against the uncollapsed walk, and the launch tables of the
// norm and softmax kernels (ChooseNormLaunch, SoftmaxThreads): vector width, threads per
// block, and rows up to the kernel's limit covered; the packed kernels' token -> sequence
// lookup (SegmentOf).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/eltwise.h"
#include "kernels/cuda/embed.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/packed.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/split_kv.h"

namespace kiln::cuda {
namespace {

using Dims = std::vector<int64_t>;

// Flat index into an input of dims `in` (right-aligned, size-1 dims broadcast) for the
// output multi-index `idx`.
int64_t BroadcastOffset(const Dims& in, const Dims& out, const Dims& idx) {
  const size_t shift = out.size() - in.size();
  int64_t off = 0, stride = 1;
  for (size_t j = in.size(); j-- > 0;) {
    if (in[j] != 1) off += idx[j + shift] * stride;
    stride *= in[j];
  }
  return off;
}

// The kernel's own index computation over the collapsed layout.
int64_t KernelOffset(const EltwiseArgs& a, int k, int64_t o) {
  if (a.contiguous) return o;
  int64_t off = 0;
  for (int d = a.rank - 1; d >= 0; --d) {
    off += (o % a.dims[d]) * a.in[k].strides[d];
    o /= a.dims[d];
  }
  return off;
}

TEST(EltwiseLayout, MatchesNumpyBroadcastOnRandomShapes) {
  std::mt19937 rng(7);
  int checked = 0, contiguous = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = static_cast<int>(rng() % 6);
    Dims out(rank);
    for (int64_t& d : out) d = 1 + rng() % 4;
    const int k = 1 + static_cast<int>(rng() % 3);
    std::vector<Dims> ins(k);
    for (Dims& in : ins) {
      const int r = static_cast<int>(rng() % (rank + 1));
      in.assign(out.end() - r, out.end());
      for (int64_t& d : in)
        if (rng() % 3 == 0) d = 1;
    }
    EltwiseArgs a;
    ASSERT_TRUE(EltwiseLayout(out, ins, &a));
    int64_t n = 1;
    for (int64_t d : out) n *= d;
    ASSERT_EQ(a.n, n);
    contiguous += a.contiguous;
    Dims idx(rank, 0);
    for (int64_t o = 0; o < n; ++o) {
      for (int i = 0; i < k; ++i)
        ASSERT_EQ(KernelOffset(a, i, o), BroadcastOffset(ins[i], out, idx))
            << "trial " << trial << " input " << i << " element " << o;
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(contiguous, 0);  // the same-shape fast path is taken, and checked
}

TEST(EltwiseLayout, CollapsesAndRefusesWhatDoesNotBroadcast) {
  EltwiseArgs a;
  // [2,3,4] + [4]: the input repeats every 4 elements; dims 0 and 1 merge.
  ASSERT_TRUE(EltwiseLayout({2, 3, 4}, {{2, 3, 4}, {4}}, &a));
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(a.dims[0], 6);
  EXPECT_EQ(a.dims[1], 4);
  EXPECT_EQ(a.in[1].strides[0], 0);
  EXPECT_EQ(a.in[1].strides[1], 1);
  EXPECT_FALSE(a.contiguous);
  EXPECT_FALSE(EltwiseLayout({2, 3}, {{2, 4}}, &a));  // 4 does not broadcast to 3
  EXPECT_FALSE(EltwiseLayout({3}, {{2, 3}}, &a));     // input of higher rank
  ASSERT_TRUE(EltwiseLayout({1}, {{}, {1}}, &a));     // a scalar and a [1]
  EXPECT_EQ(a.n, 1);
  EXPECT_TRUE(a.contiguous);
}

TEST(CollapseCopy, MergesContiguousDimsOnBothSides) {
  // A transpose [2,3,4] -> [2,4,3]: src strides (12, 1, 4), dst (12, 3, 1): nothing merges.
  StridedCopyArgs t;
  ASSERT_TRUE(CollapseCopy({2, 4, 3}, {12, 1, 4}, {12, 3, 1}, &t));
  EXPECT_EQ(t.rank, 3);
  // A concat part [2,3,4] into [2,5,4] at offset 0: rows of 12 src / 20 dst; the last two
  // dims merge on both sides (12 elements contiguous in each).
  StridedCopyArgs c;
  ASSERT_TRUE(CollapseCopy({2, 3, 4}, {12, 4, 1}, {20, 4, 1}, &c));
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.dims[0], 2);
  EXPECT_EQ(c.dims[1], 12);
  EXPECT_EQ(c.src_strides[0], 12);
  EXPECT_EQ(c.dst_strides[0], 20);
  // Size-1 dims drop; a broadcast (stride 0) dim stays.
  StridedCopyArgs e;
  ASSERT_TRUE(CollapseCopy({1, 5, 1, 3}, {0, 0, 0, 1}, {15, 3, 3, 1}, &e));
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.src_strides[0], 0);
  // Element-by-element: every collapse walks the same (src, dst) pairs as the full dims.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 6);
    Dims dims(rank), ss(rank), ds(rank);
    int64_t sstride = 1, dstride = 1;
    for (int j = rank - 1; j >= 0; --j) {
      dims[j] = 1 + rng() % 3;
      ss[j] = rng() % 4 == 0 ? 0 : sstride;
      ds[j] = dstride;
      sstride *= dims[j] + (rng() % 2);
      dstride *= dims[j];
    }
    StridedCopyArgs a;
    ASSERT_TRUE(CollapseCopy(dims, ss, ds, &a));
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    Dims idx(rank, 0);
    for (int64_t o = 0; o < n; ++o) {
      int64_t s = 0, d = 0, rem = o;
      for (int j = a.rank - 1; j >= 0; --j) {
        s += (rem % a.dims[j]) * a.src_strides[j];
        d += (rem % a.dims[j]) * a.dst_strides[j];
        rem /= a.dims[j];
      }
      int64_t s_full = 0, d_full = 0;
      for (int j = 0; j < rank; ++j) {
        s_full += idx[j] * ss[j];
        d_full += idx[j] * ds[j];
      }
      ASSERT_EQ(s, s_full) << "trial " << trial;
      ASSERT_EQ(d, d_full) << "trial " << trial;
      for (int j = rank - 1; j >= 0; --j) {
        if (++idx[j] < dims[j]) break;
        idx[j] = 0;
      }
    }
  }
}

TEST(NormLaunch, TableAndLimits) {
  NormLaunch l;
  // BERT-base rows, fp16, aligned: 8-element vectors, 2 per thread, two warps.
  ASSERT_TRUE(ChooseNormLaunch(ElemType::kF16, 768, true, &l));
  EXPECT_EQ(l.vec, 8);
  EXPECT_EQ(l.items, 2);
  EXPECT_EQ(l.threads, 64);
  // The same row unaligned (or h·size not a multiple of 16): scalar loads.
  ASSERT_TRUE(ChooseNormLaunch(ElemType::kF16, 767, true, &l));
  EXPECT_EQ(l.vec, 1);
  EXPECT_EQ(l.items, 16);
  EXPECT_EQ(l.threads, 64);
  ASSERT_TRUE(ChooseNormLaunch(ElemType::kF32, 384, false, &l));
  EXPECT_EQ(l.vec, 1);
  // The longest row: 1024 threads of 16 floats; past it, none.
  ASSERT_TRUE(ChooseNormLaunch(ElemType::kF32, kNormMaxRow, true, &l));
  EXPECT_EQ(l.threads, 1024);
  EXPECT_FALSE(ChooseNormLaunch(ElemType::kF32, kNormMaxRow + 4, true, &l));
  EXPECT_FALSE(ChooseNormLaunch(ElemType::kBF16, kNormMaxRow + 1, false, &l));
  EXPECT_FALSE(ChooseNormLaunch(ElemType::kF32, 0, true, &l));
  // EmbedLayerNorm's launch bound (512 threads): hidden up to 8192.
  ASSERT_TRUE(ChooseNormLaunch(ElemType::kF32, 8192, false, &l, 512));
  EXPECT_EQ(l.threads, 512);
  EXPECT_FALSE(ChooseNormLaunch(ElemType::kF32, 8193, false, &l, 512));
  // Every h up to the limit is covered by the threads x items x vec it gets.
  for (ElemType t : {ElemType::kF32, ElemType::kF16, ElemType::kBF16})
    for (int64_t h = 1; h <= 16384; h += (h < 256 ? 1 : 97)) {
      ASSERT_TRUE(ChooseNormLaunch(t, h, true, &l)) << h;
      EXPECT_GE(static_cast<int64_t>(l.threads) * l.items * l.vec, h) << h;
      EXPECT_EQ(l.threads % 32, 0);
      EXPECT_EQ(l.items * l.vec, kNormFloatsPerThread) << h;
    }
}

TEST(SoftmaxLaunch, ThreadsPerRow) {
  EXPECT_EQ(SoftmaxThreads(1), 32);
  EXPECT_EQ(SoftmaxThreads(128), 32);
  EXPECT_EQ(SoftmaxThreads(512), 64);
  EXPECT_EQ(SoftmaxThreads(1 << 20), 1024);
}

// The packed kernels' token -> sequence lookup against a direct walk of the lengths, with
// empty sequences anywhere (first, between, last) and tokens of no sequence after them.
TEST(PackedSegments, SegmentOfEveryToken) {
  std::mt19937 gen(4);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t n = 1 + gen() % 9;
    std::vector<int64_t> lengths(n);
    for (int64_t& l : lengths) l = gen() % 3 == 0 ? 0 : gen() % 6;
    std::vector<int32_t> cu(n + 1, 0);
    for (int64_t s = 0; s < n; ++s) cu[s + 1] = cu[s] + static_cast<int32_t>(lengths[s]);
    const int64_t tokens = cu[n] + gen() % 4;  // padding tokens belong to no sequence
    int64_t t = 0;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < lengths[s]; ++i, ++t) {
        ASSERT_EQ(SegmentOf(cu.data(), n, t), s) << "token " << t << " trial " << trial;
        EXPECT_EQ(t - cu[s], i);
      }
    for (; t < tokens; ++t) EXPECT_EQ(SegmentOf(cu.data(), n, t), -1);
    EXPECT_EQ(SegmentOf(cu.data(), n, -1), -1);
  }
}

// The packed attention grids (tile_cu): over PackedTileBound blocks, block x takes tile
// x - tile_cu[s] of sequence s = SegmentOf(tile_cu, N, x); every (sequence, row tile) with
// rows is taken exactly once, and the blocks past the last tile take none.
TEST(PackedSegments, TileGridCoversEveryRowOnce) {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + gen() % 12, rows = int64_t{1} << (gen() % 8);  // 1 .. 128 rows
    std::vector<int64_t> lengths(n);
    int64_t tokens = 0;
    for (int64_t& l : lengths) tokens += (l = gen() % 4 == 0 ? 0 : gen() % 300);
    tokens += gen() % 50;  // a bucket larger than the tokens
    std::vector<int32_t> tile_cu(n + 1, 0);
    for (int64_t s = 0; s < n; ++s)
      tile_cu[s + 1] = tile_cu[s] + static_cast<int32_t>((lengths[s] + rows - 1) / rows);
    const int64_t bound = PackedTileBound(tokens, n, rows);
    ASSERT_LE(tile_cu[n], bound);
    std::vector<std::vector<int>> seen(n);
    for (int64_t s = 0; s < n; ++s) seen[s].assign((lengths[s] + rows - 1) / rows, 0);
    for (int64_t x = 0; x < bound; ++x) {
      const int64_t s = SegmentOf(tile_cu.data(), n, x);
      if (x >= tile_cu[n]) {
        EXPECT_EQ(s, -1);
        continue;
      }
      ASSERT_GE(s, 0);
      const int64_t tile = x - tile_cu[s];
      ASSERT_LT(tile * rows, lengths[s]) << "a tile past sequence " << s << "'s rows";
      ++seen[s][tile];
    }
    for (int64_t s = 0; s < n; ++s)
      for (int v : seen[s]) EXPECT_EQ(v, 1) << "sequence " << s;
  }
}

// The paged attention's split count: about `target` (chunk, head, row) blocks, chunks of at
// least 64 keys, partials within the workspace; one split writes y directly (no partials).
TEST(PagedAttentionLaunch, SplitsFillTheDeviceWithinTheWorkspace) {
  PagedAttentionArgs a;
  a.batch = 1;
  a.seq = 1;
  a.heads = 14;
  a.head_size = 64;
  a.block_size = 16;
  a.width = 64;  // 1024 keys
  const size_t ws = size_t{32} << 20;
  EXPECT_EQ(PagedAttentionSplits(a, 264, ws), 16);  // 1024 / 64 keys, below ceil(264 / 14)
  a.width = 256;                                    // 4096 keys
  EXPECT_EQ(PagedAttentionSplits(a, 264, ws), 19);  // ceil(264 / 14)
  a.batch = 8;
  EXPECT_EQ(PagedAttentionSplits(a, 264, ws), 3);  // ceil(264 / 112)
  a.batch = 64;
  EXPECT_EQ(PagedAttentionSplits(a, 264, ws), 1);  // 896 rows already fill the device
  a.batch = 1;
  a.width = 2;  // 32 keys: one chunk
  EXPECT_EQ(PagedAttentionSplits(a, 264, ws), 1);
  a.width = 256;
  const size_t per_split = 14 * (64 + 2) * sizeof(float);
  EXPECT_EQ(PagedAttentionSplits(a, 264, 5 * per_split + 7), 5);  // the workspace caps it
  EXPECT_EQ(PagedAttentionSplits(a, 264, 0), 1);
  a.splits = 5;
  EXPECT_EQ(PagedAttentionWorkspace(a), 5 * per_split);
  a.splits = 1;
  EXPECT_EQ(PagedAttentionWorkspace(a), 0u);
}

// The split-KV decode attention's decomposition (split_kv.h), run on the host as the kernel
// runs it — chunks of the keys; in each, 4 warps' online softmaxes over groups of 4 keys 16
// apart with the mask's bias (keys at -inf never scored), merged at their largest max; the
// chunks' (max, sum, output) merged the same way —
// against one softmax in double over every key with its additive bias (the decomposed
// graph). Scores are random in [-4, 4], values in [-1, 1], 300 keys, 1 to 64 splits; masks:
// none, bool with a kept prefix (whole chunks empty), HF's float32-min fill on a tail or
// everywhere (a row that sees no key: a softmax over all of them), a row with every key
// false (zeros). Tolerance 1e-5 on outputs in [-1, 1]: fp32 sums of <= 300 terms against
// double.
TEST(SplitKv, ChunksMergedEqualOneSoftmax) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> score(-4.f, 4.f), value(-1.f, 1.f);
  const int64_t L = 300;
  std::vector<float> scores(L), values(L);
  for (int64_t j = 0; j < L; ++j) {
    scores[j] = score(rng);
    values[j] = value(rng);
  }
  enum class Mask { kNone, kBoolPrefix, kBoolNone, kFinfoTail, kFinfoAll };
  for (Mask mask :
       {Mask::kNone, Mask::kBoolPrefix, Mask::kBoolNone, Mask::kFinfoTail, Mask::kFinfoAll})
    for (int64_t splits : {1, 2, 3, 5, 16, 64}) {
      SCOPED_TRACE(testing::Message()
                   << "mask " << static_cast<int>(mask) << ", " << splits << " splits");
      const bool has_mask = mask != Mask::kNone;
      const bool is_bool = mask == Mask::kBoolPrefix || mask == Mask::kBoolNone;
      auto keep = [&](int64_t j) { return mask == Mask::kBoolPrefix && j < 37; };
      auto additive = [&](int64_t j) {
        if (mask == Mask::kFinfoAll || (mask == Mask::kFinfoTail && j >= 41))
          return -3.4028234663852886e38f;
        return 0.f;
      };
      // The reference: softmax in double over every key, bias added (bool false: excluded).
      double want = 0, ref_max = -INFINITY, ref_sum = 0;
      std::vector<double> biased(L, -INFINITY);
      for (int64_t j = 0; j < L; ++j)
        if (!is_bool || keep(j)) {
          biased[j] = static_cast<double>(scores[j]) + (is_bool ? 0.0 : additive(j));
          ref_max = std::max(ref_max, biased[j]);
        }
      for (int64_t j = 0; j < L && ref_max != -INFINITY; ++j)
        if (biased[j] != -INFINITY) {
          const double w = std::exp(biased[j] - ref_max);
          ref_sum += w;
          want += w * values[j];
        }
      want = ref_sum > 0 ? want / ref_sum : 0.0;
      // As the kernel: does the row see a key above kExcluded?
      bool skip_excluded = false;
      for (int64_t j = 0; j < L && has_mask && !is_bool; ++j)
        skip_excluded |= additive(j) > split_kv::kExcluded;
      const int64_t visible = split_kv::VisibleKeys(L, 1, 0, false);
      std::vector<float> ms, ls, os;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const split_kv::KeyRange r = split_kv::ChunkKeys(L, visible, splits, sp);
        // 4 warps, each over groups of 4 keys 16 apart, then merged at their largest max.
        float wm[4], wl[4], wo[4];
        for (int w = 0; w < 4; ++w) {
          float m = -INFINITY, l = 0.f, o = 0.f;
          for (int64_t g = r.begin + 4 * w; g < r.end; g += 16) {
            float sc[4];
            for (int u = 0; u < 4; ++u) {
              const int64_t j = g + u;
              const float bias = j < r.end ? split_kv::KeyBias(has_mask, is_bool, keep(j),
                                                               additive(j), skip_excluded)
                                           : -INFINITY;
              sc[u] = bias == -INFINITY ? -INFINITY : scores[j] + bias;
            }
            float m_new = m;
            for (float v : sc) m_new = std::max(m_new, v);
            if (m_new == -INFINITY) continue;
            const float corr = split_kv::Rescale(m, m_new);
            l *= corr;
            o *= corr;
            for (int u = 0; u < 4; ++u) {
              if (sc[u] == -INFINITY) continue;
              const float p = std::exp(sc[u] - m_new);
              l += p;
              o += p * values[g + u];
            }
            m = m_new;
          }
          wm[w] = m;
          wl[w] = l;
          wo[w] = o;
        }
        float m = -INFINITY, l = 0.f, o = 0.f;
        for (float v : wm) m = std::max(m, v);
        for (int w = 0; w < 4; ++w) {
          l += wl[w] * split_kv::Rescale(wm[w], m);
          o += wo[w] * split_kv::Rescale(wm[w], m);
        }
        ms.push_back(m);
        ls.push_back(l);
        os.push_back(o);
      }
      float bm = -INFINITY, bl = 0.f, acc = 0.f;
      for (float m : ms) bm = std::max(bm, m);
      for (int64_t sp = 0; sp < splits; ++sp) {
        bl += ls[sp] * split_kv::Rescale(ms[sp], bm);
        acc += os[sp] * split_kv::Rescale(ms[sp], bm);
      }
      const float got = bl == 0.f ? 0.f : acc / bl;
      EXPECT_NEAR(got, want, 1e-5);
      if (mask == Mask::kBoolNone) EXPECT_EQ(got, 0.f);  // every key false: zeros
    }
  // Causal rows and the chunks: query i of S sees keys <= L - S + i; chunks tile [0, L).
  EXPECT_EQ(split_kv::VisibleKeys(64, 3, 0, true), 62);
  EXPECT_EQ(split_kv::VisibleKeys(64, 3, 2, true), 64);
  EXPECT_EQ(split_kv::VisibleKeys(64, 3, 0, false), 64);
  int64_t covered = 0;
  for (int64_t sp = 0; sp < 7; ++sp) {
    const split_kv::KeyRange r = split_kv::ChunkKeys(100, 100, 7, sp);
    EXPECT_EQ(r.begin, covered);
    covered = std::max(covered, r.end);
  }
  EXPECT_EQ(covered, 100);
  const split_kv::KeyRange past = split_kv::ChunkKeys(100, 30, 7, 3);  // past the visible keys
  EXPECT_GE(past.begin, past.end);
}

}  // namespace
}  // namespace kiln::cuda
