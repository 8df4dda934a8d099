// The generic elementwise kernel: one ONNX elementwise op (unary, binary or Where) with
// numpy broadcasting, per-operand dtypes, computed in one domain (f32 for f32/f16/bf16,
// f64, i64 for signed, u64 for unsigned integers, bool) and converted to the output dtype
// on store — so it also is Cast (Identity with another output dtype) and Expand (Identity
// with a broadcast input). Semantics: src/plan/eltwise_ops.h.
// How: a grid-stride loop over the output; the host collapses the output dims (and every
// input's strides, 0 on broadcast dims) into the fewest dims (EltwiseLayout, host code
// tested on the CPU), and when no input broadcasts the kernel indexes every operand by the
// flat output index. Memory-bound; the dtype and op switches are uniform across a warp.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/eltwise_common.h"

namespace kiln::cuda {

// The op vocabulary and domains shared with the CPU kernel (kernels/eltwise_common.h).
using EltOp = ::kiln::kernels::EltOp;
using EltDomainKind = ::kiln::kernels::EltDomainKind;
static_assert(kMaxRank == ::kiln::kernels::kMaxEltRank);

struct EltOperand {
  const void* data = nullptr;
  ElemType type = ElemType::kF32;
  int64_t strides[kMaxRank] = {};  // elements per step of each (collapsed) output dim
};

struct EltwiseArgs {
  EltOp op = EltOp::kIdentity;
  EltDomainKind domain = EltDomainKind::kF32;
  int rank = 0;                 // collapsed output rank (0: a scalar)
  int64_t dims[kMaxRank] = {};  // collapsed output dims
  int64_t n = 0;                // output elements
  bool contiguous = false;      // no input broadcasts: index every operand by the flat index
  int num_inputs = 0;
  EltOperand in[3];
  void* y = nullptr;
  ElemType out_type = ElemType::kF32;
  ErrorSink err;  // integer division by zero
};

// Fills rank, dims, n, contiguous and in[k].strides for an output of dims `out` and inputs
// of dims `ins` (kernels::ComputeBroadcastLayout). False when an input does not broadcast
// to `out` or the collapsed rank exceeds kMaxRank.
bool EltwiseLayout(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins,
                   EltwiseArgs* a);

cudaError_t Eltwise(const EltwiseArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
