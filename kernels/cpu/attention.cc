// MultiHeadAttention driver: argument and mask-broadcast checks, then one of three strategies
// (attention_internal.h), chosen by shape:
// - kRows: the hand-written row kernel (isa_impl.inc, register-blocked over query rows);
//   work items (batch, head, query-row block), per-worker Kᵀ panel. No oneDNN call
//   overhead, so it wins on short sequences.
// - kGemmHeads / kGemmBatch: scores = scale·Q·Kᵀ by BatchedMatMul on strided views straight
//   into the packed qkv, mask + causal + softmax in place on the score block with the ISA
//   row kernels, then Y = P·V by BatchedMatMul writing the merged heads (ldc = N·D).
//   kGemmHeads parallelizes over (batch, head group) with single-threaded oneDNN inside;
//   kGemmBatch lets oneDNN parallelize one call over all heads of a batch item.
// Semantics shared by all paths: a row whose every key is masked (bool false, -inf, or
// causal-excluded) yields zeros.
// Limits: kGemmHeads holds about kScoreBudget score floats per worker (whole heads while
// S² fits, else blocks of query rows); kGemmBatch holds N·S² floats (it defers to
// kGemmHeads past 64 MiB). Causal attention on the GEMM paths still computes the masked
// upper triangle (the row kernel skips whole key vectors past the block's last row).
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/matmul.h"
#include "kiln/support/status.h"

namespace kiln::cpu {
namespace {

using internal::AttentionPath;

// Score floats per worker the GEMM paths aim for: 64 Ki floats = 256 KiB, a quarter of L2.
// In bench/attention_bench.cc it beat 256 Ki floats by 1–3 % at S = 128 (1 thread, loaded
// machine) and 1 Mi floats by 2–7 % at S = 128–256 (2 threads, idle machine).
constexpr int64_t kScoreBudget = int64_t{1} << 16;

// kCache from here down: query rows per head (decode steps, short prefill chunks), keys
// more than that (a cache).
constexpr int64_t kCacheQueries = 4;

// Mask broadcast strides against [B, N, S, L] (0 where the mask broadcasts).
struct MaskLayout {
  bool present = false;
  int64_t stride[4] = {0, 0, 0, 0};
};

// Where the strategies read Q, K and V: element c of head n of token t of batch item b is
// at q + b·bq + n·hq + t·ldq + c (K/V head n' likewise with k, v); query head n reads K/V
// head n / group.
struct Operands {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0;  // row strides
  int64_t hq = 0, hk = 0, hv = 0;     // head strides
  int64_t bq = 0, bk = 0, bv = 0;     // batch strides
  int64_t group = 1;
};

// What every strategy computes, whichever op it came from: S query rows per head over L
// keys per K/V head; causal query row i attends keys j <= i + L - S.
struct Problem {
  int64_t batch = 0, seq = 0, keys = 0, num_heads = 0, head_size = 0;
  float scale = 1.0f;
  bool causal = false;
  AttentionMask mask;
  MaskLayout m;
  Operands o;
  PagedCache paged;    // K/V through a block table (the cache path only)
  float* y = nullptr;  // [B, S, N·D]
  // Keys query row i attends (all L unless causal).
  int64_t KeysFor(int64_t i) const {
    return causal ? std::clamp<int64_t>(i + 1 + keys - seq, 0, keys) : keys;
  }
};

// Mask checks shared by both ops: at most one of the pointers, broadcastable to `target`.
absl::StatusOr<MaskLayout> CheckMask(const AttentionMask& mask, const int64_t (&target)[4],
                                     const std::string& op) {
  MaskLayout m;
  if (mask.additive && mask.boolean)
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": give an additive or a bool mask, not both"));
  m.present = mask.additive || mask.boolean;
  if (!m.present) return m;
  const auto& md = mask.dims;
  if (md.size() > 4)
    return absl::InvalidArgumentError(absl::StrCat("attention mask has rank ", md.size(), " > 4"));
  int64_t stride = 1;
  for (int i = static_cast<int>(md.size()) - 1, t = 3; i >= 0; --i, --t) {
    if (md[i] != 1 && md[i] != target[t])
      return absl::InvalidArgumentError(absl::StrCat(
          "attention mask [", absl::StrJoin(md, ","), "] does not broadcast to [B, N, S, ",
          op == "Attention" ? "L" : "S", "] = [", absl::StrJoin(target, ","), "]"));
    m.stride[t] = md[i] == 1 ? 0 : stride;
    stride *= md[i];
  }
  return m;
}

