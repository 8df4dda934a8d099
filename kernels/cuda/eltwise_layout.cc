// Host-side broadcast layout of the eltwise kernel (eltwise.h): the shared layout
// (kernels/eltwise_common.h) copied into the kernel's argument block; tested on the CPU.
#include "kernels/cuda/eltwise.h"

namespace kiln::cuda {

bool EltwiseLayout(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins,
                   EltwiseArgs* a) {
  kernels::BroadcastLayout l;
  if (!kernels::ComputeBroadcastLayout(out, ins, &l)) return false;
  a->rank = l.rank;
  a->n = l.n;
  a->contiguous = l.contiguous;
  a->num_inputs = l.num_inputs;
  for (int j = 0; j < kMaxRank; ++j) a->dims[j] = l.dims[j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < kMaxRank; ++j) a->in[i].strides[j] = l.strides[i][j];
  return true;
}

}  // namespace kiln::cuda
