// The one op catalogue. Passes and the importer ask it about an op (is it elementwise,
// pure, layout-only; how many inputs and outputs) instead of keeping their own lists.
// An op is known to kiln iff it is registered here; the importer rejects the others.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum OpTrait : unsigned {
  kTraitNone = 0,
  kPure = 1u << 0,          // no side effects, same inputs -> same outputs
  kElementwise = 1u << 1,   // output[i] depends on broadcast input[i] only
  kLayoutOnly = 1u << 2,    // moves or reinterprets data, no arithmetic
  kCommutative = 1u << 3,   // binary op whose operands may be swapped
  kBroadcasting = 1u << 4,  // multidirectional (numpy) broadcasting of inputs
  // Every index of the leading dims (all but the last) is a row of its own: output row r
  // reads row r of each input that has rows and the other inputs whole (weights, gamma), so
  // rows may be reordered or packed freely (kiln.Linear, the norms over the last axis,
  // kiln.Glu, kiln.EmbedLayerNorm's ids; LayerNormalization when its axis is the last).
  // The packing analysis (src/compiler/packing.cc) relies on it.
  kRowwise = 1u << 5,
};

// What the lower-precision pass (passes/lower_precision.cc) does with an op's f32 values
// when a plan is compiled for fp16 or bf16.
enum class PrecisionPolicy : uint8_t {
  kFollow,   // computes in its float inputs' dtype: runs in 16 bits when one of them does
             // (elementwise, data movement, shapes) — the default
  kLower,    // a compute op whose kernels keep fp32 statistics / accumulation inside (GEMMs,
             // norms, softmax, attention, embeddings, pooling): runs in 16 bits
  kKeepF32,  // range or accumulation would suffer in 16 bits (Exp, Log, Pow, Reciprocal,
             // reductions, CumSum): stays f32, 16-bit inputs are cast up
};

// How an op's output relates to the bytes of its data input (input 0). Lowering gives a
// view no step and no buffer of its own: its output aliases the input's bytes
// (src/compiler/lower.cc); reshape-simplification composes chains of kReshape views.
enum class ViewKind : uint8_t {
  kNone,     // computes or moves data — the default
  kSame,     // output = input 0, same shape (Identity)
  kReshape,  // output = input 0's elements in the same row-major order, under a new shape
             // (Reshape, Squeeze, Unsqueeze, Flatten)
};

// How an op combines values across positions of a dim, for the padding analysis
// (src/compiler/padding.cc: may zero padding of a symbol reach an unpadded output?).
enum class PositionMixing : uint8_t {
  kNone,            // not a concern of the analysis — the default: the op keeps sequence
                    // positions apart or mixes them only along dims padding never touches
                    // (elementwise, GEMMs, norms over the hidden axis)
  kNormalizesAxis,  // Softmax, LogSoftmax: every output of the axis reads every position,
                    // and no mask is visible to check
  kReducesAxes,     // Reduce*: mixes over the axes of input 1 (all when omitted)
  kMaskedOrCausal,  // kiln.MultiHeadAttention: honours the mask at input 1, or is causal
                    // (`causal` != 0: no query sees a later, padded key)
  kMaskedOrFirst,   // kiln.Pool: honours the mask at input 1, or reads position 0 only
                    // (mode "cls")
  kSegments,        // the packed-token ops (kiln.PackedAttention, PackedPool,
                    // PackedPositions, PackedCumSum): mix positions only within the
                    // sequences their `lengths` input delimits; they appear only in packed
                    // programs
};

struct OpInfo {
  std::string_view domain;  // "" for the ONNX default domain
  std::string_view name;
  int min_inputs;
  int max_inputs;  // -1 = variadic
  int min_outputs;
  int max_outputs;
  unsigned traits;
  // Earliest default-domain opset for which kiln accepts the op: the opset that introduced
  // it, or later where kiln needs a later version (0 = any from kMinOpset).
  int since_opset = 0;
  PrecisionPolicy precision = PrecisionPolicy::kFollow;
  // kLower ops: inputs (bit i = input i) that stay f32 (attention's additive mask: its
  // large negative values do not fit fp16).
  unsigned f32_inputs = 0;
  ViewKind view = ViewKind::kNone;
  // Outputs may hold more elements than the inputs together (Tile, Pad, Expand, MatMul, a
  // reduction of an empty axis, ...) other than by broadcasting (kBroadcasting): constant
  // folding bounds such an op's output by a rule of its own (passes/fold_bounds.cc)
  // before evaluating it under the size limit.
  bool grows = false;
  PositionMixing mixing = PositionMixing::kNone;
  // kLower ops a cpu bf16 / int8 plan keeps in fp32 (only GEMM weights go low there): why,
  // in a few words, for the plan's precision notes (`kiln plan-info`).
  std::string_view keep_f32_reason;
};

// nullptr if the op is not in the catalogue.
const OpInfo* FindOp(std::string_view domain, std::string_view name);
inline bool HasTrait(const OpInfo* info, OpTrait t) { return info && (info->traits & t); }
inline bool IsView(const OpInfo* info) { return info && info->view != ViewKind::kNone; }
const std::vector<OpInfo>& AllOps();

// kiln.QuantLinear's largest K: its int8 GEMMs (kernels/cpu/qgemm.h) sum u8 · s8 products
// (each at most 255 · 127) in int32, exact up to K = 66311.
inline constexpr int64_t kQuantLinearMaxK = 65536;

// Default-domain opsets the importer accepts.
inline constexpr int kMinOpset = 7;
inline constexpr int kMaxOpset = 27;

}  // namespace kiln
