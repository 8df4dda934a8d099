// onnxruntime's `com.microsoft` ops, as its transformer optimizer writes them into
// `model_O1.onnx` / `model_O2.onnx` files, expanded at import into the standard ops they
// compute (docs/importer.md "onnxruntime-optimized graphs"). kiln's fusions then find in
// the expansion the patterns they already know and fuse them back into kiln's own ops, so
// there is one implementation of each computation and one path to the plans.
// Expansions (each keeps the node's provenance; names "<node>/<op>_<k>"):
//   Gelu(X)                       Gelu (erf)
//   FastGelu(X, bias?)            Gelu(X + bias, approximate="tanh")
//   BiasGelu(A, B)                Gelu(A + B)
//   QuickGelu(X){alpha=1.702}     X · Sigmoid(alpha · X)
//   BiasAdd(X, bias, skip)        (X + bias) + skip
//   SkipLayerNormalization(input, skip, gamma, beta?, bias?){epsilon}
//                                 s = (input + bias) + skip; LayerNormalization(s, gamma,
//                                 beta){axis=-1} → output, mean, inv_std_var; s → output 3
//   SkipSimplifiedLayerNormalization(input, skip, gamma, bias?){epsilon}
//                                 s as above; RMSNormalization(s, gamma) → output; s → 3
//   SimplifiedLayerNormalization(X, scale){axis, epsilon} (in the default domain, where
//   onnxruntime registers it)
//                                 RMSNormalization(X, scale)
//   Upsample(X, scales) (the default domain's, deprecated in 10; `scales` an attribute
//   before 9)                     Resize(X, _, scales){mode, asymmetric, nearest_mode=floor}
//                                 (Upsample's nearest picks floor(y / scale))
//   MeanVarianceNormalization(X){axes=[0,2,3]} (an ONNX function, default domain)
//                                 (X - E[X]) / (sqrt(E[X²] - E[X]²) + 1e-9), E = ReduceMean
//   EmbedLayerNormalization(ids, segment_ids?, word, pos, segment?, gamma, beta, mask?,
//                           position_ids?){epsilon, mask_index_type}
//                                 s = word[ids] + pos[position_ids or [0..S)] (+
//                                 segment[segment_ids]); LayerNormalization(s) → output;
//                                 mask_index = Σ mask per row (i32); s → embedding_sum
//   Attention(input, weights, bias?, mask_index?, past?, attention_bias?){num_heads,
//             qkv_hidden_sizes?, scale?, mask_filter_value=-10000, unidirectional}
//                                 Q/K/V = input · W[:, part] + bias[part] (constant W),
//                                 heads split, Q·Kᵀ · scale + mask + attention_bias,
//                                 Softmax, · V, heads merged. The mask as onnxruntime reads
//                                 it: [B, T] 0/1 (0 masked), or [B] valid key counts
//                                 (keys at or past the count masked); masked scores get
//                                 mask_filter_value added. unidirectional: keys after the
//                                 query masked the same way.
//   MultiHeadAttention(query, key, value, bias?, key_padding_mask?, attention_bias?,
//                      past_key?, past_value?)
//                                 the same heads' attention on separate Q, K, V (bias a
//                                 constant split in thirds; K/V may be heads already), a
//                                 past concatenated in front (the present outputs);
//                                 packed QKV/KV refused
//   MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?){K, N, bits, block_size}
//                                 A · DequantizeLinear(B as u4/u2/u8 [N, K], blocked)ᵀ + bias
//   GroupQueryAttention(query, key?, value?, past_key?, past_value?, seqlens_k,
//                       total_sequence_length, cos_cache?, sin_cache?, _, attention_bias?)
//                                 heads (packed QKV split), rotary at each row's position,
//                                 the present cache gathered from past and new rows, the
//                                 causal / windowed attention over it with repeat_kv (see
//                                 ExpandGroupQueryAttention)
//   RotaryEmbedding(input, position_ids, cos_cache, sin_cache){interleaved, num_heads,
//                   rotary_embedding_dim}
//                                 ONNX's RotaryEmbedding(input, cos, sin, position_ids)
//   FusedMatMul(A, B){alpha, transA, transB} (what onnxruntime's optimizer writes for
//   MatMul · scale and MatMul(Transpose), in the files it saves)
//                                 MatMul(A', B') · alpha, A' = A with its last two axes
//                                 swapped when transA (B' likewise); transBatch* refused
//   MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?)
//                                 Cast(MatMulInteger(A, B, a_zp, b_zp), f32) ·
//                                 (a_scale · b_scale) + bias: quantize_dynamic's own
//                                 pattern, which the dequantize pass knows
//   DynamicQuantizeMatMul(A, B, b_scale, b_zero_point?, bias?)
//                                 DynamicQuantizeLinear(A) → (q, scale, zp), then as
//                                 MatMulIntegerToFloat(q, B, scale, b_scale, zp, ...)
//   GatherBlockQuantized(data, indices, scales, zero_points?){bits, block_size,
//                        gather_axis=0, quantize_axis=1} (an int4 embedding table shared
//                        with the LM head's MatMulNBits: onnxruntime-genai's
//                        shared_embeddings)
//                                 kiln.BlockQuantGather(codes, indices, scales, zero
//                                 points?) when the table, scales and zero points are
//                                 constants (through Reshapes): the codes stay 4/8-bit;
//                                 else Gather(DequantizeLinear(codes, scales, zero points,
//                                 axis 1, block_size), indices): u8 data unpacked two
//                                 codes per byte (Mod / Div by 16) at 4 bits; absent zero
//                                 points 2^(bits−1) (u8 data) or 0 (int4 data)
// Unimplemented (named in the error): any other com.microsoft op; past/present state,
// rotary or the 3-D/4-D/start-end mask formats of Attention; the statistics outputs of
// the simplified norms; mask_index without a mask.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/narrow.h"
#include "kiln/support/status.h"
#include "src/onnx/import_internal.h"

namespace kiln::onnx_import {
namespace {

// Adds the nodes of one expansion, named and attributed to the node they replace.
class Expansion {
 public:
  Expansion(Graph& g, Node* origin, absl::flat_hash_map<std::string, Value>& names)
      : g_(g), origin_(origin), names_(names) {}

  Value Op(const std::string& op, std::vector<Value> in,
           std::vector<std::pair<std::string, Attribute>> attrs = {}, int outputs = 1,
           std::vector<Value>* more = nullptr) {
    Node* n = g_.AddNode(op, std::move(in), outputs);
    n->set_provenance(origin_->provenance());
    for (auto& [k, v] : attrs) n->set_attr(k, std::move(v));
    for (int i = 0; i < outputs; ++i) {
      const std::string name = Fresh(op);
      n->set_output_name(i, name);
      names_[name] = n->output(i);
      if (i > 0 && more) more->push_back(n->output(i));
    }
    return n->output(0);
  }

  // An op of kiln's own domain (docs/fused-ops.md).
  Value KilnOp(const std::string& op, std::vector<Value> in,
               std::vector<std::pair<std::string, Attribute>> attrs = {}) {
    Node* n = g_.AddNode(op, std::move(in), 1, "kiln");
    n->set_provenance(origin_->provenance());
    for (auto& [k, v] : attrs) n->set_attr(k, std::move(v));
    const std::string name = Fresh(op);
    n->set_output_name(0, name);
    names_[name] = n->output(0);
    return n->output(0);
  }

  Value Const(Tensor t) {
    const std::string name = Fresh("const");
    Node* c = g_.AddConstant(name, std::move(t));
    c->add_provenance(origin_->provenance().front());
    names_[name] = c->output(0);
    return c->output(0);
  }
  Value I64(std::vector<int64_t> v) { return Const(VectorI64(v)); }
  Value F32(float v) { return Const(Tensor::ScalarF32(v)); }

  // Output i of the origin becomes `v` (its users and its ONNX name move over).
  void Bind(int i, Value v) {
    if (i >= origin_->num_outputs()) return;
    const Value old = origin_->output(i);
    const std::string name = origin_->output_info(i).name;
    g_.ReplaceAllUsesWith(old, v);
    if (name.empty()) return;
    origin_->set_output_name(i, Fresh("replaced"));
    v.node->set_output_name(v.index, name);
    names_[name] = v;
  }

  // True when output i exists and is named (a graph output or read by a node).
  bool Wanted(int i) const {
    return i < origin_->num_outputs() && !origin_->output_info(i).name.empty();
  }

