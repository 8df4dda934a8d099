// The CUDA backend's entry point for Executor::Create (executor.cc). Built from
// src/runtime/cuda when kiln has its CUDA backend, else from src/runtime/no_cuda, whose
// executor refuses cuda plans with FailedPrecondition saying so.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "kiln/kiln.h"

namespace kiln::runtime {

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(std::shared_ptr<const Plan> plan,
                                                             const ExecutorOptions& options);

}  // namespace kiln::runtime
