// Target cuda's kernel contracts (kernel_contract.h). A cuda plan has no host steps: every
// op of a model lowers to one of these device kernels (kernels/cuda) or the compile fails
// naming the node. Float kernels take f32, f16 or bf16 (one dtype per step: weights are
// stored in the step's dtype) and keep statistics, softmax and GEMM accumulation in fp32;
// masks stay f32 or bool. The data-movement kernels are dtype-agnostic.
#include "plan/kernel_contracts_table.h"

namespace kiln {

bool FlashAttentionHeadSizeOk(int64_t head_size) {
  return head_size == 8 || head_size == 16 || head_size == 32 || head_size == 64 ||
         head_size == 128;
}

namespace contracts_internal {

std::vector<KernelContract> CudaContracts() {
  const std::vector<std::string_view> activations = {"none", "gelu", "gelu_tanh", "relu", "tanh"};
  const DTypeSet scan_types = kFloatTypes | DTypeBit(DType::kI32) | DTypeBit(DType::kI64) |
                              DTypeBit(DType::kU32) | DTypeBit(DType::kU64);
  std::vector<KernelContract> t;
  t.push_back({.name = "copy",
               .inputs = {Req("x", kAnyDType)},
               .outputs = {Req("y", kAnyDType)},
               .inplace_ok = true,
               .doc = "`y` has `x`'s byte size (a device-to-device copy)"});
  t.push_back(
      {.name = "linear",
       .inputs = {Req("x", kFloatTypes),
                  {"w", kAnyDType, false, 0, true},
                  {"bias", kAnyDType, true, 0, true},
                  Same("residual", 0, true)},
       .outputs = {Same("y", 0)},
       .params = {SizeParam("m"), PositiveParam("k"), PositiveParam("n"),
                  FlagParam("trans_w", "w is [n,k]"), StringParam("activation", activations),
                  OptionalFlag("tf32", "fp32 GEMM in TF32 (--allow-tf32)")},
       .doc = "cuBLASLt: `y[m,n] = act(x[m,k] · w' + bias) (+ residual)`; residual only "
              "with activation none"});
  t.push_back({.name = "matmul",
               .inputs = {Req("a", kFloatTypes), Same("b", 0)},
               .outputs = {Same("y", 0)},
               .params = {PositiveParam("batch"), SizeParam("m"), PositiveParam("k"),
                          SizeParam("n"), FlagParam("broadcast_a", "a is one [m,k] matrix"),
                          FlagParam("broadcast_b", "b is one [k,n] matrix"),
                          OptionalFlag("tf32", "fp32 GEMM in TF32 (--allow-tf32)")},
               .doc = "cuBLASLt strided batches: `y[i] = a[i] · b[i]`, y [batch,m,n]"});
  t.push_back(QuantLinearContract(
      kFloatTypes,
      "int8 plans: `y[m,n] = act(q(x ⊙ x_mul)[m,k] · wᵀ · sx[m] · w_scale[n] + bias)`, w s8 "
      "[n,k], x (times x_mul [k]) quantized per row (s8, sx = max|row| / 127, or the static "
      "x_absmax / 127) into the step's scratch, the s8 GEMM on cuBLASLt's int8 tensor cores "
      "(s32 sums), the scales, bias and activation in one pass; k and n multiples of 4; x, y "
      "f32, f16 or bf16 (cuda int8 plans: f16)"));
  t.push_back(BlockQuantGatherContract());
  t.push_back(BlockQuantLinearContract(
      kFloatTypes,
      "int4/int8 weight-only (MatMulNBits) on CUDA cores: `y[m,n] = act(x[m,k] · wᵀ "
      "+ bias)`, w[n,k] = (codes − zero_points) · scales of k's block (zero points of "
      "the codes' width, or f32; 2^(bits−1) when absent), dequantized in registers, f32 "
      "accumulation; 4-bit codes u8 [n,ceil(k/2)] two per byte, low nibble first (u4 "
      "[n,k] in older plans), 8-bit codes u8 [n,k]; x, bias, y f32, f16 or bf16 (a 16-bit "
      "model's own; an f32 model's stay f32 at every plan precision)"));
  t.push_back({.name = "layer_norm",
               .inputs = {Req("x", kFloatTypes), Same("gamma", 0), Same("beta", 0, true)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("rows"), SizeParam("h"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "x, y [rows,h] over the last axis, h ≤ 16384; fp32 statistics"});
  t.push_back({.name = "skip_layer_norm",
               .inputs = {Req("x", kFloatTypes), Same("skip", 0), Same("gamma", 0),
                          Same("beta", 0, true), Same("bias", 0, true)},
               .outputs = {Same("y", 0), Same("sum", 0, true)},
               .params = {SizeParam("rows"), SizeParam("h"),
                          PositiveParam("skip_rows", "divides rows"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "sum = x + skip (+ bias), skip [skip_rows,h] repeats over rows"});
  t.push_back(
      {.name = "skip_rms_norm",
       .inputs = {Req("x", kFloatTypes), Same("skip", 0), Same("gamma", 0), Same("bias", 0, true)},
       .outputs = {Same("y", 0), Same("sum", 0, true)},
       .params = {SizeParam("rows"), SizeParam("h"), PositiveParam("skip_rows", "divides rows"),
                  FloatParam("epsilon")},
       .inplace_ok = true,
       .doc = "sum = x + skip (+ bias); y = sum / sqrt(mean(sum²) + epsilon) · gamma"});
  t.push_back({.name = "rotary",
               .inputs = {Req("x", kFloatTypes), Same("cos", 0), Same("sin", 0)},
               .outputs = {Same("y", 0)},
               .params = {OptionalFlag("interleaved", "GPT-J's pairs (2j, 2j+1); absent: 0")},
               .doc = "rotate-half (or interleaved) RoPE over the first r = cos's last dim of "
                      "x's last axis; cos, sin [.., r] broadcast to x's rows; fp32 math"});
  t.push_back({.name = "rms_norm",
               .inputs = {Req("x", kFloatTypes), Same("gamma", 0)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("rows"), SizeParam("h"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "y = x / sqrt(mean(x²) + epsilon) · gamma over the last axis"});
  t.push_back(
      {.name = "attention",
       .inputs = {Req("qkv", kFloatTypes),
                  Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kBool)), Same("cos", 0, true),
                  Same("sin", 0, true)},
       .outputs = {Same("y", 0)},
       .params = {SizeParam("batch"), SizeParam("seq"), PositiveParam("num_heads"),
                  PositiveParam("head_size", "≤ 256"), FloatParam("scale"), FlagParam("causal"),
                  OptionalPositive("kv_heads", "divides num_heads; absent: num_heads"),
                  OptionalFlag("rotary_interleaved", "cos/sin rotate GPT-J's pairs; absent: 0")},
       .doc = "qkv [B,S,(N+2·Nkv)·D] read in place → y [B,S,N·D]; mask additive (f32) or "
              "bool, rank ≤ 4, broadcastable to [B,N,S,S]; cos/sin [1|B,S,R] rotate Q and K "
              "as they are loaded"});
  t.push_back({.name = "head_attention",
               .inputs = {Req("q", kFloatTypes), Same("k", 0), Same("v", 0),
                          Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kBool)),
                          Opt("block_table", DTypeBit(DType::kI64))},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("batch"), SizeParam("seq"), SizeParam("kv_seq"),
                          PositiveParam("num_heads"), PositiveParam("head_size", "≤ 256"),
                          FloatParam("scale"), FlagParam("causal"),
                          OptionalPositive("kv_heads", "divides num_heads; absent: num_heads"),
                          OptionalPositive("block_size", "paged: slots per block"),
                          OptionalPositive("blocks", "paged: blocks in the pool")},
               .doc = "kiln.Attention on attention's kernel: q [B,N,S,D], k/v [B,Nkv,L,D] → y "
                      "[B,S,N·D]; mask additive (f32) or bool, broadcastable to [B,N,S,L]; causal: "
                      "query i sees keys j ≤ L−S+i. Paged (block_table [B, L/block_size], with "
                      "block_size and blocks): k/v are pools [blocks,Nkv,block_size,D] read by "
                      "the split-KV decode kernel"});
  t.push_back({.name = "flash_attention",
               .inputs = {Req("qkv", DTypeBit(DType::kF16) | DTypeBit(DType::kBF16)),
                          Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kBool))},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("batch"), SizeParam("seq"), PositiveParam("num_heads"),
                          PositiveParam("head_size", "8, 16, 32, 64 or 128"), FloatParam("scale"),
                          FlagParam("causal"),
                          OptionalPositive("kv_heads", "divides num_heads; absent: num_heads")},
               .doc = "attention's operands (no rotary tables) and rule on tensor cores "
                      "(fp16/bf16, fp32 softmax "
                      "and accumulation); key tiles past a key-padding mask's last kept key "
                      "and above a causal diagonal are skipped"});
  t.push_back({.name = "embed_layer_norm",
               .inputs = {Req("input_ids", kIndexTypes), Same("segment_ids", 0, true),
                          Same("position_ids", 0, true), Req("word", kFloatTypes), Same("pos", 3),
                          Same("segment", 3, true), Same("gamma", 3), Same("beta", 3)},
               .outputs = {Same("y", 3), Same("sum", 3, true)},
               .params = {SizeParam("batch"), SizeParam("seq"), PositiveParam("hidden"),
                          FloatParam("epsilon")},
               .doc = "ids [B,S]; position ids [B,S], [1,S] or [S]; y and sum (the embedding "
                      "sum) [B,S,hidden]; an id out of range fails the run"});
  t.push_back({.name = "pool",
               .inputs = {Req("hidden", kFloatTypes),
                          Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kI64) |
                                          DTypeBit(DType::kI32))},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("batch"), SizeParam("seq"), SizeParam("hidden"),
                          StringParam("mode", {"mean", "cls", "last"}), FlagParam("normalize")},
               .doc = "hidden [B,S,H], mask [B,S] → y [B,H]; last: the row of the last "
                      "nonzero mask entry (zeros if none), S < 2^24; normalize needs H ≤ "
                      "12256"});
  t.push_back({.name = "glu",
               .inputs = {Req("x", kFloatTypes)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("rows"), SizeParam("f"),
                          StringParam("activation", {"silu", "gelu", "gelu_tanh"})},
               .doc = "x [rows,2f] = [a|b] → y [rows,f] = act(a)·b (SwiGLU, GeGLU); fp32 math"});
  t.push_back({.name = "gelu",
               .inputs = {Req("x", kFloatTypes)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("n", "elements"), FlagParam("tanh", "ONNX `approximate`")},
               .inplace_ok = true});
  t.push_back({.name = "softmax",
               .inputs = {Req("x", kFloatTypes)},
               .outputs = {Same("y", 0)},
               .params = {SizeParam("rows"), SizeParam("n")},
               .inplace_ok = true,
               .doc = "x [rows,n], over the last axis"});
  // Packed-token programs (docs/packing.md): tokens [1, T, ...], lengths [N] int64, checked
  // on the device (a data error: no negative length, no more than T tokens in all).
  const std::vector<ParamSpec> packed_attention_params = {
      SizeParam("tokens", "< 2^31"),
      SizeParam("sequences", "1..65535"),
      PositiveParam("num_heads"),
      PositiveParam("head_size"),
      FloatParam("scale"),
      OptionalPositive("kv_heads", "divides num_heads; absent: num_heads")};
  t.push_back({.name = "packed_attention",
               .inputs = {Req("qkv", kFloatTypes), Req("lengths", DTypeBit(DType::kI64))},
               .outputs = {Same("y", 0)},
               .params = packed_attention_params,
               .doc = "qkv [1,T,(N+2·Nkv)·D] → y [1,T,N·D]: attention within each sequence on "
                      "attention's kernel (head_size ≤ 256); tokens of no sequence get zeros"});
  t.push_back({.name = "packed_flash_attention",
               .inputs = {Req("qkv", DTypeBit(DType::kF16) | DTypeBit(DType::kBF16)),
                          Req("lengths", DTypeBit(DType::kI64))},
               .outputs = {Same("y", 0)},
               .params = packed_attention_params,
               .doc = "packed_attention on the flash kernel's variable-length form (fp16/bf16, "
                      "head_size 8, 16, 32, 64 or 128)"});
  t.push_back(
      {.name = "packed_pool",
       .inputs = {Req("hidden", kFloatTypes), Req("lengths", DTypeBit(DType::kI64))},
       .outputs = {Same("y", 0)},
       .params = {SizeParam("tokens", "< 2^31"), SizeParam("sequences"), SizeParam("hidden"),
                  StringParam("mode", {"mean", "cls"}), FlagParam("normalize")},
       .doc = "hidden [1,T,H] → y [N,H]: each sequence's mean or first token (zeros "
              "for an empty one); normalize needs H ≤ 12256"});
  t.push_back(PackedPositionsContract());
  t.push_back(PackedCumSumContract());
  t.push_back(CacheWriteContract());
  t.push_back(
      {.name = "tensor_scatter",
       .inputs = {Req("cache", kAnyDType), Same("update", 0),
                  Opt("write_indices", DTypeBit(DType::kI64))},
       .outputs = {Same("y", 0)},
       .params = {SizeParam("batch"), SizeParam("outer"), PositiveParam("cap"), SizeParam("seq"),
                  SizeParam("inner"), FlagParam("circular", "mode circular (else linear)")},
       .inplace_ok = true,
       .doc = "ONNX TensorScatter: cache, y [batch,outer,cap,inner]; update "
              "[batch,outer,seq,inner] written from position write_indices[b] (0 "
              "without) of batch row b; linear: a write past cap fails the run, "
              "circular: positions wrap"});
  t.push_back({.name = "pad",
               .inputs = {Req("x", kAnyDType)},
               .outputs = {Same("y", 0)},
               .params = {IntsParam("begin", 0, int64_t{1} << 40, "x's offset in y per dim"),
                          FloatParam("value")},
               .doc = "ONNX Pad, mode constant, no crop: y = value (in y's dtype) with x at "
                      "`begin`; rank ≤ 8 after merging"});
  t.push_back(EltwiseContract());
  for (KernelContract& k : StridedCopyContracts()) t.push_back(std::move(k));
  t.push_back(GatherContract());
  for (KernelContract& k : IndexContracts()) t.push_back(std::move(k));
  t.push_back(CumSumContract(scan_types, "ONNX CumSum along `axis` (floats accumulate in f64)"));
  t.push_back({.name = "reduce",
               .inputs = {Req("x", kFloatTypes | DTypeBit(DType::kI32) | DTypeBit(DType::kI64))},
               .outputs = {Same("y", 0)},
               .params = {StringParam("op", {"sum", "mean", "max", "min", "prod", "l1", "l2",
                                             "sum_square"}),
                          IntsParam("axes", 0, 7, "the reduced dims of x, ascending")},
               .doc = "y holds x's kept dims (with or without size-1 reduced ones); f64 "
                      "accumulation; integers in wrap-around int64 (not mean or l2)"});
  return t;
}

}  // namespace contracts_internal
}  // namespace kiln