 private:
  std::string Fresh(const std::string& what) {
    const std::string base = absl::StrCat(origin_->provenance().front(), "/", what);
    std::string name = absl::StrCat(base, "_", counter_++);
    while (names_.contains(name)) name = absl::StrCat(base, "_", counter_++);
    return name;
  }

  Graph& g_;
  Node* origin_;
  absl::flat_hash_map<std::string, Value>& names_;
  int counter_ = 0;
};

absl::Status Unsupported(const Node* n, std::string_view what) {
  return absl::UnimplementedError(absl::StrCat(n->Describe(), ": ", std::string(what)));
}

bool Has(const Node* n, int i) { return i < n->num_inputs() && n->input(i); }

// The dims of a constant input (through nothing: initializers import as Constants).
std::optional<std::vector<int64_t>> ConstDims(const Node* n, int i) {
  if (!Has(n, i)) return std::nullopt;
  const Tensor* t = n->input(i).node->constant_value();
  if (t == nullptr) return std::nullopt;
  return t->dims();
}

Value GeluOf(Expansion& e, Value x, bool tanh) {
  if (tanh) return e.Op("Gelu", {x}, {{"approximate", std::string("tanh")}});
  return e.Op("Gelu", {x});
}

// (input + bias) + skip, bias optional: the bias first, so a MatMul in front fuses into a
// Linear with it (onnxruntime adds input + skip first: the sums differ by rounding only).
Value SkipSum(Expansion& e, Node* n, int bias_index) {
  Value s = n->input(0);
  if (Has(n, bias_index)) s = e.Op("Add", {s, n->input(bias_index)});
  return e.Op("Add", {s, n->input(1)});
}

absl::Status NoStats(const Node* n, Expansion& e, std::initializer_list<int> outputs) {
  for (int i : outputs)
    if (e.Wanted(i))
      return Unsupported(n, absl::StrCat("output ", i,
                                         " (a normalization statistic) is not "
                                         "supported"));
  return absl::OkStatus();
}

absl::Status ExpandEmbedLayerNorm(Node* n, Expansion& e) {
  // ids, segment_ids?, word, pos, segment?, gamma, beta, mask?, position_ids?
  if (!Has(n, 0) || !Has(n, 2) || !Has(n, 3) || !Has(n, 5) || !Has(n, 6))
    return absl::InvalidArgumentError(absl::StrCat(
        n->Describe(), ": input_ids, word, position embeddings, gamma and beta are required"));
  const Value ids = n->input(0);
  Value sum = e.Op("Gather", {n->input(2), ids});
  Value positions;
  if (Has(n, 8)) {
    positions = n->input(8);
  } else {  // [0 .. S) as [1, S], S = ids' dim 1
    Value shape = e.Op("Shape", {ids});
    Value seq = e.Op("Gather", {shape, e.Const(Tensor::ScalarI64(1))}, {{"axis", int64_t{0}}});
    Value range =
        e.Op("Range", {e.Const(Tensor::ScalarI64(0)), seq, e.Const(Tensor::ScalarI64(1))});
    positions = e.Op("Unsqueeze", {range, e.I64({0})});
  }
  sum = e.Op("Add", {sum, e.Op("Gather", {n->input(3), positions})});
  if (Has(n, 1) && Has(n, 4)) sum = e.Op("Add", {sum, e.Op("Gather", {n->input(4), n->input(1)})});
  const float eps = n->attr_float_or("epsilon", 1e-12f);
  e.Bind(0, e.Op("LayerNormalization", {sum, n->input(5), n->input(6)},
                 {{"axis", int64_t{-1}}, {"epsilon", eps}}));
  if (e.Wanted(1) && n->attr_int_or("mask_index_type", 1) != 0) {
    if (!Has(n, 7)) return Unsupported(n, "mask_index without a mask input is not supported");
    Value m = e.Op("Cast", {n->input(7)}, {{"to", int64_t{6}}});  // INT32
    Value counts = e.Op("ReduceSum", {m, e.I64({1})}, {{"keepdims", int64_t{0}}});
    // i32 [batch] by the op's definition: the Attention that reads it picks its mask
    // format by rank before shape inference has run.
    Type t;
    t.dtype = DType::kI32;
    t.shape = std::vector<Dim>{Dim()};
    counts.node->set_output_type(0, t);
    e.Bind(1, counts);
  }
  e.Bind(2, sum);
  return absl::OkStatus();
}

absl::StatusOr<Value> AttendHeads(Node* n, Expansion& e, Value q, Value kt, Value v, Value scale,
                                  Value queries, Value keys, int mask_at, int bias_at);

// A scalar: dim i of x.
Value DimOf(Expansion& e, Value x, int64_t i) {
  return e.Op("Gather", {e.Op("Shape", {x}), e.Const(Tensor::ScalarI64(i))},
              {{"axis", int64_t{0}}});
}

absl::Status ExpandAttention(Node* n, Expansion& e) {
  if (Has(n, 4)) return Unsupported(n, "the past state input is not supported");
  if (Has(n, 6) || Has(n, 7))
    return Unsupported(n, "past_sequence_length/cache inputs are not supported");
  if (n->num_outputs() > 1 && e.Wanted(1))
    return Unsupported(n, "the present output is not supported");
  if (n->attr_int_or("do_rotary", 0) != 0) return Unsupported(n, "do_rotary is not supported");
  const int64_t heads = n->attr_int_or("num_heads", 0);
  if (heads < 1)
    return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": num_heads must be >= 1"));
  const std::optional<std::vector<int64_t>> w = ConstDims(n, 1);
  if (!w || w->size() != 2)
    return Unsupported(n, "the weights must be a constant [input_hidden, q + k + v hidden]");
  std::vector<int64_t> sizes;
  if (const std::vector<int64_t>* s = n->attr_ints("qkv_hidden_sizes")) {
    sizes = *s;
  } else {
    sizes = {(*w)[1] / 3, (*w)[1] / 3, (*w)[1] / 3};
  }
  if (sizes.size() != 3 || sizes[0] + sizes[1] + sizes[2] != (*w)[1] || sizes[0] != sizes[1] ||
      sizes[0] % heads != 0 || sizes[2] % heads != 0)
    return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": the weights' ", (*w)[1],
                                                   " columns do not split into Q, K, V of ", heads,
                                                   " heads"));
  const int64_t dh = sizes[0] / heads, dv = sizes[2] / heads;
  const Value x = n->input(0);
  std::vector<Value> qkv;
  int64_t start = 0;
  for (int part = 0; part < 3; ++part) {
    const int64_t end = start + sizes[part];
    Value wp = e.Op("Slice", {n->input(1), e.I64({start}), e.I64({end}), e.I64({1})});
    Value y = e.Op("MatMul", {x, wp});
    if (Has(n, 2)) {
      Value bp = e.Op("Slice", {n->input(2), e.I64({start}), e.I64({end}), e.I64({0})});
      y = e.Op("Add", {bp, y});
    }
    const int64_t d = part == 2 ? dv : dh;
    y = e.Op("Reshape", {y, e.I64({0, 0, heads, d})});
    const std::vector<int64_t> perm =
        part == 1 ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
    qkv.push_back(e.Op("Transpose", {y}, {{"perm", perm}}));
    start = end;
  }
  // 0 (the default) means 1/sqrt(head size).
  float scale = n->attr_float_or("scale", 0.f);
  if (scale == 0.f) scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const Value tokens = DimOf(e, x, 1);  // self-attention: as many keys as queries
  KILN_ASSIGN_OR_RETURN(
      Value ctx, AttendHeads(n, e, qkv[0], qkv[1], qkv[2], e.F32(scale), tokens, tokens, 3, 5));
  e.Bind(0, e.Op("Reshape", {ctx, e.I64({0, 0, sizes[2]})}));
  return absl::OkStatus();
}

