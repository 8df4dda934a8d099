// Data-movement kernels, all dtype-agnostic (they move elements of 1, 2, 4 or 8 bytes):
// - StridedCopy: an N-d box from a strided source to a strided destination. Transpose
//   (permuted source strides), Slice (start offset, step·stride), Expand (stride 0 on
//   broadcast dims), each input of a Concat (into a sub-box of the output) and the
//   executor's pad / slice staging copies are all this one kernel. The box and its
//   collapse (dims contiguous on both sides merged first) are kernels/strided_copy.h,
//   shared with the CPU kernel.
// - Gather (ONNX Gather on one axis), GatherND (with batch_dims), GatherElements: indices
//   i32 or i64, negative ones count from the end; an index out of range records the step's
//   code in the error word and writes zeros.
// - Fill: one value everywhere (ONNX Pad is a Fill, then a StridedCopy of x into the
//   interior box).
// - CumSum along one axis (exclusive / reverse), one thread per line, in f64 for floats
//   (as the reference) and wrapping i64 for integers.
// Grid-stride loops over the output, 256 threads per block.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/strided_copy.h"

namespace kiln::cuda {

struct StridedCopyArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  int elem_size = 4;
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t src_strides[kMaxRank] = {};  // elements; may be 0 (broadcast) or negative
  int64_t dst_strides[kMaxRank] = {};
  int64_t src_offset = 0, dst_offset = 0;  // elements
};

static_assert(kMaxRank == kernels::kMaxCopyRank);

// The launch arguments of a collapsed box (kernels/strided_copy.h); pointers left null.
StridedCopyArgs StridedCopyFromBox(const kernels::CopyBox& box, int elem_size);

// Fills a->rank/dims/strides from full-rank `dims` and strides, dropping size-1 dims and
// merging dims contiguous on both sides (kernels::CollapseCopy). False when more than
// kMaxRank dims remain.
bool CollapseCopy(const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& dst_strides, StridedCopyArgs* a);

cudaError_t StridedCopy(const StridedCopyArgs& a, cudaStream_t stream);

// n elements of `elem_size` bytes (1, 2, 4 or 8) at y set to the low bytes of `bits` (a
// value already in y's dtype): Pad's background.
cudaError_t Fill(void* y, int64_t n, int elem_size, uint64_t bits, cudaStream_t stream);

struct GatherArgs {
  const void* data = nullptr;
  const void* indices = nullptr;
  bool idx_i32 = false;
  int elem_size = 4;
  int64_t outer = 0, axis_dim = 0, inner = 0, num_indices = 0;
  void* y = nullptr;  // [outer, num_indices, inner]
  ErrorSink err;
};
cudaError_t Gather(const GatherArgs& a, cudaStream_t stream);

struct GatherNDArgs {
  const void* data = nullptr;
  const void* indices = nullptr;
  bool idx_i32 = false;
  int elem_size = 4;
  int64_t batch = 1;               // product of the batch dims
  int64_t batch_stride = 0;        // data elements per batch
  int64_t tuples = 0;              // index tuples per batch
  int k = 0;                       // tuple length (indices' last dim), <= kMaxRank
  int64_t dims[kMaxRank] = {};     // data dims indexed by the tuple
  int64_t strides[kMaxRank] = {};  // their strides in elements
  int64_t slice = 1;               // elements copied per tuple
  void* y = nullptr;               // [batch, tuples, slice]
  ErrorSink err;
};
cudaError_t GatherND(const GatherNDArgs& a, cudaStream_t stream);

struct GatherElementsArgs {
  const void* data = nullptr;
  const void* indices = nullptr;  // dims = the output's
  bool idx_i32 = false;
  int elem_size = 4;
  int rank = 0, axis = 0;
  int64_t idx_dims[kMaxRank] = {};
  int64_t data_strides[kMaxRank] = {};
  int64_t axis_dim = 0;
  int64_t n = 0;
  void* y = nullptr;
  ErrorSink err;
};
cudaError_t GatherElements(const GatherElementsArgs& a, cudaStream_t stream);

struct CumSumArgs {
  const void* x = nullptr;
  void* y = nullptr;
  ElemType type = ElemType::kF32;
  int64_t outer = 0, len = 0, inner = 0;
  bool exclusive = false, reverse = false;
  // Packed tokens (kiln.PackedCumSum, packed.h): line b is tokens [cu_seqlens[b],
  // cu_seqlens[b+1]) of a dense [T] x, summed as every other line (outer = the sequences,
  // inner = 1, len = T, not reverse).
  const int32_t* cu_seqlens = nullptr;
};
cudaError_t CumSum(const CumSumArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
