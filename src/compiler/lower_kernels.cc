// Kernel choice: maps a node with static operands to one of the target's kernel ids
// (docs/plan-kernels.md) with its parameters, when the node meets that kernel's contract
// (plan/kernel_contract.h: operand dtypes per target) and shape rule exactly. On cpu
// everything else becomes a "ref" step whose node travels as IR text; cuda has no host
// steps, so there a node no kernel takes is a compile error (lower.cc). The shape rules
// here mirror the executors' checks at Create (runtime/kernel_rules.cc), so a node that
// does not fit is sent elsewhere rather than rejected later.
// Limits: LayerNormalization/EmbedLayerNorm with extra outputs have no kernel.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/lower.h"
#include "kiln/ir/ops.h"
#include "kiln/ir/text.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"
#include "plan/kernel_contract.h"

namespace kiln::compiler {
namespace {

using Dims = std::vector<int64_t>;

bool Present(const Node& n, int i) { return i < n.num_inputs() && n.input(i); }

Dims InDims(const Node& n, int i) { return n.input(i).type().StaticDims().value_or(Dims{}); }
DType InType(const Node& n, int i) { return n.input(i).type().dtype; }
Dims OutDims(const Node& n, int i) { return n.output_info(i).type.StaticDims().value_or(Dims{}); }

int64_t Product(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

PlanParam Int(const char* name, int64_t v) { return PlanParam{name, v}; }
PlanParam Real(const char* name, double v) { return PlanParam{name, v}; }
PlanParam Str(const char* name, std::string v) { return PlanParam{name, std::move(v)}; }

// The node's operand and result dtypes meet `c`'s operand specs (present operands only).
bool DTypesFit(const Node& n, const KernelContract& c) {
  auto fits = [&](const OperandSpec& spec, DType t, auto dtype_of_input) {
    if (spec.same_dtype_as >= 0) {
      const std::optional<DType> other = dtype_of_input(spec.same_dtype_as);
      return !other || *other == t;
    }
    return (spec.dtypes & DTypeBit(t)) != 0;
  };
  auto input_dtype = [&](int i) -> std::optional<DType> {
    if (!Present(n, i)) return std::nullopt;
    return InType(n, i);
  };
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (!Present(n, i)) continue;
    if (!c.variadic_inputs && i >= static_cast<int>(c.inputs.size())) return false;
    const OperandSpec& spec = c.variadic_inputs ? c.inputs[0] : c.inputs[i];
    if (!fits(spec, InType(n, i), input_dtype)) return false;
  }
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (!c.variadic_outputs && i >= static_cast<int>(c.outputs.size())) return false;
    const OperandSpec& spec = c.variadic_outputs ? c.outputs[0] : c.outputs[i];
    if (!fits(spec, n.output_info(i).type.dtype, input_dtype)) return false;
  }
  return true;
}

// The kernel `id` of `target` for `n` with `params`, when the target has it and the node's
// dtypes meet its contract. The contract also fixes the operand count and the in-place
// hint, so lowering and the executors read one description.
std::optional<KernelChoice> Emit(PlanTarget target, std::string_view id, const Node& n,
                                 std::vector<PlanParam> params) {
  const KernelContract* c = FindKernelContract(target, id);
  if (c == nullptr || !DTypesFit(n, *c)) return std::nullopt;
  return KernelChoice{std::string(id), std::move(params), c->inplace_ok,
                      static_cast<int>(c->inputs.size())};
}

// A vector operand: absent (when allowed) or exactly [h].
bool VectorOk(const Node& n, int i, int64_t h, bool optional) {
  if (!Present(n, i)) return optional;
  return InDims(n, i) == Dims{h};
}

// A constant, possibly seen through alias ops: it lowers to a weight buffer.
bool IsWeight(Value v) {
  while (v && IsAliasOp(*v.node)) v = v.node->input(0);
  return v && v.node->is_constant();
}

// The epilogue activation of a kiln.Linear / QuantLinear / BlockQuantLinear the linear
// kernels apply;
// nullopt for one they do not.
std::optional<std::string> LinearActivation(const Node& n) {
  const std::string* act = n.attr_string("activation");
  const std::string activation = act ? *act : "none";
  if (activation != "none" && activation != "gelu" && activation != "gelu_tanh" &&
      activation != "relu" && activation != "tanh")
    return std::nullopt;
  return activation;
}

// The activation of a Linear-like node whose output maps x's rows to nn columns; nullopt
// when the kernels do not apply it or the output is not [x's leading dims, nn].
std::optional<std::string> LinearEpilogue(const Node& n, const Dims& x, int64_t nn) {
  std::optional<std::string> activation = LinearActivation(n);
  Dims y(x.begin(), x.end() - 1);
  y.push_back(nn);
  if (!activation || OutDims(n, 0) != y) return std::nullopt;
  return activation;
}

std::optional<KernelChoice> Linear(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  // The executor prepacks w (and bias) at Create: they must be weights.
  if (!IsWeight(n.input(1)) || (Present(n, 2) && !IsWeight(n.input(2)))) return std::nullopt;
  const Dims x = InDims(n, 0), w = InDims(n, 1);
  if (x.empty() || w.size() != 2) return std::nullopt;
  const int64_t trans = n.attr_int_or("trans_w", 0);
  if (trans != 0 && trans != 1) return std::nullopt;
  const int64_t k = x.back();
  const int64_t wk = trans ? w[1] : w[0], nn = trans ? w[0] : w[1];
  if (wk != k || !VectorOk(n, 2, nn, true)) return std::nullopt;
  const std::optional<std::string> activation = LinearEpilogue(n, x, nn);
  if (!activation) return std::nullopt;
  return Emit(t, "linear", n,
              {Int("m", Product(x, 0, x.size() - 1)), Int("k", k), Int("n", nn),
               Int("trans_w", trans), Str("activation", *activation)});
}

// kiln.QuantLinear(X, W [N, K] s8, w_scale [N], B?, x_mul [K]?) {activation, x_quant,
// x_absmax}.
std::optional<KernelChoice> QuantLinear(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() != 1)
    return std::nullopt;
  for (int i = 1; i < n.num_inputs(); ++i)
    if (Present(n, i) && !IsWeight(n.input(i))) return std::nullopt;
  const std::string* mode = n.attr_string("x_quant");
  const bool fixed = mode != nullptr && *mode == "static";
  if (mode != nullptr && *mode != "dynamic_row" && !fixed) return std::nullopt;
  const float x_absmax = fixed ? n.attr_float_or("x_absmax", 0.0f) : 0.0f;
  if (fixed && !(x_absmax > 0.0f && std::isfinite(x_absmax))) return std::nullopt;
  const Dims x = InDims(n, 0), w = InDims(n, 1);
  if (x.empty() || w.size() != 2 || w[1] != x.back()) return std::nullopt;
  const int64_t nn = w[0];
  if (!VectorOk(n, 2, nn, false) || !VectorOk(n, 3, nn, true) || !VectorOk(n, 4, x.back(), true))
    return std::nullopt;
  // cuda: cuBLASLt's int8 GEMMs take k and n multiples of 4 (gemm-precision keeps other
  // Linears out of int8 on cuda).
  if (t == PlanTarget::kCuda && (x.back() % 4 != 0 || nn % 4 != 0)) return std::nullopt;
  const std::optional<std::string> activation = LinearEpilogue(n, x, nn);
  if (!activation) return std::nullopt;
  std::vector<PlanParam> params = {Int("m", Product(x, 0, x.size() - 1)), Int("k", x.back()),
                                   Int("n", nn), Str("activation", *activation)};
  if (fixed) params.push_back(Real("x_absmax", x_absmax));
  return Emit(t, "quant_linear", n, std::move(params));
}

