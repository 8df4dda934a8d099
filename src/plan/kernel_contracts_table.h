// Internal to kernel_contract.cc: the per-target contract tables, one file each
// (kernel_contracts_cpu.cc, kernel_contracts_cuda.cc), built once.
#pragma once

#include <vector>

#include "plan/kernel_contract.h"

namespace kiln::contracts_internal {

std::vector<KernelContract> CpuContracts();
std::vector<KernelContract> CudaContracts();

// Parameter helpers shared by the tables.
inline ParamSpec SizeParam(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kInt, 0, kMaxInt, {}, false, doc};
}
inline ParamSpec PositiveParam(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kInt, 1, kMaxInt, {}, false, doc};
}
inline ParamSpec FlagParam(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kInt, 0, 1, {}, false, doc};
}
inline ParamSpec OptionalPositive(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kInt, 1, kMaxInt, {}, true, doc};
}
inline ParamSpec OptionalFlag(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kInt, 0, 1, {}, true, doc};
}
inline ParamSpec FloatParam(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kFloat, 0, 0, {}, false, doc};
}
inline ParamSpec OptionalFloat(std::string_view name, std::string_view doc = {}) {
  return {name, ParamKind::kFloat, 0, 0, {}, true, doc};
}
inline ParamSpec StringParam(std::string_view name, std::vector<std::string_view> choices,
                             std::string_view doc = {}) {
  return {name, ParamKind::kString, 0, 0, std::move(choices), false, doc};
}
inline ParamSpec IntsParam(std::string_view name, int64_t lo, int64_t hi,
                           std::string_view doc = {}) {
  return {name, ParamKind::kInts, lo, hi, {}, false, doc};
}

inline OperandSpec Req(std::string_view name, DTypeSet dtypes) { return {name, dtypes}; }
inline OperandSpec Opt(std::string_view name, DTypeSet dtypes) { return {name, dtypes, true}; }
inline OperandSpec Same(std::string_view name, int as, bool optional = false) {
  return {name, kAnyDType, optional, as};
}
// Contracts both targets share verbatim (defined in kernel_contract.cc).
KernelContract EltwiseContract();
KernelContract GatherContract();
// transpose, slice, expand and concat (the strided copies, runtime/kernel_rules.h).
std::vector<KernelContract> StridedCopyContracts();
// gather_nd, gather_elements.
std::vector<KernelContract> IndexContracts();
// cumsum over `types`; `doc` (a literal: contracts keep views) says how the target's
// kernel sums floats.
KernelContract CumSumContract(DTypeSet types, std::string_view doc);
// packed_positions and packed_cumsum (packed programs, docs/packing.md), the same on both
// targets (cuda takes T < 2^31).
KernelContract PackedPositionsContract();
KernelContract PackedCumSumContract();
// quant_linear (int8 plans' s8 GEMM): x of `x_types` (cpu f32; cuda also f16 and bf16), y
// as x; w s8, w_scale, bias and x_mul f32; `doc` (a literal) says how the target computes.
KernelContract QuantLinearContract(DTypeSet x_types, std::string_view doc);
// block_quant_linear (int4/int8 weight-only, MatMulNBits): activations (x, bias, y) of
// `x_types` (cpu f32; cuda also f16 and bf16); `doc` (a literal) says how the target's
// kernel computes.
KernelContract BlockQuantLinearContract(DTypeSet x_types, std::string_view doc);
// block_quant_gather (kiln.BlockQuantGather: a tied model's int4 embeddings), the same on
// both targets.
KernelContract BlockQuantGatherContract();
// cache_write (decode programs, docs/generation.md): f32 caches on both targets.
KernelContract CacheWriteContract();

inline OperandSpec Weight(std::string_view name, DTypeSet dtypes, bool optional = false) {
  return {name, dtypes, optional, -1, true};
}

}  // namespace kiln::contracts_internal
