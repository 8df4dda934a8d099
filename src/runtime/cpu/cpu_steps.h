// The CPU backend's kernel table: for each kernel id of target cpu (its contract is in
// plan/kernel_contract.h) a prepare function that checks the step's own rule (how its
// parameters relate to its buffers' dims) and returns the prepared step: the kernel's
// `*Args` struct with everything but the operand pointers filled in, so that Run only
// resolves pointers as base + offset and calls the kernel.
// Limits: `ref` steps evaluate their node on the reference executor (copies in and out,
// slow path by design).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/blockq_gemm.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/qgemm.h"
#include "runtime/step_checker.h"

namespace kiln::runtime {

// Prepacked Linear weights shared across buckets, keyed by
// (weight offset, bias offset or -1, k, n, trans_w, activation).
using LinearKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int>;
using LinearCache = std::map<LinearKey, std::unique_ptr<cpu::PackedLinear>>;
// Packed int8 weights shared across buckets, keyed by (weight offset, scale offset, bias
// offset or -1, x_mul offset or -1, k, n).
// (w, w_scale, bias, x_mul offsets, k, n, static range)
using QuantKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float>;
using QuantCache = std::map<QuantKey, std::unique_ptr<cpu::QuantGemm>>;

// Packed int4/int8 weights shared across buckets: (w, scales, zero points or -1, bias or -1
// offsets, k, n, block size, the codes' layout).
using BlockQuantKey =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, cpu::CodeLayout>;
using BlockQuantCache = std::map<BlockQuantKey, std::unique_ptr<cpu::BlockQuantGemm>>;

struct CpuPrepareEnv {
  const cpu::CpuContext& ctx;
  LinearCache& linears;
  QuantCache& quant_linears;
  BlockQuantCache& block_quant_linears;
};

// Shapes already warmed up at Create (see CpuStep::WarmUp).
using WarmUpSet = std::set<std::vector<int64_t>>;

class CpuStep {
 public:
  virtual ~CpuStep() = default;
  virtual absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const = 0;
  // Create-time work that would otherwise land on the first Run (e.g. oneDNN primitive
  // creation for a shape not seen yet); `done` dedups it across steps and buckets.
  virtual void WarmUp(const cpu::CpuContext& ctx, WarmUpSet& done) const {}
  // The implementation that runs the step, where a kernel has several (TraceEvent::impl).
  virtual std::string_view Impl() const { return {}; }
};

using CpuPrepareFn = absl::StatusOr<std::unique_ptr<CpuStep>> (*)(const StepChecker&,
                                                                  CpuPrepareEnv&);

// The prepare function of a cpu kernel id, or null for an id the table does not have.
CpuPrepareFn FindCpuKernel(std::string_view kernel);
// Every id in the table (each must have a cpu contract; a test checks both ways).
std::vector<std::string_view> CpuKernelIds();

// ref_step.cc
absl::StatusOr<std::unique_ptr<CpuStep>> PrepareRef(const StepChecker& c, CpuPrepareEnv& env);

}  // namespace kiln::runtime