// kiln.BlockQuantLinear(X, W [N, K] u4 or u8, scales [N, KB], zero_points [N, KB] (the codes'
// dtype or f32)?, B?){block_size, activation}; 8-bit codes (u8) add the param bits = 8 (4 is
// the default: the plan's u8 codes of 4-bit weights are packed two per byte).
std::optional<KernelChoice> BlockQuantLinear(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() != 1)
    return std::nullopt;
  for (int i = 1; i < n.num_inputs(); ++i)
    if (Present(n, i) && !IsWeight(n.input(i))) return std::nullopt;
  const int64_t bs = n.attr_int_or("block_size", 0);
  if (bs < 16 || (bs & (bs - 1)) != 0) return std::nullopt;
  const Dims x = InDims(n, 0), w = InDims(n, 1);
  if (x.empty() || w.size() != 2 || w[1] != x.back()) return std::nullopt;
  const int64_t nn = w[0], kb = (x.back() + bs - 1) / bs;
  if (InDims(n, 2) != Dims{nn, kb} || (Present(n, 3) && InDims(n, 3) != Dims{nn, kb}) ||
      !VectorOk(n, 4, nn, true))
    return std::nullopt;
  const DType codes = n.input(1).type().dtype;
  if ((codes != DType::kU4 && codes != DType::kU8) ||
      (Present(n, 3) && n.input(3).type().dtype != codes && n.input(3).type().dtype != DType::kF32))
    return std::nullopt;
  const std::optional<std::string> activation = LinearEpilogue(n, x, nn);
  if (!activation) return std::nullopt;
  std::vector<PlanParam> params = {Int("m", Product(x, 0, x.size() - 1)), Int("k", x.back()),
                                   Int("n", nn), Int("block_size", bs),
                                   Str("activation", *activation)};
  if (codes == DType::kU8) params.push_back(Int("bits", 8));
  return Emit(t, "block_quant_linear", n, std::move(params));
}