// The heads' attention shared by Attention and MultiHeadAttention: q [B, N, S, D], kt
// [B, N, D, T], v [B, N, T, Dv] -> [B, S, N, Dv] (heads not merged): Q·Kᵀ · scale, the
// key mask at input `mask_at` ([B, T] 0/1 or [B] valid key counts), the causal mask when
// `unidirectional` (query i sits at key position T - S + i: with a past, after it), the
// additive bias at input `bias_at`, Softmax, · V. Masked scores get mask_filter_value
// added, as onnxruntime does. `queries` (S) and `keys` (T) are scalars the caller reads
// from the op's inputs, not from the heads (a value read outside the attention block
// would keep it from fusing).
absl::StatusOr<Value> AttendHeads(Node* n, Expansion& e, Value q, Value kt, Value v, Value scale,
                                  Value queries, Value keys, int mask_at, int bias_at) {
  // The scale and the masks are built in f32 and cast to Q's dtype (an fp16 file's
  // Attention computes in fp16; for f32 the CastLikes are no-ops the passes remove).
  Value scores = e.Op("Mul", {e.Op("MatMul", {q, kt}), e.Op("CastLike", {scale, q})});
  const float filter = n->attr_float_or("mask_filter_value", -10000.0f);
  if (Has(n, mask_at)) {
    const Type& mt = n->input(mask_at).type();
    Value keep;  // [B, T] of 0/1, as f32
    if (mt.has_rank() && mt.rank() == 2) {
      keep = e.Op("Cast", {n->input(mask_at)}, {{"to", int64_t{1}}});
    } else if (mt.has_rank() && mt.rank() == 1) {
      // Valid key counts: key j is kept while j < count[b].
      Value range =
          e.Op("Range", {e.Const(Tensor::ScalarI64(0)), keys, e.Const(Tensor::ScalarI64(1))});
      Value counts = e.Op("Cast", {n->input(mask_at)}, {{"to", int64_t{7}}});
      Value less = e.Op("Less", {range, e.Op("Unsqueeze", {counts, e.I64({1})})});
      keep = e.Op("Cast", {less}, {{"to", int64_t{1}}});
    } else {
      return Unsupported(n,
                         "only the [batch, total_sequence] and [batch] mask_index formats "
                         "are supported (its rank must be known at import)");
    }
    Value masked = e.Op("Sub", {e.F32(1.0f), keep});
    Value bias = e.Op("CastLike", {e.Op("Mul", {masked, e.F32(filter)}), q});
    bias = e.Op("Unsqueeze", {bias, e.I64({1, 2})});
    scores = e.Op("Add", {scores, bias});
  }
  if (n->attr_int_or("unidirectional", 0) != 0) {
    // 1 where the key comes after the query: (1 - tril(ones [S, T], T - S)) · filter.
    Value st = e.Op("Concat",
                    {e.Op("Reshape", {queries, e.I64({1})}), e.Op("Reshape", {keys, e.I64({1})})},
                    {{"axis", int64_t{0}}});
    Value ones = e.Op("ConstantOfShape", {st}, {{"value", Tensor::FromF32({1}, {1.0f})}});
    Value tril = e.Op("Trilu", {ones, e.Op("Sub", {keys, queries})}, {{"upper", int64_t{0}}});
    const Value causal = e.Op("Mul", {e.Op("Sub", {e.F32(1.0f), tril}), e.F32(filter)});
    scores = e.Op("Add", {scores, e.Op("CastLike", {causal, q})});
  }
  if (Has(n, bias_at)) scores = e.Op("Add", {scores, n->input(bias_at)});
  Value probs = e.Op("Softmax", {scores}, {{"axis", int64_t{-1}}});
  return e.Op("Transpose", {e.Op("MatMul", {probs, v})},
              {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
}

// MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?){K, N, bits, block_size}: onnxruntime's
// block-quantized weight-only MatMul. The constant B [N, k_blocks, blob] (codes packed
// low-first along K) becomes a u4/u2/u8 tensor [N, K] and Y = A · DequantizeLinear(B,
// scales [N, k_blocks], zero points, axis 1, block_size)ᵀ (+ bias): kiln's blocked
// DequantizeLinear, which constant folding turns into the f32 weight a plan multiplies —
// except 4 and 8 bits with constant scales, which become kiln.BlockQuantLinear(A, codes,
// scales [N, k_blocks], zero points?, bias?){block_size} and stay 4- or 8-bit in the plan.
// Either form multiplies in f32, as onnxruntime's CPU kernel does: f16/bf16 scales widen
// to f32 (exactly); BlockQuantLinear takes a 16-bit A (a q4f16 file) as it is and rounds
// its f32 result to A's dtype; the DequantizeLinear form casts A up and the result back.
// Zero points: absent (2^(bits-1)),
// packed like B, or floats [N · k_blocks] (4 and 8 bits only); g_idx refused.
absl::Status ExpandMatMulNBits(Node* n, Expansion& e) {
  const int64_t k = n->attr_int_or("K", 0), nn = n->attr_int_or("N", 0);
  const int64_t bits = n->attr_int_or("bits", 4), bs = n->attr_int_or("block_size", 0);
  if (bits != 2 && bits != 4 && bits != 8)
    return Unsupported(n, absl::StrCat("bits=", bits, " is not supported (2, 4, 8 are)"));
  if (k < 1 || nn < 1 || bs < 16 || (bs & (bs - 1)) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(n->Describe(), ": K, N must be positive and block_size a power of two >= 16"));
  if (Has(n, 4)) return Unsupported(n, "g_idx (act-order) is not supported");
  const Tensor* b = Has(n, 1) ? n->input(1).node->constant_value() : nullptr;
  if (b == nullptr || b->dtype() != DType::kU8)
    return Unsupported(n, "B must be a constant uint8 tensor");
  const int64_t kb = (k + bs - 1) / bs, per_byte = 8 / bits, blob = bs / per_byte;
  if (b->dims() != std::vector<int64_t>{nn, kb, blob})
    return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": B must be [", nn, ", ", kb,
                                                   ", ", blob, "], got ", b->ShapeString()));
  const DType code = bits == 4 ? DType::kU4 : bits == 2 ? DType::kU2 : DType::kU8;
  const uint8_t* packed = b->data<uint8_t>();
  Tensor w(code, {nn, k});  // row r: K codes of its kb · bs (the rest is padding)
  std::vector<uint8_t> row(static_cast<size_t>(kb * bs));
  for (int64_t r = 0; r < nn; ++r) {
    UnpackSubByte(packed + r * kb * blob, kb * bs, bits == 8 ? DType::kU8 : code, row.data());
    std::memcpy(w.data<uint8_t>() + r * k, row.data(), static_cast<size_t>(k));
  }
  Tensor zp(code, {nn, kb});
  const Tensor* sc = n->input(2).node->constant_value();
  // 4 or 8 bits with constant float scales: kept as kiln.BlockQuantLinear, whose kernels
  // dequantize in registers (2 bits: dequantized by constant folding).
  const bool keep_codes =
      (bits == 4 || bits == 8) && sc != nullptr &&
      (sc->dtype() == DType::kF32 || sc->dtype() == DType::kF16 || sc->dtype() == DType::kBF16) &&
      sc->NumElements() == nn * kb;
  // Float zero points (T1, one per block, unpacked: what HQQ writes): w = (code − z) · s with
  // z fractional, which only BlockQuantLinear represents (DequantizeLinear's are integers).
  const Tensor* z = Has(n, 3) ? n->input(3).node->constant_value() : nullptr;
  Tensor float_zp;
  const bool float_zero = z != nullptr && (z->dtype() == DType::kF32 || z->dtype() == DType::kF16 ||
                                           z->dtype() == DType::kBF16);
  if (float_zero) {
    if (!keep_codes)
      return Unsupported(n, "float zero points need 4 or 8 bits and constant scales");
    if (z->NumElements() != nn * kb)
      return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": float zero points must be [",
                                                     nn * kb, "], got ", z->ShapeString()));
    float_zp = Tensor(DType::kF32, {nn, kb});
    for (int64_t i = 0; i < nn * kb; ++i)
      float_zp.data<float>()[i] = static_cast<float>(z->GetAsDouble(i));  // exact: f16 ⊂ f32
  } else if (!Has(n, 3)) {
    std::memset(zp.raw(), 1 << (bits - 1), zp.NumBytes());
  } else {
    const int64_t zrow = (kb + per_byte - 1) / per_byte;
    if (z == nullptr || z->dtype() != DType::kU8 || z->NumElements() != nn * zrow)
      return Unsupported(n, absl::StrCat("zero points must be a constant uint8 [", nn * zrow,
                                         "] packed like B, or constant floats [", nn * kb, "]"));
    for (int64_t r = 0; r < nn; ++r) {
      std::vector<uint8_t> zr(static_cast<size_t>(zrow * per_byte));
      UnpackSubByte(z->data<uint8_t>() + r * zrow, zrow * per_byte, bits == 8 ? DType::kU8 : code,
                    zr.data());
      std::memcpy(zp.data<uint8_t>() + r * kb, zr.data(), static_cast<size_t>(kb));
    }
  }
  const DType t1 = n->input(2).type().dtype;  // A's, the scales', the bias' and Y's
  const bool narrow = t1 == DType::kF16 || t1 == DType::kBF16;
  Value y;
  if (keep_codes) {  // absent zero points stay absent: the op's default is MatMulNBits'
    // X, B and Y keep T1 (the op multiplies in f32 whatever X's dtype: a q4f16 file's
    // activations stay 16-bit on cuda; the cpu's widen-fp16 makes them f32); the scales
    // are widened to f32 exactly.
    Tensor scales(DType::kF32, {nn, kb});
    for (int64_t i = 0; i < nn * kb; ++i)
      scales.data<float>()[i] = static_cast<float>(sc->GetAsDouble(i));  // exact: f16 ⊂ f32
    Value zero_points;
    if (float_zero)
      zero_points = e.Const(std::move(float_zp));
    else if (Has(n, 3))
      zero_points = e.Const(std::move(zp));
    y = e.KilnOp("BlockQuantLinear",
                 {n->input(0), e.Const(std::move(w)), e.Const(std::move(scales)), zero_points,
                  Has(n, 5) ? n->input(5) : Value()},
                 {{"block_size", bs}});
  } else {
    // In f32 whatever T1 is: a 16-bit A and bias cast up, the result back down, as
    // onnxruntime's CPU kernel computes it.
    Value x = n->input(0), bias = Has(n, 5) ? n->input(5) : Value();
    if (narrow) {
      x = e.Op("Cast", {x}, {{"to", int64_t{1}}});
      if (bias) bias = e.Op("Cast", {bias}, {{"to", int64_t{1}}});
    }
    Value scales = e.Op("Reshape", {n->input(2), e.I64({nn, kb})});
    if (narrow) scales = e.Op("Cast", {scales}, {{"to", int64_t{1}}});
    const Value weight =
        e.Op("DequantizeLinear", {e.Const(std::move(w)), scales, e.Const(std::move(zp))},
             {{"axis", int64_t{1}}, {"block_size", bs}});
    y = e.Op("MatMul", {x, e.Op("Transpose", {weight}, {{"perm", std::vector<int64_t>{1, 0}}})});
    if (bias) y = e.Op("Add", {y, bias});
    if (narrow) y = e.Op("Cast", {y}, {{"to", int64_t{t1 == DType::kF16 ? 10 : 16}}});
  }
  e.Bind(0, y);
  return absl::OkStatus();
}

