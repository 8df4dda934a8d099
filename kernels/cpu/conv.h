// 2-D convolution, NCHW f32: Y[n, m, oh, ow] = B[m] + Σ X[n, c, oh·sh − ph + kh·dh,
// ow·sw − pw + kw·dw] · W[m, c, kh, kw] over the channels of m's group (zero outside X).
// oneDNN's direct convolution (its forward_inference primitive, the weights reordered once
// into the blocked layout it prefers; X and Y stay plain NCHW). A PackedConv is built once
// per plan step (fixed shapes) at load time. 1-D convolutions run as H = 1.
// Limits: f32 only; the shapes are the step's (one primitive per PackedConv).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

struct ConvDesc {
  int64_t batch = 0, in_ch = 0, in_h = 0, in_w = 0;
  int64_t out_ch = 0, out_h = 0, out_w = 0;
  int64_t k_h = 0, k_w = 0, group = 1;
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// InvalidArgument unless the sizes are positive, the groups divide both channel counts and
// the output size is what the window geometry gives.
absl::Status CheckConvDesc(const ConvDesc& d);

class PackedConv {
 public:
  // Copies w ([out_ch, in_ch / group, k_h, k_w]) and bias ([out_ch], may be null) into
  // oneDNN's layout; the caller's buffers are not referenced afterwards.
  static absl::StatusOr<std::unique_ptr<PackedConv>> Create(const ConvDesc& desc, const float* w,
                                                            const float* bias,
                                                            const CpuContext& ctx);
  ~PackedConv();

  // y = conv(x). Safe to call from several threads at once.
  absl::Status Run(const CpuContext& ctx, const float* x, float* y) const;

  // oneDNN's implementation name (e.g. "brg:avx512_core"), for traces.
  const char* ImplName() const;

 private:
  struct State;
  explicit PackedConv(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cpu