// kiln.BlockQuantGather(W [V, K] u4 or u8, indices, scales [V, KB], zero_points?){block_size}:
// the codes as block_quant_linear's (4-bit packed two per byte in the plan; bits = 8 for u8).
std::optional<KernelChoice> BlockQuantGather(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() != 1)
    return std::nullopt;
  for (int i : {0, 2, 3})
    if (Present(n, i) && !IsWeight(n.input(i))) return std::nullopt;
  const int64_t bs = n.attr_int_or("block_size", 0);
  if (bs < 16 || (bs & (bs - 1)) != 0) return std::nullopt;
  const Dims w = InDims(n, 0), ids = InDims(n, 1);
  if (w.size() != 2) return std::nullopt;
  const int64_t kb = (w[1] + bs - 1) / bs;
  if (InDims(n, 2) != Dims{w[0], kb} || (Present(n, 3) && InDims(n, 3) != Dims{w[0], kb}))
    return std::nullopt;
  const DType codes = n.input(0).type().dtype;
  if (codes != DType::kU4 && codes != DType::kU8) return std::nullopt;
  std::vector<PlanParam> params = {Int("rows", Product(ids, 0, ids.size())), Int("k", w[1]),
                                   Int("n", w[0]), Int("block_size", bs)};
  if (codes == DType::kU8) params.push_back(Int("bits", 8));
  return Emit(t, "block_quant_gather", n, std::move(params));
}

std::optional<KernelChoice> LayerNorm(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  const Dims x = InDims(n, 0);
  if (x.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int_or("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return std::nullopt;
  const int64_t h = x.back();
  if (!VectorOk(n, 1, h, false) || !VectorOk(n, 2, h, true) || OutDims(n, 0) != x)
    return std::nullopt;
  return Emit(t, "layer_norm", n,
              {Int("rows", Product(x, 0, x.size() - 1)), Int("h", h),
               Real("epsilon", n.attr_float_or("epsilon", 1e-5f))});
}

// SkipLayerNorm (X, skip, gamma, beta?, bias?) or SkipRMSNorm (X, skip, gamma, bias?).
std::optional<KernelChoice> SkipNorm(const Node& n, PlanTarget t, bool rms) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() > 2)
    return std::nullopt;
  const Dims x = InDims(n, 0);
  Dims skip = InDims(n, 1);
  if (x.empty() || skip.empty()) return std::nullopt;
  // skip broadcasts by repeating whole rows: leading ones aside, it is a suffix of x.
  size_t lead = 0;
  while (lead + 1 < skip.size() && skip[lead] == 1) ++lead;
  skip.erase(skip.begin(), skip.begin() + lead);
  if (skip.size() > x.size() || !std::equal(skip.begin(), skip.end(), x.end() - skip.size()))
    return std::nullopt;
  const int64_t h = x.back();
  const int64_t rows = Product(x, 0, x.size() - 1);
  const int64_t skip_rows = Product(skip, 0, skip.size() - 1);
  if (skip_rows <= 0 || rows % skip_rows != 0) return std::nullopt;
  if (!VectorOk(n, 2, h, false) || !VectorOk(n, 3, h, true) || (!rms && !VectorOk(n, 4, h, true)))
    return std::nullopt;
  for (int i = 0; i < n.num_outputs(); ++i)
    if (OutDims(n, i) != x) return std::nullopt;
  return Emit(t, rms ? "skip_rms_norm" : "skip_layer_norm", n,
              {Int("rows", rows), Int("h", h), Int("skip_rows", skip_rows),
               Real("epsilon", n.attr_float_or("epsilon", rms ? 1e-6f : 1e-5f))});
}

