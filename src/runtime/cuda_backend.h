// The CUDA backend's entry point for Executor::Create (executor.cc). Built from
// src/runtime/cuda when kiln has its CUDA backend, else from src/runtime/no_cuda, whose
// executor refuses cuda plans with FailedPrecondition saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/kiln.h"

namespace kiln::runtime {

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(std::shared_ptr<const Plan> plan,
                                                             const ExecutorOptions& options);

// Device-memory work of kiln::GenerationSession's cache pools on CUDA device `ordinal`.
// Each call queues its work on the device's default stream and waits for it; nothing to
// do is OK anywhere, else FailedPrecondition in a build without the CUDA backend.
struct CudaCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};
absl::Status CudaCopies(int ordinal, std::span<const CudaCopy> copies);
absl::Status CudaZero(int ordinal, void* p, size_t bytes);
// `rows` [heads, seq, row] (device memory) into `pool` [blocks, heads, block_size, row] at
// slots 0 .. seq - 1 through `table` (host: the blocks of those slots, ceil(seq /
// block_size) ids in [0, blocks)); the kiln.CacheWrite kernel of decode plans.
struct CudaPagedRows {
  void* pool = nullptr;
  const void* rows = nullptr;
  int64_t heads = 0, seq = 0, row_bytes = 0, block_size = 0, blocks = 0;
  std::vector<int64_t> table;
};
absl::Status CudaWritePagedRows(int ordinal, std::span<const CudaPagedRows> writes);

}  // namespace kiln::runtime
