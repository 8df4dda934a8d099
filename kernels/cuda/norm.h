// LayerNorm, RMSNorm and their Skip forms (+bias, + the residual-sum output) over the last
// axis, fp32 / fp16 / bf16 I/O with fp32 statistics.
// How: one block per row; each thread loads its share of the row once, with 16-byte
// vector loads when the row allows it, into registers; the mean and then the centred
// variance (two block reductions over the register values, so large means do not cancel)
// are computed in fp32; the row is normalized and written from registers. One read of x
// (and skip), one write of y (and sum).
// Launch shape (ChooseNormLaunch, host code, tested on the CPU): the vector width is 16
// bytes when h·sizeof(T) and every row pointer are 16-byte aligned, else 1 element; each
// thread holds 16 floats of the row in registers (kNormFloatsPerThread); threads = the
// row's vectors / vectors per thread, rounded up to a warp, at most 1024 (~51 registers a
// thread fit the SM's 64K). So h ≤ 16384 elements.
// Limits: skip broadcasts by repeating whole rows (skip_rows divides rows).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace kiln::cuda {

enum class NormKind : uint8_t { kLayerNorm, kSkipLayerNorm, kRmsNorm, kSkipRmsNorm };
// The residual-add forms (skip, bias and sum are read), and the RMS forms (no mean, no beta).
inline constexpr bool IsSkipNorm(NormKind k) {
  return k == NormKind::kSkipLayerNorm || k == NormKind::kSkipRmsNorm;
}
inline constexpr bool IsRmsNorm(NormKind k) {
  return k == NormKind::kRmsNorm || k == NormKind::kSkipRmsNorm;
}

struct NormArgs {
  NormKind kind = NormKind::kLayerNorm;
  ElemType dtype = ElemType::kF32;  // of x, skip, gamma, beta, bias, y, sum
  const void* x = nullptr;          // [rows, h]
  const void* skip = nullptr;       // [skip_rows, h]; row r uses skip row r % skip_rows
  int64_t skip_rows = 1;
  const void* gamma = nullptr;  // [h]
  const void* beta = nullptr;   // [h] or null (null for the RMS forms)
  const void* bias = nullptr;   // [h] or null (skip only)
  int64_t rows = 0, h = 0;
  float eps = 1e-5f;
  void* y = nullptr;    // [rows, h]; may equal x
  void* sum = nullptr;  // [rows, h] x + skip (+ bias), or null
};

inline constexpr int kNormFloatsPerThread = 16;
inline constexpr int64_t kNormMaxRow = 1024 * kNormFloatsPerThread;

struct NormLaunch {
  int threads = 0;  // per block (one block per row)
  int vec = 1;      // elements per vector access
  int items = 0;    // vectors per thread: kNormFloatsPerThread / vec
};

// The launch shape for rows of `h` elements of `dtype`; `aligned16`: every row and vector
// pointer is 16-byte aligned; at most `max_threads` per block (the kernel's launch bound:
// 1024 for the norms, 512 for EmbedLayerNorm, whose three table rows need the registers).
// False when h is beyond the kernel's limit (or h = 0).
bool ChooseNormLaunch(ElemType dtype, int64_t h, bool aligned16, NormLaunch* out,
                      int max_threads = 1024);

// `a` checked by the caller (ChooseNormLaunch true, pointers sized). rows = 0 is a no-op.
cudaError_t Norm(const NormArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
