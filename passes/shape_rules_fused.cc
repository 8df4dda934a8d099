// Shape rules of kiln's fused ops (domain "kiln", docs/fused-ops.md): Linear, BlockQuantLinear,
// SkipLayerNorm, RMSNorm, SkipRMSNorm, Rotary, MultiHeadAttention, Attention, EmbedLayerNorm, Pool,
// CacheWrite and the packed-token ops. The fusion passes set output types themselves, but the -O2
// cleanup runs shape inference again after fusing (and --shape specializes graphs that already hold
// fused ops), so each rule derives its outputs from its inputs, symbolic dims included
// (MultiHeadAttention's hidden size is `3H / 3`). Known dims that contradict the contract (K of X
// vs W, a gamma of the wrong length, a packed qkv not divisible by 3·num_heads) are errors naming
// the node; anything unknown stays unknown. Limits: broadcasts of optional inputs (skip, masks,
// position ids) are checked only where both dims are known.
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

using Rule = absl::StatusOr<std::vector<Type>>;

// Known dims a and b must agree.
absl::Status Agree(const RuleContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_known() && b.is_known() && a.value() != b.value())
    return ctx.Error(absl::StrCat(what, ": ", a.value(), " vs ", b.value()));
  return absl::OkStatus();
}

// Input i, when present with a known rank, must be a vector whose length agrees with h.
absl::Status CheckVector(const RuleContext& ctx, int i, const Dim& h, const char* what) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  const Type& t = ctx.input_type(i);
  if (!t.has_rank()) return absl::OkStatus();
  if (t.rank() != 1) return ctx.Error(absl::StrCat(what, " must be a vector, got ", t.ToString()));
  return Agree(ctx, (*t.shape)[0], h, absl::StrCat(what, " length differs from the hidden size"));
}

// Input i, when present with a known rank, must have rank r.
absl::Status CheckRank(const RuleContext& ctx, int i, int r, const char* what) {
  const Type& t = ctx.input_type(i);
  if (!ctx.has_input(i) || !t.has_rank() || t.rank() == r) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " must have rank ", r, ", got ", t.ToString()));
}

Dim LastDim(const Type& t) { return t.has_rank() && t.rank() > 0 ? t.shape->back() : Dim(); }