std::optional<KernelChoice> RmsNorm(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  const Dims x = InDims(n, 0);
  if (x.empty() || OutDims(n, 0) != x || !VectorOk(n, 1, x.back(), false)) return std::nullopt;
  return Emit(t, "rms_norm", n,
              {Int("rows", Product(x, 0, x.size() - 1)), Int("h", x.back()),
               Real("epsilon", n.attr_float_or("epsilon", 1e-6f))});
}

// kiln.Rotary(x, cos, sin): static dims, tables of one shape; the kernel rule checks the
// broadcast.
std::optional<KernelChoice> Rotary(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() != 1)
    return std::nullopt;
  const Dims x = InDims(n, 0), c = InDims(n, 1);
  if (x.empty() || c.empty() || InDims(n, 2) != c || OutDims(n, 0) != x) return std::nullopt;
  const int64_t interleaved = n.attr_int_or("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return std::nullopt;
  std::vector<PlanParam> params;
  if (interleaved) params.push_back(Int("interleaved", 1));
  return Emit(t, "rotary", n, std::move(params));
}

std::optional<KernelChoice> Attention(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || n.num_outputs() != 1) return std::nullopt;
  const Dims qkv = InDims(n, 0);
  const auto heads = n.attr_int("num_heads");
  const auto scale = n.attr_float("scale");
  const int64_t causal = n.attr_int_or("causal", 0);
  if (qkv.size() != 3 || !heads || *heads <= 0 || !scale || (causal != 0 && causal != 1))
    return std::nullopt;
  const int64_t kv = n.attr_int_or("num_kv_heads", *heads);
  if (kv <= 0 || *heads % kv != 0) return std::nullopt;
  const int64_t b = qkv[0], s = qkv[1];
  if (qkv[2] % (*heads + 2 * kv) != 0) return std::nullopt;
  const int64_t d = qkv[2] / (*heads + 2 * kv);
  const bool rotary = Present(n, 2);
  if (rotary != Present(n, 3)) return std::nullopt;
  if (rotary) {
    const Dims c = InDims(n, 2);
    if (c != InDims(n, 3) || c.size() != 3 || (c[0] != 1 && c[0] != b) || c[1] != s || c[2] <= 0 ||
        c[2] % 2 != 0 || c[2] > d || InType(n, 2) != InType(n, 0) || InType(n, 3) != InType(n, 0))
      return std::nullopt;
  }
  if (Present(n, 1)) {
    const Dims m = InDims(n, 1);
    if (m.size() > 4) return std::nullopt;
    const Dims full = {b, *heads, s, s};
    for (size_t i = 0; i < m.size(); ++i) {
      const int64_t want = full[4 - m.size() + i];
      if (m[i] != 1 && m[i] != want) return std::nullopt;
    }
  }
  if (OutDims(n, 0) != Dims{b, s, *heads * d}) return std::nullopt;
  std::vector<PlanParam> params = {Int("batch", b),          Int("seq", s),
                                   Int("num_heads", *heads), Int("head_size", d),
                                   Real("scale", *scale),    Int("causal", causal)};
  if (kv != *heads) params.push_back(Int("kv_heads", kv));
  const int64_t interleaved = n.attr_int_or("rotary_interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return std::nullopt;
  if (rotary && interleaved) params.push_back(Int("rotary_interleaved", 1));
  // cuda: 16-bit attention at a head size the tensor-core kernel has (its contract takes
  // fp16/bf16 and no rotary tables); everything else the simple kernel.
  if (t == PlanTarget::kCuda && FlashAttentionHeadSizeOk(d) && !rotary)
    if (auto k = Emit(t, "flash_attention", n, params)) return k;
  return Emit(t, "attention", n, std::move(params));
}

