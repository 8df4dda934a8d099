// ONNX Gather, GatherND and GatherElements, any element type. Gather on one axis: y[o, j, :] =
// data[o, idx[j], :] with data viewed [outer, axis_dim, inner] and y [outer, num_indices, inner];
// negative indices count from the end. Every index is checked before anything is copied, so an
// out-of-range id fails the run with the index and its position, never reads outside `data` (a
// plan's token-embedding Gather over a mapped table touches only the rows it copies). Limits: dense
// row-major; elem_size in bytes (1..16).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu {

struct GatherArgs {
  const void* data = nullptr;
  const void* indices = nullptr;
  bool idx_i32 = false;  // indices int32, else int64
  int64_t elem_size = 4;
  int64_t outer = 0, axis_dim = 0, inner = 0, num_indices = 0;
  void* y = nullptr;
};

absl::Status Gather(const CpuContext& ctx, const GatherArgs& a);

// GatherND with batch_dims: for batch b < batch and tuple t < tuples, the k indices
// idx[(b·tuples + t)·k + j] (each in [-dims[j], dims[j]), negative from the end) select
// the `slice` elements at b·batch_stride + Σ_j index_j·strides[j] of data, copied to
// y[(b·tuples + t)·slice ...]. Every tuple is checked before anything is copied.
struct GatherNDArgs {
  const void* data = nullptr;
  const void* indices = nullptr;
  bool idx_i32 = false;
  int64_t elem_size = 4;
  int64_t batch = 1, batch_stride = 0, tuples = 0, slice = 1;
  int k = 0;  // 1..8
  int64_t dims[8] = {}, strides[8] = {};
  void* y = nullptr;
};
absl::Status GatherND(const CpuContext& ctx, const GatherNDArgs& a);

// GatherElements: y and indices [idx_dims] (rank dims); y[i] = data at i with dim `axis`
// replaced by indices[i] (in [-axis_dim, axis_dim)); data's row-major strides given.
// Every index is checked before anything is copied.
struct GatherElementsArgs {
  const void* data = nullptr;
  const void* indices = nullptr;
  bool idx_i32 = false;
  int64_t elem_size = 4;
  int rank = 0, axis = 0;  // rank 1..8
  int64_t idx_dims[8] = {}, data_strides[8] = {};
  int64_t axis_dim = 0, n = 0;
  void* y = nullptr;
};
absl::Status GatherElements(const CpuContext& ctx, const GatherElementsArgs& a);

// Rows of a block-quantized table (kiln.BlockQuantGather, a tied model's int4 embeddings):
// y[j, c] = (code[r, c] − zero[r, c / block_size]) · scale[r, c / block_size] in f32, r =
// idx[j] (negative from the end). Codes 4-bit two per byte (low nibble first), or one per
// byte (`one_code_per_byte`: u4 in older layouts, and 8-bit); zero points one per byte or
// f32 [rows, blocks], absent: 2^(bits−1). Every index is checked before anything is written.
struct BlockQuantGatherArgs {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const uint8_t* zero_points = nullptr;      // or null
  const float* float_zero_points = nullptr;  // or null
  const void* indices = nullptr;
  bool idx_i32 = false;
  int bits = 4;
  bool one_code_per_byte = false;
  int64_t table_rows = 0, k = 0, block_size = 0, num_indices = 0;
  float* y = nullptr;
};
absl::Status BlockQuantGather(const CpuContext& ctx, const BlockQuantGatherArgs& a);

}  // namespace kiln::cpu
