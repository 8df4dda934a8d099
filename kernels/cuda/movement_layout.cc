// Host-side dim collapsing of the strided copy (movement.h); tested on the CPU.
#include "kernels/cuda/movement.h"

namespace kiln::cuda {

bool CollapseCopy(const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& dst_strides, StridedCopyArgs* a) {
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
  if (d.size() > static_cast<size_t>(kMaxRank)) return false;
  a->rank = static_cast<int>(d.size());
  for (int j = 0; j < a->rank; ++j) {
    a->dims[j] = d[j];
    a->src_strides[j] = ss[j];
    a->dst_strides[j] = ds[j];
  }
  return true;
}

}  // namespace kiln::cuda
