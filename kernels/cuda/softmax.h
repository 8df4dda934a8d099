// Softmax over the last axis, fp32 / fp16 / bf16 I/O with fp32 math.
// How: one block per row; each thread keeps a running (max, sum of exp) over its elements
// (online softmax), the pairs are combined across the block, and a second pass writes
// exp(x - max) / sum: two reads of the row, one write, any row length.
// Launch shape: SoftmaxThreads(n) threads per block (a warp for short rows, 8 elements per
// thread up to 1024 threads).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

struct SoftmaxArgs {
  ElemType dtype = ElemType::kF32;
  const void* x = nullptr;  // [rows, n]
  void* y = nullptr;        // [rows, n]; may equal x
  int64_t rows = 0, n = 0;
};

int SoftmaxThreads(int64_t n);
cudaError_t Softmax(const SoftmaxArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