// kiln.Linear(X [..., K], W [K, M] | [M, K] with trans_w) -> Y [..., M]
Rule LinearRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& w = ctx.input_type(1);
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 1, 2, "W"));
  if (x.has_rank() && x.rank() == 0) return ctx.Error("X must have rank >= 1");
  const bool tw = ctx.node().attr_int_or("trans_w", 0) != 0;
  Dim k, m;
  if (w.has_rank()) {
    k = (*w.shape)[tw ? 1 : 0];
    m = (*w.shape)[tw ? 0 : 1];
  }
  KILN_RETURN_IF_ERROR(Agree(ctx, LastDim(x), k, "X and W disagree on K"));
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 2, m, "B"));
  if (m.is_unknown() && ctx.has_input(2) && ctx.input_type(2).has_rank())
    m = (*ctx.input_type(2).shape)[0];
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  Shape out(x.shape->begin(), x.shape->end() - 1);
  out.push_back(m);
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// kiln.QuantLinear(X [..., K], W [N, K] s8, w_scale [N], B [N]?, x_mul [K]?) -> Y [..., N]
Rule QuantLinearRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& w = ctx.input_type(1);
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 1, 2, "W"));
  if (x.has_rank() && x.rank() == 0) return ctx.Error("X must have rank >= 1");
  if (x.dtype != DType::kUndefined && x.dtype != DType::kF32 && x.dtype != DType::kF16 &&
      x.dtype != DType::kBF16)
    return ctx.Error(absl::StrCat("X must be f32, f16 or bf16, got ", x.ToString()));
  if (w.dtype != DType::kUndefined && w.dtype != DType::kI8)
    return ctx.Error(absl::StrCat("W must be int8, got ", w.ToString()));
  Dim n;
  if (w.has_rank()) {
    n = (*w.shape)[0];
    KILN_RETURN_IF_ERROR(Agree(ctx, LastDim(x), (*w.shape)[1], "X and W disagree on K"));
    const Dim& k = (*w.shape)[1];
    if (k.is_known() && k.value() > kQuantLinearMaxK)
      return ctx.Error(absl::StrCat("K ", k.value(), " is above ", kQuantLinearMaxK,
                                    " (the int8 GEMM's int32 sums)"));
  }
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 2, n, "w_scale"));
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 3, n, "B"));
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 4, LastDim(x), "x_mul"));
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  Shape out(x.shape->begin(), x.shape->end() - 1);
  out.push_back(n);
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// The block-quantized table both quantized ops read: W (input `w`) u4 or u8 [rows, K],
// scales f32 and zero points (W's dtype or f32; optional) [rows, KB] at inputs w + s and
// w + s + 1, block_size a power of two >= 16; `rows` names W's first dim in errors.
absl::Status CheckBlockQuantTable(const RuleContext& ctx, int w_in, int scales_in,
                                  const char* rows) {
  const Type& w = ctx.input_type(w_in);
  const int zp_in = scales_in + 1;
  KILN_RETURN_IF_ERROR(CheckRank(ctx, w_in, 2, "W"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, scales_in, 2, "scales"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, zp_in, 2, "zero_points"));
  if (w.dtype != DType::kUndefined && w.dtype != DType::kU4 && w.dtype != DType::kU8)
    return ctx.Error(absl::StrCat("W must be uint4 or uint8, got ", w.ToString()));
  const DType st = ctx.input_type(scales_in).dtype;
  if (st != DType::kUndefined && st != DType::kF32)
    return ctx.Error(
        absl::StrCat("scales must be f32, got ", ctx.input_type(scales_in).ToString()));
  const DType zt = ctx.has_input(zp_in) ? ctx.input_type(zp_in).dtype : DType::kUndefined;
  if (w.dtype != DType::kUndefined && zt != DType::kUndefined && zt != w.dtype && zt != DType::kF32)
    return ctx.Error(absl::StrCat("zero_points must have W's dtype ",
                                  std::string(DTypeName(w.dtype)), " or be f32, got ",
                                  ctx.input_type(zp_in).ToString()));
  const int64_t bs = ctx.node().attr_int_or("block_size", 0);
  if (bs < 16 || (bs & (bs - 1)) != 0)
    return ctx.Error(absl::StrCat("block_size must be a power of two >= 16, got ", bs));
  if (!w.has_rank()) return absl::OkStatus();
  const Dim& k = (*w.shape)[1];
  for (int i : {scales_in, zp_in}) {
    if (!ctx.has_input(i) || !ctx.input_type(i).has_rank()) continue;
    const Shape& s = *ctx.input_type(i).shape;
    KILN_RETURN_IF_ERROR(
        Agree(ctx, s[0], (*w.shape)[0], absl::StrCat("W and its scales disagree on ", rows)));
    if (k.is_known())
      KILN_RETURN_IF_ERROR(
          Agree(ctx, s[1], Dim::Known((k.value() + bs - 1) / bs), "scales' blocks differ from K"));
  }
  return absl::OkStatus();
}

// kiln.BlockQuantGather(W [V, K] u4 or u8, indices int, scales [V, KB] f32, zero_points
// [V, KB] W's dtype or f32?){block_size} -> Y [indices..., K] f32, KB = ceil(K / block_size).
Rule BlockQuantGatherRule(const RuleContext& ctx) {
  const Type& w = ctx.input_type(0);
  const Type& ids = ctx.input_type(1);
  if (ids.dtype != DType::kUndefined && ids.dtype != DType::kI32 && ids.dtype != DType::kI64)
    return ctx.Error(absl::StrCat("indices must be int32 or int64, got ", ids.ToString()));
  KILN_RETURN_IF_ERROR(CheckBlockQuantTable(ctx, 0, 2, "rows"));
  const Dim k = w.has_rank() ? (*w.shape)[1] : Dim();
  if (!ids.has_rank()) return Outputs(ctx, MakeType(DType::kF32, std::nullopt));
  Shape out(ids.shape->begin(), ids.shape->end());
  out.push_back(k);
  return Outputs(ctx, MakeType(DType::kF32, std::move(out)));
}