int64_t KvHeads(const MultiHeadAttentionArgs& a) {
  return a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
}

absl::StatusOr<MaskLayout> CheckArgs(const MultiHeadAttentionArgs& a) {
  const int64_t nb = a.batch, s = a.seq, nh = a.num_heads, d = a.head_size;
  if (nb < 0 || s < 0 || nh <= 0 || d <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("MultiHeadAttention got B=", nb, " S=", s, " N=", nh, " D=", d));
  if (a.num_kv_heads < 0 || nh % KvHeads(a) != 0)
    return absl::InvalidArgumentError(absl::StrCat("MultiHeadAttention: num_kv_heads ",
                                                   a.num_kv_heads, " does not divide N=", nh));
  if ((a.rotary.cos == nullptr) != (a.rotary.sin == nullptr) ||
      (a.rotary.cos && (a.rotary.dim <= 0 || a.rotary.dim % 2 != 0 || a.rotary.dim > d)))
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiHeadAttention: rotary tables need cos and sin and an even dim in (0, D=", d,
        "], got ", a.rotary.dim));
  if (nb == 0 || s == 0) return MaskLayout{};
  if (!a.qkv || !a.y) return absl::InvalidArgumentError("MultiHeadAttention: null pointer");
  return CheckMask(a.mask, {nb, nh, s, s}, "MultiHeadAttention");
}

absl::StatusOr<MaskLayout> CheckArgs(const AttentionArgs& a) {
  const int64_t nb = a.batch, s = a.seq, l = a.kv_seq, nh = a.num_heads, d = a.head_size;
  const int64_t nkv = a.num_kv_heads > 0 ? a.num_kv_heads : nh;
  if (nb < 0 || s < 0 || l < 0 || nh <= 0 || d <= 0 || nh % nkv != 0)
    return absl::InvalidArgumentError(absl::StrCat("Attention got B=", nb, " S=", s, " L=", l,
                                                   " N=", nh, " Nkv=", nkv, " D=", d,
                                                   " (Nkv must divide N)"));
  if (a.causal && l < s)
    return absl::InvalidArgumentError(absl::StrCat(
        "Attention: causal attention needs at least as many keys as queries, got S=", s, " L=", l));
  if (nb == 0 || s == 0) return MaskLayout{};
  if (!a.q || !a.k || !a.v || !a.y) return absl::InvalidArgumentError("Attention: null pointer");
  return CheckMask(a.mask, {nb, nh, s, l}, "Attention");
}

absl::Status RunRows(const CpuContext& ctx, const Problem& p) {
  const int64_t nb = p.batch, s = p.seq, l = p.keys, nh = p.num_heads, d = p.head_size;
  const Operands& o = p.o;
  const MaskLayout& m = p.m;
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  const int64_t vw = k.vector_width;
  const int64_t sp = (l + vw - 1) / vw * vw;
  const int64_t h = nh * d;
  // Row blocks: whole heads when there are enough of them, else split the query rows.
  const int64_t threads = ctx.threads();
  int64_t rb = s;
  if (nb * nh < 4 * threads)
    rb = std::max<int64_t>(8, (s * nb * nh + 4 * threads - 1) / (4 * threads));
  rb = std::min(rb, s);
  const int64_t blocks = (s + rb - 1) / rb;
  const int64_t per_worker = d * sp + internal::kAttentionRowBlock * sp;
  // ParallelForWorkers numbers workers below min(threads, work items): size for those only.
  const int64_t workers = std::min<int64_t>(threads, nb * nh * blocks);
  std::vector<float> scratch(static_cast<size_t>(std::max<int64_t>(workers, 1) * per_worker));
  ParallelForWorkers(ctx, nb * nh * blocks, 1, [&](int64_t begin, int64_t end, int worker) {
    float* kt = scratch.data() + worker * per_worker;
    float* scores = kt + d * sp;
    int64_t packed = -1;  // (batch * Nkv + K/V head) whose Kᵀ is in kt
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / blocks, blk = task % blocks;
      const int64_t b = bh / nh, n = bh % nh, kvh = n / o.group;
      const int64_t key = b * (nh / o.group) + kvh;
      if (packed != key) {
        const float* kp = o.k + b * o.bk + kvh * o.hk;
        for (int64_t j = 0; j < l; ++j)
          for (int64_t c = 0; c < d; ++c) kt[c * sp + j] = kp[j * o.ldk + c];
        for (int64_t c = 0; c < d; ++c)
          for (int64_t j = l; j < sp; ++j) kt[c * sp + j] = 0.0f;
        packed = key;
      }
      internal::AttentionRows r;
      r.q = o.q + b * o.bq + n * o.hq;
      r.ldq = o.ldq;
      r.kt = kt;
      r.sp = sp;
      r.v = o.v + b * o.bv + kvh * o.hv;
      r.ldv = o.ldv;
      r.s = l;
      r.d = d;
      r.scale = p.scale;
      if (m.present) {
        const int64_t off = b * m.stride[0] + n * m.stride[1];
        if (p.mask.additive) r.mask_add = p.mask.additive + off;
        if (p.mask.boolean) r.mask_bool = p.mask.boolean + off;
        r.mask_si = m.stride[2];
        r.mask_sj = m.stride[3];
      }
      r.causal = p.causal;
      r.causal_offset = l - s;
      r.row_begin = blk * rb;
      r.row_end = std::min(s, r.row_begin + rb);
      r.scores = scores;
      r.out = p.y + b * s * h + n * d;
      r.ldo = h;
      k.attention_rows(r);
    }
  });
  return absl::OkStatus();
}

