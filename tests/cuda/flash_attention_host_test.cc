// The flash attention kernel's host-side halves (kernels/cuda/flash_attention.h), on the
// CPU: the head sizes agree with the cuda contract's, every SM's launch shape is
// instantiated and fits that SM's shared memory, FlashAttentionUnsupported names each
// broken argument, and the key-range rules (causal diagonal, key-padding tail) are exact:
// a float model of the kernel's loop — the same tile ranges, the same online softmax in
// exp2 — matches the direct softmax over every key (no skipping) within 2e-6 relative on
// random scores, with HF's finfo.min padding, -inf and bool masks, fully padded rows and
// causal with Sq != Skv; and the kernel's shared-memory placement and fragment offsets
// (flash_layout.h, which the kernel calls) assemble S = Q·Kᵀ and O = P·V exactly under an
// emulation of mma.m16n8k16 and ldmatrix.x4.trans written from the PTX ISA's fragment
// tables. (The kernel itself runs in CudaOps.FlashAttention, GPU only.)
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/flash_layout.h"
#include "plan/kernel_contract.h"

namespace kiln::cuda {
namespace {

TEST(FlashHost, HeadSizesAgreeWithTheContract) {
  for (int64_t d = 0; d <= 512; ++d)
    EXPECT_EQ(FlashHeadSizeSupported(d), FlashAttentionHeadSizeOk(d)) << d;
}

// Per-block dynamic shared memory an SM grants (opt-in maximum).
int64_t MaxSmem(int sm) {
  if (sm == 80 || sm == 87) return 163 * 1024;
  if (sm == 90 || sm == 100) return 227 * 1024;
  return 99 * 1024;  // 86, 89, 120
}

TEST(FlashHost, EveryLaunchShapeIsInstantiatedAndFits) {
  for (int sm : {80, 86, 87, 89, 90, 100, 120})
    for (int64_t d : {8, 16, 32, 64, 128}) {
      const FlashLaunch l = ChooseFlashLaunch(sm, d);
      bool instantiated = false;
      for (const FlashLaunch& k : kFlashLaunches)
        instantiated |= k.block_q == l.block_q && k.block_k == l.block_k;
      EXPECT_TRUE(instantiated) << sm << " " << d;
      EXPECT_EQ(l.block_q % 16, 0);
      EXPECT_EQ(l.block_k % 16, 0);
      EXPECT_LE(l.SmemBytes(d), MaxSmem(sm)) << sm << " " << d;
    }
  // Padded rows: head size rounded up to 16, plus 8 elements, 2 bytes each.
  EXPECT_EQ((FlashLaunch{64, 64}.SmemBytes(64)), (64 + 4 * 64) * 72 * 2);
  EXPECT_EQ((FlashLaunch{64, 64}.SmemBytes(8)), (64 + 4 * 64) * 24 * 2);
}

FlashAttentionArgs Packed(int64_t b, int64_t s, int64_t n, int64_t d) {
  FlashAttentionArgs a;
  a.dtype = ElemType::kF16;
  a.batch = b;
  a.q_len = a.kv_len = s;
  a.heads = a.kv_heads = n;
  a.head_size = d;
  a.q_row_stride = a.kv_row_stride = 3 * n * d;
  a.q_batch_stride = a.kv_batch_stride = s * 3 * n * d;
  a.y_row_stride = n * d;
  a.y_batch_stride = s * n * d;
  return a;
}

TEST(FlashHost, UnsupportedSaysWhy) {
  const FlashLaunch l{64, 64};
  EXPECT_EQ(FlashAttentionUnsupported(Packed(33, 129, 12, 64), l), nullptr);
  struct Case {
    const char* want;
    void (*edit)(FlashAttentionArgs&);
  };
  const Case cases[] = {
      {"dtype", [](FlashAttentionArgs& a) { a.dtype = ElemType::kF32; }},
      {"head_size", [](FlashAttentionArgs& a) { a.head_size = 96; }},
      {"kv_heads", [](FlashAttentionArgs& a) { a.kv_heads = 5; }},
      {"grid", [](FlashAttentionArgs& a) { a.batch = 70000; }},
      {"length", [](FlashAttentionArgs& a) { a.kv_len = int64_t{1} << 31; }},
      {"mask",
       [](FlashAttentionArgs& a) {
         a.mask = &a;
         a.mask_type = ElemType::kI64;
       }},
      {"together",
       [](FlashAttentionArgs& a) {
         static const int32_t cu[2] = {0, 1};
         a.cu_seqlens_q = cu;
       }},
      {"alignment", [](FlashAttentionArgs& a) { a.q_row_stride = 12; }},
  };
  for (const Case& c : cases) {
    FlashAttentionArgs a = Packed(2, 16, 4, 32);
    c.edit(a);
    const char* why = FlashAttentionUnsupported(a, l);
    ASSERT_NE(why, nullptr) << c.want;
    EXPECT_NE(std::strstr(why, c.want), nullptr) << why;
  }
  EXPECT_NE(FlashAttentionUnsupported(Packed(2, 16, 4, 32), FlashLaunch{32, 32}), nullptr);
}

TEST(FlashHost, KeyRanges) {
  EXPECT_TRUE(KeyIsKept(0.f));
  EXPECT_TRUE(KeyIsKept(-1e4f));
  EXPECT_TRUE(KeyIsKept(std::nanf("")));
  EXPECT_FALSE(KeyIsKept(std::numeric_limits<float>::lowest()));  // HF's finfo.min fill
  EXPECT_FALSE(KeyIsKept(-std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(KeyIsKept(-1e30f));
  // Bool: the tail past the last true key is -inf; none true: no key at all.
  EXPECT_EQ(PaddedKeyEnd(true, 5, 9), 5);
  EXPECT_EQ(PaddedKeyEnd(true, 0, 9), 0);
  // Additive: the same, except that with no kept key every key counts.
  EXPECT_EQ(PaddedKeyEnd(false, 5, 9), 5);
  EXPECT_EQ(PaddedKeyEnd(false, 0, 9), 9);
  EXPECT_EQ(PaddedKeyEnd(false, 9, 9), 9);
  // Causal, bottom-right aligned.
  EXPECT_EQ(CausalKeyEnd(false, 0, 64, 100, 100), 100);
  EXPECT_EQ(CausalKeyEnd(true, 0, 64, 100, 100), 64);
  EXPECT_EQ(CausalKeyEnd(true, 64, 64, 100, 100), 100);  // last block: rows 64..99
  EXPECT_EQ(CausalKeyEnd(true, 0, 64, 1, 300), 300);     // one new token sees the cache
  EXPECT_EQ(CausalKeyEnd(true, 0, 16, 32, 40), 24);      // rows 0..15 see keys <= 15 + 8
  EXPECT_EQ(CausalKeyEnd(true, 0, 16, 64, 8), 0);        // rows 0..15 see nothing
}

// The kernel's loop on the host for one (batch, head): rows [0, q_len), keys in tiles of
// bk up to the block's key end, online softmax in exp2 as the kernel does (block_q = all
// rows, so every row gets the most generous end — the kernel's per-block ends are the
// same rule per block and checked in KeyRanges).
enum class MaskKind { kNone, kAdditive, kBool };
std::vector<float> Model(const std::vector<float>& scores, int64_t q_len, int64_t kv_len, int64_t d,
                         const std::vector<float>& v, bool causal, MaskKind mk,
                         const std::vector<float>& key_mask, int64_t block_q, int bk) {
  std::vector<float> y(q_len * d, 0.f);
  const float log2e = 1.4426950408889634f;
  for (int64_t q0 = 0; q0 < q_len; q0 += block_q) {
    int64_t end = CausalKeyEnd(causal, q0, block_q, q_len, kv_len);
    if (mk != MaskKind::kNone) {
      int64_t kept = 0;
      for (int64_t j = 0; j < kv_len; ++j)
        if (mk == MaskKind::kBool ? key_mask[j] != 0 : KeyIsKept(key_mask[j])) kept = j + 1;
      end = std::min(end, PaddedKeyEnd(mk == MaskKind::kBool, kept, kv_len));
    }
    for (int64_t i = q0; i < std::min(q0 + block_q, q_len); ++i) {
      float m = -INFINITY, l = 0;
      std::vector<float> o(d, 0.f);
      for (int64_t j0 = 0; j0 < end; j0 += bk) {
        std::vector<float> x(bk, -INFINITY);
        float tm = -INFINITY;
        for (int jj = 0; jj < bk; ++jj) {
          const int64_t j = j0 + jj;
          if (j >= kv_len || (causal && j > i + kv_len - q_len)) continue;
          x[jj] = scores[i * kv_len + j];
          if (mk == MaskKind::kBool) x[jj] = key_mask[j] != 0 ? x[jj] : -INFINITY;
          if (mk == MaskKind::kAdditive) x[jj] += key_mask[j];
          tm = std::fmax(tm, x[jj]);
        }
        const float mn = std::fmax(m, tm), mu = mn == -INFINITY ? 0.f : mn;
        const float corr = std::exp2((m - mu) * log2e);
        m = mn;
        l *= corr;
        for (float& e : o) e *= corr;
        for (int jj = 0; jj < bk; ++jj) {
          const float p = std::exp2((x[jj] - mu) * log2e);
          l += p;
          if (p != 0)
            for (int64_t c = 0; c < d; ++c) o[c] += p * v[(j0 + jj) * d + c];
        }
      }
      const float inv = l == 0 ? 0.f : 1.f / l;
      for (int64_t c = 0; c < d; ++c) y[i * d + c] = o[c] * inv;
    }
  }
  return y;
}

// Softmax over every key in double, the decomposed graph's semantics (additive mask added
// in fp32, as the exporters' graph does; -inf rows are zeros, the fused op's contract).
std::vector<double> Direct(const std::vector<float>& scores, int64_t q_len, int64_t kv_len,
                           int64_t d, const std::vector<float>& v, bool causal, MaskKind mk,
                           const std::vector<float>& key_mask) {
  std::vector<double> y(q_len * d, 0.0);
  for (int64_t i = 0; i < q_len; ++i) {
    std::vector<double> x(kv_len);
    double mx = -INFINITY;
    for (int64_t j = 0; j < kv_len; ++j) {
      float s = scores[i * kv_len + j];
      if (mk == MaskKind::kAdditive) s += key_mask[j];
      if (mk == MaskKind::kBool && key_mask[j] == 0) s = -INFINITY;
      if (causal && j > i + kv_len - q_len) s = -INFINITY;
      x[j] = s;
      mx = std::fmax(mx, x[j]);
    }
    if (mx == -INFINITY) continue;
    double sum = 0;
    for (double& e : x) sum += e = std::exp(e - mx);
    for (int64_t j = 0; j < kv_len; ++j)
      for (int64_t c = 0; c < d; ++c) y[i * d + c] += x[j] / sum * v[j * d + c];
  }
  return y;
}

TEST(FlashHost, SkippedTilesChangeNothing) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  const float fmin = std::numeric_limits<float>::lowest();
  int checked = 0;
  for (const auto& [q_len, kv_len] :
       {std::pair<int64_t, int64_t>{7, 7}, {129, 129}, {64, 200}, {1, 300}, {130, 70}})
    for (bool causal : {false, true})
      for (MaskKind mk : {MaskKind::kNone, MaskKind::kAdditive, MaskKind::kBool})
        for (int64_t valid : {kv_len, kv_len / 3 + 1, int64_t{0}}) {
          if (mk == MaskKind::kNone && valid != kv_len) continue;
          SCOPED_TRACE(::testing::Message()
                       << q_len << "x" << kv_len << " causal " << causal << " mask "
                       << static_cast<int>(mk) << " valid " << valid);
          const int64_t d = 8;
          std::vector<float> scores(q_len * kv_len), v(kv_len * d), key_mask(kv_len);
          for (float& e : scores) e = u(rng);
          for (float& e : v) e = u(rng);
          for (int64_t j = 0; j < kv_len; ++j) {
            const bool pad = j >= valid;
            key_mask[j] = mk == MaskKind::kBool ? (pad ? 0.f : 1.f)
                                                : (pad ? (j % 2 ? fmin : -INFINITY) : 0.f);
          }
          if (mk == MaskKind::kAdditive && valid == 0)  // a fully padded row: HF's fill only
            for (float& e : key_mask) e = fmin;
          const std::vector<double> want =
              Direct(scores, q_len, kv_len, d, v, causal, mk, key_mask);
          for (int64_t block_q : {16, 64})
            for (int bk : {16, 64}) {
              const std::vector<float> got =
                  Model(scores, q_len, kv_len, d, v, causal, mk, key_mask, block_q, bk);
              for (size_t e = 0; e < want.size(); ++e)
                ASSERT_NEAR(got[e], want[e], 2e-6 * (1 + std::fabs(want[e])))
                    << "element " << e << " block_q " << block_q << " bk " << bk;
              ++checked;
            }
        }
  EXPECT_GT(checked, 100);
}

// ---- The fragment layout under an emulation of the PTX instructions ---------------------
// Written from the PTX ISA's tables for mma.m16n8k16 with .f16/.bf16 inputs and f32
// accumulators (g = lane / 4, t = lane % 4; each 32-bit input register holds two elements,
// the first in the low half), independently of flash_layout.h:
//   A (16×16): reg i, element j is A[g + 8·(i % 2)][2t + j + 8·(i / 2)];
//   B (16×8):  reg i, element j is B[2t + j + 8i][g];
//   C (16×8):  element e is C[g + 8·(e / 2)][2t + e % 2].
// ldmatrix.m8n8.x4.trans: lanes 8m .. 8m+7 give the addresses of rows 0..7 of matrix m
// (8 consecutive 16-bit elements each); lane l's register m gets elements
// [2t][g] and [2t+1][g] of matrix m (the transpose of the non-.trans [g][2t..2t+1]).
using Pair = std::array<float, 2>;
struct Lanes {
  std::array<std::array<Pair, 4>, 32> reg;  // per lane, up to 4 registers
};

// C (16×8) += A·B over the 32 lanes' registers.
void EmulateMma(std::array<std::array<float, 4>, 32>& c, const Lanes& a, const Lanes& b) {
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) A[g + 8 * (i % 2)][2 * t + j + 8 * (i / 2)] = a.reg[l][i][j];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) B[2 * t + j + 8 * i][g] = b.reg[l][i][j];
  }
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
      float acc = 0;
      for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
      c[l][e] += acc;
    }
  }
}