// kiln.BlockQuantLinear(X [..., K] f32|f16|bf16, W [N, K] u4 or u8, scales [N, KB] f32,
// zero_points [N, KB] W's dtype or f32?, B [N] X's dtype?){block_size} -> Y [..., N] X's
// dtype, KB = ceil(K / block_size).
Rule BlockQuantLinearRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& w = ctx.input_type(1);
  if (x.has_rank() && x.rank() == 0) return ctx.Error("X must have rank >= 1");
  if (x.dtype != DType::kUndefined && x.dtype != DType::kF32 && x.dtype != DType::kF16 &&
      x.dtype != DType::kBF16)
    return ctx.Error(absl::StrCat("X must be f32, f16 or bf16, got ", x.ToString()));
  KILN_RETURN_IF_ERROR(CheckBlockQuantTable(ctx, 1, 2, "N"));
  Dim n;
  if (w.has_rank()) {
    n = (*w.shape)[0];
    KILN_RETURN_IF_ERROR(Agree(ctx, LastDim(x), (*w.shape)[1], "X and W disagree on K"));
  }
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 4, n, "B"));
  if (!x.has_rank()) return Outputs(ctx, MakeType(x.dtype, std::nullopt));
  Shape out(x.shape->begin(), x.shape->end() - 1);
  out.push_back(n);
  return Outputs(ctx, MakeType(x.dtype, std::move(out)));
}

// Y (and Sum) have X's type; norm ops check their vectors against X's last dim.
// SkipLayerNorm: (X, skip, gamma, beta?, bias?); SkipRMSNorm: (X, skip, gamma, bias?).
Rule SkipNormRule(const RuleContext& ctx, bool rms) {
  const Type& x = ctx.input_type(0);
  if (x.has_rank() && x.rank() == 0) return ctx.Error("X must have rank >= 1");
  const Type& skip = ctx.input_type(1);
  if (x.has_rank() && skip.has_rank()) {
    if (skip.rank() > x.rank())
      return ctx.Error(
          absl::StrCat("skip ", skip.ToString(), " does not broadcast to X ", x.ToString()));
    for (int i = 0; i < skip.rank(); ++i) {
      const Dim& s = (*skip.shape)[i];
      const Dim& d = (*x.shape)[i + x.rank() - skip.rank()];
      if (s.is_known() && s.value() != 1 && d.is_known() && s.value() != d.value())
        return ctx.Error(
            absl::StrCat("skip ", skip.ToString(), " does not broadcast to X ", x.ToString()));
    }
  }
  const Dim h = LastDim(x);
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 2, h, "gamma"));
  if (!rms) KILN_RETURN_IF_ERROR(CheckVector(ctx, 3, h, "beta"));
  KILN_RETURN_IF_ERROR(CheckVector(ctx, rms ? 3 : 4, h, "bias"));
  return Outputs(ctx, x);
}
Rule SkipLayerNormRule(const RuleContext& ctx) { return SkipNormRule(ctx, false); }
Rule SkipRMSNormRule(const RuleContext& ctx) { return SkipNormRule(ctx, true); }

// kiln.Rotary(X, cos, sin): Y has X's type; cos and sin agree, their last dim R is even
// and at most X's, and their leading dims broadcast to X's.
// kiln.Glu(X [..., 2F]) -> Y [..., F]
Rule GluRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const std::string* act = ctx.node().attr_string("activation");
  if (act && *act != "silu" && *act != "gelu" && *act != "gelu_tanh")
    return ctx.Error(absl::StrCat("activation must be silu, gelu or gelu_tanh, got ", *act));
  if (!x.has_rank()) return Outputs(ctx, x);
  if (x.rank() == 0) return ctx.Error("X must have rank >= 1");
  const Dim d = LastDim(x);
  if (d.is_known() && d.value() % 2 != 0)
    return ctx.Error(absl::StrCat("X's last dim ", d.value(), " is odd; it must be 2F"));
  Type y = x;
  y.shape->back() = d.is_known() ? Dim::Known(d.value() / 2) : Dim();
  return Outputs(ctx, y);
}

