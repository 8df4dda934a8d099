// The CUDA backend of a build without it (-DKILN_CUDA=OFF, or no nvcc found): cuda plans
// still compile (lowering needs no CUDA), but no executor runs them here.
#include "absl/strings/str_format.h"
#include "runtime/cuda_backend.h"

namespace kiln {

CudaDeviceInfo QueryCudaDevice(int) {
  CudaDeviceInfo info;
  info.build = "no CUDA backend (built with -DKILN_CUDA=OFF or without nvcc)";
  info.reason = "kiln was built without its CUDA backend";
  return info;
}

absl::StatusOr<std::shared_ptr<void>> AllocateCudaBuffer(int, size_t) {
  return absl::FailedPreconditionError(
      "cannot allocate CUDA memory: kiln was built without its CUDA backend");
}

namespace runtime {

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(std::shared_ptr<const Plan>,
                                                             const ExecutorOptions&) {
  return absl::FailedPreconditionError(
      "kiln::Executor: the plan targets cuda, and this kiln was built without its CUDA "
      "backend (rebuild with the CUDA toolkit, -DKILN_CUDA=ON)");
}

namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError("device memory: kiln was built without its CUDA backend");
}

}  // namespace

absl::Status CudaCopies(int, std::span<const CudaCopy> copies) {
  return copies.empty() ? absl::OkStatus() : NoCuda();
}
absl::Status CudaZero(int, void*, size_t) { return NoCuda(); }
absl::Status CudaWritePagedRows(int, std::span<const CudaPagedRows> writes) {
  return writes.empty() ? absl::OkStatus() : NoCuda();
}

}  // namespace runtime
}  // namespace kiln