// ldmatrix.x4.trans from `smem`: lane l addresses row offset `row_of[l]`.
Lanes EmulateLdmatrixX4Trans(const std::vector<float>& smem, const std::array<int, 32>& row_of) {
  Lanes out{};
  for (int m = 0; m < 4; ++m)
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      // matrix m, row r, column c is smem[row_of[8m + r] + c]
      out.reg[l][m] = {smem[row_of[8 * m + 2 * t] + g], smem[row_of[8 * m + 2 * t + 1] + g]};
    }
  return out;
}

// A rows × d tile of `g` (row stride `stride`) placed as the kernel's LoadTile places it
// (chunks by ChunkRow / ChunkCol at RowPitch), columns [d, 16-rounded d) zeroed as the
// kernel zeroes them, everything else NaN (so a read of an unwritten element shows).
std::vector<float> PlaceTile(const std::vector<float>& g, int rows, int d, int stride) {
  const int pitch = flash::RowPitch(d), dp = (d + 15) / 16 * 16;
  std::vector<float> smem(rows * pitch, std::nanf(""));
  for (int c = 0; c < rows * (d / 8); ++c) {
    const int r = flash::ChunkRow(d, c), col = flash::ChunkCol(d, c);
    for (int i = 0; i < 8; ++i) smem[r * pitch + col + i] = g[r * stride + col + i];
  }
  for (int r = 0; r < rows; ++r)
    for (int col = d; col < dp; ++col) smem[r * pitch + col] = 0;
  return smem;
}

