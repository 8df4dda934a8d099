// The CPU `eltwise` kernel: one ONNX elementwise op (unary, binary, Where, Clip) with numpy
// broadcasting and per-operand dtypes, computed in one domain (f32 for f32/f16/bf16, f64,
// i64 for signed and u64 for unsigned integers, bool) and converted to the output dtype on
// store — so also Cast (Identity with another output dtype). The semantics are the CUDA
// kernel's and the reference executor's (src/plan/eltwise_ops.h): integers wrap, integer
// Div truncates, Min/Max propagate NaN, Cast from float to integer truncates, saturates and
// maps NaN to 0; f32 transcendentals are the C library's float functions, but Exp and
// Sigmoid, which take kiln's vector exp (isa_kernels.h: ~2e-7 relative, against libm's
// ~1 ulp) wherever the inputs are in its range.
// How: the host collapses the broadcast (kernels/eltwise_common.h); rows of the collapsed
// layout in spans of ≤ 16 Ki elements across threads; an f32 path where every operand is
// read contiguously or as one broadcast value per span (+ - * / Min Max in vectorized
// loops; Identity, Neg, Relu; Exp and Sigmoid on the ISA's vector kernels), an index walk
// otherwise.
// Errors: an integer division by zero fails with InvalidArgument (the output is then
// partly written).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/eltwise_common.h"
#include "kiln/ir/tensor.h"

namespace kiln::cpu {

struct EltwiseArgs {
  kernels::EltOp op = kernels::EltOp::kIdentity;
  kernels::EltDomainKind domain = kernels::EltDomainKind::kF32;
  kernels::BroadcastLayout layout;  // num_inputs operands
  const void* in[3] = {};
  DType in_type[3] = {DType::kF32, DType::kF32, DType::kF32};
  void* y = nullptr;
  DType out_type = DType::kF32;
};

absl::Status Eltwise(const CpuContext& ctx, const EltwiseArgs& a);

}  // namespace kiln::cpu
