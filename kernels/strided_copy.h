// What the CPU and CUDA strided-copy kernels share (kernels/cpu/strided_copy.h,
// kernels/cuda/movement.h): the copy of an N-d box from a strided source into a strided
// destination, the one primitive behind Transpose (permuted source strides), Slice (start
// offset, step·stride), Expand (stride 0 on broadcast dims), each input of a Concat (into a
// sub-box of the output) and the executors' pad/unpad staging; and its host-side collapse,
// which drops size-1 dims and merges dims contiguous on both sides, so that a box whose
// inner dim is contiguous on both sides copies whole rows.
// Header-only so that both kernel libraries (and nvcc) take it without a dependency.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::kernels {

inline constexpr int kMaxCopyRank = 8;

// Element (i0..i{rank-1}) of the box is src[src_offset + Σ i·src_strides] →
// dst[dst_offset + Σ i·dst_strides]; strides and offsets in elements, source strides may
// be 0 (broadcast) or negative (a reversed slice). rank 0 = one element.
struct CopyBox {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t src_strides[kMaxCopyRank] = {};
  int64_t dst_strides[kMaxCopyRank] = {};
  int64_t src_offset = 0, dst_offset = 0;
};

// Fills `box` (rank, dims, strides; offsets untouched) from full-rank `dims` and strides,
// dropping size-1 dims and merging each dim into the previous one where both sides are
// contiguous across them. False when more than kMaxCopyRank dims remain.
inline bool CollapseCopy(const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                         const std::vector<int64_t>& dst_strides, CopyBox* box) {
  std::vector<int64_t> d, ss, ds;
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j] == 1) continue;
    if (!d.empty() && ss.back() == src_strides[j] * dims[j] &&
        ds.back() == dst_strides[j] * dims[j]) {
      d.back() *= dims[j];
      ss.back() = src_strides[j];
      ds.back() = dst_strides[j];
    } else {
      d.push_back(dims[j]);
      ss.push_back(src_strides[j]);
      ds.push_back(dst_strides[j]);
    }
  }
  if (d.size() > static_cast<size_t>(kMaxCopyRank)) return false;
  box->rank = static_cast<int>(d.size());
  for (int j = 0; j < box->rank; ++j) {
    box->dims[j] = d[j];
    box->src_strides[j] = ss[j];
    box->dst_strides[j] = ds[j];
  }
  return true;
}

}  // namespace kiln::kernels