Rule RotaryRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& c = ctx.input_type(1);
  const Type& s = ctx.input_type(2);
  if (x.has_rank() && x.rank() == 0) return ctx.Error("X must have rank >= 1");
  for (const Type* t : {&c, &s}) {
    if (!t->has_rank()) continue;
    if (t->rank() == 0) return ctx.Error("cos and sin must have rank >= 1");
    const Dim r = t->shape->back(), d = LastDim(x);
    if (r.is_known() && (r.value() % 2 != 0 || (d.is_known() && r.value() > d.value())))
      return ctx.Error(
          absl::StrCat("the rotary dim ", r.value(), " must be even and at most X's last dim"));
    if (x.has_rank()) {
      if (t->rank() > x.rank())
        return ctx.Error(absl::StrCat(t->ToString(), " does not broadcast to X ", x.ToString()));
      for (int i = 0; i + 1 < t->rank(); ++i) {
        const Dim& a = (*t->shape)[i];
        const Dim& b = (*x.shape)[i + x.rank() - t->rank()];
        if (a.is_known() && a.value() != 1 && b.is_known() && a.value() != b.value())
          return ctx.Error(absl::StrCat(t->ToString(), " does not broadcast to X ", x.ToString()));
      }
    }
  }
  if (c.has_rank() && s.has_rank() && c.rank() == s.rank())
    for (int i = 0; i < c.rank(); ++i)
      KILN_RETURN_IF_ERROR(Agree(ctx, (*c.shape)[i], (*s.shape)[i], "cos and sin differ"));
  return Outputs(ctx, x);
}

Rule RMSNormRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (x.has_rank() && x.rank() == 0) return ctx.Error("X must have rank >= 1");
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 1, LastDim(x), "gamma"));
  return Outputs(ctx, x);
}

// kiln.MultiHeadAttention(qkv [B, S, (N + 2·Nkv)·D], mask?, cos?, sin?) -> Y [B, S, N·D]
Rule MultiHeadAttentionRule(const RuleContext& ctx) {
  const Type& qkv = ctx.input_type(0);
  const int64_t heads = ctx.node().attr_int_or("num_heads", 0);
  const int64_t kv_heads = ctx.node().attr_int_or("num_kv_heads", heads);
  if (ctx.node().has_attr("num_heads") && heads <= 0)
    return ctx.Error(absl::StrCat("num_heads must be positive, got ", heads));
  if (heads > 0 && (kv_heads <= 0 || heads % kv_heads != 0))
    return ctx.Error(absl::StrCat("num_kv_heads must be positive and divide num_heads = ", heads,
                                  ", got ", kv_heads));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 0, 3, "qkv"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 2, 3, "cos"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 3, 3, "sin"));
  if (ctx.has_input(2) != ctx.has_input(3))
    return ctx.Error("cos and sin must be given together or both omitted");
  if (ctx.has_input(1) && ctx.input_type(1).has_rank() && ctx.input_type(1).rank() > 4)
    return ctx.Error(
        absl::StrCat("mask ", ctx.input_type(1).ToString(), " does not broadcast to [B, N, S, S]"));
  if (!qkv.has_rank()) return Outputs(ctx, MakeType(qkv.dtype, std::nullopt));
  const Shape& s = *qkv.shape;
  const Dim& packed = s[2];
  const int64_t parts = heads > 0 ? heads + 2 * kv_heads : 3;
  if (packed.is_known() && heads > 0 && packed.value() % parts != 0)
    return ctx.Error(absl::StrCat("qkv last dim ", packed.value(),
                                  " is not divisible by num_heads + 2 * num_kv_heads = ", parts));
  Dim h;  // N·D
  if (heads <= 0 || kv_heads == heads)
    h = DimDivByConst(packed, 3);
  else if (packed.is_known())
    h = Dim::Known(packed.value() / parts * heads);
  return Outputs(ctx, MakeType(qkv.dtype, Shape{s[0], s[1], h}));
}

