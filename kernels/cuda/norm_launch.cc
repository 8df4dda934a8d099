// Host-side launch choice of the norm kernels (norm.h); plain C++ so CPU tests cover it.
#include <algorithm>

#include "kernels/cuda/norm.h"

namespace kiln::cuda {

bool ChooseNormLaunch(ElemType dtype, int64_t h, bool aligned16, NormLaunch* out, int max_threads) {
  const int size = ElemSize(dtype);
  if (h <= 0 || size == 0) return false;
  const int vec16 = 16 / size;
  const int vec = (aligned16 && (h * size) % 16 == 0) ? vec16 : 1;
  const int64_t vectors = h / vec;
  // Each thread holds kNormFloatsPerThread floats of the row (the kernel's register array:
  // ~51 registers a thread, so 1024 threads fit the SM's 64K registers).
  const int items = kNormFloatsPerThread / vec;
  const int64_t threads = (vectors + items - 1) / items;
  if (threads > max_threads) return false;
  out->vec = vec;
  out->items = items;
  out->threads = static_cast<int>(std::max<int64_t>(32, (threads + 31) / 32 * 32));
  return true;
}

}  // namespace kiln::cuda