// Score rows [row_begin, row_end) of head n of batch item b, row i at
// scores + (i - row_begin)·L, already scaled: add or apply the mask, exclude causal keys, and
// exponentiate in place (ExpShiftRow) without normalizing; inv[i - row_begin] = 1 / row sum
// (0 for a fully masked row) is applied to the P·V output instead, D floats per row rather
// than L. Excluded keys end as exact zeros so that P·V can run over all L keys.
void MaskExpRows(const internal::IsaKernels& k, const Problem& p, int64_t b, int64_t n,
                 int64_t row_begin, int64_t row_end, float* scores, float* inv) {
  const int64_t l = p.keys;
  const MaskLayout& m = p.m;
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t moff = b * m.stride[0] + n * m.stride[1];
  const int64_t msj = m.stride[3];
  for (int64_t i = row_begin; i < row_end; ++i) {
    float* row = scores + (i - row_begin) * l;
    const int64_t keys = p.KeysFor(i);
    const float* add = nullptr;
    if (p.mask.additive) {
      const float* mr = p.mask.additive + moff + i * m.stride[2];
      if (msj == 1) {
        add = mr;
      } else {
        for (int64_t j = 0; j < keys; ++j) row[j] += mr[0];
      }
    } else if (p.mask.boolean) {
      const uint8_t* mr = p.mask.boolean + moff + i * m.stride[2];
      for (int64_t j = 0; j < keys; ++j)
        if (mr[j * msj] == 0) row[j] = ninf;
    }
    const float sum = k.exp_shift_row(row, add, keys);
    inv[i - row_begin] = sum > 0.0f ? 1.0f / sum : 0.0f;
    std::fill(row + keys, row + l, 0.0f);
  }
}

// out row i (D floats at out + i·ldo) *= inv[i] for i < rows.
void ScaleRows(const internal::IsaKernels& k, const float* inv, int64_t rows, int64_t d, float* out,
               int64_t ldo) {
  for (int64_t i = 0; i < rows; ++i) k.scale(inv[i], out + i * ldo, d);
}

// scale·Q·Kᵀ for `heads` consecutive heads and `rows` query rows into scores
// [heads, rows, L]; Q and K are strided views. With grouped K/V heads (o.group > 1) call it
// per head: `heads` = 1.
BatchedMatMulDesc ScoresDesc(const Problem& p, int64_t heads, int64_t rows) {
  BatchedMatMulDesc qk;
  qk.batch = heads;
  qk.m = rows;
  qk.n = p.keys;
  qk.k = p.head_size;
  qk.trans_b = true;
  qk.alpha = p.scale;
  qk.lda = p.o.ldq;
  qk.ldb = p.o.ldk;
  qk.sa = p.o.hq;
  qk.sb = p.o.hk;
  qk.ldc = p.keys;
  qk.sc = rows * p.keys;
  return qk;
}

