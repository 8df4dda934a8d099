// The device-neutral kernel rules (kernel_rules.h).
#include "runtime/kernel_rules.h"

#include <array>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"

namespace kiln::runtime {

absl::StatusOr<CopyRule> CheckCopy(const StepChecker& c) {
  const PlanBuffer *x = c.In(0), *y = c.Out(0);
  const int64_t bx = StepChecker::Elems(*x) * DTypeSize(x->dtype);
  const int64_t by = StepChecker::Elems(*y) * DTypeSize(y->dtype);
  if (bx != by) return c.Err("copies %d bytes into %d", bx, by);
  return CopyRule{bx};
}

absl::StatusOr<ActivationKind> CheckActivation(const StepChecker& c) {
  const std::string& act = c.String("activation");
  if (act == "none") return ActivationKind::kNone;
  if (act == "gelu") return ActivationKind::kGeluErf;
  if (act == "gelu_tanh") return ActivationKind::kGeluTanh;
  if (act == "relu") return ActivationKind::kRelu;
  if (act == "tanh") return ActivationKind::kTanh;
  return c.Err("unknown activation '%s'", act);
}

absl::StatusOr<LinearRule> CheckLinear(const StepChecker& c) {
  LinearRule r;
  r.m = c.Int("m");
  r.k = c.Int("k");
  r.n = c.Int("n");
  r.trans_w = c.Flag("trans_w");
  KILN_ASSIGN_OR_RETURN(r.activation, CheckActivation(c));
  const PlanBuffer *x = c.In(0), *w = c.In(1), *bias = c.In(2), *res = c.In(3), *y = c.Out(0);
  r.weight_dtype = w->dtype;
  KILN_ASSIGN_OR_RETURN(const int64_t mk, c.Product({r.m, r.k}, "m*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t mn, c.Product({r.m, r.n}, "m*n"));
  KILN_ASSIGN_OR_RETURN(const int64_t kn, c.Product({r.k, r.n}, "k*n"));
  KILN_RETURN_IF_ERROR(c.N(x, mk, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, r.k, "x", "k"));
  KILN_RETURN_IF_ERROR(c.N(w, kn, "w"));
  KILN_RETURN_IF_ERROR(c.N(bias, r.n, "bias"));
  KILN_RETURN_IF_ERROR(c.N(y, mn, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(y, r.n, "y", "n"));
  if (res != nullptr) {
    KILN_RETURN_IF_ERROR(c.N(res, mn, "residual"));
    KILN_RETURN_IF_ERROR(c.LastDim(res, r.n, "residual", "n"));
    if (r.activation != ActivationKind::kNone)
      return c.Err("a residual input needs activation 'none' (it is added before the epilogue)");
  }
  r.has_bias = bias != nullptr;
  r.has_residual = res != nullptr;
  return r;
}

absl::StatusOr<ConvRule> CheckConv(const StepChecker& c) {
  ConvRule r;
  for (auto [field, name] :
       std::initializer_list<std::pair<int64_t*, const char*>>{{&r.batch, "batch"},
                                                               {&r.in_ch, "in_ch"},
                                                               {&r.in_h, "in_h"},
                                                               {&r.in_w, "in_w"},
                                                               {&r.out_ch, "out_ch"},
                                                               {&r.out_h, "out_h"},
                                                               {&r.out_w, "out_w"},
                                                               {&r.k_h, "k_h"},
                                                               {&r.k_w, "k_w"},
                                                               {&r.group, "group"},
                                                               {&r.stride_h, "stride_h"},
                                                               {&r.stride_w, "stride_w"},
                                                               {&r.dil_h, "dil_h"},
                                                               {&r.dil_w, "dil_w"},
                                                               {&r.pad_top, "pad_top"},
                                                               {&r.pad_left, "pad_left"},
                                                               {&r.pad_bottom, "pad_bottom"},
                                                               {&r.pad_right, "pad_right"}})
    *field = c.Int(name);
  if (r.in_ch % r.group != 0 || r.out_ch % r.group != 0)
    return c.Err("group %d does not divide in_ch %d and out_ch %d", r.group, r.in_ch, r.out_ch);
  const int64_t span_h = (r.k_h - 1) * r.dil_h + 1, span_w = (r.k_w - 1) * r.dil_w + 1;
  const int64_t room_h = r.in_h + r.pad_top + r.pad_bottom - span_h;
  const int64_t room_w = r.in_w + r.pad_left + r.pad_right - span_w;
  if (room_h < 0 || room_w < 0 || room_h / r.stride_h + 1 != r.out_h ||
      room_w / r.stride_w + 1 != r.out_w)
    return c.Err(
        "out_h x out_w %d x %d is not what the input, kernel, strides, dilations and "
        "padding give",
        r.out_h, r.out_w);
  const PlanBuffer *x = c.In(0), *w = c.In(1), *bias = c.In(2), *y = c.Out(0);
  KILN_ASSIGN_OR_RETURN(const int64_t nx, c.Product({r.batch, r.in_ch, r.in_h, r.in_w}, "x"));
  KILN_ASSIGN_OR_RETURN(const int64_t nw,
                        c.Product({r.out_ch, r.in_ch / r.group, r.k_h, r.k_w}, "w"));
  KILN_ASSIGN_OR_RETURN(const int64_t ny, c.Product({r.batch, r.out_ch, r.out_h, r.out_w}, "y"));
  KILN_RETURN_IF_ERROR(c.N(x, nx, "x"));
  KILN_RETURN_IF_ERROR(c.N(w, nw, "w"));
  KILN_RETURN_IF_ERROR(c.N(bias, r.out_ch, "bias"));
  KILN_RETURN_IF_ERROR(c.N(y, ny, "y"));
  r.has_bias = bias != nullptr;
  return r;
}

absl::StatusOr<QuantLinearRule> CheckQuantLinear(const StepChecker& c) {
  QuantLinearRule r;
  r.m = c.Int("m");
  r.k = c.Int("k");
  r.n = c.Int("n");
  KILN_ASSIGN_OR_RETURN(r.activation, CheckActivation(c));
  if (r.k > kQuantLinearMaxK)  // beyond it the s32 sums could overflow
    return c.Err("k %lld is above the int8 GEMM's %lld", static_cast<long long>(r.k),
                 static_cast<long long>(kQuantLinearMaxK));
  const PlanBuffer *x = c.In(0), *w = c.In(1), *scale = c.In(2), *bias = c.In(3), *mul = c.In(4),
                   *y = c.Out(0);
  KILN_ASSIGN_OR_RETURN(const int64_t mk, c.Product({r.m, r.k}, "m*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t mn, c.Product({r.m, r.n}, "m*n"));
  KILN_ASSIGN_OR_RETURN(const int64_t nk, c.Product({r.n, r.k}, "n*k"));
  KILN_RETURN_IF_ERROR(c.N(x, mk, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, r.k, "x", "k"));
  KILN_RETURN_IF_ERROR(c.N(w, nk, "w"));
  KILN_RETURN_IF_ERROR(c.N(scale, r.n, "w_scale"));
  KILN_RETURN_IF_ERROR(c.N(bias, r.n, "bias"));
  KILN_RETURN_IF_ERROR(c.N(mul, r.k, "x_mul"));
  KILN_RETURN_IF_ERROR(c.N(y, mn, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(y, r.n, "y", "n"));
  r.has_bias = bias != nullptr;
  r.has_x_mul = mul != nullptr;
  r.x_absmax = static_cast<float>(c.Float("x_absmax"));
  if (!(r.x_absmax >= 0) || !std::isfinite(r.x_absmax))
    return c.Err("x_absmax %g is not a finite value >= 0", r.x_absmax);
  return r;
}

namespace {

// A block-quantized table [n, k] (block_quant_linear's and block_quant_gather's w, scales
// and zero points): block_size a power of two >= 16, `bits` (param; absent 4) 4 or 8, the
// codes' layout and the buffers' sizes.
struct QuantTable {
  int64_t blocks = 0;
  int bits = 4;
  bool two_codes_per_byte = false, has_zero_points = false, float_zero_points = false;
};
absl::StatusOr<QuantTable> CheckQuantTable(const StepChecker& c, const PlanBuffer* w,
                                           const PlanBuffer* scales, const PlanBuffer* zp,
                                           int64_t n, int64_t k, int64_t block_size) {
  if (block_size < 16 || (block_size & (block_size - 1)) != 0)
    return c.Err("block_size %lld is not a power of two >= 16", static_cast<long long>(block_size));
  QuantTable t;
  t.blocks = (k + block_size - 1) / block_size;
  const int64_t bits = c.Int("bits", 4);
  if (bits != 4 && bits != 8) return c.Err("bits %lld is not 4 or 8", static_cast<long long>(bits));
  t.bits = static_cast<int>(bits);
  const DType codes = bits == 8 ? DType::kU8 : DType::kU4;  // one per byte
  if (bits == 8 && w->dtype != DType::kU8) return c.Err("8-bit codes must be u8");
  if (zp != nullptr && zp->dtype != codes && zp->dtype != DType::kF32)
    return c.Err("the zero points of %d-bit codes must be %s or f32", t.bits,
                 std::string(DTypeName(codes)));
  t.has_zero_points = zp != nullptr;
  t.float_zero_points = zp != nullptr && zp->dtype == DType::kF32;
  t.two_codes_per_byte = bits == 4 && w->dtype == DType::kU8;
  KILN_ASSIGN_OR_RETURN(const int64_t nk, t.two_codes_per_byte
                                              ? c.Product({n, (k + 1) / 2}, "n*ceil(k/2)")
                                              : c.Product({n, k}, "n*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t nb, c.Product({n, t.blocks}, "n*blocks"));
  KILN_RETURN_IF_ERROR(c.N(w, nk, "w"));
  KILN_RETURN_IF_ERROR(c.N(scales, nb, "scales"));
  KILN_RETURN_IF_ERROR(c.N(zp, nb, "zero_points"));
  return t;
}

}  // namespace

absl::StatusOr<BlockQuantLinearRule> CheckBlockQuantLinear(const StepChecker& c) {
  BlockQuantLinearRule r;
  r.m = c.Int("m");
  r.k = c.Int("k");
  r.n = c.Int("n");
  r.block_size = c.Int("block_size");
  const PlanBuffer *x = c.In(0), *bias = c.In(4), *y = c.Out(0);
  KILN_ASSIGN_OR_RETURN(const QuantTable t,
                        CheckQuantTable(c, c.In(1), c.In(2), c.In(3), r.n, r.k, r.block_size));
  r.blocks = t.blocks;
  r.bits = t.bits;
  r.two_codes_per_byte = t.two_codes_per_byte;
  r.has_zero_points = t.has_zero_points;
  r.float_zero_points = t.float_zero_points;
  KILN_ASSIGN_OR_RETURN(r.activation, CheckActivation(c));
  KILN_ASSIGN_OR_RETURN(const int64_t mk, c.Product({r.m, r.k}, "m*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t mn, c.Product({r.m, r.n}, "m*n"));
  KILN_RETURN_IF_ERROR(c.N(x, mk, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, r.k, "x", "k"));
  KILN_RETURN_IF_ERROR(c.N(bias, r.n, "bias"));
  KILN_RETURN_IF_ERROR(c.N(y, mn, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(y, r.n, "y", "n"));
  r.has_bias = bias != nullptr;
  return r;
}

absl::StatusOr<BlockQuantGatherRule> CheckBlockQuantGather(const StepChecker& c) {
  BlockQuantGatherRule r;
  r.rows = c.Int("rows");
  r.k = c.Int("k");
  r.n = c.Int("n");
  r.block_size = c.Int("block_size");
  const PlanBuffer *ids = c.In(1), *y = c.Out(0);
  KILN_ASSIGN_OR_RETURN(const QuantTable t,
                        CheckQuantTable(c, c.In(0), c.In(2), c.In(3), r.n, r.k, r.block_size));
  r.blocks = t.blocks;
  r.bits = t.bits;
  r.two_codes_per_byte = t.two_codes_per_byte;
  r.has_zero_points = t.has_zero_points;
  r.float_zero_points = t.float_zero_points;
  r.idx_i32 = ids->dtype == DType::kI32;
  KILN_ASSIGN_OR_RETURN(const int64_t rk, c.Product({r.rows, r.k}, "rows*k"));
  KILN_RETURN_IF_ERROR(c.N(ids, r.rows, "indices"));
  KILN_RETURN_IF_ERROR(c.N(y, rk, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(y, r.k, "y", "k"));
  return r;
}

absl::StatusOr<MatMulRule> CheckMatMul(const StepChecker& c) {
  MatMulRule r;
  r.batch = c.Int("batch");
  r.m = c.Int("m");
  r.k = c.Int("k");
  r.n = c.Int("n");
  r.broadcast_a = c.Flag("broadcast_a");
  r.broadcast_b = c.Flag("broadcast_b");
  KILN_ASSIGN_OR_RETURN(const int64_t mk, c.Product({r.m, r.k}, "m*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t kn, c.Product({r.k, r.n}, "k*n"));
  KILN_ASSIGN_OR_RETURN(const int64_t mn, c.Product({r.m, r.n}, "m*n"));
  KILN_ASSIGN_OR_RETURN(const int64_t a_elems,
                        c.Product({r.broadcast_a ? 1 : r.batch, mk}, "batch*m*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t b_elems,
                        c.Product({r.broadcast_b ? 1 : r.batch, kn}, "batch*k*n"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({r.batch, mn}, "batch*m*n"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), a_elems, "a"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), b_elems, "b"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), r.k, "a", "k"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(1), r.n, "b", "n"));
  return r;
}

absl::StatusOr<NormRule> CheckNorm(const StepChecker& c, bool skip, bool rms) {
  NormRule r;
  r.rows = c.Int("rows");
  r.h = c.Int("h");
  r.eps = static_cast<float>(c.Float("epsilon"));
  KILN_ASSIGN_OR_RETURN(const int64_t total, c.Product({r.rows, r.h}, "rows*h"));
  int i = 0;
  const PlanBuffer* x = c.In(i++);
  KILN_RETURN_IF_ERROR(c.N(x, total, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, r.h, "x", "h"));
  if (skip) {
    r.skip_rows = c.Int("skip_rows");
    if (r.rows % r.skip_rows != 0)
      return c.Err("skip_rows %d does not divide rows %d", r.skip_rows, r.rows);
    KILN_ASSIGN_OR_RETURN(const int64_t skip_elems, c.Product({r.skip_rows, r.h}, "skip_rows*h"));
    const PlanBuffer* sk = c.In(i++);
    KILN_RETURN_IF_ERROR(c.N(sk, skip_elems, "skip"));
    KILN_RETURN_IF_ERROR(c.LastDim(sk, r.h, "skip", "h"));
  }
  KILN_RETURN_IF_ERROR(c.N(c.In(i++), r.h, "gamma"));
  if (!rms) KILN_RETURN_IF_ERROR(c.N(c.In(i++), r.h, "beta"));
  if (skip) KILN_RETURN_IF_ERROR(c.N(c.In(i++), r.h, "bias"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), total, "y"));
  r.has_sum = skip && c.Out(1) != nullptr;
  if (skip) KILN_RETURN_IF_ERROR(c.N(c.Out(1), total, "sum"));
  return r;
}

namespace {

// An attention mask of rank <= 4 broadcastable (right-aligned) to the scores `target`
// (`what` names its dims in the error).
absl::Status CheckScoreMask(const StepChecker& c, const PlanBuffer& mask,
                            const std::array<int64_t, 4>& target, const char* what) {
  if (mask.dims.size() > 4) return c.Err("mask %s has rank > 4", DimsStr(mask.dims));
  for (size_t i = 0; i < mask.dims.size(); ++i) {
    const int64_t d = mask.dims[mask.dims.size() - 1 - i], t = target[3 - i];
    if (d != 1 && d != t)
      return c.Err("mask %s does not broadcast to %s = [%d,%d,%d,%d]", DimsStr(mask.dims), what,
                   target[0], target[1], target[2], target[3]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AttentionRule> CheckAttention(const StepChecker& c) {
  AttentionRule r;
  r.batch = c.Int("batch");
  r.seq = c.Int("seq");
  r.heads = c.Int("num_heads");
  r.head_size = c.Int("head_size");
  r.kv_heads = c.Int("kv_heads", r.heads);
  r.scale = static_cast<float>(c.Float("scale"));
  r.causal = c.Flag("causal");
  if (r.heads % r.kv_heads != 0)
    return c.Err("kv_heads %d does not divide num_heads %d", r.kv_heads, r.heads);
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems,
                        c.Product({r.batch, r.seq, r.heads, r.head_size}, "B*S*N*D"));
  // Not implied by B*S*(N+2*Nkv)*D when B or S is 0.
  KILN_ASSIGN_OR_RETURN(const int64_t qkv_row, c.Product({r.heads + 2 * r.kv_heads, r.head_size},
                                                         "(num_heads+2*kv_heads)*head_size"));
  KILN_ASSIGN_OR_RETURN(const int64_t qkv_elems,
                        c.Product({r.batch, r.seq, qkv_row}, "B*S*(N+2*Nkv)*D"));
  const PlanBuffer *qkv = c.In(0), *mask = c.In(1), *cs = c.In(2), *sn = c.In(3);
  KILN_RETURN_IF_ERROR(c.N(qkv, qkv_elems, "qkv"));
  KILN_RETURN_IF_ERROR(c.LastDim(qkv, qkv_row, "qkv", "(num_heads+2*kv_heads)*head_size"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  if ((cs == nullptr) != (sn == nullptr)) return c.Err("cos and sin must be given together");
  if (cs != nullptr) {
    const std::vector<int64_t>& t = cs->dims;
    if (t != sn->dims || t.size() != 3 || (t[0] != 1 && t[0] != r.batch) || t[1] != r.seq ||
        t[2] <= 0 || t[2] % 2 != 0 || t[2] > r.head_size)
      return c.Err("cos %s / sin %s must be [1 or B, S, R] with R even, 0 < R <= head_size %d",
                   DimsStr(cs->dims), DimsStr(sn->dims), r.head_size);
    r.rotary_dim = t[2];
    r.rotary_per_batch = t[0] != 1;
    r.rotary_interleaved = c.Flag("rotary_interleaved");
  }
  if (mask != nullptr) {
    r.mask_dtype = mask->dtype;
    r.mask_dims = mask->dims;
    KILN_RETURN_IF_ERROR(CheckScoreMask(c, *mask, {r.batch, r.heads, r.seq, r.seq}, "[B,N,S,S]"));
  }
  return r;
}

// The paged params and the block table (input `table`) of a cache of `slots` slots per
// sequence, `heads` × `row` per slot; `pool` is what the pool's element count must be.
absl::StatusOr<PagedRule> CheckPaged(const StepChecker& c, int table, int64_t batch, int64_t slots,
                                     int64_t heads, int64_t row, int64_t* pool) {
  PagedRule r{c.Int("block_size"), c.Int("blocks")};
  if ((r.block_size > 0) != (r.blocks > 0) || (r.block_size > 0) != (c.In(table) != nullptr))
    return c.Err("a paged cache needs block_size, blocks and a block table together");
  if (r.block_size == 0) return r;
  if (slots % r.block_size != 0)
    return c.Err("%d slots are not whole blocks of %d", slots, r.block_size);
  r.width = slots / r.block_size;
  KILN_ASSIGN_OR_RETURN(const int64_t ids, c.Product({batch, r.width}, "batch*blocks per row"));
  KILN_RETURN_IF_ERROR(c.N(c.In(table), ids, "block_table"));
  KILN_ASSIGN_OR_RETURN(*pool, c.Product({r.blocks, heads, r.block_size, row}, "pool elements"));
  return r;
}

absl::StatusOr<HeadAttentionRule> CheckHeadAttention(const StepChecker& c) {
  HeadAttentionRule r;
  r.batch = c.Int("batch");
  r.seq = c.Int("seq");
  r.kv_seq = c.Int("kv_seq");
  r.heads = c.Int("num_heads");
  r.kv_heads = c.Int("kv_heads", r.heads);
  r.head_size = c.Int("head_size");
  r.scale = static_cast<float>(c.Float("scale"));
  r.causal = c.Flag("causal");
  if (r.heads % r.kv_heads != 0)
    return c.Err("kv_heads %d does not divide num_heads %d", r.kv_heads, r.heads);
  if (r.causal && r.kv_seq < r.seq)
    return c.Err("causal attention needs kv_seq %d >= seq %d", r.kv_seq, r.seq);
  KILN_ASSIGN_OR_RETURN(const int64_t q_elems,
                        c.Product({r.batch, r.heads, r.seq, r.head_size}, "B*N*S*D"));
  int64_t kv_elems = 0;
  KILN_ASSIGN_OR_RETURN(kv_elems,
                        c.Product({r.batch, r.kv_heads, r.kv_seq, r.head_size}, "B*Nkv*L*D"));
  KILN_ASSIGN_OR_RETURN(r.paged,
                        CheckPaged(c, 4, r.batch, r.kv_seq, r.kv_heads, r.head_size, &kv_elems));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), q_elems, "q"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), kv_elems, "k"));
  KILN_RETURN_IF_ERROR(c.N(c.In(2), kv_elems, "v"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), q_elems, "y"));
  if (const PlanBuffer* mask = c.In(3)) {
    r.mask_dtype = mask->dtype;
    r.mask_dims = mask->dims;
    KILN_RETURN_IF_ERROR(
        CheckScoreMask(c, *mask, {r.batch, r.heads, r.seq, r.kv_seq}, "[B,N,S,L]"));
  }
  return r;
}

absl::StatusOr<EmbedRule> CheckEmbedLayerNorm(const StepChecker& c) {
  EmbedRule r;
  r.batch = c.Int("batch");
  r.seq = c.Int("seq");
  r.hidden = c.Int("hidden");
  r.eps = static_cast<float>(c.Float("epsilon"));
  KILN_ASSIGN_OR_RETURN(const int64_t tokens, c.Product({r.batch, r.seq}, "B*S"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({tokens, r.hidden}, "B*S*hidden"));
  const PlanBuffer *ids = c.In(0), *seg_ids = c.In(1), *pos_ids = c.In(2), *word = c.In(3),
                   *pos = c.In(4), *seg = c.In(5);
  r.ids_i32 = ids->dtype == DType::kI32;
  if (StepChecker::Elems(*ids) != tokens)
    return c.Err("input_ids %s does not have B*S = %d elements", DimsStr(ids->dims), tokens);
  if (seg_ids != nullptr && StepChecker::Elems(*seg_ids) != tokens)
    return c.Err("segment_ids %s does not have B*S = %d elements", DimsStr(seg_ids->dims), tokens);
  if ((seg_ids == nullptr) != (seg == nullptr))
    return c.Err("segment_ids and the segment table must be given together");
  if (pos_ids != nullptr) {
    const auto& d = pos_ids->dims;
    if (d.size() == 2 && d[0] == r.batch && d[1] == r.seq)
      r.position_rows = r.batch;
    else if ((d.size() == 2 && d[0] == 1 && d[1] == r.seq) || (d.size() == 1 && d[0] == r.seq))
      r.position_rows = 1;
    else
      return c.Err("position_ids %s must be [B,S], [1,S] or [S] with B=%d S=%d", DimsStr(d),
                   r.batch, r.seq);
  }
  auto table = [&](const PlanBuffer* t, const char* what, int64_t* rows) -> absl::Status {
    if (t == nullptr) return absl::OkStatus();
    if (t->dims.size() != 2 || t->dims[1] != r.hidden)
      return c.Err("%s %s must be [rows, hidden=%d]", what, DimsStr(t->dims), r.hidden);
    *rows = t->dims[0];
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(table(word, "word", &r.word_rows));
  KILN_RETURN_IF_ERROR(table(pos, "pos", &r.pos_rows));
  KILN_RETURN_IF_ERROR(table(seg, "segment", &r.segment_rows));
  if (pos_ids == nullptr && r.seq > r.pos_rows)
    return c.Err("seq %d exceeds the %d rows of the position table", r.seq, r.pos_rows);
  KILN_RETURN_IF_ERROR(c.N(c.In(6), r.hidden, "gamma"));
  KILN_RETURN_IF_ERROR(c.N(c.In(7), r.hidden, "beta"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(1), y_elems, "sum"));
  return r;
}

absl::StatusOr<PoolRule> CheckPool(const StepChecker& c) {
  PoolRule r;
  r.batch = c.Int("batch");
  r.seq = c.Int("seq");
  r.hidden = c.Int("hidden");
  r.cls = c.String("mode") == "cls";
  r.last = c.String("mode") == "last";
  r.normalize = c.Flag("normalize");
  KILN_ASSIGN_OR_RETURN(const int64_t tokens, c.Product({r.batch, r.seq}, "B*S"));
  KILN_ASSIGN_OR_RETURN(const int64_t h_elems, c.Product({tokens, r.hidden}, "B*S*hidden"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({r.batch, r.hidden}, "B*hidden"));
  if (r.cls && r.seq == 0 && y_elems > 0) return c.Err("cls pooling needs seq >= 1");
  KILN_RETURN_IF_ERROR(c.N(c.In(0), h_elems, "hidden"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), r.hidden, "hidden", "hidden"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  if (const PlanBuffer* mask = c.In(1); mask != nullptr) {
    r.mask_dtype = mask->dtype;
    if (StepChecker::Elems(*mask) != tokens)
      return c.Err("mask %s does not have B*S = %d elements", DimsStr(mask->dims), tokens);
  }
  return r;
}

absl::StatusOr<GeluRule> CheckGelu(const StepChecker& c) {
  GeluRule r{c.Int("n"), c.Flag("tanh")};
  KILN_RETURN_IF_ERROR(c.N(c.In(0), r.n, "x"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), r.n, "y"));
  return r;
}

absl::StatusOr<GluRule> CheckGlu(const StepChecker& c) {
  GluRule r{c.Int("rows"), c.Int("f"), c.String("activation")};
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({r.rows, r.f}, "rows*f"));
  KILN_ASSIGN_OR_RETURN(const int64_t x_elems, c.Product({y_elems, 2}, "rows*2f"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), x_elems, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), 2 * r.f, "x", "2f"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.Out(0), r.f, "y", "f"));
  return r;
}

absl::StatusOr<PackedAttentionRule> CheckPackedAttention(const StepChecker& c) {
  PackedAttentionRule r;
  r.tokens = c.Int("tokens");
  r.sequences = c.Int("sequences");
  r.heads = c.Int("num_heads");
  r.head_size = c.Int("head_size");
  r.kv_heads = c.Int("kv_heads", r.heads);
  r.scale = static_cast<float>(c.Float("scale"));
  if (r.heads % r.kv_heads != 0)
    return c.Err("kv_heads %d does not divide num_heads %d", r.kv_heads, r.heads);
  KILN_ASSIGN_OR_RETURN(const int64_t qkv_row, c.Product({r.heads + 2 * r.kv_heads, r.head_size},
                                                         "(num_heads+2*kv_heads)*head_size"));
  KILN_ASSIGN_OR_RETURN(const int64_t qkv_elems, c.Product({r.tokens, qkv_row}, "T*(N+2*Nkv)*D"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems,
                        c.Product({r.tokens, r.heads, r.head_size}, "T*N*D"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), qkv_elems, "qkv"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), qkv_row, "qkv", "(num_heads+2*kv_heads)*head_size"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), r.sequences, "lengths"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  return r;
}

absl::StatusOr<PackedPoolRule> CheckPackedPool(const StepChecker& c) {
  PackedPoolRule r;
  r.tokens = c.Int("tokens");
  r.sequences = c.Int("sequences");
  r.hidden = c.Int("hidden");
  r.cls = c.String("mode") == "cls";
  r.normalize = c.Flag("normalize");
  KILN_ASSIGN_OR_RETURN(const int64_t h_elems, c.Product({r.tokens, r.hidden}, "T*hidden"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({r.sequences, r.hidden}, "N*hidden"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), h_elems, "hidden"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), r.hidden, "hidden", "hidden"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), r.sequences, "lengths"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), y_elems, "y"));
  return r;
}

absl::StatusOr<PackedPositionsRule> CheckPackedPositions(const StepChecker& c) {
  PackedPositionsRule r{c.Int("tokens"), c.Int("sequences")};
  KILN_RETURN_IF_ERROR(c.N(c.In(0), r.sequences, "lengths"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), r.tokens, "tokens"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), r.tokens, "y"));
  return r;
}

absl::StatusOr<PackedCumSumRule> CheckPackedCumSum(const StepChecker& c) {
  PackedCumSumRule r{c.Int("tokens"), c.Int("sequences"), c.In(0)->dtype, c.Flag("exclusive")};
  KILN_RETURN_IF_ERROR(c.N(c.In(0), r.tokens, "x"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), r.sequences, "lengths"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), r.tokens, "y"));
  return r;
}

absl::StatusOr<CacheWriteRule> CheckCacheWrite(const StepChecker& c) {
  CacheWriteRule r{c.Int("batch"), c.Int("heads"), c.Int("slots"), c.Int("seq"), c.Int("row")};
  int64_t cache = 0;
  KILN_ASSIGN_OR_RETURN(cache,
                        c.Product({r.batch, r.heads, r.slots, r.row}, "batch*heads*slots*row"));
  KILN_ASSIGN_OR_RETURN(r.paged, CheckPaged(c, 3, r.batch, r.slots, r.heads, r.row, &cache));
  KILN_ASSIGN_OR_RETURN(const int64_t rows,
                        c.Product({r.batch, r.heads, r.seq, r.row}, "batch*heads*seq*row"));
  KILN_ASSIGN_OR_RETURN(const int64_t positions, c.Product({r.batch, r.seq}, "batch*seq"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), cache, "cache"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), rows, "new"));
  KILN_RETURN_IF_ERROR(c.N(c.In(2), positions, "positions"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), cache, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), r.row, "cache", "row"));
  r.elem_size = DTypeSize(c.In(0)->dtype);
  return r;
}

absl::StatusOr<SoftmaxRule> CheckSoftmax(const StepChecker& c) {
  SoftmaxRule r{c.Int("rows"), c.Int("n")};
  KILN_ASSIGN_OR_RETURN(const int64_t total, c.Product({r.rows, r.n}, "rows*n"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), total, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(c.In(0), r.n, "x", "n"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), total, "y"));
  return r;
}

absl::StatusOr<EltwiseRule> CheckEltwise(const StepChecker& c) {
  const std::string& op = c.String("op");
  EltwiseRule r;
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < c.step().inputs.size(); ++i) {
    const PlanBuffer* b = c.In(i);
    if (b == nullptr) continue;
    if (r.in_types.size() != i) return c.Err("input %d is given after an omitted one", i);
    r.in_types.push_back(b->dtype);
    dims.push_back(b->dims);
  }
  const PlanBuffer* y = c.Out(0);
  r.out_type = y->dtype;
  // In place (the contract lets y take exactly input 0's bytes): each element is read
  // before it is written, which holds only if input 0 does not broadcast (has y's element
  // count: a broadcast to as many elements only adds 1s) and has y's element size.
  const PlanBuffer* x0 = c.In(0);
  const bool in_place = x0 != nullptr && x0->kind == y->kind && x0->offset == y->offset &&
                        (x0->kind == PlanBufferKind::kArena ||
                         (x0->kind == PlanBufferKind::kOutput && x0->binding == y->binding));
  if (in_place && (StepChecker::Elems(*x0) != StepChecker::Elems(*y) ||
                   DTypeSize(x0->dtype) != DTypeSize(y->dtype)))
    return c.Err("y %s in place over input 0 %s needs its element count and size", DimsStr(y->dims),
                 DimsStr(x0->dims));
  absl::StatusOr<EltDomain> d = TypeEltwise(op, r.in_types, y->dtype);
  if (!d.ok()) return c.Err("%s", d.status().message());
  r.domain = *d;
  switch (*d) {
    case EltDomain::kF32:
      r.domain_kind = kernels::EltDomainKind::kF32;
      break;
    case EltDomain::kF64:
      r.domain_kind = kernels::EltDomainKind::kF64;
      break;
    case EltDomain::kI64:
      r.domain_kind = kernels::EltDomainKind::kI64;
      break;
    case EltDomain::kU64:
      r.domain_kind = kernels::EltDomainKind::kU64;
      break;
    case EltDomain::kBool:
      r.domain_kind = kernels::EltDomainKind::kBool;
      break;
  }
  if (!kernels::EltOpFromName(op, &r.op)) return c.Err("no eltwise op '%s'", op);
  if (!kernels::ComputeBroadcastLayout(y->dims, dims, &r.layout)) {
    std::string ins;
    for (const auto& v : dims) absl::StrAppend(&ins, ins.empty() ? "" : " ", DimsStr(v));
    return c.Err("the inputs %s do not broadcast to y %s (or rank > %d)", ins, DimsStr(y->dims),
                 kernels::kMaxEltRank);
  }
  return r;
}

