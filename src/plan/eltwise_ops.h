// The vocabulary of the device `eltwise` kernel (docs/plan-kernels.md): which ONNX
// elementwise ops it computes, their arity, and the typing rule that picks the domain a
// step computes in from its operand dtypes. Lowering (src/compiler) asks it whether a node
// can be an eltwise step; the executors' rule (src/runtime/kernel_rules.cc) checks plan
// steps with the same function, so the two cannot disagree.
// Semantics follow the reference executor (src/reference/elementwise.cc): integers wrap in
// their own type, integer Div truncates, an integer division by zero is a data error (the
// element becomes 0 and the run fails naming the step), Min/Max propagate NaN (Clip passes
// a NaN x through, with scalar min and max both given), Cast from
// float to integer truncates, saturates and maps NaN to 0. Floats of f32/f16/bf16 compute
// in f32 (f64 in f64): + - * / sqrt are correctly rounded as in the reference; the
// transcendental functions are the device's f32 libm, within a few ulp.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/ir/tensor.h"

namespace kiln {

// The arithmetic a step computes in; every input is converted to it (Where's condition
// is bool) and the result converted to the output dtype.
enum class EltDomain : uint8_t { kF32, kF64, kI64, kU64, kBool };

struct EltOpInfo {
  std::string_view name;     // the ONNX op name ("Identity" also stands for Cast and Expand)
  int arity;                 // 1, 2 or 3
  bool floats, ints, bools;  // domains the op is defined on
  bool returns_bool;         // comparisons, logic, IsNaN
  bool signed_only = false;  // ints: signed ones only (Neg, Relu, as the reference)
};

const EltOpInfo* FindEltOp(std::string_view name);
const std::vector<EltOpInfo>& EltOps();
std::vector<std::string_view> EltOpNames();

// The domain `op` computes in for these operand dtypes and output dtype, or
// InvalidArgument saying why the combination is not an eltwise step (an Identity whose
// dtypes differ is a Cast: the domain is the input's).
absl::StatusOr<EltDomain> TypeEltwise(std::string_view op, const std::vector<DType>& inputs,
                                      DType output);

}  // namespace kiln