// P·V for the same heads and rows, written into their columns of y (merged heads,
// ldc = N·D).
BatchedMatMulDesc OutputDesc(const Problem& p, int64_t heads, int64_t rows) {
  const int64_t l = p.keys, d = p.head_size;
  BatchedMatMulDesc pv;
  pv.batch = heads;
  pv.m = rows;
  pv.n = d;
  pv.k = l;
  pv.lda = l;
  pv.sa = rows * l;
  pv.ldb = p.o.ldv;
  pv.sb = p.o.hv;
  pv.ldc = p.num_heads * d;
  pv.sc = d;
  return pv;
}

// Work items of kGemmHeads: (batch item, group of `heads` heads, block of `rows` query rows).
struct ItemShape {
  int64_t heads = 1, rows = 1;
};

// Whole heads (rows = S) while one head's S·L scores fit kScoreBudget; then the largest
// head count whose block fits, among those with the shortest makespan counted in heads per
// thread under the static split: B=1, N=12, S=L=128 (4 heads fit) on 2 threads takes 3
// heads (4 items), not 4 (3 items, one thread doing two). Past the budget: one head,
// budget / L rows.
ItemShape ChooseItemShape(const CpuContext& ctx, const Problem& p) {
  const int64_t nh = p.num_heads, s = p.seq, l = std::max<int64_t>(p.keys, 1);
  const int64_t threads = ctx.threads();
  ItemShape shape;
  if (s > kScoreBudget / l) {
    shape.rows = std::max<int64_t>(1, kScoreBudget / l);
    return shape;
  }
  shape.rows = s;
  const int64_t cap = std::max<int64_t>(1, std::min(nh, kScoreBudget / (s * l)));
  int64_t best_span = -1;
  for (int64_t hpi = 1; hpi <= cap; ++hpi) {
    const int64_t items = p.batch * ((nh + hpi - 1) / hpi);
    const int64_t span = (items + threads - 1) / threads * hpi;
    if (best_span < 0 || span <= best_span) shape.heads = hpi, best_span = span;
  }
  return shape;
}

absl::Status RunGemmHeads(const CpuContext& ctx, const Problem& p) {
  const int64_t nb = p.batch, s = p.seq, l = p.keys, nh = p.num_heads, d = p.head_size;
  const Operands& o = p.o;
  const int64_t h = nh * d;
  const ItemShape shape = ChooseItemShape(ctx, p);
  const int64_t groups = (nh + shape.heads - 1) / shape.heads;
  const int64_t blocks = (s + shape.rows - 1) / shape.rows;
  const int64_t items = nb * groups * blocks;
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  const int64_t threads = std::min<int64_t>(ctx.threads(), items);
  const int64_t block = shape.heads * shape.rows;  // score rows per item
  const int64_t per_worker = block * l + block;    // scores, then 1/row sums
  std::vector<float> scratch(static_cast<size_t>(threads * per_worker));
  std::vector<absl::Status> status(static_cast<size_t>(threads));
  CpuContext inner = ctx;
  inner.num_threads = 1;
  ParallelForWorkers(ctx, items, 1, [&](int64_t begin, int64_t end, int worker) {
    float* scores = scratch.data() + worker * per_worker;
    float* inv = scores + block * l;
    absl::Status& st = status[worker];
    for (int64_t item = begin; item < end && st.ok(); ++item) {
      const int64_t b = item / (groups * blocks), rest = item % (groups * blocks);
      const int64_t n0 = rest / blocks * shape.heads, i0 = rest % blocks * shape.rows;
      const int64_t heads = std::min(shape.heads, nh - n0), rows = std::min(shape.rows, s - i0);
      float* out = p.y + (b * s + i0) * h + n0 * d;
      // Heads sharing K/V heads one at a time (a batch stride cannot map n to n / group).
      const int64_t per_call = o.group > 1 ? 1 : heads;
      for (int64_t n = 0; n < heads && st.ok(); n += per_call) {
        const int64_t kvh = (n0 + n) / o.group;
        st = BatchedMatMul(inner, ScoresDesc(p, per_call, rows),
                           o.q + b * o.bq + i0 * o.ldq + (n0 + n) * o.hq,
                           o.k + b * o.bk + kvh * o.hk, scores + n * rows * l);
      }
      if (!st.ok()) break;
      for (int64_t n = 0; n < heads; ++n)
        MaskExpRows(k, p, b, n0 + n, i0, i0 + rows, scores + n * rows * l, inv + n * rows);
      for (int64_t n = 0; n < heads && st.ok(); n += per_call) {
        const int64_t kvh = (n0 + n) / o.group;
        st = BatchedMatMul(inner, OutputDesc(p, per_call, rows), scores + n * rows * l,
                           o.v + b * o.bv + kvh * o.hv, out + n * d);
      }
      if (!st.ok()) break;
      for (int64_t n = 0; n < heads; ++n) ScaleRows(k, inv + n * rows, rows, d, out + n * d, h);
    }
  });
  for (const absl::Status& st : status) KILN_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::Status RunGemmBatch(const CpuContext& ctx, const Problem& p) {
  const int64_t nb = p.batch, s = p.seq, l = p.keys, nh = p.num_heads, d = p.head_size;
  const Operands& o = p.o;
  const int64_t h = nh * d;
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  // One [N, S, L] score block per call: past 16 Mi floats (64 MiB), take the bounded path;
  // grouped K/V heads need one call per head, which is that path.
  if (s > (int64_t{1} << 24) / (nh * std::max<int64_t>(l, 1)) || o.group > 1)
    return RunGemmHeads(ctx, p);
  std::vector<float> scores(static_cast<size_t>(nh * s * l)), inv(static_cast<size_t>(nh * s));
  const BatchedMatMulDesc qk = ScoresDesc(p, nh, s), pv = OutputDesc(p, nh, s);
  // Rows per softmax chunk: at least ~16K score floats, so short rows are not one task each.
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(l, 1));
  for (int64_t b = 0; b < nb; ++b) {
    KILN_RETURN_IF_ERROR(BatchedMatMul(ctx, qk, o.q + b * o.bq, o.k + b * o.bk, scores.data()));
    ParallelFor(ctx, nh * s, min_rows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end;) {
        const int64_t n = r / s, i0 = r % s, i1 = std::min(s, i0 + (end - r));
        MaskExpRows(k, p, b, n, i0, i1, scores.data() + r * l, inv.data() + r);
        r += i1 - i0;
      }
    });
    float* out = p.y + b * s * h;
    KILN_RETURN_IF_ERROR(BatchedMatMul(ctx, pv, scores.data(), o.v + b * o.bv, out));
    ParallelFor(ctx, nh * s, min_rows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) k.scale(inv[r], out + r % s * h + r / s * d, d);
    });
  }
  return absl::OkStatus();
}

