// The executable contract of every plan kernel, per target (docs/plan-kernels.md): each
// operand's name, whether it may be omitted, its allowed dtypes (or "the dtype of input k"),
// weight-only operands; each parameter's name, kind and range or choices; the memory rules
// (output 0 in place over input 0, outputs that may overlap inputs).
// Why one table: lowering (src/compiler) builds its steps from it and the executors' plan
// checkers (src/runtime) validate steps against it, so the two cannot drift; the tables in
// docs/plan-kernels.md are rendered from it (KernelContractsMarkdown, checked by a test).
// Limits: the contract covers what can be checked without a kernel's semantics; each
// kernel's own rule (how parameters relate to buffer dims) lives with its executor.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "kiln/ir/tensor.h"
#include "kiln/plan/plan.h"

namespace kiln {

using DTypeSet = uint32_t;
constexpr DTypeSet DTypeBit(DType t) { return DTypeSet{1} << static_cast<unsigned>(t); }
// Every dtype a buffer can have (not undefined, not string).
inline constexpr DTypeSet kAnyDType =
    ~(DTypeBit(DType::kUndefined) | DTypeBit(DType::kString)) &
    ((DTypeSet{1} << (static_cast<unsigned>(DType::kString) + 1)) - 1);
// kAnyDType and the narrow types (kiln/ir/narrow.h), which only kernels that move bytes or
// run the reference executor take.
inline constexpr DTypeSet kAnyStorableDType =
    kAnyDType | DTypeBit(DType::kF8E4M3FN) | DTypeBit(DType::kF8E4M3FNUZ) |
    DTypeBit(DType::kF8E5M2) | DTypeBit(DType::kF8E5M2FNUZ) | DTypeBit(DType::kF8E8M0) |
    DTypeBit(DType::kF4E2M1) | DTypeBit(DType::kI4) | DTypeBit(DType::kU4) | DTypeBit(DType::kI2) |
    DTypeBit(DType::kU2);
inline constexpr DTypeSet kF32Only = DTypeBit(DType::kF32);
// The float dtypes device kernels compute on (fp32 statistics and accumulation inside).
inline constexpr DTypeSet kFloatTypes =
    DTypeBit(DType::kF32) | DTypeBit(DType::kF16) | DTypeBit(DType::kBF16);
inline constexpr DTypeSet kIndexTypes = DTypeBit(DType::kI64) | DTypeBit(DType::kI32);
inline constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

struct OperandSpec {
  std::string_view name;
  DTypeSet dtypes = kAnyDType;
  bool optional = false;     // inputs: may be -1; outputs: trailing ones may be absent
  int same_dtype_as = -1;    // input index whose dtype this operand must have (-1: none)
  bool weight_only = false;  // must be a weight buffer (a constant the executor may prepack)
};

enum class ParamKind { kInt, kFloat, kString, kInts };

struct ParamSpec {
  std::string_view name;
  ParamKind kind = ParamKind::kInt;
  int64_t lo = 0, hi = kMaxInt;           // kInt: the allowed range; kInts: each element's
  std::vector<std::string_view> choices;  // kString: the allowed values (empty: any)
  bool optional = false;
  std::string_view doc;  // one phrase for the docs table
};

struct KernelContract {
  std::string_view name;
  std::vector<OperandSpec> inputs, outputs;
  // ref-like kernels: any number of operands, each described by inputs[0] / outputs[0].
  bool variadic_inputs = false, variadic_outputs = false;
  std::vector<ParamSpec> params;
  bool inplace_ok = false;   // output 0 may occupy exactly input 0's bytes
  bool any_overlap = false;  // outputs may overlap inputs (copy, ref)
  std::string_view doc;      // shape rule, for the docs table

  const ParamSpec* FindParam(std::string_view name) const;
  size_t min_inputs() const;
  size_t min_outputs() const;
};

// The contract of `kernel` for `target`, or null when the target has no such kernel.
const KernelContract* FindKernelContract(PlanTarget target, std::string_view kernel);
const std::vector<KernelContract>& KernelContracts(PlanTarget target);

// cuda flash_attention: the head sizes its kernel is instantiated for (kernels/cuda/
// flash_attention.h, FlashHeadSizeSupported; a test keeps the two equal).
bool FlashAttentionHeadSizeOk(int64_t head_size);

// Checks `step` of `bucket` against its contract: arity, every non-optional parameter
// present with its kind, in range / one of its choices (floats finite and within f32
// range), operand dtypes and weight-only operands. InvalidArgument with a message that
// names the operand or parameter, without the step's location (callers prefix it).
// Buffer indices must already be in range (ValidatePlan).
absl::Status CheckStepContract(const KernelContract& contract, const PlanBucket& bucket,
                               const PlanStep& step);

// "f32", "f32, f16 or bf16", "any" for messages and docs.
std::string DTypeSetText(DTypeSet set);

// The docs/plan-kernels.md table of `target`'s kernels (one row per kernel).
std::string KernelContractsMarkdown(PlanTarget target);

}  // namespace kiln