// kiln.Attention(q [B, N, S, D], k [B, Nkv, L, D], v, mask?) -> y [B, S, N·D].
std::optional<KernelChoice> HeadAttention(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() != 1)
    return std::nullopt;
  const Dims q = InDims(n, 0), k = InDims(n, 1);
  const auto scale = n.attr_float("scale");
  const int64_t causal = n.attr_int_or("causal", 0);
  if (q.size() != 4 || k.size() != 4 || InDims(n, 2) != k || !scale || (causal != 0 && causal != 1))
    return std::nullopt;
  const int64_t b = q[0], heads = q[1], s = q[2], d = q[3], kv = k[1];
  int64_t l = k[2];
  // Paged (input 4, the block table [B, W]): k/v are pools [P, Nkv, bs, D], L = W·bs.
  const bool paged = Present(n, 4);
  if (paged) {
    const Dims table = InDims(n, 4);
    if (InType(n, 4) != DType::kI64 || table.size() != 2 || table[0] != b || k[0] <= 0 || k[2] <= 0)
      return std::nullopt;
    // cuda: the split-KV kernel's limits (kernels/cuda/kv_cache.h).
    if (t == PlanTarget::kCuda &&
        (d > 256 || heads > 65535 || b * s > 65535 || b * s * heads > 0x7fffffff))
      return std::nullopt;
    l = table[1] * k[2];
  }
  if ((!paged && k[0] != b) || k[3] != d || heads <= 0 || kv <= 0 || heads % kv != 0 ||
      (causal && l < s))
    return std::nullopt;
  if (InType(n, 1) != InType(n, 0) || InType(n, 2) != InType(n, 0)) return std::nullopt;
  if (Present(n, 3)) {
    const Dims m = InDims(n, 3);
    if (m.size() > 4) return std::nullopt;
    const Dims full = {b, heads, s, l};
    for (size_t i = 0; i < m.size(); ++i) {
      const int64_t want = full[4 - m.size() + i];
      if (m[i] != 1 && m[i] != want) return std::nullopt;
    }
  }
  if (OutDims(n, 0) != Dims{b, s, heads * d}) return std::nullopt;
  std::vector<PlanParam> params = {
      Int("batch", b),     Int("seq", s),         Int("kv_seq", l),     Int("num_heads", heads),
      Int("head_size", d), Real("scale", *scale), Int("causal", causal)};
  if (kv != heads) params.push_back(Int("kv_heads", kv));
  if (paged) {
    params.push_back(Int("block_size", k[2]));
    params.push_back(Int("blocks", k[0]));
  }
  return Emit(t, "head_attention", n, std::move(params));
}

std::optional<KernelChoice> EmbedLayerNorm(const Node& n, PlanTarget t) {
  // input_ids, segment_ids?, position_ids?, word, pos, segment?, gamma, beta -> y, sum?
  if (n.num_outputs() > 2 || n.num_inputs() != 8) return std::nullopt;
  for (int i : {0, 3, 4, 6, 7})
    if (!Present(n, i)) return std::nullopt;
  if (Present(n, 1) != Present(n, 5)) return std::nullopt;
  const DType id = InType(n, 0);
  const Dims ids = InDims(n, 0);
  if (ids.size() != 2) return std::nullopt;
  const int64_t b = ids[0], s = ids[1];
  const Dims word = InDims(n, 3), pos = InDims(n, 4);
  if (word.size() != 2 || pos.size() != 2) return std::nullopt;
  const int64_t h = word[1];
  if (pos[1] != h) return std::nullopt;
  if (Present(n, 1) && (InType(n, 1) != id || InDims(n, 1) != ids)) return std::nullopt;
  if (Present(n, 5)) {
    const Dims seg = InDims(n, 5);
    if (seg.size() != 2 || seg[1] != h) return std::nullopt;
  }
  if (Present(n, 2)) {
    const Dims p = InDims(n, 2);
    if (InType(n, 2) != id || (p != ids && p != Dims{1, s} && p != Dims{s})) return std::nullopt;
  } else if (s > pos[0]) {
    return std::nullopt;
  }
  if (!VectorOk(n, 6, h, false) || !VectorOk(n, 7, h, false)) return std::nullopt;
  if (OutDims(n, 0) != Dims{b, s, h}) return std::nullopt;
  if (n.num_outputs() == 2 && OutDims(n, 1) != Dims{b, s, h}) return std::nullopt;
  return Emit(t, "embed_layer_norm", n,
              {Int("batch", b), Int("seq", s), Int("hidden", h),
               Real("epsilon", n.attr_float_or("epsilon", 1e-12f))});
}