// Q and K heads of qkv rotated (rotate-half over the first R elements of each head, the
// rest copied): [B, S, (N + Nkv)·D], in parallel over tokens.
std::vector<float> RotateQk(const CpuContext& ctx, const MultiHeadAttentionArgs& a) {
  const int64_t nb = a.batch, s = a.seq, d = a.head_size, heads = a.num_heads + KvHeads(a);
  const int64_t ld = (a.num_heads + 2 * KvHeads(a)) * d, out_ld = heads * d;
  const int64_t r = a.rotary.dim, half = r / 2;
  std::vector<float> out(static_cast<size_t>(nb * s * out_ld));
  ParallelFor(ctx, nb * s, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / s, t = row % s;
      const int64_t toff = ((a.rotary.per_batch ? b : 0) * s + t) * r;
      const float* c = a.rotary.cos + toff;
      const float* sn = a.rotary.sin + toff;
      for (int64_t n = 0; n < heads; ++n) {
        const float* x = a.qkv + row * ld + n * d;
        float* y = out.data() + row * out_ld + n * d;
        if (a.rotary.interleaved) {
          for (int64_t j = 0; j < r; j += 2) {
            y[j] = x[j] * c[j] - x[j + 1] * sn[j];
            y[j + 1] = x[j + 1] * c[j + 1] + x[j] * sn[j + 1];
          }
        } else {
          for (int64_t j = 0; j < half; ++j) {
            y[j] = x[j] * c[j] - x[j + half] * sn[j];
            y[j + half] = x[j + half] * c[j + half] + x[j] * sn[j + half];
          }
        }
        std::copy(x + r, x + d, y + r);
      }
    }
  });
  return out;
}

// The fields both ops' arguments share.
template <typename Args>
void SetCommon(const Args& a, Problem& p) {
  p.batch = a.batch;
  p.seq = a.seq;
  p.num_heads = a.num_heads;
  p.head_size = a.head_size;
  p.scale = a.scale;
  p.causal = a.causal;
  p.mask = a.mask;
  p.y = a.y;
}

