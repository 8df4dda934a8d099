// The CUDA backend's kernel table: for each kernel id of target cuda (contracts in
// src/plan/kernel_contracts_cuda.cc) a prepare function that applies the kernel's rule to
// a contract-checked step and returns a prepared step holding the kernel's own Args
// (kernels/cuda) with everything but the device pointers filled in.
// Two phases, so that plans are checked on machines without a GPU: Prepare is host code
// only (Executor::Create runs it for every step before it looks for a device); Init does
// what needs the device (cuBLASLt descriptors and algorithm choice, the fixed bias
// pointers into the uploaded weights). Launch enqueues the step on a stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/flash_attention.h"
#include "runtime/kernel_rules.h"
#include "runtime/step_checker.h"

namespace kiln::runtime {

struct CudaInitEnv {
  cublasLtHandle_t lt = nullptr;
  const std::byte* weights = nullptr;  // the uploaded weights blob (device)
  size_t workspace_bytes = 0;          // cuBLASLt workspace each run slot has
  int sm = 0;                          // the device's SM (major·10 + minor)
  int multiprocessors = 0;             // the device's SMs
};

struct CudaRunEnv {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace (device)
  size_t workspace_bytes = 0;
  std::byte* scratch = nullptr;  // the slot's step scratch (device), ScratchBytes() at least
  int64_t scratch_bytes = 0;
  cuda::ErrorSink err;  // this step's data-error word and code
};

class CudaStep {
 public:
  virtual ~CudaStep() = default;
  virtual absl::Status Init(const CudaInitEnv& env) { return absl::OkStatus(); }
  // Enqueues the step; the returned status is the launch's (asynchronous errors surface
  // at the run's synchronization).
  virtual absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const = 0;
  // What a non-zero error word from this step means ("an index is out of range").
  virtual const char* DataError() const { return "a data error"; }
  // Device bytes the step needs between its launches (CudaRunEnv::scratch), known at
  // Prepare: the executor sizes each run slot's scratch for the largest step.
  virtual int64_t ScratchBytes() const { return 0; }
};

using CudaPrepareFn = absl::StatusOr<std::unique_ptr<CudaStep>> (*)(const StepChecker&);

// The prepare function of a cuda kernel id, or null for an id the table does not have.
CudaPrepareFn FindCudaKernel(std::string_view kernel);
// Every id in the table (each must have a cuda contract; a test checks both ways).
std::vector<std::string_view> CudaKernelIds();

// cuda_steps_movement.cc: eltwise, gelu, copy, transpose, slice, expand, concat, gather,
// gather_nd, gather_elements, cumsum, reduce, pad.
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaMovement(std::string_view kernel,
                                                              const StepChecker& c);

// cuda_steps_packed.cc: packed_attention, packed_flash_attention, packed_pool,
// packed_positions, packed_cumsum (packed-token programs, docs/packing.md).
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaPacked(std::string_view kernel,
                                                            const StepChecker& c);

// cuda_steps_kv.cc: cache_write, tensor_scatter (genai's cache update), head_attention
// over a paged cache (decode programs, docs/generation.md) with `r` its checked rule.
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaCacheWrite(const StepChecker& c);
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaTensorScatter(const StepChecker& c);
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaPagedAttention(const StepChecker& c,
                                                                    const HeadAttentionRule& r);
// cuda_steps_quant.cc: block_quant_linear (int4/int8 weight-only GEMMs), quant_linear
// (int8 plans' s8 × s8 GEMMs, kernels/cuda/quant_linear.h) and block_quant_gather (rows of
// an int4/int8 table).
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaBlockQuantLinear(const StepChecker& c);
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaQuantLinear(const StepChecker& c);
absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaBlockQuantGather(const StepChecker& c);

// Element strides of a mask of dims `m` broadcast (right-aligned) to [B, N, S, L]; 0 on
// broadcast dims.
void MaskStrides(const std::vector<int64_t>& m, int64_t stride_out[4]);

// DType -> the kernels' element type.
cuda::ElemType ElemTypeOf(DType t);
// A kernel rule's activation -> the Linear-like kernels' epilogue activation.
cuda::LinearAct LinearActOf(ActivationKind a);

// The flash kernel's steps (flash_attention, packed_flash_attention; `kernel` names the
// step in errors): Init picks the device's launch shape for `a`, checks it and sets the
// kernel's shared-memory size; SetQkv points Q, K and V at their heads in the qkv row
// [(N + 2·Nkv)·D] (16-bit) at `qkv`.
absl::StatusOr<cuda::FlashLaunch> InitFlash(const cuda::FlashAttentionArgs& a, int sm,
                                            const char* kernel);
void SetFlashQkv(cuda::FlashAttentionArgs& a, const void* qkv);

// The byte alignment (<= 256) of the device pointer a step gets for buffer `b`: every base
// the CUDA executor hands out (arena, weights, staging slots) is 256-byte aligned, so it
// is what the buffer's offset allows. (A hand-made plan may place a GEMM operand at any
// element-aligned offset; cuBLASLt is told the truth rather than the planner's usual 64.)
uint32_t PointerAlignment(const PlanBuffer& b);

// Launch-error status for step `kernel`.
absl::Status LaunchStatus(cudaError_t e, const char* kernel);

}  // namespace kiln::runtime