std::optional<KernelChoice> Pool(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || n.num_outputs() != 1) return std::nullopt;
  const Dims hid = InDims(n, 0);
  if (hid.size() != 3) return std::nullopt;
  const int64_t b = hid[0], s = hid[1], h = hid[2];
  if (Present(n, 1) && InDims(n, 1) != Dims{b, s}) return std::nullopt;
  const std::string* mode = n.attr_string("mode");
  const int64_t normalize = n.attr_int_or("normalize", 0);
  if (!mode || (*mode != "mean" && *mode != "cls" && *mode != "last") ||
      (normalize != 0 && normalize != 1))
    return std::nullopt;
  if (*mode == "cls" && s < 1) return std::nullopt;
  if (OutDims(n, 0) != Dims{b, h}) return std::nullopt;
  return Emit(t, "pool", n,
              {Int("batch", b), Int("seq", s), Int("hidden", h), Str("mode", *mode),
               Int("normalize", normalize)});
}

std::optional<KernelChoice> Gelu(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || n.num_outputs() != 1) return std::nullopt;
  const std::string* a = n.attr_string("approximate");
  const std::string approx = a ? *a : "none";
  if (approx != "none" && approx != "tanh") return std::nullopt;
  const Dims x = InDims(n, 0);
  if (OutDims(n, 0) != x) return std::nullopt;
  return Emit(t, "gelu", n,
              {Int("n", Product(x, 0, x.size())), Int("tanh", approx == "tanh" ? 1 : 0)});
}

std::optional<KernelChoice> Glu(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || n.num_outputs() != 1) return std::nullopt;
  const std::string* act = n.attr_string("activation");
  const Dims x = InDims(n, 0);
  if (!act || x.empty() || x.back() % 2 != 0) return std::nullopt;
  Dims y = x;
  y.back() /= 2;
  if (OutDims(n, 0) != y) return std::nullopt;
  return Emit(
      t, "glu", n,
      {Int("rows", Product(x, 0, x.size() - 1)), Int("f", y.back()), Str("activation", *act)});
}

// kiln.CacheWrite(cache [B,H,C,D], new [B,H,S,D], positions [B,S], table?) -> [B,H,C,D];
// paged (table [B, W]): cache and y are the pool [P,H,bs,D] and C = W·bs.
std::optional<KernelChoice> CacheWrite(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || n.num_outputs() != 1)
    return std::nullopt;
  const Dims c = InDims(n, 0), r = InDims(n, 1), p = InDims(n, 2);
  if (c.size() != 4 || r.size() != 4 || OutDims(n, 0) != c) return std::nullopt;
  const bool paged = Present(n, 3);
  const Dims table = paged ? InDims(n, 3) : Dims{};
  if (paged && (InType(n, 3) != DType::kI64 || table.size() != 2 || table[0] != r[0]))
    return std::nullopt;
  if ((!paged && r[0] != c[0]) || r[1] != c[1] || r[3] != c[3] || p != Dims{r[0], r[2]})
    return std::nullopt;
  std::vector<PlanParam> params = {Int("batch", r[0]), Int("heads", c[1]),
                                   Int("slots", paged ? table[1] * c[2] : c[2]), Int("seq", r[2]),
                                   Int("row", c[3])};
  if (paged) {
    params.push_back(Int("block_size", c[2]));
    params.push_back(Int("blocks", c[0]));
  }
  return Emit(t, "cache_write", n, std::move(params));
}

