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

std::vector<KernelContract> IndexContracts() {
  std::vector<KernelContract> t;
  t.push_back({.name = "gather_nd",
               .inputs = {Req("data", kAnyDType), Req("indices", kIndexTypes)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("batch_dims")},
               .doc = "ONNX GatherND; an index out of range fails the run"});
  t.push_back({.name = "gather_elements",
               .inputs = {Req("data", kAnyDType), Req("indices", kIndexTypes)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("axis")},
               .doc = "ONNX GatherElements; an index out of range fails the run"});
  return t;
}

KernelContract CumSumContract(DTypeSet types, std::string_view doc) {
  return {.name = "cumsum",
          .inputs = {Req("x", types)},
          .outputs = {Same("y", 0)},
          .params = {SizeParam("axis"), FlagParam("exclusive"), FlagParam("reverse")},
          .doc = doc};
}

KernelContract PackedPositionsContract() {
  return {.name = "packed_positions",
          .inputs = {Req("lengths", DTypeBit(DType::kI64)), Req("tokens", kIndexTypes)},
          .outputs = {Req("y", DTypeBit(DType::kI64))},
          .params = {SizeParam("tokens", "< 2^31 on cuda"), SizeParam("sequences")},
          .doc = "y [1,T]: each token's position in its sequence (0 for tokens of none)"};
}

KernelContract PackedCumSumContract() {
  return {
      .name = "packed_cumsum",
      .inputs = {Req("x", DTypeBit(DType::kF32) | DTypeBit(DType::kI32) | DTypeBit(DType::kI64)),
                 Req("lengths", DTypeBit(DType::kI64))},
      .outputs = {Same("y", 0)},
      .params = {SizeParam("tokens", "< 2^31 on cuda"), SizeParam("sequences"),
                 FlagParam("exclusive")},
      .doc =
          "x, y [1,T]: the target's cumsum along each sequence's tokens (bit for bit "
          "the padded program's); 0 for tokens of no sequence"};
}

KernelContract QuantLinearContract(DTypeSet x_types, std::string_view doc) {
  const std::vector<std::string_view> activations = {"none", "gelu", "gelu_tanh", "relu", "tanh"};
  const DTypeSet f32 = DTypeBit(DType::kF32);
  return {
      .name = "quant_linear",
      .inputs = {Req("x", x_types), Weight("w", DTypeBit(DType::kI8)), Weight("w_scale", f32),
                 Weight("bias", f32, /*optional=*/true), Weight("x_mul", f32, /*optional=*/true)},
      .outputs = {Same("y", 0)},
      .params = {SizeParam("m"), PositiveParam("k"), PositiveParam("n"),
                 StringParam("activation", activations),
                 OptionalFloat("x_absmax",
                               "> 0: static activations, sx = x_absmax / 127 for every row")},
      .doc = doc};
}

KernelContract BlockQuantLinearContract(DTypeSet x_types, std::string_view doc) {
  const std::vector<std::string_view> activations = {"none", "gelu", "gelu_tanh", "relu", "tanh"};
  return {.name = "block_quant_linear",
          .inputs = {Req("x", x_types), Weight("w", DTypeBit(DType::kU8) | DTypeBit(DType::kU4)),
                     Weight("scales", DTypeBit(DType::kF32)),
                     Weight("zero_points",
                            DTypeBit(DType::kU4) | DTypeBit(DType::kU8) | DTypeBit(DType::kF32),
                            /*optional=*/true),
                     OperandSpec{"bias", x_types, /*optional=*/true, /*same_dtype_as=*/0,
                                 /*weight_only=*/true}},
          .outputs = {Same("y", 0)},
          .params = {SizeParam("m"), PositiveParam("k"), PositiveParam("n"),
                     PositiveParam("block_size"), StringParam("activation", activations),
                     OptionalPositive("bits",
                                      "8: 8-bit codes, w and zero_points u8 [n,k], "
                                      "[n,blocks]; absent: 4")},
          .doc = doc};
}

KernelContract BlockQuantGatherContract() {
  return {.name = "block_quant_gather",
          .inputs = {Weight("w", DTypeBit(DType::kU8) | DTypeBit(DType::kU4)),
                     Req("indices", DTypeBit(DType::kI32) | DTypeBit(DType::kI64)),
                     Weight("scales", DTypeBit(DType::kF32)),
                     Weight("zero_points",
                            DTypeBit(DType::kU4) | DTypeBit(DType::kU8) | DTypeBit(DType::kF32),
                            /*optional=*/true)},
          .outputs = {Req("y", DTypeBit(DType::kF32))},
          .params = {SizeParam("rows"), PositiveParam("k"), PositiveParam("n"),
                     PositiveParam("block_size"),
                     OptionalPositive("bits", "8: 8-bit codes u8 [n,k]; absent: 4")},
          .doc =
              "kiln.BlockQuantGather (a tied model's int4 embeddings): `y[j,:] = (w[r,:] − "
              "zero_points[r, k/block_size]) · scales[r, k/block_size]`, r = indices[j] "
              "(negative from the end; out of range fails the run), codes as "
              "block_quant_linear's (4-bit two per byte, low nibble first; 8-bit u8), "
              "zero points 2^(bits−1) when absent; y [rows,k]"};
}

KernelContract CacheWriteContract() {
  return {
      .name = "cache_write",
      .inputs = {Req("cache", DTypeBit(DType::kF32)), Same("new", 0),
                 Req("positions", DTypeBit(DType::kI64)),
                 Opt("block_table", DTypeBit(DType::kI64))},
      .outputs = {Same("y", 0)},
      .params = {SizeParam("batch"), SizeParam("heads"), PositiveParam("slots"), SizeParam("seq"),
                 PositiveParam("row"), OptionalPositive("block_size", "paged: slots per block"),
                 OptionalPositive("blocks", "paged: blocks in the pool")},
      .inplace_ok = true,
      .doc =
          "cache, y [batch,heads,slots,row]; new [batch,heads,seq,row]; positions "
          "[batch,seq]: y = cache with new's rows at those slots (only they move when y is "
          "the cache). Paged (block_table [batch, slots/block_size]): cache and y are the "
          "pool [blocks,heads,block_size,row]"};
}

std::vector<KernelContract> StridedCopyContracts() {
  std::vector<KernelContract> t;
  t.push_back({.name = "transpose",
               .inputs = {Req("x", kAnyDType)},
               .outputs = {Same("y", 0)},
               .params = {IntsParam("perm", 0, 7, "y dim d is x dim perm[d]")},
               .doc = "rank ≤ 8"});
  t.push_back({.name = "slice",
               .inputs = {Req("x", kAnyDType)},
               .outputs = {Same("y", 0)},
               .params = {IntsParam("starts", 0, kMaxInt, "per dim, normalized"),
                          IntsParam("steps", -kMaxInt, kMaxInt, "per dim, non-zero")},
               .doc = "y[i] = x[starts + i·steps] per dim, y's dims given by its buffer"});
  t.push_back({.name = "expand",
               .inputs = {Req("x", kAnyDType)},
               .outputs = {Same("y", 0)},
               .doc = "x broadcast (numpy) to y's dims"});
  t.push_back({.name = "concat",
               .inputs = {Req("x", kAnyDType)},
               .outputs = {Req("y", kAnyDType)},
               .variadic_inputs = true,
               .params = {SizeParam("axis")},
               .doc = "inputs of y's dtype, equal but on `axis`, whose sizes sum to y's"});
  return t;
}

}  // namespace kiln::contracts_internal
