// Host side of the paged attention kernel (kv_cache.h): its split count and partial
// buffer; tested on the CPU.
#include <algorithm>

#include "kernels/cuda/kv_cache.h"

namespace kiln::cuda {
namespace {

constexpr int64_t kMinKeysPerSplit = 64;

}  // namespace

size_t PagedAttentionWorkspace(const PagedAttentionArgs& a) {
  if (a.splits <= 1) return 0;
  return static_cast<size_t>(a.batch * a.seq * a.heads) * static_cast<size_t>(a.splits) *
         static_cast<size_t>(a.head_size + 2) * sizeof(float);
}

int PagedAttentionSplits(const PagedAttentionArgs& a, int64_t target_blocks,
                         size_t workspace_bytes) {
  const int64_t rows = std::max<int64_t>(a.batch * a.seq * a.heads, 1);
  const int64_t keys = a.width * a.block_size;
  int64_t splits =
      std::min((target_blocks + rows - 1) / rows, (keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
  splits = std::clamp<int64_t>(splits, 1, 65535);
  const int64_t per_split = rows * (a.head_size + 2) * static_cast<int64_t>(sizeof(float));
  if (splits > 1 && per_split > 0)
    splits = std::min<int64_t>(splits, static_cast<int64_t>(workspace_bytes) / per_split);
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

}  // namespace kiln::cuda