// MultiHeadAttention(query, key, value, bias?, key_padding_mask?, attention_bias?,
// past_key?, past_value?): separate [B, S, H] queries and [B, L, H], [B, L, Hv] keys and
// values (bias [H + H + Hv] a constant split in thirds), heads split by num_heads — or
// keys and values already heads [B, N, L, D] (a cross-attention cache: only Q's bias
// applies, as onnxruntime does) — with a past, K/V = Concat(past, this step's heads) on the
// key axis, which are the present outputs; then AttendHeads over T = past + L keys.
// Refused by name: packed QKV/KV (onnxruntime's CPU kernel refuses them too), the
// past_sequence_length (shared buffer) and cache_indirection inputs, the qk output.
absl::Status ExpandMultiHeadAttention(Node* n, Expansion& e) {
  if (!Has(n, 1) || !Has(n, 2))
    return Unsupported(n, "packed QKV or KV (key or value omitted) is not supported");
  const auto rank_of = [&](int i) {
    const Type& t = n->input(i).type();
    return t.has_rank() ? t.rank() : -1;
  };
  const int kv_rank = rank_of(1);
  if ((kv_rank != 3 && kv_rank != 4) || rank_of(2) != kv_rank)
    return Unsupported(n,
                       "key and value must both be [batch, kv_sequence, hidden] or both "
                       "[batch, heads, kv_sequence, head] (ranks known at import)");
  if (Has(n, 8) || Has(n, 9))
    return Unsupported(n,
                       "the past_sequence_length (shared cache buffer) and cache_indirection "
                       "inputs are not supported");
  if (Has(n, 6) != Has(n, 7))
    return absl::InvalidArgumentError(
        absl::StrCat(n->Describe(), ": past_key and past_value must both be given, or neither"));
  const bool past = Has(n, 6);
  if (past && kv_rank == 4)
    return Unsupported(n, "a past together with [batch, heads, kv_sequence, head] keys");
  if (e.Wanted(3)) return Unsupported(n, "the qk output is not supported");
  if (!past && (e.Wanted(1) || e.Wanted(2)))
    return Unsupported(n, "present key and value without a past are not supported");
  const int64_t heads = n->attr_int_or("num_heads", 0);
  if (heads < 1)
    return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": num_heads must be >= 1"));
  std::vector<Value> qkv = {n->input(0), n->input(1), n->input(2)};
  const int projected = kv_rank == 3 ? 3 : 1;  // the inputs still [B, S, width]
  if (Has(n, 3)) {
    const std::optional<std::vector<int64_t>> b = ConstDims(n, 3);
    if (!b || b->size() != 1 || (*b)[0] % 3 != 0)
      return Unsupported(n, "the bias must be a constant [3 · hidden] (equal Q, K, V widths)");
    const int64_t h = (*b)[0] / 3;
    for (int part = 0; part < projected; ++part)
      qkv[part] = e.Op("Add", {qkv[part], e.Op("Slice", {n->input(3), e.I64({part * h}),
                                                         e.I64({(part + 1) * h}), e.I64({0})})});
  }
  const std::vector<int64_t> to_heads = {0, 2, 1, 3};
  for (int part = 0; part < projected; ++part)
    qkv[part] = e.Op("Transpose", {e.Op("Reshape", {qkv[part], e.I64({0, 0, heads, -1})})},
                     {{"perm", to_heads}});
  Value keys = kv_rank == 3 ? DimOf(e, n->input(1), 1) : DimOf(e, n->input(1), 2);
  if (past) {
    for (int part : {1, 2}) {
      qkv[part] = e.Op("Concat", {n->input(5 + part), qkv[part]}, {{"axis", int64_t{2}}});
      e.Bind(part, qkv[part]);
    }
    keys = e.Op("Add", {DimOf(e, n->input(6), 2), keys});
  }
  const Value kt = e.Op("Transpose", {qkv[1]}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value scale;
  if (const float s = n->attr_float_or("scale", 0.f); s != 0.f) {
    scale = e.F32(s);
  } else {  // 1/sqrt(head size), the size read from Q's heads (constant once shapes are)
    Value d = e.Op("Slice", {e.Op("Shape", {qkv[0]}), e.I64({3}), e.I64({4}), e.I64({0})});
    scale = e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Cast", {d}, {{"to", int64_t{1}}})})});
  }
  KILN_ASSIGN_OR_RETURN(Value ctx, AttendHeads(n, e, qkv[0], kt, qkv[2], scale,
                                               DimOf(e, n->input(0), 1), keys, 4, 5));
  e.Bind(0, e.Op("Reshape", {ctx, e.I64({0, 0, -1})}));
  return absl::OkStatus();
}

