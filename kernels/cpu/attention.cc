// MultiHeadAttention driver: mask broadcast strides, work partitioning over (batch, head,
// query-row block), per-worker Kᵀ panels; the inner loops are in isa_impl.inc.
#include "kernels/cpu/attention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {

absl::Status MultiHeadAttention(const CpuContext& ctx, const MultiHeadAttentionArgs& a) {
  const int64_t nb = a.batch, s = a.seq, nh = a.num_heads, d = a.head_size;
  if (nb < 0 || s < 0 || nh <= 0 || d <= 0)
    return absl::InvalidArgumentError(absl::StrCat("MultiHeadAttention got B=", nb, " S=", s,
                                                   " N=", nh, " D=", d));
  if (nb == 0 || s == 0) return absl::OkStatus();
  if (!a.qkv || !a.y) return absl::InvalidArgumentError("MultiHeadAttention: null pointer");
  if (a.mask.additive && a.mask.boolean)
    return absl::InvalidArgumentError("MultiHeadAttention: give an additive or a bool mask, not both");
  const bool has_mask = a.mask.additive || a.mask.boolean;
  // Broadcast strides of the mask against [B, N, S, S] (0 where it broadcasts).
  int64_t mstride[4] = {0, 0, 0, 0};
  if (has_mask) {
    const auto& md = a.mask.dims;
    const int64_t target[4] = {nb, nh, s, s};
    if (md.size() > 4)
      return absl::InvalidArgumentError(absl::StrCat("attention mask has rank ", md.size(), " > 4"));
    int64_t stride = 1;
    for (int i = static_cast<int>(md.size()) - 1, t = 3; i >= 0; --i, --t) {
      if (md[i] != 1 && md[i] != target[t])
        return absl::InvalidArgumentError(absl::StrCat(
            "attention mask [", absl::StrJoin(md, ","), "] does not broadcast to [B, N, S, S] = [",
            nb, ",", nh, ",", s, ",", s, "]"));
      mstride[t] = md[i] == 1 ? 0 : stride;
      stride *= md[i];
    }
  }
  const internal::IsaKernels& k = internal::KernelsFor(ctx);
  const int64_t vw = k.vector_width;
  const int64_t sp = (s + vw - 1) / vw * vw;
  const int64_t h = nh * d, ld = 3 * h;
  // Row blocks: whole heads when there are enough of them, else split the query rows.
  const int64_t threads = ctx.threads();
  int64_t rb = s;
  if (nb * nh < 4 * threads) rb = std::max<int64_t>(8, (s * nb * nh + 4 * threads - 1) / (4 * threads));
  rb = std::min(rb, s);
  const int64_t blocks = (s + rb - 1) / rb;
  const int64_t per_worker = d * sp + sp;
  std::vector<float> scratch(static_cast<size_t>(threads * per_worker));
  ParallelForWorkers(ctx, nb * nh * blocks, 1, [&](int64_t begin, int64_t end, int worker) {
    float* kt = scratch.data() + worker * per_worker;
    float* scores = kt + d * sp;
    int64_t packed = -1;  // (batch * N + head) whose Kᵀ is in kt
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / blocks, blk = task % blocks;
      const int64_t b = bh / nh, n = bh % nh;
      const float* base = a.qkv + b * s * ld;
      if (packed != bh) {
        const float* kp = base + h + n * d;
        for (int64_t j = 0; j < s; ++j)
          for (int64_t c = 0; c < d; ++c) kt[c * sp + j] = kp[j * ld + c];
        for (int64_t c = 0; c < d; ++c)
          for (int64_t j = s; j < sp; ++j) kt[c * sp + j] = 0.0f;
        packed = bh;
      }
      internal::AttentionRows r;
      r.q = base + n * d;
      r.ldq = ld;
      r.kt = kt;
      r.sp = sp;
      r.v = base + 2 * h + n * d;
      r.ldv = ld;
      r.s = s;
      r.d = d;
      r.scale = a.scale;
      if (has_mask) {
        const int64_t off = b * mstride[0] + n * mstride[1];
        if (a.mask.additive) r.mask_add = a.mask.additive + off;
        if (a.mask.boolean) r.mask_bool = a.mask.boolean + off;
        r.mask_si = mstride[2];
        r.mask_sj = mstride[3];
      }
      r.causal = a.causal;
      r.row_begin = blk * rb;
      r.row_end = std::min(s, r.row_begin + rb);
      r.scores = scores;
      r.out = a.y + b * s * h + n * d;
      r.ldo = h;
      k.attention_rows(r);
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
