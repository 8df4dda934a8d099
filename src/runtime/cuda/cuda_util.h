// Host-side helpers of the CUDA executor: CUDA and cuBLASLt return codes as absl::Status
// (device out-of-memory is ResourceExhausted; no device or driver is FailedPrecondition;
// the rest Internal, each naming what was being done), the device check of a plan's SM
// list against this GPU and this build, and small RAII owners of CUDA objects.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kiln/kiln.h"

namespace kiln::runtime {

// OK for cudaSuccess; else "<what>: cudaErrorX (message)" with the code mapped as above.
absl::Status CudaStatus(cudaError_t e, std::string_view what);
absl::Status CublasStatus(cublasStatus_t s, std::string_view what);

#define KILN_CUDA_TRY(expr, what)                                                            \
  do {                                                                                       \
    const cudaError_t _kiln_cuda_e = (expr);                                                 \
    if (_kiln_cuda_e != cudaSuccess) return ::kiln::runtime::CudaStatus(_kiln_cuda_e, what); \
  } while (0)

// The SM architectures the kernels of this build were compiled for (80, 90, ...).
const std::vector<int>& BuildSms();

// Whether a plan for `plan_sms` runs on a device of compute capability `device_sm` with
// this build: some listed architecture must have the device's major version and be at most
// its minor (binary compatibility within a major), and the build must carry kernels for it.
// OK, or FailedPrecondition saying which of the three does not hold.
absl::Status CheckSmCompatibility(const std::vector<int32_t>& plan_sms, int device_sm);

}  // namespace kiln::runtime