absl::StatusOr<GatherRule> CheckGather(const StepChecker& c) {
  const PlanBuffer &data = *c.In(0), &idx = *c.In(1), &y = *c.Out(0);
  const int64_t axis = c.Int("axis");
  const int64_t r = static_cast<int64_t>(data.dims.size());
  if (axis >= r) return c.Err("axis %d is past data's rank %d", axis, r);
  std::vector<int64_t> want(data.dims.begin(), data.dims.begin() + axis);
  want.insert(want.end(), idx.dims.begin(), idx.dims.end());
  want.insert(want.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (want != y.dims) return c.Err("y %s should be %s", DimsStr(y.dims), DimsStr(want));
  GatherRule g;
  g.idx_i32 = idx.dtype == DType::kI32;
  g.elem_size = static_cast<int64_t>(DTypeSize(data.dtype));
  g.outer = 1;
  for (int64_t d = 0; d < axis; ++d) g.outer *= data.dims[d];
  g.axis_dim = data.dims[axis];
  g.inner = 1;
  for (int64_t d = axis + 1; d < r; ++d) g.inner *= data.dims[d];
  g.num_indices = StepChecker::Elems(idx);
  return g;
}

namespace {

using Dims = std::vector<int64_t>;

Dims RowMajorStrides(const Dims& d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// A copy of the box `dims` from x (strides `ss`, offset `so`) to y (`ds`, `do_`): checks
// that every element touched lies in both buffers, then collapses the dims.
absl::Status AddBox(const StepChecker& c, const PlanBuffer& x, const PlanBuffer& y,
                    const Dims& dims, const Dims& ss, int64_t so, const Dims& ds, int64_t do_,
                    StridedCopyRule* r) {
  int64_t elems = 1;
  for (int64_t d : dims) elems *= d;
  if (elems > 0) {
    // The lowest and highest element the copy touches on one side (false on overflow).
    auto span = [&](const Dims& st, int64_t off, int64_t* lo, int64_t* hi) {
      *lo = *hi = off;
      for (size_t j = 0; j < dims.size(); ++j) {
        int64_t reach;
        if (MulOverflows(dims[j] - 1, st[j], &reach) ||
            AddOverflows(reach < 0 ? *lo : *hi, reach, reach < 0 ? lo : hi))
          return false;
      }
      return true;
    };
    int64_t lo, hi;
    if (!span(ss, so, &lo, &hi) || lo < 0 || hi >= StepChecker::Elems(x))
      return c.Err("reads outside x %s", DimsStr(x.dims));
    if (!span(ds, do_, &lo, &hi) || lo < 0 || hi >= StepChecker::Elems(y))
      return c.Err("writes outside y %s", DimsStr(y.dims));
  }
  kernels::CopyBox box;
  box.src_offset = so;
  box.dst_offset = do_;
  if (!kernels::CollapseCopy(dims, ss, ds, &box))
    return c.Err("the copy has more than %d non-contiguous dims", kernels::kMaxCopyRank);
  r->boxes.push_back(box);
  return absl::OkStatus();
}

absl::Status TransposeBoxes(const StepChecker& c, StridedCopyRule* rule) {
  const PlanBuffer &x = *c.In(0), &y = *c.Out(0);
  const Dims& perm = c.Ints("perm");
  const size_t r = x.dims.size();
  std::vector<bool> seen(r, false);
  if (perm.size() != r) return c.Err("perm has %d entries for rank %d", perm.size(), r);
  Dims out(r), ss(r);
  const Dims xs = RowMajorStrides(x.dims);
  for (size_t d = 0; d < r; ++d) {
    if (perm[d] >= static_cast<int64_t>(r) || seen[perm[d]])
      return c.Err("perm is not a permutation");
    seen[perm[d]] = true;
    out[d] = x.dims[perm[d]];
    ss[d] = xs[perm[d]];
  }
  if (out != y.dims) return c.Err("y %s is not x %s permuted", DimsStr(y.dims), DimsStr(x.dims));
  return AddBox(c, x, y, out, ss, 0, RowMajorStrides(out), 0, rule);
}

absl::Status SliceBoxes(const StepChecker& c, StridedCopyRule* rule) {
  const PlanBuffer &x = *c.In(0), &y = *c.Out(0);
  const Dims &starts = c.Ints("starts"), &steps = c.Ints("steps");
  const size_t r = x.dims.size();
  if (starts.size() != r || steps.size() != r || y.dims.size() != r)
    return c.Err("starts, steps and y need x's rank %d", r);
  const Dims xs = RowMajorStrides(x.dims);
  Dims ss(r);
  int64_t off = 0;
  for (size_t d = 0; d < r; ++d) {
    if (steps[d] == 0) return c.Err("step of dim %d is 0", d);
    if (y.dims[d] > 0 && starts[d] >= x.dims[d])
      return c.Err("start %d of dim %d is past its %d elements", starts[d], d, x.dims[d]);
    int64_t at;
    if (MulOverflows(starts[d], xs[d], &at) || AddOverflows(off, at, &off) ||
        MulOverflows(steps[d], xs[d], &ss[d]))
      return c.Err("start or step of dim %d overflows", d);
  }
  return AddBox(c, x, y, y.dims, ss, off, RowMajorStrides(y.dims), 0, rule);
}

absl::Status ExpandBoxes(const StepChecker& c, StridedCopyRule* rule) {
  const PlanBuffer &x = *c.In(0), &y = *c.Out(0);
  if (x.dims.size() > y.dims.size()) return c.Err("x %s has a higher rank than y", DimsStr(x.dims));
  const size_t shift = y.dims.size() - x.dims.size();
  const Dims xs = RowMajorStrides(x.dims);
  Dims ss(y.dims.size(), 0);
  for (size_t d = 0; d < x.dims.size(); ++d) {
    if (x.dims[d] != 1 && x.dims[d] != y.dims[d + shift])
      return c.Err("x %s does not broadcast to y %s", DimsStr(x.dims), DimsStr(y.dims));
    if (x.dims[d] != 1) ss[d + shift] = xs[d];
  }
  return AddBox(c, x, y, y.dims, ss, 0, RowMajorStrides(y.dims), 0, rule);
}

absl::Status ConcatBoxes(const StepChecker& c, StridedCopyRule* rule) {
  const PlanBuffer& y = *c.Out(0);
  const int64_t axis = c.Int("axis");
  if (axis >= static_cast<int64_t>(y.dims.size())) return c.Err("axis %d is past y's rank", axis);
  const Dims ys = RowMajorStrides(y.dims);
  int64_t at = 0;
  for (size_t i = 0; i < c.step().inputs.size(); ++i) {
    const PlanBuffer* x = c.In(i);
    if (x == nullptr) return c.Err("input %d is omitted", i);
    if (x->dtype != y.dtype)
      return c.Err("input %d is %s, y is %s", i, std::string(DTypeName(x->dtype)),
                   std::string(DTypeName(y.dtype)));
    if (x->dims.size() != y.dims.size()) return c.Err("input %d's rank is not y's", i);
    for (size_t d = 0; d < y.dims.size(); ++d)
      if (static_cast<int64_t>(d) != axis && x->dims[d] != y.dims[d])
        return c.Err("input %d %s differs from y %s off the axis", i, DimsStr(x->dims),
                     DimsStr(y.dims));
    int64_t offset;
    if (MulOverflows(at, ys[axis], &offset)) return c.Err("input %d's offset overflows", i);
    KILN_RETURN_IF_ERROR(AddBox(c, *x, y, x->dims, RowMajorStrides(x->dims), 0, ys, offset, rule));
    at += x->dims[axis];
  }
  if (at != y.dims[axis])
    return c.Err("the inputs give %d along the axis, y has %d", at, y.dims[axis]);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StridedCopyRule> CheckStridedCopy(const StepChecker& c) {
  StridedCopyRule r;
  const std::string& k = c.step().kernel;
  r.elem_size = static_cast<int64_t>(DTypeSize(c.Out(0)->dtype));
  if (k == "transpose") {
    KILN_RETURN_IF_ERROR(TransposeBoxes(c, &r));
  } else if (k == "slice") {
    KILN_RETURN_IF_ERROR(SliceBoxes(c, &r));
  } else if (k == "expand") {
    KILN_RETURN_IF_ERROR(ExpandBoxes(c, &r));
  } else if (k == "concat") {
    KILN_RETURN_IF_ERROR(ConcatBoxes(c, &r));
  } else {
    return c.Err("kernel '%s' is not a strided copy", k);
  }
  if (k != "concat" && DTypeSize(c.In(0)->dtype) != DTypeSize(c.Out(0)->dtype))
    return c.Err("x and y element sizes differ");
  return r;
}

namespace {

int64_t ElemsOf(const Dims& d, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= d[i];
  return n;
}

}  // namespace

absl::StatusOr<GatherNDRule> CheckGatherND(const StepChecker& c) {
  const PlanBuffer &data = *c.In(0), &idx = *c.In(1), &y = *c.Out(0);
  const int64_t b = c.Int("batch_dims");
  const int64_t r = static_cast<int64_t>(data.dims.size()),
                q = static_cast<int64_t>(idx.dims.size());
  if (q < 1 || b >= std::min(r, q)) return c.Err("batch_dims %d needs more data and index dims", b);
  const int64_t k = idx.dims.back();
  if (k < 1 || b + k > r || k > kMaxIndexRank)
    return c.Err("index tuples of %d do not fit data %s after %d batch dims", k, DimsStr(data.dims),
                 b);
  for (int64_t d = 0; d < b; ++d)
    if (data.dims[d] != idx.dims[d]) return c.Err("batch dim %d differs", d);
  Dims want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + b + k, data.dims.end());
  if (want != y.dims) return c.Err("y %s should be %s", DimsStr(y.dims), DimsStr(want));
  const Dims ds = RowMajorStrides(data.dims);
  GatherNDRule g;
  g.idx_i32 = idx.dtype == DType::kI32;
  g.elem_size = static_cast<int64_t>(DTypeSize(data.dtype));
  g.batch = ElemsOf(data.dims, 0, b);
  g.batch_stride = ElemsOf(data.dims, b, r);
  g.tuples = ElemsOf(idx.dims, b, q - 1);
  g.k = static_cast<int>(k);
  for (int64_t j = 0; j < k; ++j) {
    g.dims[j] = data.dims[b + j];
    g.strides[j] = ds[b + j];
  }
  g.slice = ElemsOf(data.dims, b + k, r);
  return g;
}

absl::StatusOr<GatherElementsRule> CheckGatherElements(const StepChecker& c) {
  const PlanBuffer &data = *c.In(0), &idx = *c.In(1), &y = *c.Out(0);
  const int64_t axis = c.Int("axis");
  const size_t r = data.dims.size();
  if (r == 0 || r > static_cast<size_t>(kMaxIndexRank) || idx.dims.size() != r ||
      axis >= static_cast<int64_t>(r))
    return c.Err("data, indices and axis must share a rank of 1..%d", kMaxIndexRank);
  if (y.dims != idx.dims) return c.Err("y %s must have the indices' dims", DimsStr(y.dims));
  for (size_t d = 0; d < r; ++d)
    if (static_cast<int64_t>(d) != axis && idx.dims[d] > data.dims[d])
      return c.Err("indices dim %d (%d) exceeds data's (%d)", d, idx.dims[d], data.dims[d]);
  const Dims ds = RowMajorStrides(data.dims);
  GatherElementsRule g;
  g.idx_i32 = idx.dtype == DType::kI32;
  g.elem_size = static_cast<int64_t>(DTypeSize(data.dtype));
  g.rank = static_cast<int>(r);
  g.axis = static_cast<int>(axis);
  for (size_t d = 0; d < r; ++d) {
    g.idx_dims[d] = idx.dims[d];
    g.data_strides[d] = ds[d];
  }
  g.axis_dim = data.dims[axis];
  g.n = StepChecker::Elems(idx);
  return g;
}

absl::StatusOr<CumSumRule> CheckCumSum(const StepChecker& c) {
  const PlanBuffer &x = *c.In(0), &y = *c.Out(0);
  const int64_t axis = c.Int("axis");
  if (axis >= static_cast<int64_t>(x.dims.size())) return c.Err("axis %d is past x's rank", axis);
  if (y.dims != x.dims) return c.Err("y %s must have x's dims", DimsStr(y.dims));
  CumSumRule r;
  r.dtype = x.dtype;
  r.outer = ElemsOf(x.dims, 0, axis);
  r.len = x.dims[axis];
  r.inner = ElemsOf(x.dims, axis + 1, x.dims.size());
  r.exclusive = c.Flag("exclusive");
  r.reverse = c.Flag("reverse");
  return r;
}

absl::StatusOr<TensorScatterRule> CheckTensorScatter(const StepChecker& c) {
  TensorScatterRule r{c.Int("batch"), c.Int("outer"), c.Int("cap"), c.Int("seq"), c.Int("inner")};
  r.circular = c.Flag("circular");
  if (r.seq > r.cap) return c.Err("seq %d is more than the cache's %d positions", r.seq, r.cap);
  KILN_ASSIGN_OR_RETURN(const int64_t cache,
                        c.Product({r.batch, r.outer, r.cap, r.inner}, "batch*outer*cap*inner"));
  KILN_ASSIGN_OR_RETURN(const int64_t update,
                        c.Product({r.batch, r.outer, r.seq, r.inner}, "batch*outer*seq*inner"));
  KILN_RETURN_IF_ERROR(c.N(c.In(0), cache, "cache"));
  KILN_RETURN_IF_ERROR(c.N(c.In(1), update, "update"));
  KILN_RETURN_IF_ERROR(c.N(c.In(2), r.batch, "write_indices"));
  KILN_RETURN_IF_ERROR(c.N(c.Out(0), cache, "y"));
  r.elem_size = DTypeSize(c.In(0)->dtype);
  return r;
}

absl::StatusOr<PadRule> CheckPad(const StepChecker& c) {
  const PlanBuffer &x = *c.In(0), &y = *c.Out(0);
  const std::vector<int64_t>& begin = c.Ints("begin");
  const size_t r = x.dims.size();
  if (begin.size() != r || y.dims.size() != r)
    return c.Err("x %s, y %s and begin (%d values) must have one rank", DimsStr(x.dims),
                 DimsStr(y.dims), begin.size());
  PadRule p;
  p.dims = x.dims;
  p.x_strides.assign(r, 1);
  p.y_strides.assign(r, 1);
  for (size_t i = r; i-- > 1;) {
    p.x_strides[i - 1] = p.x_strides[i] * x.dims[i];
    p.y_strides[i - 1] = p.y_strides[i] * y.dims[i];
  }
  for (size_t i = 0; i < r; ++i) {
    if (begin[i] < 0 || begin[i] + x.dims[i] > y.dims[i])
      return c.Err("dim %d: x's %d at %d does not fit y's %d", i, x.dims[i], begin[i], y.dims[i]);
    p.y_offset += begin[i] * p.y_strides[i];
  }
  p.y_elems = StepChecker::Elems(y);
  return p;
}

absl::StatusOr<RotaryRule> CheckRotary(const StepChecker& c) {
  const PlanBuffer &x = *c.In(0), &cs = *c.In(1), &sn = *c.In(2), &y = *c.Out(0);
  if (x.dims.empty() || cs.dims.empty() || cs.dims != sn.dims || cs.dims.size() > x.dims.size())
    return c.Err("x %s, cos %s and sin %s: the tables must share dims of rank 1..rank(x)",
                 DimsStr(x.dims), DimsStr(cs.dims), DimsStr(sn.dims));
  if (y.dims != x.dims) return c.Err("y %s must have x's dims", DimsStr(y.dims));
  RotaryRule r;
  r.d = x.dims.back();
  r.r = cs.dims.back();
  r.interleaved = c.Flag("interleaved");
  if (r.r % 2 != 0 || r.r > r.d)
    return c.Err("the rotary dim %d must be even and at most x's last dim %d", r.r, r.d);
  const Dims xl(x.dims.begin(), x.dims.end() - 1), tl(cs.dims.begin(), cs.dims.end() - 1);
  if (!kernels::ComputeBroadcastLayout(xl, {xl, tl, tl}, &r.rows))
    return c.Err("cos %s does not broadcast to the rows of x %s", DimsStr(cs.dims),
                 DimsStr(x.dims));
  return r;
}

}  // namespace kiln::runtime