// kCache: work item (b, K/V head, chunk of keys) takes the S·G query rows of the G heads
// sharing that K/V head (row r = g·S + i: head kvh·G + g, query i) and leaves, per row, the
// chunk's max m, sum l = Σ exp(s − m) and unnormalized P·V; the merge rescales the chunks
// to their common max: y = Σ_c acc_c·e^{m_c − M} / Σ_c l_c·e^{m_c − M} (zeros when no
// key is visible anywhere). Keys past the last one a batch item's mask lets any row see
// are skipped (below).
absl::Status RunCache(const CpuContext& ctx, const Problem& p) {
  const int64_t nb = p.batch, s = p.seq, l = p.keys, nh = p.num_heads, d = p.head_size;
  const Operands& o = p.o;
  const MaskLayout& m = p.m;
  const int64_t group = o.group, nkv = nh / group, rows = s * group, h = nh * d;
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  const float ninf = -std::numeric_limits<float>::infinity();
  // Per batch item, one past the last key any of its query rows can see: the keys after it
  // (a static KV cache's free slots, which the mask excludes) would weigh exactly zero, so
  // they are neither read nor scored. "Excluded" = bool false, or an additive value of at
  // most -1e30 (HF's float32-min fill, -inf): with any visible key in the row, exp of such
  // a score is 0 in fp32. An item whose rows see no key keeps every key (a row of only
  // float32-min scores is a softmax over all of them, not zeros).
  std::vector<int64_t> visible(static_cast<size_t>(nb), l);
  if (m.present) {
    auto excluded = [&](int64_t mi) {
      return p.mask.additive ? p.mask.additive[mi] <= -1e30f : p.mask.boolean[mi] == 0;
    };
    for (int64_t b = 0; b < nb; ++b) {
      int64_t last = 0;
      for (int64_t head = 0; head < nh && last < l; ++head)
        for (int64_t i = 0; i < s && last < l; ++i) {
          const int64_t off = b * m.stride[0] + head * m.stride[1] + i * m.stride[2];
          for (int64_t j = std::min(l, p.KeysFor(i)); j > last; --j)
            if (!excluded(off + (j - 1) * m.stride[3])) {
              last = j;
              break;
            }
        }
      if (last > 0) visible[b] = last;
    }
  }
  const PagedCache& pg = p.paged;
  if (pg.paged())
    for (int64_t b = 0; b < nb; ++b)
      KILN_RETURN_IF_ERROR(CheckBlockIds(pg, b, (visible[b] + pg.block_size - 1) / pg.block_size));
  const int64_t lv = *std::max_element(visible.begin(), visible.end());
  // Chunks of at least 256 keys, enough of them for two items per thread, and at most 2048
  // (the scores of a chunk stay in L2 and the scratch bounded).
  constexpr int64_t kMinChunk = 256, kMaxChunk = 2048;
  const int64_t threads = ctx.threads();
  const int64_t want = std::max<int64_t>(1, (2 * threads + nb * nkv - 1) / (nb * nkv));
  const int64_t chunks =
      std::max({int64_t{1}, std::min(want, lv / kMinChunk), (lv + kMaxChunk - 1) / kMaxChunk});
  const int64_t chunk = (lv + chunks - 1) / chunks;
  const int64_t items = nb * nkv * chunks;
  // Per item and row: max, sum, then D floats of P·V.
  const int64_t per_row = 2 + d;
  std::vector<float> partial(static_cast<size_t>(items * rows * per_row));
  const int64_t workers = std::min<int64_t>(threads, items);
  std::vector<float> scratch(static_cast<size_t>(workers * rows * chunk));
  ParallelForWorkers(ctx, items, 1, [&](int64_t begin, int64_t end, int worker) {
    float* scores = scratch.data() + worker * rows * chunk;
    std::vector<const float*> q(static_cast<size_t>(rows));
    std::vector<float*> acc(static_cast<size_t>(rows));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / (nkv * chunks), kvh = item / chunks % nkv, c = item % chunks;
      const int64_t j0 = c * chunk, n = std::max<int64_t>(0, std::min(chunk, visible[b] - j0));
      float* part = partial.data() + item * rows * per_row;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t head = kvh * group + r / s, i = r % s;
        q[r] = o.q + b * o.bq + head * o.hq + i * o.ldq;
        acc[r] = part + r * per_row + 2;
        std::fill(acc[r], acc[r] + d, 0.0f);
      }
      // Keys [j0 + j, j0 + j + seg) sit in one run of rows: the whole chunk when dense, one
      // block's part of it when paged.
      auto segment = [&](int64_t j, const float* base, int64_t bs, int64_t hs, int64_t ld,
                         int64_t* seg) {
        const int64_t key = j0 + j;
        if (!pg.paged()) {
          *seg = n - j;
          return base + b * bs + kvh * hs + key * ld;
        }
        *seg = std::min(n - j, pg.block_size - key % pg.block_size);
        return base + (pg.Block(b, key) * (nh / group) + kvh) * hs + key % pg.block_size * ld;
      };
      for (int64_t j = 0, seg = 0; j < n; j += seg) {
        const float* kp = segment(j, o.k, o.bk, o.hk, o.ldk, &seg);
        k.dot_rows(q.data(), static_cast<int>(rows), kp, o.ldk, d, seg, p.scale, scores + j, chunk);
      }
      int64_t used = 0;  // keys [0, used) of the chunk any row sees
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t head = kvh * group + r / s, i = r % s;
        const int64_t seen = std::clamp<int64_t>(p.KeysFor(i) - j0, 0, n);
        float* row = scores + r * chunk;
        if (m.present) {
          const int64_t off = b * m.stride[0] + head * m.stride[1] + i * m.stride[2];
          for (int64_t j = 0; j < seen; ++j) {
            const int64_t mi = off + (j0 + j) * m.stride[3];
            if (p.mask.additive)
              row[j] += p.mask.additive[mi];
            else if (p.mask.boolean[mi] == 0)
              row[j] = ninf;
          }
        }
        float mx = ninf;
        for (int64_t j = 0; j < seen; ++j) mx = std::max(mx, row[j]);
        part[r * per_row] = mx;
        part[r * per_row + 1] = seen > 0 ? k.exp_shift_row(row, nullptr, seen) : 0.0f;
        std::fill(row + seen, row + n, 0.0f);  // excluded keys weigh nothing
        used = std::max(used, seen);
      }
      for (int64_t j = 0, seg = 0; j < used; j += seg) {
        const float* vp = segment(j, o.v, o.bv, o.hv, o.ldv, &seg);
        seg = std::min(seg, used - j);
        k.weighted_rows(scores + j, chunk, static_cast<int>(rows), vp, o.ldv, d, seg, acc.data());
      }
    }
  });
  ParallelFor(ctx, nb * nh * s, 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (nh * s), head = t / s % nh, i = t % s;
      const int64_t kvh = head / group, r = (head % group) * s + i;
      float* y = p.y + (b * s + i) * h + head * d;
      float big = ninf;
      for (int64_t c = 0; c < chunks; ++c) {
        const float* part = partial.data() + ((b * nkv + kvh) * chunks + c) * rows * per_row;
        if (part[r * per_row + 1] > 0.0f) big = std::max(big, part[r * per_row]);
      }
      std::fill(y, y + d, 0.0f);
      if (big == ninf) continue;  // no visible key: zeros
      float sum = 0.0f;
      for (int64_t c = 0; c < chunks; ++c) {
        const float* part =
            partial.data() + ((b * nkv + kvh) * chunks + c) * rows * per_row + r * per_row;
        if (!(part[1] > 0.0f)) continue;
        const float w = std::exp(part[0] - big);
        sum += w * part[1];
        k.axpy(w, part + 2, d, y);
      }
      k.scale(1.0f / sum, y, d);
    }
  });
  return absl::OkStatus();
}

