// Shared host-side vocabulary of the CUDA kernels (kernels/cuda): element types, the
// fixed-rank shapes strided kernels take by value, and the device error word.
// Kernels here know nothing of the IR: they take device pointers, sizes, parameters and a
// stream, and every launch function returns the launch's cudaError_t; all pointer and size
// checks happen on the host (src/runtime/cuda) before a launch.
// Why an error word: data-dependent failures (an index out of range, an integer division
// by zero) cannot return a status from a kernel; the kernel writes zeros for that element
// and records its step's code in a device word the executor reads after the run.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace kiln::cuda {

enum class ElemType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kBool,
};

constexpr int ElemSize(ElemType t) {
  switch (t) {
    case ElemType::kF64:
    case ElemType::kI64:
    case ElemType::kU64:
      return 8;
    case ElemType::kF32:
    case ElemType::kI32:
    case ElemType::kU32:
      return 4;
    case ElemType::kF16:
    case ElemType::kBF16:
    case ElemType::kI16:
    case ElemType::kU16:
      return 2;
    case ElemType::kI8:
    case ElemType::kU8:
    case ElemType::kBool:
      return 1;
  }
  return 0;
}

// The activation a Linear-like kernel applies to its f32 sums before storing them
// (block_quant.h, quant_linear.h); kGeluErf is ONNX's exact GELU, kGeluTanh its tanh form.
enum class LinearAct : uint8_t { kNone, kGeluErf, kGeluTanh, kRelu, kTanh };

// The largest rank strided kernels take (after collapsing contiguous dims).
inline constexpr int kMaxRank = 8;

// A device word where kernels record the first data error of a run: `code` (non-zero,
// the step's number + 1) is stored with atomicCAS(word, 0, code). Null word: not checked.
struct ErrorSink {
  uint32_t* word = nullptr;
  uint32_t code = 0;
};

// Grid size for `n` elements at `threads` per block and up to `per_thread` elements per
// thread, capped so that a grid-stride loop covers the rest.
inline unsigned GridFor(int64_t n, int threads, int64_t per_thread = 1) {
  const int64_t per_block = static_cast<int64_t>(threads) * per_thread;
  int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535 * 16) blocks = 65535 * 16;
  return static_cast<unsigned>(blocks);
}

}  // namespace kiln::cuda