// GroupQueryAttention(query, key?, value?, past_key?, past_value?, seqlens_k,
// total_sequence_length, cos_cache?, sin_cache?, ...){num_heads, kv_num_heads, scale,
// softcap, local_window_size, do_rotary, rotary_interleaved, causal}: onnxruntime's decoder
// attention with its KV cache, as onnxruntime-genai's model builder writes it. Per batch
// row b: T = seqlens_k[b] + 1 tokens after this step, Q = min(S, T) of them new, P = T - Q
// cached before; query row s sits at position P + s. Expansion:
//   heads   Q [B, N, S, D], K/V [B, Nkv, S, D] (packed QKV sliced after the head split);
//           do_rotary: ONNX RotaryEmbedding of Q and K at positions P + s
//   present [B, Nkv, C, D], C = max(past length, total_sequence_length): the past padded
//           to C rows (zeros without a past), this step's S rows (its padding rows too)
//           written at row P by ONNX TensorScatter. Rows [0, T) are onnxruntime's; the rows
//           after P + S hold the past's there where onnxruntime zeroes them (both
//           unspecified by its contract; they differ only in a ragged batch)
//   scores  Q · repeat_kv(K)ᵀ · scale (default 1/sqrt(D)), softcap · tanh(x / softcap),
//           + attention_bias (its T columns padded to C), + 0 / -inf where the key is
//           after the query's position (or, local_window_size W > 0, at or before it - W;
//           causal = 0: at or past T)
//   output  Softmax · repeat_kv(V), heads merged [B, S, N·D]; rows s ≥ Q (padding) are
//           unspecified, as onnxruntime documents.
// The attention part is the pattern fuse-attention turns into kiln.Attention over the
// present K/V. Refused by name: position_ids, head_sink/smooth_softmax, quantized caches,
// per-head Q/K norms, query_seqlens, sliding_window_cache, the output_qk output.
absl::Status ExpandGroupQueryAttention(Node* n, Expansion& e) {
  const int64_t heads = n->attr_int_or("num_heads", 0);
  const int64_t kv_heads = n->attr_int_or("kv_num_heads", 0);
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
    return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": num_heads (", heads,
                                                   ") must be a positive multiple of ",
                                                   "kv_num_heads (", kv_heads, ")"));
  static constexpr std::pair<int, const char*> kRefusedInputs[] = {
      {9, "position_ids"},
      {11, "head_sink"},
      {12, "k_scale (a quantized KV cache)"},
      {13, "v_scale (a quantized KV cache)"},
      {14, "q_norm_weight"},
      {15, "k_norm_weight"},
      {16, "query_seqlens (right-padded chunks)"}};
  for (const auto& [i, what] : kRefusedInputs)
    if (Has(n, i)) return Unsupported(n, absl::StrCat("the ", what, " input is not supported"));
  for (const char* a : {"smooth_softmax", "sliding_window_cache", "qk_output"})
    if (n->attr_int_or(a, 0) != 0) return Unsupported(n, absl::StrCat(a, " is not supported"));
  for (const char* a : {"k_quant_type", "v_quant_type"})
    if (const std::string* q = n->attr_string(a); q && *q != "NONE")
      return Unsupported(n, absl::StrCat(a, "=", *q, " (a quantized KV cache) is not supported"));
  if (e.Wanted(3)) return Unsupported(n, "the output_qk output is not supported");
  if (Has(n, 1) != Has(n, 2))
    return absl::InvalidArgumentError(
        absl::StrCat(n->Describe(), ": key and value must both be given, or neither (packed QKV)"));
  if (Has(n, 3) != Has(n, 4))
    return absl::InvalidArgumentError(
        absl::StrCat(n->Describe(), ": past_key and past_value must both be given, or neither"));
  if (!Has(n, 5) || !Has(n, 6))
    return absl::InvalidArgumentError(
        absl::StrCat(n->Describe(), ": seqlens_k and total_sequence_length are required"));
  const bool causal = n->attr_int_or("causal", 1) != 0;
  const int64_t window = n->attr_int_or("local_window_size", -1);
  if (!causal && window > 0)
    return absl::InvalidArgumentError(
        absl::StrCat(n->Describe(), ": local_window_size needs causal = 1"));
  const float softcap = n->attr_float_or("softcap", 0.f);
  if (!(softcap >= 0.f))
    return absl::InvalidArgumentError(absl::StrCat(n->Describe(), ": softcap must be >= 0"));
  const bool rotary = n->attr_int_or("do_rotary", 0) != 0;
  int64_t rotary_dim = 0;
  if (rotary) {
    if (!Has(n, 7) || !Has(n, 8))
      return absl::InvalidArgumentError(
          absl::StrCat(n->Describe(), ": do_rotary needs cos_cache and sin_cache"));
    const Type& ct = n->input(7).type();
    if (!ct.has_rank() || ct.rank() != 2 || !ct.shape->at(1).is_known())
      return Unsupported(n, "cos_cache must be [max_position, rotary_dim / 2] with a known width");
    rotary_dim = 2 * ct.shape->at(1).value();
  }

  const Value query = n->input(0);
  const Value zero = e.Const(Tensor::ScalarI64(0)), one = e.Const(Tensor::ScalarI64(1));
  auto dims = [&](Value shape, int64_t from, int64_t to) {
    return e.Op("Slice", {shape, e.I64({from}), e.I64({to}), e.I64({0})});
  };
  const std::vector<int64_t> to_heads = {0, 2, 1, 3};
  // [B, S, n·D] -> [B, n, S, D]; the packed form's parts sliced from [B, S, N + 2·Nkv, D].
  auto heads_of = [&](Value x, int64_t count) {
    return e.Op("Transpose", {e.Op("Reshape", {x, e.I64({0, 0, count, -1})})},
                {{"perm", to_heads}});
  };
  Value q, k, v;
  if (Has(n, 1)) {
    q = heads_of(query, heads), k = heads_of(n->input(1), kv_heads);
    v = heads_of(n->input(2), kv_heads);
  } else {
    const Value all = e.Op("Reshape", {query, e.I64({0, 0, heads + 2 * kv_heads, -1})});
    auto part = [&](int64_t from, int64_t to) {
      return e.Op("Transpose",
                  {e.Op("Slice", {all, e.I64({from}), e.I64({to}), e.I64({2}), e.I64({1})})},
                  {{"perm", to_heads}});
    };
    q = part(0, heads), k = part(heads, heads + kv_heads);
    v = part(heads + kv_heads, heads + 2 * kv_heads);
  }

  // Per batch row: T (total), P (cached before this step); C, the present length.
  const Value seq = DimOf(e, query, 1);
  const Value total = e.Op("Add", {e.Op("Cast", {n->input(5)}, {{"to", int64_t{7}}}), one});
  const Value past_len = e.Op("Sub", {total, e.Op("Min", {total, seq})});
  const Value past_buf = Has(n, 3) ? DimOf(e, n->input(3), 2) : zero;
  const Value total_max =
      e.Op("Reshape", {e.Op("Cast", {n->input(6)}, {{"to", int64_t{7}}}), e.I64({})});
  const Value cap = e.Op("Max", {past_buf, total_max});
  const Value keys = e.Op("Range", {zero, cap, one});  // [C]
  const Value position =
      e.Op("Add", {e.Op("Unsqueeze", {past_len, e.I64({1})}),  // [B, S]
                   e.Op("Unsqueeze", {e.Op("Range", {zero, seq, one}), e.I64({0})})});
  if (rotary) {
    std::vector<std::pair<std::string, Attribute>> attrs = {
        {"interleaved", n->attr_int_or("rotary_interleaved", 0)},
        {"rotary_embedding_dim", rotary_dim}};
    q = e.Op("RotaryEmbedding", {q, n->input(7), n->input(8), position}, attrs);
    k = e.Op("RotaryEmbedding", {k, n->input(7), n->input(8), position}, attrs);
  }

  // present: the past (zeros without one) padded to C rows, this step's S rows written at
  // row P of each batch row: ONNX's KV-cache update, which a generation plan's decode
  // program turns into kiln.CacheWrite into its paged cache.
  auto present = [&](Value past, Value fresh) {
    Value base;
    if (past) {
      const Value more = e.Op("Reshape", {e.Op("Sub", {cap, past_buf}), e.I64({1})});
      base = e.Op("Pad", {past, e.Op("Concat", {e.I64({0, 0, 0, 0, 0, 0}), more, e.I64({0})},
                                     {{"axis", int64_t{0}}})});
    } else {
      const Value shape = e.Op("Shape", {fresh});
      base = e.Op("Expand",
                  {e.Op("CastLike", {e.F32(0.f), fresh}),
                   e.Op("Concat",
                        {dims(shape, 0, 2), e.Op("Reshape", {cap, e.I64({1})}), dims(shape, 3, 4)},
                        {{"axis", int64_t{0}}})});
    }
    return e.Op("TensorScatter", {base, fresh, past_len}, {{"axis", int64_t{2}}});
  };
  const Value present_k = present(Has(n, 3) ? n->input(3) : Value(), k);
  const Value present_v = present(Has(n, 4) ? n->input(4) : Value(), v);
  // HF's repeat_kv: [B, Nkv, C, D] -> [B, N, C, D], query head h reading K/V head h / group.
  const int64_t group = heads / kv_heads;
  auto repeat = [&](Value x) {
    if (group == 1) return x;
    const Value shape = e.Op("Shape", {x});
    const Value to = e.Op("Concat", {dims(shape, 0, 1), e.I64({heads, -1}), dims(shape, 3, 4)},
                          {{"axis", int64_t{0}}});
    return e.Op(
        "Reshape",
        {e.Op("Expand", {e.Op("Unsqueeze", {x, e.I64({2})}), e.I64({1, 1, group, 1, 1})}), to});
  };
  const Value kt =
      e.Op("Transpose", {repeat(present_k)}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value scale;
  if (const float s = n->attr_float_or("scale", 0.f); s != 0.f) {
    scale = e.Op("CastLike", {e.F32(s), query});
  } else {  // 1/sqrt(D), D read from Q's heads
    scale = e.Op(
        "CastLike",
        {e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Cast", {DimOf(e, q, 3)}, {{"to", int64_t{1}}})})}),
         query});
  }
  Value scores = e.Op("Mul", {e.Op("MatMul", {q, kt}), scale});
  if (softcap > 0.f) {
    const Value c = e.Op("CastLike", {e.F32(softcap), query});
    scores = e.Op("Mul", {e.Op("Tanh", {e.Op("Div", {scores, c})}), c});
  }
  if (Has(n, 10)) {  // [B or 1, N or 1, S, T]: its columns padded to C with zeros
    const Value width = e.Op("Sub", {cap, total_max});
    const Value pads =
        e.Op("Concat", {e.I64({0, 0, 0, 0, 0, 0, 0}), e.Op("Reshape", {width, e.I64({1})})},
             {{"axis", int64_t{0}}});
    scores = e.Op("Add", {scores, e.Op("Pad", {n->input(10), pads})});
  }
  const Value key_3d = e.Op("Unsqueeze", {keys, e.I64({0, 1})});  // [1, 1, C]
  Value visible;                                                  // [B, S or 1, C]
  if (causal) {
    const Value at = e.Op("Unsqueeze", {position, e.I64({2})});  // [B, S, 1]
    visible = e.Op("LessOrEqual", {key_3d, at});
    if (window > 0)
      visible = e.Op(
          "And", {visible, e.Op("Greater",
                                {key_3d, e.Op("Sub", {at, e.Const(Tensor::ScalarI64(window))})})});
  } else {
    visible = e.Op("Less", {key_3d, e.Op("Unsqueeze", {total, e.I64({1, 2})})});
  }
  const Value mask = e.Op(
      "Where", {e.Op("Unsqueeze", {visible, e.I64({1})}), e.Op("CastLike", {e.F32(0.f), query}),
                e.Op("CastLike", {e.F32(-std::numeric_limits<float>::infinity()), query})});
  scores = e.Op("Add", {scores, mask});
  const Value probs = e.Op("Softmax", {scores}, {{"axis", int64_t{-1}}});
  const Value context = e.Op("MatMul", {probs, repeat(present_v)});
  e.Bind(0,
         e.Op("Reshape", {e.Op("Transpose", {context}, {{"perm", to_heads}}), e.I64({0, 0, -1})}));
  e.Bind(1, present_k);
  e.Bind(2, present_v);
  return absl::OkStatus();
}

