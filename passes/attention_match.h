// Structural matching of Transformer self-attention blocks, shared by fuse-qkv (which must
// know which three projections feed one attention's Q, K and V, in that order) and
// fuse-attention (which replaces the whole block with kiln.MultiHeadAttention).
// The match is rooted at a Softmax and proceeds in stages, so a caller can use a partial
// result: kAttention (the Softmax sits between MatMul(Q, Kᵀ) and MatMul(P, V): from here
// on a failure is a near-miss worth reporting), kProjections (Q, K and V traced back
// through their head splits to [B, S, H] projections: enough for fuse-qkv), kComplete
// (everything fuse-attention needs: scale, mask, causal flag, head merge, no interior value
// read from outside). Exporter variants accepted are listed in docs/passes.md
// (## fuse-attention).
// Limits: self-attention only (Q, K and V computed from one tensor); 4-D head layout
// [B, N, S, D] (heads folded into the batch only in the dynamo SDPA Kᵀ chain); one mask
// plus a causal pattern; a rotary embedding only as fuse-rotary's kiln.Rotary on the
// [B, N, S, D] Q and K heads (same tables for both); grouped K/V heads only through the
// HF repeat_kv expansion.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "passes/rewrite_util.h"

namespace kiln::attention {

// One of Q, K, V: the projection and the head split between it and the attention MatMul.
struct HeadPath {
  Value proj;               // the [B, S, H] value before the head split
  Node* reshape = nullptr;  // Reshape [B, S, H] -> [B, S, N, D], or (packed_part >= 0)
                            // Reshape [B, S, 3H] -> [B, S, 3, N, D]
  // ModernBERT's packed split: part 0, 1 or 2 (Q, K, V) of the [B, S, 3, N, D] Reshape,
  // taken by a Split or Slice on axis 2 and a Squeeze of that axis; proj is then the
  // packed [B, S, 3H] projection. -1: the plain split.
  int packed_part = -1;
  std::vector<Node*> nodes;      // every node from proj (exclusive) to the MatMul operand
  std::vector<Node*> scale_ops;  // Mul/Div by a scalar on this path (Q and K only)
  double scale = 1.0;            // product of the constant factors of scale_ops
  int64_t heads = -1, head_dim = -1;
  // Q and K only: the kiln.Rotary (fuse-rotary's) applied to the [B, N, S, D] heads, or
  // (rotary_before_transpose, GPT-J) to the [B, S, N, D] split before the head Transpose.
  Node* rotary = nullptr;
  bool rotary_before_transpose = false;
  // K and V only: the grouped-query repeat_kv expansion Reshape(Expand(Unsqueeze(x, 2),
  // [B, Nkv, repeat, S, D]), [B, Nkv·repeat, S, D]) after the head split, if any.
  Node* repeat_reshape = nullptr;
  int64_t repeat = 1;
  // The heads form only: the [B, N, S, D] (Q) or [B, Nkv, L, D] (K, V) value the attention
  // reads, before any repeat_kv, Kᵀ transpose or scale (proj, reshape stay unset).
  Value heads_value;
};

// How the scores are masked, as kiln.MultiHeadAttention will take it.
enum class MaskKind {
  kNone,
  kAdditive,   // Add(scores, value): value is the fused op's f32 mask as is
  kBoolKeep,   // Where(value, scores, -inf): value is the fused op's bool mask
  kBoolDrop,   // Where(value, -inf, scores): the fused op takes Not(value)
  kWhereFill,  // Where(value, scores, fill) with a finite fill (keep = true) or
               // Where(value, fill, scores) (keep = false): becomes the additive mask
               // Where(value, 0, fill) / Where(value, fill, 0)
};

struct Mask {
  MaskKind kind = MaskKind::kNone;
  Value value;
  bool keep = true;  // kWhereFill: true when `value` true means "attend"
  double fill = 0;   // kWhereFill: the fill value
};

struct AttentionBlock {
  Node* softmax = nullptr;
  Node* scores = nullptr;           // MatMul(Q, Kᵀ)
  Node* context = nullptr;          // MatMul(P, V)
  Node* guard = nullptr;            // Where(IsNaN(P), 0, P) after the Softmax, if any
  Node* context_reshape = nullptr;  // a Reshape of P·V to the shape it has, if any
  Node* merge_transpose = nullptr;
  Node* output = nullptr;  // the head-merge Reshape
  // False: `output` produces [B, S, H] and the fused op replaces it. True: `output`
  // reshapes the heads straight to another shape (GPT-2's [B·S, H] in front of its
  // Conv1D Gemm): it stays, reading the fused op's [B, S, H] result (same elements in the
  // same row-major order).
  bool merge_kept = false;
  HeadPath q, k, v;
  int64_t num_heads = 0, head_dim = 0;
  int64_t num_kv_heads = 0;  // K/V heads (num_heads / k.repeat)
  // Rotary tables of Q and K's kiln.Rotary, as the fused op takes them ([1 or B, S, R]
  // after `table_fix`): the Rotary's cos / sin, and what reshapes them.
  Value cos, sin;
  // kSqueezeHeadAxis: [1 or B, 1, S, R] (axis 1); kSqueezeAxis2: [1 or B, S, 1, R] (the
  // head axis of a rotary applied before the head Transpose).
  enum class TableFix {
    kNone,
    kSqueezeHeadAxis,
    kSqueezeAxis2,
    kUnsqueezeBatch
  } table_fix = TableFix::kNone;
  bool rotary_interleaved = false;  // the Rotary's `interleaved` (GPT-J's pairs)
  double scale = 1.0;
  bool causal = false;
  Mask mask;
  // Further additive terms when `mask` is additive too (MPNet's relative position bias
  // beside the padding mask): the fused op takes their sum as its mask.
  std::vector<Value> more_additive;
  // When Q, K, V are outputs 0, 1, 2 of one Split of a [B, S, 3H] tensor (the fuse-qkv
  // result, GPT-2's c_attn): that Split; qkv is then its input. Else qkv is a Concat.
  Node* qkv_split = nullptr;
  // ModernBERT's Wqkv: Q, K, V are parts 0, 1, 2 of one [B, S, 3, N, D] Reshape of this
  // [B, S, 3H] projection, which is then qkv as it is (null Value otherwise).
  Value packed_qkv;
  // True when Q, K and V do not all trace back to projections of one [B, S, H] tensor (a KV
  // cache's past concatenated in front of K and V, cross-attention) but are plain heads
  // tensors: the block then becomes kiln.Attention(q, k, v, mask?) over those heads
  // (HeadPath::heads_value), and the head splits, rotary and qkv fields are unused.
  bool heads_form = false;
  std::vector<Node*> interior;  // every node the fused op replaces
};

enum class Stage { kNotAttention, kAttention, kProjections, kComplete };

struct MatchResult {
  Stage stage = Stage::kNotAttention;
  std::string reason;              // why the match stopped short of kComplete
  std::vector<const Node*> nodes;  // the nodes a report names
  AttentionBlock block;
};

// Matches the attention block around `softmax`. Never modifies the graph. `order` (the
// graph's order taken by the calling pass, or null) puts the block's nodes in graph order
// without walking the whole graph per block.
MatchResult MatchAttention(const Graph& g, Node* softmax,
                           const rewrite::NodeOrder* order = nullptr);

// The tensor a Q/K/V projection reads: kiln.Linear's X, MatMul's A, x of
// Add(MatMul(x, W), b), or the input of a Split whose output `proj` is. Null otherwise.
Value ProjectionInput(Value proj);

// "[batch,4,?,16]"
std::string DimsString(const std::vector<Dim>& dims);

}  // namespace kiln::attention
