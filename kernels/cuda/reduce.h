// Reductions over a set of axes (ONNX ReduceSum / Mean / Max / Min / Prod / L1 / L2 /
// SumSquare) of f32 / f16 / bf16 tensors, accumulated in f64 as the reference does; of i32
// / i64 tensors (all but Mean and L2: an attention mask's ReduceSum into sequence lengths)
// in wrap-around 64-bit integers, as the reference does.
// How: one warp per output element; lanes stride over the reduced elements (the reduced
// dims' strides in the input), then a warp reduction. The output is dense in the input's
// order of kept dims (keepdims only changes its dims, not its layout).
// Empty reduced sets give the operation's identity (Sum 0, Prod 1, Max -inf, Min +inf,
// Mean NaN).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

enum class ReduceOp : uint8_t { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare };

struct ReduceArgs {
  ReduceOp op = ReduceOp::kSum;
  ElemType type = ElemType::kF32;  // of x and y: f32, f16, bf16, i32 or i64
  const void* x = nullptr;
  void* y = nullptr;
  int64_t out_count = 0;
  int out_rank = 0;  // kept dims (reduced ones dropped)
  int64_t out_dims[kMaxRank] = {};
  int64_t out_strides[kMaxRank] = {};  // input strides of the kept dims
  int red_rank = 0;
  int64_t red_dims[kMaxRank] = {};
  int64_t red_strides[kMaxRank] = {};  // input strides of the reduced dims
  int64_t group = 1;                   // product of red_dims
};

cudaError_t Reduce(const ReduceArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
