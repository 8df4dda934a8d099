// CUDA status conversion, build/device information (cuda_util.h).
#include "runtime/cuda/cuda_util.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/gemm.h"

namespace kiln {
namespace runtime {

absl::Status CudaStatus(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(std::string(what), ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  switch (e) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status CublasStatus(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrCat(std::string(what), ": ", cuda::CublasStatusName(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  if (s == CUBLAS_STATUS_ARCH_MISMATCH || s == CUBLAS_STATUS_NOT_SUPPORTED)
    return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

const std::vector<int>& BuildSms() {
  static const std::vector<int>* sms = [] {
    auto* v = new std::vector<int>;
    for (absl::string_view part : absl::StrSplit(KILN_CUDA_ARCHS, ',')) {
      // CMake spellings: "90", "90a", "90-real", "80-virtual".
      std::string digits;
      for (char c : part)
        if (c >= '0' && c <= '9')
          digits += c;
        else
          break;
      int sm = 0;
      if (absl::SimpleAtoi(digits, &sm)) v->push_back(sm);
    }
    std::sort(v->begin(), v->end());
    return v;
  }();
  return *sms;
}

absl::Status CheckSmCompatibility(const std::vector<int32_t>& plan_sms, int device_sm) {
  auto runs = [device_sm](int sm) { return sm / 10 == device_sm / 10 && sm <= device_sm; };
  bool planned = false, built = false;
  for (int32_t sm : plan_sms) planned |= runs(sm);
  for (int sm : BuildSms()) built |= runs(sm);
  std::vector<std::string> plan_names, build_names;
  for (int32_t sm : plan_sms) plan_names.push_back(absl::StrCat("sm_", sm));
  for (int sm : BuildSms()) build_names.push_back(absl::StrCat("sm_", sm));
  if (!planned)
    return absl::FailedPreconditionError(
        absl::StrCat("the plan is for ", absl::StrJoin(plan_names, ", "), " and this GPU is sm_",
                     device_sm, ": recompile with --cuda-arch sm_", device_sm));
  if (!built)
    return absl::FailedPreconditionError(
        absl::StrCat("this kiln's CUDA kernels are built for ", absl::StrJoin(build_names, ", "),
                     " and this GPU is sm_", device_sm,
                     ": rebuild with -DCMAKE_CUDA_ARCHITECTURES=", device_sm));
  return absl::OkStatus();
}

}  // namespace runtime

CudaDeviceInfo QueryCudaDevice(int ordinal) {
  CudaDeviceInfo info;
  info.built = true;
  info.build_sms = runtime::BuildSms();
  std::vector<std::string> sms;
  for (int sm : info.build_sms) sms.push_back(absl::StrCat("sm_", sm));
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  std::string lt_why;
  const cuda::LtApi* lt = cuda::Lt(&lt_why);
  const size_t ltv = lt ? lt->GetVersion() : 0;  // major*10000 + minor*100 + patch
  info.build = absl::StrCat("CUDA ", runtime_version / 1000, ".", (runtime_version % 1000) / 10,
                            ", cuBLASLt ",
                            lt ? absl::StrCat(ltv / 10000, ".", (ltv / 100) % 100, ".", ltv % 100)
                               : std::string("not loadable"),
                            ", kernels for ", absl::StrJoin(sms, " "));
  cudaDriverGetVersion(&info.driver_version);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    info.reason = absl::StrCat("no usable CUDA device: ", cudaGetErrorString(e));
    return info;
  }
  if (ordinal < 0 || ordinal >= count) {
    info.reason = absl::StrCat("CUDA device ", ordinal, " does not exist (", count,
                               count == 1 ? " device)" : " devices)");
    return info;
  }
  cudaDeviceProp p{};
  if (const cudaError_t pe = cudaGetDeviceProperties(&p, ordinal); pe != cudaSuccess) {
    info.reason = absl::StrCat("cudaGetDeviceProperties: ", cudaGetErrorString(pe));
    return info;
  }
  info.name = p.name;
  info.sm = p.major * 10 + p.minor;
  info.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  info.multiprocessors = p.multiProcessorCount;
  if (lt == nullptr) {  // a GPU, but no GEMM library to run plans with
    info.reason = absl::StrCat("cuBLASLt cannot be loaded: ", lt_why);
    return info;
  }
  info.available = true;
  return info;
}

absl::StatusOr<std::shared_ptr<void>> AllocateCudaBuffer(int ordinal, size_t bytes) {
  // Allocated and freed with `ordinal` current, and the caller's current device restored:
  // a Python thread that holds buffers on two GPUs must not see its device switched.
  int previous = 0;
  KILN_CUDA_TRY(cudaGetDevice(&previous), "AllocateCudaBuffer: cudaGetDevice");
  KILN_CUDA_TRY(cudaSetDevice(ordinal), "AllocateCudaBuffer: cudaSetDevice");
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  cudaSetDevice(previous);
  if (e != cudaSuccess)
    return runtime::CudaStatus(
        e, absl::StrCat("AllocateCudaBuffer: cudaMalloc of ", bytes, " bytes on device ", ordinal));
  return std::shared_ptr<void>(p, [ordinal](void* q) {
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) current = ordinal;
    cudaSetDevice(ordinal);
    cudaFree(q);
    cudaSetDevice(current);
  });
}

}  // namespace kiln
