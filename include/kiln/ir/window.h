// Sliding-window geometry of Conv, ConvTranspose and the pools (MaxPool, AveragePool,
// LpPool): the ONNX attributes kernel_shape, strides, dilations, pads, auto_pad, ceil_mode
// (and ConvTranspose's output_padding, output_shape) read and checked once, and per
// spatial dim the output size and the padding before and after the input. The reference
// kernels and the shape rules both use it, so a plan's shapes and the values computed for
// them cannot disagree. Semantics as onnxruntime's (and PyTorch's): SAME_UPPER/SAME_LOWER
// give ceil(in / stride) outputs with the odd padding element after / before; ceil_mode
// drops a last window that would start in the end padding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kiln/ir/graph.h"

namespace kiln::window {

struct Attrs {
  int spatial = 0;  // number of spatial dims
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;  // [begin_0 .. begin_{n-1}, end_0 .. end_{n-1}]
  std::vector<int64_t> output_padding, output_shape;  // ConvTranspose only (may be empty)
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

// Reads the node's window attributes for `spatial` dims. `kernel` gives kernel_shape when
// the attribute is absent (Conv and ConvTranspose: W's spatial dims; empty for the pools,
// which need the attribute). InvalidArgument naming the attribute for a wrong length, a
// non-positive kernel, stride or dilation, a negative pad, an unknown auto_pad.
absl::StatusOr<Attrs> Read(const Node& n, int spatial, absl::Span<const int64_t> kernel);

struct Extent {
  int64_t out = 0;        // output size
  int64_t pad_begin = 0;  // padding before the input (window i starts at i*stride - pad_begin)
  int64_t pad_end = 0;    // padding after it
};

// Conv and the pools: dim i of an input of size `in`. InvalidArgument when the (dilated)
// window is larger than the padded input.
absl::StatusOr<Extent> Forward(const Attrs& a, int i, int64_t in);

// ConvTranspose: dim i of an input of size `in` (output_shape, output_padding and auto_pad
// as the ONNX spec gives them; an output_shape beyond what the input covers is
// zero-extended at the end, as onnxruntime does). InvalidArgument when the output would be
// empty.
absl::StatusOr<Extent> Transposed(const Attrs& a, int i, int64_t in);

}  // namespace kiln::window