absl::Status Run(const CpuContext& ctx, const Problem& p, AttentionPath path) {
  if (p.paged.paged()) {  // only the cache path reads through a block table
    if (path != AttentionPath::kAuto && path != AttentionPath::kCache)
      return absl::InvalidArgumentError("Attention: a paged cache is read by the cache path only");
    path = AttentionPath::kCache;
  }
  if (path == AttentionPath::kAuto) path = internal::ChooseAttentionPath(p.seq, p.keys);
  switch (path) {
    case AttentionPath::kAuto:
    case AttentionPath::kRows:
      return RunRows(ctx, p);
    case AttentionPath::kGemmHeads:
      return RunGemmHeads(ctx, p);
    case AttentionPath::kGemmBatch:
      return RunGemmBatch(ctx, p);
    case AttentionPath::kCache:
      return RunCache(ctx, p);
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

// Measured with bench/attention_bench.cc (docs/benchmarks.md; N = 12, D = 32 and 64): the
// register-blocked row kernel is faster up to S = 64 (1.4–2.5× at S ≤ 16, 0–16 % at
// S = 48–64: no oneDNN per-call cost), even at S = 96 (±6 % either way across runs), up to
// 13 % slower at S = 128 and up to 40 % slower at S = 256, so kGemmHeads from S = 65 on.
// That was square attention; the key count L decides, as the row kernel's work per row
// grows with it (for kiln.Attention over a cache, S is often 1). kGemmBatch is never
// picked: no faster than kGemmHeads on one thread, and with two it opens three parallel
// regions per batch item where kGemmHeads opens one per call.
AttentionPath ChooseAttentionPath(int64_t queries, int64_t keys) {
  if (queries <= kCacheQueries && keys > queries) return AttentionPath::kCache;
  return keys <= 64 ? AttentionPath::kRows : AttentionPath::kGemmHeads;
}

absl::Status MultiHeadAttentionWithPath(const CpuContext& ctx, const MultiHeadAttentionArgs& a,
                                        AttentionPath path) {
  Problem p;
  KILN_ASSIGN_OR_RETURN(p.m, CheckArgs(a));
  if (a.batch == 0 || a.seq == 0) return absl::OkStatus();
  const int64_t s = a.seq, d = a.head_size, nh = a.num_heads, nkv = KvHeads(a);
  const int64_t ld = (nh + 2 * nkv) * d;
  SetCommon(a, p);
  p.keys = s;
  Operands& o = p.o;
  o.q = a.qkv;
  o.k = a.qkv + nh * d;
  o.v = a.qkv + (nh + nkv) * d;
  o.ldq = o.ldk = o.ldv = ld;
  o.hq = o.hk = o.hv = d;
  o.bq = o.bk = o.bv = s * ld;
  o.group = nh / nkv;
  std::vector<float> rotated;
  if (a.rotary.cos) {
    rotated = RotateQk(ctx, a);
    o.q = rotated.data();
    o.k = rotated.data() + nh * d;
    o.ldq = o.ldk = (nh + nkv) * d;
    o.bq = o.bk = s * o.ldq;
  }
  return Run(ctx, p, path);
}

absl::Status AttentionWithPath(const CpuContext& ctx, const AttentionArgs& a, AttentionPath path) {
  Problem p;
  KILN_ASSIGN_OR_RETURN(p.m, CheckArgs(a));
  if (a.batch == 0 || a.seq == 0) return absl::OkStatus();
  const int64_t s = a.seq, l = a.kv_seq, d = a.head_size, nh = a.num_heads;
  const int64_t nkv = a.num_kv_heads > 0 ? a.num_kv_heads : nh;
  if (l == 0) {  // no keys: every row is fully masked
    std::fill(a.y, a.y + a.batch * s * nh * d, 0.0f);
    return absl::OkStatus();
  }
  SetCommon(a, p);
  p.keys = l;
  Operands& o = p.o;
  o.q = a.q;
  o.k = a.k;
  o.v = a.v;
  o.ldq = o.ldk = o.ldv = d;
  o.hq = s * d;
  o.hk = o.hv = l * d;
  o.bq = nh * s * d;
  o.bk = o.bv = nkv * l * d;
  o.group = nh / nkv;
  if (a.paged.paged()) {  // pools [blocks, Nkv, block_size, D]: a head is block_size rows
    const PagedCache& pg = a.paged;
    if (pg.block_size <= 0 || pg.blocks <= 0 || pg.width * pg.block_size != l)
      return absl::InvalidArgumentError(
          absl::StrCat("Attention: a paged cache of ", pg.blocks, " blocks of ", pg.block_size,
                       " slots, ", pg.width, " per sequence, does not hold L = ", l, " keys"));
    p.paged = pg;
    o.hk = o.hv = pg.block_size * d;
    o.bk = o.bv = 0;  // unused: a block's place comes from the table
  }
  return Run(ctx, p, path);
}

}  // namespace internal

absl::Status MultiHeadAttention(const CpuContext& ctx, const MultiHeadAttentionArgs& a) {
  return internal::MultiHeadAttentionWithPath(ctx, a, internal::AttentionPath::kAuto);
}

absl::Status Attention(const CpuContext& ctx, const AttentionArgs& a) {
  return internal::AttentionWithPath(ctx, a, internal::AttentionPath::kAuto);
}

}  // namespace kiln::cpu
