// Host-side launch choice of the softmax kernel (softmax.h); tested on the CPU.
#include <algorithm>

#include "kernels/cuda/softmax.h"

namespace kiln::cuda {

int SoftmaxThreads(int64_t n) {
  const int64_t per_thread = 8;
  const int64_t t = (n + per_thread - 1) / per_thread;
  return static_cast<int>(std::clamp<int64_t>((t + 31) / 32 * 32, 32, 1024));
}

}  // namespace kiln::cuda
