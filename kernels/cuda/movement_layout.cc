// Host side of the strided copy (movement.h): the launch arguments of a collapsed box
// (kernels/strided_copy.h, shared with the CPU kernel); tested on the CPU.
#include "kernels/cuda/movement.h"

namespace kiln::cuda {

StridedCopyArgs StridedCopyFromBox(const kernels::CopyBox& box, int elem_size) {
  StridedCopyArgs a;
  a.elem_size = elem_size;
  a.rank = box.rank;
  for (int j = 0; j < box.rank; ++j) {
    a.dims[j] = box.dims[j];
    a.src_strides[j] = box.src_strides[j];
    a.dst_strides[j] = box.dst_strides[j];
  }
  a.src_offset = box.src_offset;
  a.dst_offset = box.dst_offset;
  return a;
}

bool CollapseCopy(const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& dst_strides, StridedCopyArgs* a) {
  kernels::CopyBox box;
  if (!kernels::CollapseCopy(dims, src_strides, dst_strides, &box)) return false;
  const StridedCopyArgs b = StridedCopyFromBox(box, a->elem_size);
  a->rank = b.rank;
  for (int j = 0; j < kMaxRank; ++j) {
    a->dims[j] = b.dims[j];
    a->src_strides[j] = b.src_strides[j];
    a->dst_strides[j] = b.dst_strides[j];
  }
  return true;
}

}  // namespace kiln::cuda