// MatMulIntegerToFloat's computation, written as quantize_dynamic writes it (MatMulInteger,
// Cast, Mul by the scales' product, the bias Add), so the dequantize pass and the fusions
// see the pattern they know. a_scale must be per tensor (onnxruntime's CPU kernel also
// takes only that); b_scale per tensor or per column of B.
absl::Status ExpandIntegerMatMul(Node* n, Expansion& e, Value a, Value a_scale, Value a_zero,
                                 int b_scale_at, int b_zero_at, int bias_at) {
  const Type& st = a_scale.type();
  if (st.has_rank() && st.rank() > 0 &&
      !(st.rank() == 1 && st.shape->at(0).is_known() && st.shape->at(0).value() == 1))
    return Unsupported(n, "a per-column a_scale is not supported (only a per-tensor one)");
  std::vector<Value> in = {a, n->input(1)};
  const bool b_zero = Has(n, b_zero_at);
  if (a_zero || b_zero) in.push_back(a_zero);
  if (b_zero) in.push_back(n->input(b_zero_at));
  const Value acc = e.Op("MatMulInteger", std::move(in));
  const Value scales = e.Op("Mul", {a_scale, n->input(b_scale_at)});
  Value y = e.Op("Mul", {e.Op("Cast", {acc}, {{"to", int64_t{1}}}), scales});
  if (Has(n, bias_at)) y = e.Op("Add", {y, n->input(bias_at)});
  e.Bind(0, y);
  return absl::OkStatus();
}

// The constant `v` is, seen through Identity and Reshapes with constant shapes (how
// onnxruntime-genai views the LM head's MatMulNBits codes as a [rows, bytes] table): its
// bytes under the view's dims, or nullopt for anything else.
std::optional<Tensor> ConstantView(Value v) {
  if (!v || !v.node) return std::nullopt;
  if (const Tensor* t = v.node->constant_value()) return *t;
  const Node* n = v.node;
  if (!n->domain().empty() || n->num_inputs() < 1 || !n->input(0)) return std::nullopt;
  std::optional<Tensor> in = ConstantView(n->input(0));
  if (!in || n->op() == "Identity") return in;
  if (n->op() != "Reshape" || n->num_inputs() < 2 || !n->input(1)) return std::nullopt;
  const Tensor* shape = n->input(1).node ? n->input(1).node->constant_value() : nullptr;
  if (shape == nullptr || shape->dtype() != DType::kI64 || shape->rank() != 1) return std::nullopt;
  std::vector<int64_t> dims(shape->data<int64_t>(), shape->data<int64_t>() + shape->NumElements());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && n->attr_int_or("allowzero", 0) == 0) {
      if (i >= in->dims().size()) return std::nullopt;
      dims[i] = in->dims()[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else if (dims[i] < 0) {
      return std::nullopt;
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || in->NumElements() % known != 0) return std::nullopt;
    dims[infer] = in->NumElements() / known;
  }
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count != in->NumElements()) return std::nullopt;
  return in->Reshaped(std::move(dims));
}

// GatherBlockQuantized with a constant table, scales and zero points (seen through views):
// kiln.BlockQuantGather on the codes unpacked one per byte — u4 [rows, K] (4 bits; int4 data
// shifted by 8 with its zero points, exactly) or u8 (8 bits) — with f32 scales [rows, KB]: the
// same constants the LM head's kiln.BlockQuantLinear holds, which cse merges, so a tied
// model's embeddings cost the plan nothing beyond its int4 LM head. Y f32 (cast to a 16-bit
// scales' dtype, as the op's output). False (nothing added) for any other form.
absl::StatusOr<bool> GatherBlockQuantizedConstant(Node* n, Expansion& e, int64_t bits, int64_t bs) {
  const std::optional<Tensor> data = ConstantView(n->input(0));
  const std::optional<Tensor> sc = ConstantView(n->input(2));
  const std::optional<Tensor> zp = Has(n, 3) ? ConstantView(n->input(3)) : std::nullopt;
  if (!data || !sc || data->rank() != 2 || (Has(n, 3) && !zp)) return false;
  const DType dt = data->dtype(), st = sc->dtype();
  if (st != DType::kF32 && st != DType::kF16 && st != DType::kBF16) return false;
  const bool packed = dt == DType::kU8 && bits == 4;
  if (!(dt == DType::kU8 || (bits == 4 && (dt == DType::kU4 || dt == DType::kI4)))) return false;
  const int64_t rows = data->dims()[0], k = packed ? 2 * data->dims()[1] : data->dims()[1];
  const int64_t kb = (k + bs - 1) / bs;
  if (sc->NumElements() != rows * kb) return false;
  const DType code = bits == 4 ? DType::kU4 : DType::kU8;
  const uint8_t shift = dt == DType::kI4 ? 8 : 0;  // int4 -> uint4: +8 on codes and zeros
  Tensor w(code, {rows, k});
  const uint8_t* src = reinterpret_cast<const uint8_t*>(data->raw());
  uint8_t* dst = reinterpret_cast<uint8_t*>(w.raw());
  if (packed)
    UnpackSubByte(src, rows * k, DType::kU4, dst);
  else
    for (int64_t i = 0; i < rows * k; ++i) dst[i] = static_cast<uint8_t>((src[i] + shift) & 255);
  if (code == DType::kU4)
    for (int64_t i = 0; i < rows * k; ++i) dst[i] &= 15;
  Tensor scales(DType::kF32, {rows, kb});
  for (int64_t i = 0; i < rows * kb; ++i)
    scales.data<float>()[i] = static_cast<float>(sc->GetAsDouble(i));  // exact: f16 ⊂ f32
  Value zero;
  if (zp) {
    Tensor z(code, {rows, kb});
    uint8_t* zd = reinterpret_cast<uint8_t*>(z.raw());
    const uint8_t* zs = reinterpret_cast<const uint8_t*>(zp->raw());
    if (zp->dtype() != dt) return false;
    if (packed) {  // as many columns as the blocks, rounded up to whole bytes
      const int64_t zrow = (kb + 1) / 2;
      if (zp->NumElements() != rows * zrow) return false;
      std::vector<uint8_t> row(static_cast<size_t>(2 * zrow));
      for (int64_t r = 0; r < rows; ++r) {
        UnpackSubByte(zs + r * zrow, 2 * zrow, DType::kU4, row.data());
        std::memcpy(zd + r * kb, row.data(), static_cast<size_t>(kb));
      }
    } else {
      if (zp->NumElements() != rows * kb) return false;
      for (int64_t i = 0; i < rows * kb; ++i)
        zd[i] = static_cast<uint8_t>((zs[i] + shift) & (code == DType::kU4 ? 15 : 255));
    }
    zero = e.Const(std::move(z));
  } else if (dt == DType::kU4) {  // DequantizeLinear's default zero point for uint4 is 0
    Tensor z(code, {rows, kb});
    std::memset(z.raw(), 0, z.NumBytes());
    zero = e.Const(std::move(z));
  }  // else: u8 data's 2^(bits−1), or int4's 0 shifted to 8: kiln's default
  Value y = e.KilnOp("BlockQuantGather",
                     {e.Const(std::move(w)), n->input(1), e.Const(std::move(scales)), zero},
                     {{"block_size", bs}});
  if (st != DType::kF32) y = e.Op("Cast", {y}, {{"to", int64_t{st == DType::kF16 ? 10 : 16}}});
  e.Bind(0, y);
  return true;
}