TEST(FlashHost, FragmentLayoutAssemblesBothProducts) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int d : {8, 16, 32, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "head size " << d);
    const int dp = (d + 15) / 16 * 16, pitch = flash::RowPitch(d);
    const int kRows = 16, kKeys = 64, stride = 3 * d + 8;  // one warp's rows, one key tile
    std::vector<float> q(kRows * stride), k(kKeys * stride), v(kKeys * stride);
    for (auto* t : {&q, &k, &v})
      for (float& e : *t) e = u(rng);
    const std::vector<float> qs = PlaceTile(q, kRows, d, stride),
                             ks = PlaceTile(k, kKeys, d, stride),
                             vs = PlaceTile(v, kKeys, d, stride);
    // S = Q·Kᵀ as the kernel computes it: score tile n (keys 8n..), k-steps kk.
    std::vector<std::array<std::array<float, 4>, 32>> s(kKeys / 8);
    for (int n = 0; n < kKeys / 8; ++n) {
      for (auto& lane : s[n]) lane.fill(0.f);
      for (int kk = 0; kk < dp / 16; ++kk) {
        Lanes a{}, b{};
        for (int l = 0; l < 32; ++l) {
          for (int r = 0; r < 4; ++r) {
            const int off = kk * 16 + flash::AFragOffset(l, r, pitch);
            a.reg[l][r] = {qs[off], qs[off + 1]};
          }
          for (int r = 0; r < 2; ++r) {
            const int off = n * 8 * pitch + kk * 16 + flash::BFromRowsOffset(l, r, pitch);
            b.reg[l][r] = {ks[off], ks[off + 1]};
          }
        }
        EmulateMma(s[n], a, b);
      }
      for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 4; ++e) {
          const int i = flash::CRow(l, e), j = n * 8 + flash::CCol(l, e);
          double want = 0;
          for (int c = 0; c < d; ++c) want += double{q[i * stride + c]} * k[j * stride + c];
          ASSERT_NEAR(s[n][l][e], want, 1e-4) << "S[" << i << "][" << j << "]";
        }
    }
    // O = P·V with P = the scores above, through P's A fragments and V by ldmatrix.trans.
    std::vector<std::array<std::array<float, 4>, 32>> o(dp / 8);
    for (auto& t : o)
      for (auto& lane : t) lane.fill(0.f);
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      Lanes pf{};
      for (int l = 0; l < 32; ++l)
        for (int r = 0; r < 4; ++r) {
          const auto& st = s[2 * kk + flash::PTile(r)][l];
          pf.reg[l][r] = {st[2 * flash::PPair(r)], st[2 * flash::PPair(r) + 1]};
        }
      for (int n = 0; n < dp / 8; n += 2) {
        std::array<int, 32> row_of;
        for (int l = 0; l < 32; ++l)
          row_of[l] = kk * 16 * pitch + flash::VLdmatrixRowOffset(l, pitch) + n * 8;
        const Lanes vf = EmulateLdmatrixX4Trans(vs, row_of);
        Lanes b0{}, b1{};
        for (int l = 0; l < 32; ++l) {
          b0.reg[l] = {vf.reg[l][0], vf.reg[l][1]};
          b1.reg[l] = {vf.reg[l][2], vf.reg[l][3]};
        }
        EmulateMma(o[n], pf, b0);
        EmulateMma(o[n + 1], pf, b1);
      }
    }
    for (int n = 0; n < dp / 8; ++n)
      for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 4; ++e) {
          const int i = flash::CRow(l, e), c = n * 8 + flash::CCol(l, e);
          if (c >= d) continue;  // padding columns: never stored
          double want = 0;
          for (int j = 0; j < kKeys; ++j) {
            double p = 0;
            for (int x = 0; x < d; ++x) p += double{q[i * stride + x]} * k[j * stride + x];
            want += p * v[j * stride + c];
          }
          ASSERT_NEAR(o[n][l][e], want, 1e-3 * (1 + std::fabs(want)))
              << "O[" << i << "][" << c << "]";
        }
  }
}

}  // namespace
}  // namespace kiln::cuda
