// The op catalogue: every op kiln knows, with arity, traits and the per-op facts passes
// and lowering ask instead of keeping op-name lists (include/kiln/ir/ops.h). Adding an op:
// add a row here, a reference kernel in src/reference/, and shape rules when passes need
// them (docs/adding-an-op.md).
#include "kiln/ir/ops.h"

#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace kiln {
namespace {

constexpr unsigned kEw = kPure | kElementwise;
constexpr unsigned kBin = kPure | kElementwise | kBroadcasting;
constexpr unsigned kBinC = kBin | kCommutative;
constexpr unsigned kLay = kPure | kLayoutOnly;

// Row modifiers, for the facts most ops leave at their defaults.
OpInfo View(ViewKind kind, OpInfo info) {
  info.view = kind;
  return info;
}

OpInfo Grows(OpInfo info) {
  info.grows = true;
  return info;
}

OpInfo Mixes(PositionMixing mixing, OpInfo info) {
  info.mixing = mixing;
  return info;
}

// A compute op that cpu bf16 / int8 plans keep in fp32, and why (OpInfo::keep_f32_reason).
OpInfo KeepF32(std::string_view why, OpInfo info) {
  info.keep_f32_reason = why;
  return info;
}

constexpr std::string_view kNormWhy = "normalization: mean and variance over the hidden axis";
constexpr std::string_view kSoftmaxWhy = "softmax: exponentials of the scores";
constexpr std::string_view kAttentionWhy =
    "attention: Q·Kᵀ scores and their softmax (activations on both sides, no weights)";
constexpr std::string_view kEmbedWhy = "embedding lookup and its normalization";

const std::vector<OpInfo>& Table() {
  static const auto* table = new std::vector<OpInfo>{
      // IR-internal
      {"", "Input", 0, 0, 1, 1, kTraitNone},
      {"", "Constant", 0, 0, 1, 1, kPure},
      // Elementwise unary
      {"", "Sqrt", 1, 1, 1, 1, kEw},
      {"", "Reciprocal", 1, 1, 1, 1, kEw, 0, PrecisionPolicy::kKeepF32},
      {"", "Exp", 1, 1, 1, 1, kEw, 0, PrecisionPolicy::kKeepF32},
      {"", "Log", 1, 1, 1, 1, kEw, 0, PrecisionPolicy::kKeepF32},
      {"", "Erf", 1, 1, 1, 1, kEw, 9},
      {"", "Tanh", 1, 1, 1, 1, kEw},
      {"", "Sigmoid", 1, 1, 1, 1, kEw},
      {"", "Relu", 1, 1, 1, 1, kEw},
      {"", "Neg", 1, 1, 1, 1, kEw},
      {"", "Abs", 1, 1, 1, 1, kEw},
      {"", "Not", 1, 1, 1, 1, kEw},
      {"", "BitwiseNot", 1, 1, 1, 1, kEw, 18},
      {"", "Cast", 1, 1, 1, 1, kEw},
      View(ViewKind::kSame, {"", "Identity", 1, 1, 1, 1, kLay}),
      {"", "Dropout", 1, 3, 1, 2, kPure},
      {"", "Gelu", 1, 1, 1, 1, kEw, 20},
      {"", "Clip", 1, 3, 1, 1, kEw},
      {"", "Floor", 1, 1, 1, 1, kEw},
      {"", "Ceil", 1, 1, 1, 1, kEw},
      {"", "Round", 1, 1, 1, 1, kEw, 11},
      {"", "Sin", 1, 1, 1, 1, kEw},
      {"", "Cos", 1, 1, 1, 1, kEw},
      {"", "Tan", 1, 1, 1, 1, kEw},
      {"", "Asin", 1, 1, 1, 1, kEw},
      {"", "Acos", 1, 1, 1, 1, kEw},
      {"", "Atan", 1, 1, 1, 1, kEw},
      {"", "Sinh", 1, 1, 1, 1, kEw, 9},
      {"", "Cosh", 1, 1, 1, 1, kEw, 9},
      {"", "Asinh", 1, 1, 1, 1, kEw, 9},
      {"", "Acosh", 1, 1, 1, 1, kEw, 9},
      {"", "Atanh", 1, 1, 1, 1, kEw, 9},
      {"", "Sign", 1, 1, 1, 1, kEw, 9},
      {"", "Softplus", 1, 1, 1, 1, kEw, 0, PrecisionPolicy::kKeepF32},
      {"", "Softsign", 1, 1, 1, 1, kEw},
      {"", "LeakyRelu", 1, 1, 1, 1, kEw},
      {"", "Elu", 1, 1, 1, 1, kEw},
      {"", "Celu", 1, 1, 1, 1, kEw, 12},
      {"", "Selu", 1, 1, 1, 1, kEw},
      {"", "HardSigmoid", 1, 1, 1, 1, kEw},
      {"", "HardSwish", 1, 1, 1, 1, kEw, 14},
      {"", "ThresholdedRelu", 1, 1, 1, 1, kEw, 10},
      {"", "Shrink", 1, 1, 1, 1, kEw, 9},
      {"", "Swish", 1, 1, 1, 1, kEw, 24},
      {"", "IsNaN", 1, 1, 1, 1, kEw, 9},
      {"", "IsInf", 1, 1, 1, 1, kEw, 10},
      {"", "Mish", 1, 1, 1, 1, kEw, 18},
      // Elementwise binary / variadic
      {"", "Add", 2, 2, 1, 1, kBinC},
      {"", "Sub", 2, 2, 1, 1, kBin},
      {"", "Mul", 2, 2, 1, 1, kBinC},
      {"", "Div", 2, 2, 1, 1, kBin},
      {"", "Pow", 2, 2, 1, 1, kBin, 0, PrecisionPolicy::kKeepF32},
      {"", "Equal", 2, 2, 1, 1, kBinC},
      {"", "Less", 2, 2, 1, 1, kBin},
      {"", "Greater", 2, 2, 1, 1, kBin},
      {"", "And", 2, 2, 1, 1, kBinC},
      {"", "Or", 2, 2, 1, 1, kBinC},
      {"", "Min", 1, -1, 1, 1, kBinC},
      {"", "Max", 1, -1, 1, 1, kBinC},
      {"", "Where", 3, 3, 1, 1, kBin, 9},
      {"", "Mod", 2, 2, 1, 1, kBin, 10},
      {"", "BitShift", 2, 2, 1, 1, kBin, 11},
      {"", "LessOrEqual", 2, 2, 1, 1, kBin, 12},
      {"", "GreaterOrEqual", 2, 2, 1, 1, kBin, 12},
      {"", "Xor", 2, 2, 1, 1, kBinC},
      {"", "BitwiseAnd", 2, 2, 1, 1, kBinC, 18},
      {"", "BitwiseOr", 2, 2, 1, 1, kBinC, 18},
      {"", "BitwiseXor", 2, 2, 1, 1, kBinC, 18},
      {"", "Sum", 1, -1, 1, 1, kBinC},
      {"", "Mean", 1, -1, 1, 1, kBinC},
      {"", "PRelu", 2, 2, 1, 1, kBin},
      {"", "CastLike", 2, 2, 1, 1, kPure, 15},
      // Linear algebra and normalization
      KeepF32("matmul of two activations (no weights to store low)",
              Grows({"", "MatMul", 2, 2, 1, 1, kPure, 0, PrecisionPolicy::kLower})),
      KeepF32("Gemm left unfused (fuse-linear makes kiln.Linear of the usual ones)",
              Grows({"", "Gemm", 2, 3, 1, 1, kPure, 0, PrecisionPolicy::kLower})),
      KeepF32(kSoftmaxWhy, Mixes(PositionMixing::kNormalizesAxis,
                                 {"", "Softmax", 1, 1, 1, 1, kPure, 0, PrecisionPolicy::kLower})),
      KeepF32(kSoftmaxWhy,
              Mixes(PositionMixing::kNormalizesAxis,
                    {"", "LogSoftmax", 1, 1, 1, 1, kPure, 0, PrecisionPolicy::kLower})),
      Mixes(PositionMixing::kNormalizesAxis, {"", "Hardmax", 1, 1, 1, 1, kPure}),
      // Vision (src/reference/vision.cc): windows over the spatial dims, which the padding
      // analysis treats as mixing positions with no mask to check.
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "Conv", 2, 3, 1, 1, kPure})),
      // x, w, x_zero_point?, w_zero_point? -> i32; x, x_scale, x_zero_point, w, w_scale,
      // w_zero_point, y_scale, y_zero_point?, B? -> quantized.
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "ConvInteger", 2, 4, 1, 1, kPure, 10})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "QLinearConv", 8, 9, 1, 1, kPure, 10})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "ConvTranspose", 2, 3, 1, 1, kPure})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "MaxPool", 1, 1, 1, 2, kPure})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "AveragePool", 1, 1, 1, 1, kPure})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "LpPool", 1, 1, 1, 1, kPure})),
      Mixes(PositionMixing::kNormalizesAxis, {"", "GlobalAveragePool", 1, 1, 1, 1, kPure}),
      Mixes(PositionMixing::kNormalizesAxis, {"", "GlobalMaxPool", 1, 1, 1, 1, kPure}),
      {"", "BatchNormalization", 5, 5, 1, 5, kPure},
      Mixes(PositionMixing::kNormalizesAxis, {"", "InstanceNormalization", 3, 3, 1, 1, kPure}),
      Mixes(PositionMixing::kNormalizesAxis, {"", "GroupNormalization", 3, 3, 1, 1, kPure, 18}),
      Mixes(PositionMixing::kNormalizesAxis, {"", "LpNormalization", 1, 1, 1, 1, kPure}),
      Mixes(PositionMixing::kNormalizesAxis, {"", "LRN", 1, 1, 1, 1, kPure}),
      Mixes(PositionMixing::kNormalizesAxis, {"", "DepthToSpace", 1, 1, 1, 1, kPure}),
      Mixes(PositionMixing::kNormalizesAxis, {"", "SpaceToDepth", 1, 1, 1, 1, kPure}),
      // X, roi?, scales?, sizes? (the opset-11 form; Resize-10 and Upsample canonicalize
      // to it): src/reference/resize.cc.
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "Resize", 1, 4, 1, 1, kPure, 10})),
      // Recurrent layers (src/reference/recurrent.cc): each step reads the previous one;
      // every output is optional (Y_h alone is common).
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "RNN", 3, 6, 0, 2, kPure, 7})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "GRU", 3, 6, 0, 2, kPure, 7})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "LSTM", 3, 8, 0, 3, kPure, 7})),
      // Spectral ops (src/reference/spectral.cc).
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "DFT", 1, 3, 1, 1, kPure, 17})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "STFT", 2, 4, 1, 1, kPure, 17})),
      Grows({"", "MelWeightMatrix", 5, 5, 1, 1, kPure, 17}),
      // Detection and image-patch ops (src/reference/detection.cc): each output reads
      // positions across the input, as the windowed vision ops.
      Mixes(PositionMixing::kNormalizesAxis,
            Grows({"", "NonMaxSuppression", 2, 5, 1, 1, kPure, 11})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "RoiAlign", 3, 3, 1, 1, kPure, 16})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "Unique", 1, 1, 1, 4, kPure, 11})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "Col2Im", 3, 3, 1, 1, kPure, 18})),
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "MaxUnpool", 2, 3, 1, 1, kPure, 11})),
      // Sampling at grid positions (src/reference/grid_sample.cc).
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "GridSample", 2, 2, 1, 1, kPure, 16})),
      Grows({"", "AffineGrid", 2, 2, 1, 1, kPure, 20}),
      // ONNX's decoder ops besides Attention (src/reference/decoder_ops.cc): RotaryEmbedding
      // keeps positions apart; TensorScatter writes the update's positions into the cache.
      {"", "RotaryEmbedding", 3, 4, 1, 1, kPure, 23},
      Mixes(PositionMixing::kNormalizesAxis, {"", "TensorScatter", 2, 3, 1, 1, kPure, 24}),
      // numpy's einsum and Det (src/reference/linalg.cc); Einsum may contract any axis.
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "Einsum", 1, -1, 1, 1, kPure, 12})),
      {"", "Det", 1, 1, 1, 1, kPure, 11},
      {"", "BitCast", 1, 1, 1, 1, kPure, 26},
      // Signal windows (src/reference/signal.cc): 1-D of the size input's value.
      Grows({"", "HannWindow", 1, 1, 1, 1, kPure, 17}),
      Grows({"", "HammingWindow", 1, 1, 1, 1, kPure, 17}),
      Grows({"", "BlackmanWindow", 1, 1, 1, 1, kPure, 17}),
      // ONNX's own scaled dot-product attention (Q, K, V, attn_mask?, past_key?,
      // past_value?, nonpad_kv_seqlen?): the padding analysis treats it as mixing
      // positions with no mask it can check.
      Mixes(PositionMixing::kNormalizesAxis, Grows({"", "Attention", 3, 7, 1, 4, kPure, 23})),
      // Accepted at every opset, as onnxruntime does (it registers the op in the default
      // domain from opset 1, and its transformer optimizer writes it into opset-14 files);
      // ONNX itself has it from 17, with the same semantics.
      KeepF32(kNormWhy,
              {"", "LayerNormalization", 2, 3, 1, 3, kPure | kRowwise, 0, PrecisionPolicy::kLower}),
      // Over dims [axis, rank): like LayerNormalization, but not kRowwise (canonicalize
      // turns the last-axis ones into kiln.RMSNorm, which is).
      KeepF32(kNormWhy, {"", "RMSNormalization", 2, 2, 1, 1, kPure, 23, PrecisionPolicy::kLower}),
      // Reductions and scans
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceMean", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceSum", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes, Grows({"", "ReduceMax", 1, 2, 1, 1, kPure})),
      Mixes(PositionMixing::kReducesAxes, Grows({"", "ReduceMin", 1, 2, 1, 1, kPure})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceProd", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceL1", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceL2", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceSumSquare", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceLogSum", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Mixes(PositionMixing::kReducesAxes,
            Grows({"", "ReduceLogSumExp", 1, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32})),
      Grows({"", "ArgMax", 1, 1, 1, 1, kPure}),
      Grows({"", "ArgMin", 1, 1, 1, 1, kPure}),
      {"", "CumSum", 2, 2, 1, 1, kPure, 11, PrecisionPolicy::kKeepF32},
      {"", "CumProd", 2, 2, 1, 1, kPure, 26, PrecisionPolicy::kKeepF32},
      // Data movement and shapes
      Grows({"", "Gather", 2, 2, 1, 1, kPure}),
      // Quantization (onnxruntime's quantizers): per-tensor, per-axis or blocked scales.
      // DynamicQuantizeLinear's scale comes from the whole tensor, padding included.
      {"", "QuantizeLinear", 2, 3, 1, 1, kPure, 10},
      {"", "DequantizeLinear", 2, 3, 1, 1, kPure, 10},
      Mixes(PositionMixing::kReducesAxes, {"", "DynamicQuantizeLinear", 1, 1, 3, 3, kPure, 11}),
      Grows({"", "MatMulInteger", 2, 4, 1, 1, kPure, 10}),
      // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point?
      Grows({"", "QLinearMatMul", 7, 8, 1, 1, kPure, 10}),
      {"", "Slice", 3, 5, 1, 1, kLay},
      {"", "Concat", 1, -1, 1, 1, kLay},
      {"", "Split", 1, 2, 1, -1, kLay},
      View(ViewKind::kReshape, {"", "Reshape", 2, 2, 1, 1, kLay}),
      {"", "Transpose", 1, 1, 1, 1, kLay},
      View(ViewKind::kReshape, {"", "Unsqueeze", 2, 2, 1, 1, kLay}),
      View(ViewKind::kReshape, {"", "Squeeze", 1, 2, 1, 1, kLay}),
      Grows({"", "Expand", 2, 2, 1, 1, kLay, 8}),
      View(ViewKind::kReshape, {"", "Flatten", 1, 1, 1, 1, kLay}),
      Grows({"", "Shape", 1, 1, 1, 1, kPure}),
      Grows({"", "ConstantOfShape", 1, 1, 1, 1, kPure, 9}),
      Grows({"", "Range", 3, 3, 1, 1, kPure, 11, PrecisionPolicy::kKeepF32}),
      {"", "Trilu", 1, 2, 1, 1, kPure, 14},
      Grows({"", "Tile", 2, 2, 1, 1, kLay}),
      Grows({"", "Pad", 2, 4, 1, 1, kPure}),
      {"", "GatherElements", 2, 2, 1, 1, kPure, 11},
      Grows({"", "GatherND", 2, 2, 1, 1, kPure, 11}),
      {"", "ScatterND", 3, 3, 1, 1, kPure, 11},
      {"", "ScatterElements", 3, 3, 1, 1, kPure, 11},
      {"", "Scatter", 3, 3, 1, 1, kPure, 9},  // deprecated in 11: ScatterElements
      {"", "EyeLike", 1, 1, 1, 1, kPure, 9},
      // Selection by data (src/reference/movement_select.cc).
      {"", "Compress", 2, 2, 1, 1, kPure, 9},
      Mixes(PositionMixing::kNormalizesAxis, {"", "ReverseSequence", 2, 2, 1, 1, kPure, 10}),
      Grows({"", "CenterCropPad", 2, 2, 1, 1, kPure, 18}),
      // Losses (inference-usable; reduce over every position): loss.cc.
      Mixes(PositionMixing::kNormalizesAxis,
            {"", "NegativeLogLikelihoodLoss", 2, 3, 1, 1, kPure, 12}),
      Mixes(PositionMixing::kNormalizesAxis,
            {"", "SoftmaxCrossEntropyLoss", 2, 3, 1, 2, kPure, 12}),
      Grows({"", "OneHot", 3, 3, 1, 1, kPure, 9}),
      Grows({"", "NonZero", 1, 1, 1, 1, kPure, 9}),
      {"", "Size", 1, 1, 1, 1, kPure},
      {"", "TopK", 2, 2, 2, 2, kPure},
      // kiln's fused ops (domain "kiln", version 1; docs/fused-ops.md)
      Grows({"kiln", "Linear", 2, 3, 1, 1, kPure | kRowwise, 0, PrecisionPolicy::kLower}),
      // An int8 plan's Linear (docs/fused-ops.md): s8 weights [N, K] with per-output-channel
      // scales, activations (times an optional per-channel x_mul) quantized per row at run
      // time (so rows stay apart: row-wise). kLower: a cuda int8 plan's 16-bit compute path
      // runs through it (X and Y fp16); its scales, bias and x_mul stay f32.
      KeepF32("already quantized", {"kiln", "QuantLinear", 3, 5, 1, 1, kPure | kRowwise, 0,
                                    PrecisionPolicy::kLower, (1u << 2) | (1u << 3) | (1u << 4)}),
      // A weight-only 4- or 8-bit Linear (onnxruntime's MatMulNBits): u4 or u8 weights [N, K]
      // with a scale (and zero point) per block of K, f32 activations; row-wise like Linear.
      KeepF32(
          "already quantized (int4/int8 weights)",
          {"kiln", "BlockQuantLinear", 3, 5, 1, 1, kPure | kRowwise, 0, PrecisionPolicy::kKeepF32}),
      // Rows of a block-quantized [V, K] table (onnxruntime's GatherBlockQuantized: a tied
      // model's int4 embeddings, shared with its LM head): W u4 or u8 codes, indices,
      // scales [V, KB], zero points?; f32 rows. Its codes and scales stay quantized (the
      // LM head's, after cse); f32 out at every precision.
      Grows({"kiln", "BlockQuantGather", 3, 4, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32}),
      KeepF32(kNormWhy,
              {"kiln", "SkipLayerNorm", 3, 5, 1, 2, kPure | kRowwise, 0, PrecisionPolicy::kLower}),
      KeepF32(kNormWhy,
              {"kiln", "RMSNorm", 2, 2, 1, 1, kPure | kRowwise, 0, PrecisionPolicy::kLower}),
      KeepF32(kNormWhy,
              {"kiln", "SkipRMSNorm", 3, 4, 1, 2, kPure | kRowwise, 0, PrecisionPolicy::kLower}),
      KeepF32("rotary: elementwise on Q and K, no weights",
              {"kiln", "Rotary", 3, 3, 1, 1, kPure, 0, PrecisionPolicy::kLower}),
      KeepF32("gated activation: elementwise, no weights",
              {"kiln", "Glu", 1, 1, 1, 1, kPure | kRowwise, 0, PrecisionPolicy::kLower}),
      KeepF32(kAttentionWhy,
              Mixes(PositionMixing::kMaskedOrCausal, {"kiln", "MultiHeadAttention", 1, 4, 1, 1,
                                                      kPure, 0, PrecisionPolicy::kLower, 1u << 1})),
      // Its mask (input 3) is not where the padding analysis looks, and its keys may be a
      // cache: treated like a Softmax (never paddable).
      KeepF32(kAttentionWhy,
              Mixes(PositionMixing::kNormalizesAxis,
                    {"kiln", "Attention", 3, 5, 1, 1, kPure, 0, PrecisionPolicy::kLower, 1u << 3})),
      KeepF32(kEmbedWhy, Grows({"kiln", "EmbedLayerNorm", 8, 8, 1, 2, kPure | kRowwise, 0,
                                PrecisionPolicy::kLower})),
      // A decode program's cache append (docs/generation.md): writes rows at the slots its
      // positions name, so it mixes positions like a Softmax (never paddable).
      Mixes(PositionMixing::kNormalizesAxis, {"kiln", "CacheWrite", 3, 4, 1, 1, kPure}),
      KeepF32("pooling: a masked mean, no weights",
              Mixes(PositionMixing::kMaskedOrFirst, Grows({"kiln", "Pool", 1, 2, 1, 1, kPure, 0,
                                                           PrecisionPolicy::kLower, 1u << 1}))),
      // Packed-token programs (docs/packing.md): the encoder over the tokens of several
      // sequences laid end to end, `lengths` delimiting them.
      KeepF32(kAttentionWhy,
              Mixes(PositionMixing::kSegments,
                    {"kiln", "PackedAttention", 2, 2, 1, 1, kPure, 0, PrecisionPolicy::kLower})),
      KeepF32("pooling: a masked mean, no weights",
              Mixes(PositionMixing::kSegments,
                    Grows({"kiln", "PackedPool", 2, 2, 1, 1, kPure, 0, PrecisionPolicy::kLower}))),
      Mixes(PositionMixing::kSegments, {"kiln", "PackedPositions", 2, 2, 1, 1, kPure}),
      // As CumSum: a running sum keeps f32 in 16-bit plans.
      Mixes(PositionMixing::kSegments,
            {"kiln", "PackedCumSum", 2, 2, 1, 1, kPure, 0, PrecisionPolicy::kKeepF32}),
  };
  return *table;
}

}  // namespace

const std::vector<OpInfo>& AllOps() { return Table(); }

const OpInfo* FindOp(std::string_view domain, std::string_view name) {
  // Keyed by views of the catalogue's own (static) strings: a lookup allocates nothing,
  // and passes ask once per node.
  using Key = std::pair<std::string_view, std::string_view>;
  static const auto* index = [] {
    auto* m = new absl::flat_hash_map<Key, const OpInfo*>();
    for (const OpInfo& info : Table()) (*m)[Key(info.domain, info.name)] = &info;
    return m;
  }();
  auto it = index->find(Key(domain, name));
  return it == index->end() ? nullptr : it->second;
}

}  // namespace kiln