// The packed-token ops (docs/packing.md): tokens [1, T, ...], lengths [N] int64.
std::optional<KernelChoice> PackedAttention(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  const Dims qkv = InDims(n, 0), len = InDims(n, 1);
  const auto heads = n.attr_int("num_heads");
  const auto scale = n.attr_float("scale");
  if (qkv.size() != 3 || qkv[0] != 1 || len.size() != 1 || !heads || *heads <= 0 || !scale)
    return std::nullopt;
  const int64_t kv = n.attr_int_or("num_kv_heads", *heads);
  if (kv <= 0 || *heads % kv != 0 || qkv[2] % (*heads + 2 * kv) != 0) return std::nullopt;
  const int64_t d = qkv[2] / (*heads + 2 * kv);
  if (OutDims(n, 0) != Dims{1, qkv[1], *heads * d}) return std::nullopt;
  std::vector<PlanParam> params = {Int("tokens", qkv[1]), Int("sequences", len[0]),
                                   Int("num_heads", *heads), Int("head_size", d),
                                   Real("scale", *scale)};
  if (kv != *heads) params.push_back(Int("kv_heads", kv));
  if (t == PlanTarget::kCuda) {
    // The CUDA kernels' limits (cuda_steps_packed.cc): a grid row per sequence and head,
    // int32 token offsets; the simple kernel's head size.
    if (len[0] > 65535 || *heads > 65535 || qkv[1] > 0x7fffffff) return std::nullopt;
    // 16-bit at a flash head size on the flash kernel's variable-length form.
    if (FlashAttentionHeadSizeOk(d))
      if (auto k = Emit(t, "packed_flash_attention", n, params)) return k;
    if (d > 256) return std::nullopt;
  }
  return Emit(t, "packed_attention", n, std::move(params));
}

std::optional<KernelChoice> PackedPool(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  const Dims hid = InDims(n, 0), len = InDims(n, 1);
  if (hid.size() != 3 || hid[0] != 1 || len.size() != 1) return std::nullopt;
  const std::string* mode = n.attr_string("mode");
  const int64_t normalize = n.attr_int_or("normalize", 0);
  if (!mode || (*mode != "mean" && *mode != "cls") || (normalize != 0 && normalize != 1))
    return std::nullopt;
  if (OutDims(n, 0) != Dims{len[0], hid[2]}) return std::nullopt;
  return Emit(t, "packed_pool", n,
              {Int("tokens", hid[1]), Int("sequences", len[0]), Int("hidden", hid[2]),
               Str("mode", *mode), Int("normalize", normalize)});
}

std::optional<KernelChoice> PackedPositions(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  const Dims len = InDims(n, 0), tok = InDims(n, 1);
  if (len.size() != 1 || tok.size() != 2 || tok[0] != 1 || OutDims(n, 0) != tok)
    return std::nullopt;
  return Emit(t, "packed_positions", n, {Int("tokens", tok[1]), Int("sequences", len[0])});
}

std::optional<KernelChoice> PackedCumSum(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || !Present(n, 1) || n.num_outputs() != 1) return std::nullopt;
  const Dims x = InDims(n, 0), len = InDims(n, 1);
  const int64_t exclusive = n.attr_int_or("exclusive", 0);
  if (x.size() != 2 || x[0] != 1 || len.size() != 1 || OutDims(n, 0) != x ||
      (exclusive != 0 && exclusive != 1))
    return std::nullopt;
  return Emit(t, "packed_cumsum", n,
              {Int("tokens", x[1]), Int("sequences", len[0]), Int("exclusive", exclusive)});
}