// GatherBlockQuantized's table, dequantized (constant folding makes it the f32 table a plan
// gathers from, as an unshared embedding's), then its rows — unless the table is constant
// (GatherBlockQuantizedConstant: it stays quantized).
absl::Status ExpandGatherBlockQuantized(Node* n, Expansion& e) {
  const int64_t gather_axis = n->attr_int_or("gather_axis", 0);
  const int64_t quantize_axis = n->attr_int_or("quantize_axis", 1);
  const int64_t bits = n->attr_int_or("bits", 4), bs = n->attr_int_or("block_size", 128);
  if (gather_axis != 0 || (quantize_axis != 1 && quantize_axis != -1))
    return Unsupported(n,
                       "only gather_axis 0 and quantize_axis 1 (the rows of a [rows, hidden] "
                       "table) are supported");
  if ((bits != 4 && bits != 8) || bs < 16 || (bs & (bs - 1)) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        n->Describe(), ": bits must be 4 or 8 and block_size a power of two >= 16, got bits=", bits,
        " block_size=", bs));
  KILN_ASSIGN_OR_RETURN(const bool kept, GatherBlockQuantizedConstant(n, e, bits, bs));
  if (kept) return absl::OkStatus();
  // The data's dtype, through the Reshape that views the LM head's MatMulNBits codes as the
  // table (types of computed values are not known at import).
  Value source = n->input(0);
  while (source.type().dtype == DType::kUndefined && source.node->domain().empty() &&
         (source.node->op() == "Reshape" || source.node->op() == "Identity" ||
          source.node->op() == "Squeeze" || source.node->op() == "Unsqueeze") &&
         source.node->num_inputs() > 0 && source.node->input(0))
    source = source.node->input(0);
  const DType dt = source.type().dtype;
  auto u8 = [&](uint8_t v) {
    Tensor t(DType::kU8, {});
    t.data<uint8_t>()[0] = v;
    return e.Const(std::move(t));
  };
  // u8 data at 4 bits: two codes per byte, the first in the low nibble, along the rows.
  auto unpack = [&](Value packed) {
    if (bits == 8) return packed;
    const Value lo = e.Op("Unsqueeze", {e.Op("Mod", {packed, u8(16)}), e.I64({2})});
    const Value hi = e.Op("Unsqueeze", {e.Op("Div", {packed, u8(16)}), e.I64({2})});
    return e.Op("Reshape", {e.Op("Concat", {lo, hi}, {{"axis", int64_t{2}}}), e.I64({0, -1})});
  };
  Value codes, zero;
  const Value scales = n->input(2);
  if (dt == DType::kU8) {
    codes = unpack(n->input(0));
    if (Has(n, 3)) {  // packed like the data: as many columns as the blocks, rounded up
      const Value blocks = e.Op("Reshape", {DimOf(e, scales, 1), e.I64({1})});
      zero = e.Op("Slice", {unpack(n->input(3)), e.I64({0}), blocks, e.I64({1})});
    } else {
      Tensor value(DType::kU8, {1});
      value.data<uint8_t>()[0] = static_cast<uint8_t>(1 << (bits - 1));
      zero = e.Op("ConstantOfShape", {e.Op("Shape", {scales})}, {{"value", std::move(value)}});
    }
  } else if (dt == DType::kU4 || dt == DType::kI4) {
    if (bits != 4) return Unsupported(n, "int4 / uint4 data needs bits = 4");
    codes = n->input(0);  // absent zero points: DequantizeLinear's 0, as onnxruntime's
    if (Has(n, 3)) zero = n->input(3);
  } else {
    return Unsupported(n, absl::StrCat("the data must be uint8, uint4 or int4 (known at import), ",
                                       "got ", n->input(0).type().ToString()));
  }
  std::vector<Value> dq = {codes, scales};
  if (zero) dq.push_back(zero);
  const Value table =
      e.Op("DequantizeLinear", std::move(dq), {{"axis", int64_t{1}}, {"block_size", bs}});
  e.Bind(0, e.Op("Gather", {table, n->input(1)}, {{"axis", int64_t{0}}}));
  return absl::OkStatus();
}

// FusedMatMul(A, B){alpha, transA, transB, transBatchA, transBatchB}.
absl::Status ExpandFusedMatMul(Node* n, Expansion& e) {
  if (n->attr_int_or("transBatchA", 0) != 0 || n->attr_int_or("transBatchB", 0) != 0)
    return Unsupported(n, "transBatchA / transBatchB are not supported");
  Value operands[2] = {n->input(0), n->input(1)};
  const char* flags[2] = {"transA", "transB"};
  for (int i = 0; i < 2; ++i) {
    if (n->attr_int_or(flags[i], 0) == 0) continue;
    const Type& t = operands[i].type();
    if (!t.has_rank() || t.rank() < 2)
      return Unsupported(n, absl::StrCat(flags[i], " needs the operand's rank (>= 2) at import; ",
                                         "it is ", t.ToString()));
    std::vector<int64_t> perm(static_cast<size_t>(t.rank()));
    for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    operands[i] = e.Op("Transpose", {operands[i]}, {{"perm", perm}});
  }
  Value y = e.Op("MatMul", {operands[0], operands[1]});
  const float alpha = n->attr_float_or("alpha", 1.0f);
  if (alpha != 1.0f) y = e.Op("Mul", {y, e.Op("CastLike", {e.F32(alpha), y})});
  e.Bind(0, y);
  return absl::OkStatus();
}

}  // namespace

const OpInfo* FindContribOp(std::string_view domain, std::string_view op) {
  // Arity as onnxruntime's schemas give it; not in the op catalogue, since no node of
  // these ops outlives the import (the catalogue's ops all run).
  static const auto* table = new std::vector<OpInfo>{
      {"com.microsoft", "Gelu", 1, 1, 1, 1, kPure},
      {"com.microsoft", "FastGelu", 1, 2, 1, 1, kPure},
      {"com.microsoft", "BiasGelu", 2, 2, 1, 1, kPure},
      {"com.microsoft", "QuickGelu", 1, 1, 1, 1, kPure},
      {"com.microsoft", "BiasAdd", 3, 3, 1, 1, kPure},
      {"com.microsoft", "SkipLayerNormalization", 3, 5, 1, 4, kPure},
      {"com.microsoft", "SkipSimplifiedLayerNormalization", 3, 4, 1, 4, kPure},
      // onnxruntime registers this one in the default domain (only).
      {"", "SimplifiedLayerNormalization", 2, 2, 1, 2, kPure},
      {"", "Upsample", 1, 2, 1, 1, kPure},  // ONNX's, deprecated: imported as Resize
      {"", "MeanVarianceNormalization", 1, 1, 1, 1, kPure, 9},  // an ONNX function
      {"com.microsoft", "EmbedLayerNormalization", 7, 9, 1, 3, kPure},
      {"com.microsoft", "Attention", 2, 8, 1, 2, kPure},
      {"com.microsoft", "RotaryEmbedding", 4, 4, 1, 1, kPure},
      {"com.microsoft", "MultiHeadAttention", 1, 10, 1, 4, kPure},
      {"com.microsoft", "MatMulNBits", 3, 6, 1, 1, kPure},
      {"com.microsoft", "GroupQueryAttention", 1, 17, 1, 4, kPure},  // 5, 6 checked
      {"com.microsoft", "FusedMatMul", 2, 2, 1, 1, kPure},
      {"com.microsoft", "MatMulIntegerToFloat", 4, 7, 1, 1, kPure},
      {"com.microsoft", "DynamicQuantizeMatMul", 3, 5, 1, 1, kPure},
      {"com.microsoft", "GatherBlockQuantized", 3, 4, 1, 1, kPure},
  };
  for (const OpInfo& info : *table)
    if (info.domain == domain && info.name == op) return &info;
  return nullptr;
}