// kiln.Attention(q [B, N, S, D], k [B, Nkv, L, D], v [B, Nkv, L, D], mask?) -> Y [B, S, N·D]
// Input i, the block table of a paged cache: int64 [B, W], B agreeing with `batched`'s dim 0.
absl::Status CheckBlockTable(const RuleContext& ctx, int i, const Type& batched) {
  const Type& t = ctx.input_type(i);
  if (t.dtype != DType::kUndefined && t.dtype != DType::kI64)
    return ctx.Error(absl::StrCat("the block table must be int64, got ", t.ToString()));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, i, 2, "the block table"));
  if (t.has_rank() && batched.has_rank() && batched.rank() > 0)
    return Agree(ctx, (*t.shape)[0], (*batched.shape)[0], "the block table's rows and the batch");
  return absl::OkStatus();
}

Rule AttentionRule(const RuleContext& ctx) {
  const Type& q = ctx.input_type(0);
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 0, 4, "q"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 1, 4, "k"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 2, 4, "v"));
  const Type& k = ctx.input_type(1);
  const Type& v = ctx.input_type(2);
  if (k.has_rank() && v.has_rank())
    for (int i = 0; i < 4; ++i)
      KILN_RETURN_IF_ERROR(Agree(ctx, (*k.shape)[i], (*v.shape)[i], "k and v differ"));
  // A block table (input 4) makes k and v paged pools [P, Nkv, bs, D]: dim 0 is the pool's.
  const bool paged = ctx.has_input(4);
  if (paged) KILN_RETURN_IF_ERROR(CheckBlockTable(ctx, 4, q));
  if (q.has_rank() && k.has_rank()) {
    if (!paged)
      KILN_RETURN_IF_ERROR(Agree(ctx, (*q.shape)[0], (*k.shape)[0], "q and k differ in batch"));
    KILN_RETURN_IF_ERROR(Agree(ctx, (*q.shape)[3], (*k.shape)[3], "q and k differ in head size"));
    const Dim &n = (*q.shape)[1], &nkv = (*k.shape)[1];
    if (n.is_known() && nkv.is_known() && (nkv.value() <= 0 || n.value() % nkv.value() != 0))
      return ctx.Error(
          absl::StrCat("k has ", nkv.value(), " heads, which does not divide q's ", n.value()));
  }
  if (ctx.has_input(3) && ctx.input_type(3).has_rank() && ctx.input_type(3).rank() > 4)
    return ctx.Error(
        absl::StrCat("mask ", ctx.input_type(3).ToString(), " does not broadcast to [B, N, S, L]"));
  if (!q.has_rank()) return Outputs(ctx, MakeType(q.dtype, std::nullopt));
  const Shape& s = *q.shape;
  Dim h;  // N·D
  if (s[1].is_known() && s[3].is_known()) h = Dim::Known(s[1].value() * s[3].value());
  return Outputs(ctx, MakeType(q.dtype, Shape{s[0], s[2], h}));
}

// kiln.EmbedLayerNorm(input_ids [B, S], ..., word_emb [V, H], ...) -> Y [B, S, H]
// (and Sum [B, S, H] when it has a second output)
Rule EmbedLayerNormRule(const RuleContext& ctx) {
  const Type& ids = ctx.input_type(0);
  const Type& word = ctx.input_type(3);
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 0, 2, "input_ids"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 1, 2, "segment_ids"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 3, 2, "word_emb"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 4, 2, "pos_emb"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 5, 2, "segment_emb"));
  if (ctx.has_input(1) != ctx.has_input(5))
    return ctx.Error("segment_ids and segment_emb must be given together or both omitted");
  Dim h = LastDim(word);
  for (int i : {4, 5}) {
    if (!ctx.has_input(i)) continue;
    const Dim d = LastDim(ctx.input_type(i));
    KILN_RETURN_IF_ERROR(Agree(ctx, d, h, "embedding tables disagree on the hidden size"));
    if (h.is_unknown()) h = d;
  }
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 6, h, "gamma"));
  KILN_RETURN_IF_ERROR(CheckVector(ctx, 7, h, "beta"));
  Dim b, s;
  if (ids.has_rank()) {
    b = (*ids.shape)[0];
    s = (*ids.shape)[1];
  }
  return Outputs(ctx, MakeType(word.dtype, Shape{b, s, h}));
}

