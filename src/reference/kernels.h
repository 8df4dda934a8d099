// Internal interface between the reference executor (executor.cc) and its kernels, which
// live one op family per file (elementwise.cc, math.cc, movement.cc ...).
// A kernel reads the node's attributes and canonical (opset-21 form) inputs, and returns
// its outputs. Errors use InvalidArgument for bad inputs/attributes and Unimplemented for
// unsupported dtypes; the executor prefixes them with Node::Describe().
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"

namespace kiln::reference {

// `inputs[i]` is nullptr for an omitted optional input.
using KernelFn = absl::StatusOr<std::vector<Tensor>> (*)(const Node& node,
                                                         absl::Span<const Tensor* const> inputs);

// key: "domain::Op" ("::Add" for the default domain)
using KernelTable = absl::flat_hash_map<std::string, KernelFn>;

inline std::string KernelKey(std::string_view domain, std::string_view op) {
  return std::string(domain) + "::" + std::string(op);
}

// Each family file defines one of these; executor.cc calls them all once.
void RegisterElementwiseKernels(KernelTable& table);  // unary, binary, Where, Cast, Clip ...
void RegisterMathKernels(KernelTable& table);      // MatMul Gemm Softmax LayerNorm reductions ...
void RegisterMovementKernels(KernelTable& table);  // Gather(ND) Slice Concat Reshape Transpose ...
void RegisterQuantizeKernels(KernelTable& table);  // Quantize/DequantizeLinear ... (quantize.cc)
void RegisterFusedKernels(KernelTable& table);  // kiln domain: Linear SkipLayerNorm ... (fused.cc)
void RegisterOnnxAttentionKernels(KernelTable& table);  // Attention (onnx_attention.cc)
void RegisterVisionKernels(KernelTable& table);         // Conv, pools, BatchNorm ... (vision.cc)
void RegisterResizeKernels(KernelTable& table);         // Resize (resize.cc)
void RegisterDecoderKernels(KernelTable& table);  // RotaryEmbedding, TensorScatter (decoder_ops.cc)
void RegisterLinalgKernels(KernelTable& table);   // Einsum, Det (linalg.cc)
void RegisterGridKernels(KernelTable& table);     // GridSample, AffineGrid (grid_sample.cc)
void RegisterRecurrentKernels(KernelTable& table);  // RNN, GRU, LSTM (recurrent.cc)
void RegisterSpectralKernels(KernelTable& table);   // DFT, STFT, MelWeightMatrix (spectral.cc)
void RegisterDetectionKernels(KernelTable& table);  // NMS, RoiAlign, Unique, Col2Im, MaxUnpool
void RegisterSignalKernels(KernelTable& table);     // Hann/Hamming/BlackmanWindow (signal.cc)
void RegisterLossKernels(KernelTable& table);       // NLL, SoftmaxCrossEntropy, EyeLike (loss.cc)

// --- Shared helpers (helpers.cc) ---
// Numpy-style broadcast of two shapes; error when incompatible.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(absl::Span<const int64_t> a,
                                                     absl::Span<const int64_t> b);
// True when `src` broadcasts (unidirectionally) to exactly `target`.
bool BroadcastsTo(absl::Span<const int64_t> src, absl::Span<const int64_t> target);
// For each element of a tensor of shape `out`, the flat index of the element of `src`
// broadcast to it (numpy, right-aligned). Callers check BroadcastsTo(src, out) first.
std::vector<int64_t> BroadcastOffsets(absl::Span<const int64_t> src, absl::Span<const int64_t> out);
// Normalizes a possibly negative axis against `rank`; error when out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank);
// Row-major strides of `dims`.
std::vector<int64_t> Strides(absl::Span<const int64_t> dims);
// Reads a 0-D/1-D integer tensor as int64 values.
std::vector<int64_t> ToInt64Vector(const Tensor& t);

}  // namespace kiln::reference