absl::Status ExpandContribOp(Graph& graph, Node* n,
                             absl::flat_hash_map<std::string, Value>& names) {
  if (FindContribOp(n->domain(), n->op()) == nullptr)
    return Unsupported(n, "this com.microsoft op is not supported");
  Expansion e(graph, n, names);
  const std::string& op = n->op();
  const float eps = n->attr_float_or("epsilon", 1e-12f);
  if (op == "Gelu") {
    e.Bind(0, GeluOf(e, n->input(0), false));
  } else if (op == "FastGelu") {
    Value x = Has(n, 1) ? e.Op("Add", {n->input(0), n->input(1)}) : n->input(0);
    e.Bind(0, GeluOf(e, x, true));
  } else if (op == "BiasGelu") {
    e.Bind(0, GeluOf(e, e.Op("Add", {n->input(0), n->input(1)}), false));
  } else if (op == "QuickGelu") {
    const float alpha = n->attr_float_or("alpha", 1.702f);
    Value s = e.Op("Sigmoid", {e.Op("Mul", {n->input(0), e.F32(alpha)})});
    e.Bind(0, e.Op("Mul", {n->input(0), s}));
  } else if (op == "BiasAdd") {
    e.Bind(0, e.Op("Add", {e.Op("Add", {n->input(0), n->input(1)}), n->input(2)}));
  } else if (op == "SkipLayerNormalization") {
    Value s = SkipSum(e, n, 4);
    std::vector<Value> stats;
    std::vector<Value> in = {s, n->input(2)};
    if (Has(n, 3)) in.push_back(n->input(3));
    Value y = e.Op("LayerNormalization", std::move(in), {{"axis", int64_t{-1}}, {"epsilon", eps}},
                   e.Wanted(1) || e.Wanted(2) ? 3 : 1, &stats);
    e.Bind(0, y);
    if (!stats.empty()) {
      e.Bind(1, stats[0]);
      e.Bind(2, stats[1]);
    }
    e.Bind(3, s);
  } else if (op == "SkipSimplifiedLayerNormalization") {
    KILN_RETURN_IF_ERROR(NoStats(n, e, {1, 2}));
    Value s = SkipSum(e, n, 3);
    e.Bind(0,
           e.Op("RMSNormalization", {s, n->input(2)}, {{"axis", int64_t{-1}}, {"epsilon", eps}}));
    e.Bind(3, s);
  } else if (op == "SimplifiedLayerNormalization") {
    KILN_RETURN_IF_ERROR(NoStats(n, e, {1}));
    e.Bind(0, e.Op("RMSNormalization", {n->input(0), n->input(1)},
                   {{"axis", n->attr_int_or("axis", -1)},
                    {"epsilon", n->attr_float_or("epsilon", 1e-5f)}}));
  } else if (op == "Upsample") {
    Value scales;
    if (Has(n, 1)) {
      scales = n->input(1);
    } else {
      const std::vector<float>* s = n->attr_floats("scales");
      if (s == nullptr)
        return absl::InvalidArgumentError(
            absl::StrCat(n->Describe(), ": needs the 'scales' input or FLOATS attribute"));
      scales = e.Const(Tensor::FromF32({static_cast<int64_t>(s->size())}, *s));
    }
    const std::string* mode = n->attr_string("mode");
    const std::string m = mode ? *mode : "nearest";
    if (m != "nearest" && m != "linear")
      return absl::InvalidArgumentError(
          absl::StrCat(n->Describe(), ": mode '", m, "' is not nearest or linear"));
    e.Bind(0, e.Op("Resize", {n->input(0), Value(), scales},
                   {{"mode", m},
                    {"coordinate_transformation_mode", std::string("asymmetric")},
                    {"nearest_mode", std::string("floor")}}));
  } else if (op == "MeanVarianceNormalization") {
    // ONNX's function body: (X - E[X]) / (sqrt(E[X²] - E[X]²) + 1e-9) over `axes`.
    const std::vector<int64_t>* a = n->attr_ints("axes");
    const Value axes = e.I64(a ? *a : std::vector<int64_t>{0, 2, 3});
    const Value x = n->input(0);
    const Value mean = e.Op("ReduceMean", {x, axes});
    const Value mean_sq = e.Op("ReduceMean", {e.Op("Mul", {x, x}), axes});
    const Value var = e.Op("Sub", {mean_sq, e.Op("Mul", {mean, mean})});
    const Value eps = e.Op("CastLike", {e.F32(1e-9f), x});
    e.Bind(0, e.Op("Div", {e.Op("Sub", {x, mean}), e.Op("Add", {e.Op("Sqrt", {var}), eps})}));
  } else if (op == "EmbedLayerNormalization") {
    KILN_RETURN_IF_ERROR(ExpandEmbedLayerNorm(n, e));
  } else if (op == "Attention") {
    KILN_RETURN_IF_ERROR(ExpandAttention(n, e));
  } else if (op == "MatMulNBits") {
    KILN_RETURN_IF_ERROR(ExpandMatMulNBits(n, e));
  } else if (op == "MultiHeadAttention") {
    KILN_RETURN_IF_ERROR(ExpandMultiHeadAttention(n, e));
  } else if (op == "GroupQueryAttention") {
    KILN_RETURN_IF_ERROR(ExpandGroupQueryAttention(n, e));
  } else if (op == "GatherBlockQuantized") {
    KILN_RETURN_IF_ERROR(ExpandGatherBlockQuantized(n, e));
  } else if (op == "FusedMatMul") {
    KILN_RETURN_IF_ERROR(ExpandFusedMatMul(n, e));
  } else if (op == "MatMulIntegerToFloat") {
    KILN_RETURN_IF_ERROR(ExpandIntegerMatMul(n, e, n->input(0), n->input(2),
                                             Has(n, 4) ? n->input(4) : Value(), 3, 5, 6));
  } else if (op == "DynamicQuantizeMatMul") {
    std::vector<Value> qz;
    const Value q = e.Op("DynamicQuantizeLinear", {n->input(0)}, {}, 3, &qz);
    KILN_RETURN_IF_ERROR(ExpandIntegerMatMul(n, e, q, qz[0], qz[1], 2, 3, 4));
  } else if (op == "RotaryEmbedding") {
    // (input, position_ids, cos_cache, sin_cache): ONNX's RotaryEmbedding with the inputs
    // reordered; position ids [batch, sequence] only (a [1] offset is not supported).
    if (n->attr_int_or("is_packed_batching", 0) != 0)
      return Unsupported(n, "is_packed_batching is not supported");
    if (n->attr_float_or("scale", 1.0f) != 1.0f)
      return Unsupported(n, "a scale other than 1 is not supported");
    const Type& pt = n->input(1).type();
    if (pt.has_rank() && pt.rank() != 2)
      return Unsupported(n,
                         "position_ids must be [batch, sequence] (the [1] offset form is not "
                         "supported)");
    std::vector<std::pair<std::string, Attribute>> attrs;
    for (const char* a : {"interleaved", "num_heads", "rotary_embedding_dim"})
      if (std::optional<int64_t> v = n->attr_int(a)) attrs.emplace_back(a, *v);
    e.Bind(0, e.Op("RotaryEmbedding", {n->input(0), n->input(2), n->input(3), n->input(1)},
                   std::move(attrs)));
  } else {
    return Unsupported(n, "this com.microsoft op is not supported");
  }
  return graph.RemoveNode(n);
}

}  // namespace kiln::onnx_import
