// Contracts that targets cpu and cuda share verbatim (kernel_contracts_table.h): one
// definition, so the two tables cannot drift for the kernels both executors run alike.
#include "plan/eltwise_ops.h"
#include "plan/kernel_contracts_table.h"

namespace kiln::contracts_internal {

KernelContract EltwiseContract() {
  return {
      .name = "eltwise",
      .inputs = {Req("a", kAnyDType), Opt("b", kAnyDType), Opt("c", kAnyDType)},
      .outputs = {Req("y", kAnyDType)},
      .params = {StringParam("op", EltOpNames(), "the ONNX op (Identity: Cast and Expand too)")},
      .inplace_ok = true,
      .doc =
          "numpy broadcasting of the inputs to y's dims; typing and semantics: "
          "src/plan/eltwise_ops.h"};
}

KernelContract GatherContract() {
  return {.name = "gather",
          .inputs = {Req("data", kAnyDType), Req("indices", kIndexTypes)},
          .outputs = {Same("y", 0)},
          .params = {SizeParam("axis")},
          .doc = "ONNX Gather; an index out of range fails the run"};
}

}  // namespace kiln::contracts_internal