std::optional<KernelChoice> Softmax(const Node& n, PlanTarget t) {
  if (!Present(n, 0) || n.num_outputs() != 1) return std::nullopt;
  const Dims x = InDims(n, 0);
  if (x.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int_or("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1 || OutDims(n, 0) != x) return std::nullopt;
  return Emit(t, "softmax", n, {Int("rows", Product(x, 0, x.size() - 1)), Int("n", x.back())});
}

}  // namespace

bool IsAliasOp(const Node& n) {
  if (n.num_outputs() != 1 || !Present(n, 0)) return false;
  return IsView(FindOp(n.domain(), n.op()));
}

std::optional<KernelChoice> ChooseKernel(const Node& n, PlanTarget target, std::string* why_not) {
  std::optional<KernelChoice> k;
  bool known = true;
  if (n.domain() == "kiln") {
    if (n.op() == "Linear")
      k = Linear(n, target);
    else if (n.op() == "QuantLinear")
      k = QuantLinear(n, target);
    else if (n.op() == "BlockQuantLinear")
      k = BlockQuantLinear(n, target);
    else if (n.op() == "BlockQuantGather")
      k = BlockQuantGather(n, target);
    else if (n.op() == "SkipLayerNorm" || n.op() == "SkipRMSNorm")
      k = SkipNorm(n, target, n.op() == "SkipRMSNorm");
    else if (n.op() == "RMSNorm")
      k = RmsNorm(n, target);
    else if (n.op() == "Rotary")
      k = Rotary(n, target);
    else if (n.op() == "Glu")
      k = Glu(n, target);
    else if (n.op() == "MultiHeadAttention")
      k = Attention(n, target);
    else if (n.op() == "Attention")
      k = HeadAttention(n, target);
    else if (n.op() == "EmbedLayerNorm")
      k = EmbedLayerNorm(n, target);
    else if (n.op() == "Pool")
      k = Pool(n, target);
    else if (n.op() == "CacheWrite")
      k = CacheWrite(n, target);
    else if (n.op() == "PackedAttention")
      k = PackedAttention(n, target);
    else if (n.op() == "PackedPool")
      k = PackedPool(n, target);
    else if (n.op() == "PackedPositions")
      k = PackedPositions(n, target);
    else if (n.op() == "PackedCumSum")
      k = PackedCumSum(n, target);
    else
      known = false;
  } else if (n.domain().empty() && n.op() == "LayerNormalization") {
    k = LayerNorm(n, target);
  } else if (n.domain().empty() && n.op() == "Gelu") {
    k = Gelu(n, target);
  } else if (n.domain().empty() && n.op() == "Softmax") {
    k = Softmax(n, target);

  } else {
    known = false;
  }
  if (!k && !known) return ChooseStandardKernel(n, target, why_not);
  if (!k && why_not) {
    *why_not =
        known ? "its dtypes or shapes are outside the kernel's rule" : "no kernel for this op";
    // A target without the quantized Linear's kernel: say so rather than blame the shapes.
    for (const auto& [op, id] : {std::pair{"QuantLinear", "quant_linear"},
                                 std::pair{"BlockQuantLinear", "block_quant_linear"}})
      if (n.domain() == "kiln" && n.op() == op && FindKernelContract(target, id) == nullptr)
        *why_not = absl::StrCat("no ", std::string(PlanTargetName(target)), " kernel '", id, "'");
  }
  return k;
}

absl::StatusOr<std::string> RefNodeText(const Node& n) {
  if (!HasReferenceKernel(n.domain(), n.op()))
    return absl::UnimplementedError(
        absl::StrCat(n.Describe(), ": no CPU kernel (optimized or reference) for this op"));
  Graph g;
  g.set_name("step");
  g.set_opset(n.graph() ? n.graph()->opset() : 0);
  std::vector<Value> operands;
  int k = 0;
  for (const Value& v : n.inputs()) {
    if (!v) {
      operands.push_back(Value{});
      continue;
    }
    const auto dims = v.type().StaticDims();
    if (!dims) return KILN_INTERNAL("%s: operand without static dims", n.Describe());
    operands.push_back(
        g.AddInput(absl::StrCat("x", k++), Type::Static(v.type().dtype, *dims))->output(0));
  }
  Node* m = g.AddNode(n.op(), operands, n.num_outputs(), n.domain());
  for (const auto& [name, attr] : n.attrs()) m->set_attr(name, attr);
  for (int i = 0; i < n.num_outputs(); ++i) {
    m->set_output_type(i, n.output_info(i).type);
    m->set_output_name(i, n.output_info(i).name);
  }
  m->set_provenance(n.provenance());
  for (int i = 0; i < n.num_outputs(); ++i) g.AddOutput(absl::StrCat("y", i), m->output(i));
  std::string text = PrintGraph(g);
  if (absl::StatusOr<std::unique_ptr<Graph>> back = ParseGraph(text); !back.ok())
    return KILN_INTERNAL("%s: its ref step IR text does not parse: %s", n.Describe(),
                         std::string(back.status().message()));
  return text;
}

}  // namespace kiln::compiler