// kiln.Pool(hidden [B, S, H], mask [B, S]?) -> Y [B, H]
Rule PoolRule(const RuleContext& ctx) {
  const Type& hidden = ctx.input_type(0);
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 0, 3, "hidden"));
  KILN_RETURN_IF_ERROR(CheckRank(ctx, 1, 2, "mask"));
  if (!hidden.has_rank()) return Outputs(ctx, MakeType(hidden.dtype, Shape{Dim(), Dim()}));
  const Shape& s = *hidden.shape;
  if (ctx.has_input(1) && ctx.input_type(1).has_rank()) {
    const Shape& m = *ctx.input_type(1).shape;
    KILN_RETURN_IF_ERROR(Agree(ctx, m[0], s[0], "mask and hidden disagree on the batch"));
    KILN_RETURN_IF_ERROR(Agree(ctx, m[1], s[1], "mask and hidden disagree on the sequence"));
  }
  return Outputs(ctx, MakeType(hidden.dtype, Shape{s[0], s[2]}));
}

// kiln.CacheWrite(cache [B,H,C,D], new [B,H,S,D], positions [B,S] int64, block table?)
// -> cache's type (paged: the pool [P,H,bs,D]).
Rule CacheWriteRule(const RuleContext& ctx) {
  const Type& cache = ctx.input_type(0);
  const Type& rows = ctx.input_type(1);
  const Type& pos = ctx.input_type(2);
  if (pos.dtype != DType::kUndefined && pos.dtype != DType::kI64)
    return ctx.Error("positions must be int64");
  if (cache.dtype != DType::kUndefined && rows.dtype != DType::kUndefined &&
      cache.dtype != rows.dtype)
    return ctx.Error("new and the cache differ in dtype");
  if (cache.has_rank() && cache.rank() != 4) return ctx.Error("the cache must be rank 4");
  if (rows.has_rank() && rows.rank() != 4) return ctx.Error("new must be rank 4");
  if (pos.has_rank() && pos.rank() != 2) return ctx.Error("positions must be rank 2");
  const bool paged = ctx.has_input(3);  // a pool [P, H, bs, D] and its block table
  if (paged) KILN_RETURN_IF_ERROR(CheckBlockTable(ctx, 3, rows));
  if (cache.has_rank() && rows.has_rank())
    for (int d : {0, 1, 3}) {
      if (d == 0 && paged) continue;
      const Dim a = (*cache.shape)[d], b = (*rows.shape)[d];
      if (a.is_known() && b.is_known() && a.value() != b.value())
        return ctx.Error(absl::StrCat("new's dim ", d, " (", b.value(),
                                      ") differs from the "
                                      "cache's (",
                                      a.value(), ")"));
    }
  return Outputs(ctx, cache);
}

// The packed-token ops: `lengths` (input `i`) must be an integer vector.
absl::Status CheckLengths(const RuleContext& ctx, int i) {
  const Type& t = ctx.input_type(i);
  if (t.dtype != DType::kUndefined && !IsInteger(t.dtype))
    return ctx.Error(absl::StrCat("lengths must be integer, got ", t.ToString()));
  return CheckRank(ctx, i, 1, "lengths");
}

// Packed tokens are [1, T, ...]: dim 0 must be 1 where it is known.
absl::Status CheckPacked(const RuleContext& ctx, int i, int rank, const char* what) {
  KILN_RETURN_IF_ERROR(CheckRank(ctx, i, rank, what));
  const Type& t = ctx.input_type(i);
  if (t.has_rank() && (*t.shape)[0].is_known() && (*t.shape)[0].value() != 1)
    return ctx.Error(absl::StrCat(what, " must be packed tokens [1, T, ...], got ", t.ToString()));
  return absl::OkStatus();
}

// kiln.PackedAttention(qkv [1, T, (N + 2·Nkv)·D], lengths [Nseq]) -> Y [1, T, N·D]
Rule PackedAttentionRule(const RuleContext& ctx) {
  const Type& qkv = ctx.input_type(0);
  KILN_RETURN_IF_ERROR(CheckPacked(ctx, 0, 3, "qkv"));
  KILN_RETURN_IF_ERROR(CheckLengths(ctx, 1));
  const int64_t heads = ctx.node().attr_int_or("num_heads", 0);
  const int64_t kv_heads = ctx.node().attr_int_or("num_kv_heads", heads);
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return ctx.Error(
        "num_heads and num_kv_heads must be positive, num_kv_heads dividing num_heads");
  if (!qkv.has_rank()) return Outputs(ctx, MakeType(qkv.dtype, Shape{Dim(), Dim(), Dim()}));
  const Shape& s = *qkv.shape;
  Dim h;
  if (s[2].is_known()) {
    const int64_t parts = heads + 2 * kv_heads;
    if (s[2].value() % parts != 0)
      return ctx.Error(absl::StrCat("qkv's last dim ", s[2].value(),
                                    " is not divisible by num_heads + 2 * num_kv_heads = ", parts));
    h = Dim::Known(s[2].value() / parts * heads);
  }
  return Outputs(ctx, MakeType(qkv.dtype, Shape{s[0], s[1], h}));
}

// kiln.PackedPool(hidden [1, T, H], lengths [Nseq]) -> Y [Nseq, H]
Rule PackedPoolRule(const RuleContext& ctx) {
  const Type& hidden = ctx.input_type(0);
  KILN_RETURN_IF_ERROR(CheckPacked(ctx, 0, 3, "hidden"));
  KILN_RETURN_IF_ERROR(CheckLengths(ctx, 1));
  const Type& lengths = ctx.input_type(1);
  const Dim n = lengths.has_rank() ? (*lengths.shape)[0] : Dim();
  return Outputs(ctx, MakeType(hidden.dtype, Shape{n, LastDim(hidden)}));
}

// kiln.PackedPositions(lengths [Nseq], tokens [1, T]) -> int64 [1, T]
Rule PackedPositionsRule(const RuleContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckLengths(ctx, 0));
  KILN_RETURN_IF_ERROR(CheckPacked(ctx, 1, 2, "tokens"));
  const Type& tokens = ctx.input_type(1);
  if (!tokens.has_rank()) return Outputs(ctx, MakeType(DType::kI64, Shape{Dim(), Dim()}));
  return Outputs(ctx, MakeType(DType::kI64, *tokens.shape));
}

// kiln.PackedCumSum(x [1, T], lengths [Nseq]) {exclusive} -> x's type: CumSum along the
// tokens within each sequence (RoBERTa's position ids, counted from its input ids).
Rule PackedCumSumRule(const RuleContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckPacked(ctx, 0, 2, "x"));
  KILN_RETURN_IF_ERROR(CheckLengths(ctx, 1));
  const DType dt = ctx.input_type(0).dtype;
  if (dt != DType::kUndefined && dt != DType::kI32 && dt != DType::kI64 && dt != DType::kF32)
    return ctx.Error(absl::StrCat("x must be i32, i64 or f32, got ", std::string(DTypeName(dt))));
  const int64_t exclusive = ctx.node().attr_int_or("exclusive", 0);
  if (exclusive != 0 && exclusive != 1) return ctx.Error("exclusive must be 0 or 1");
  return Outputs(ctx, ctx.input_type(0));
}

}  // namespace

ShapeRule FindFusedRule(std::string_view op) {
  static const auto* rules = new absl::flat_hash_map<std::string, ShapeRule>{
      {"Linear", &LinearRule},
      {"QuantLinear", &QuantLinearRule},
      {"BlockQuantLinear", &BlockQuantLinearRule},
      {"BlockQuantGather", &BlockQuantGatherRule},
      {"SkipLayerNorm", &SkipLayerNormRule},
      {"RMSNorm", &RMSNormRule},
      {"SkipRMSNorm", &SkipRMSNormRule},
      {"Rotary", &RotaryRule},
      {"Glu", &GluRule},
      {"MultiHeadAttention", &MultiHeadAttentionRule},
      {"Attention", &AttentionRule},
      {"EmbedLayerNorm", &EmbedLayerNormRule},
      {"Pool", &PoolRule},
      {"CacheWrite", &CacheWriteRule},
      {"PackedAttention", &PackedAttentionRule},
      {"PackedPool", &PackedPoolRule},
      {"PackedPositions", &PackedPositionsRule},
      {"PackedCumSum", &PackedCumSumRule},
  };
  auto it = rules->find(std::string(op));
  return it == rules->end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
