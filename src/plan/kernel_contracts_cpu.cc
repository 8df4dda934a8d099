// Target cpu's kernel contracts (kernel_contract.h): fp32 float kernels on kernels/cpu, and
// `ref` for every op without one (the node as IR text, run by the reference executor).
#include "plan/kernel_contracts_table.h"

namespace kiln::contracts_internal {

std::vector<KernelContract> CpuContracts() {
  const std::vector<std::string_view> activations = {"none", "gelu", "gelu_tanh", "relu", "tanh"};
  std::vector<KernelContract> t;
  t.push_back({.name = "copy",
               .inputs = {Req("x", kAnyStorableDType)},
               .outputs = {Req("y", kAnyStorableDType)},
               .any_overlap = true,
               .doc = "`y` has `x`'s byte size"});
  t.push_back({.name = "ref",
               .inputs = {Req("x", kAnyStorableDType)},
               .outputs = {Req("y", kAnyStorableDType)},
               .variadic_inputs = true,
               .variadic_outputs = true,
               .params = {StringParam("node", {},
                                      "IR text of one node: an `Input` per present step "
                                      "input (static types, in order), the node, `return` of "
                                      "its outputs in order")},
               .any_overlap = true,
               .doc = "operands and results match the node text's types"});
  t.push_back(
      {.name = "linear",
       .inputs = {Req("x", kF32Only), Weight("w", kF32Only | DTypeBit(DType::kBF16)),
                  Weight("bias", kF32Only, /*optional=*/true)},
       .outputs = {Req("y", kF32Only)},
       .params = {SizeParam("m"), PositiveParam("k"), PositiveParam("n"),
                  FlagParam("trans_w", "w is [n,k]"), StringParam("activation", activations)},
       .doc = "`y[m,n] = act(x[m,k] · w' + bias)`, w' = w [k,n] or wᵀ; bf16 w (bf16 plans): x "
              "rounded to bf16, fp32 accumulation"});
  t.push_back(QuantLinearContract(
      DTypeBit(DType::kF32),
      "int8 plans: `y[m,n] = act(q(x ⊙ x_mul)[m,k] · wᵀ · sx[m] · w_scale[n] + bias)`, w s8 "
      "[n,k], x (times x_mul [k]) quantized per row (s8, sx = max|row| / 127, or the static "
      "x_absmax / 127)"));
  t.push_back(BlockQuantGatherContract());
  t.push_back(BlockQuantLinearContract(
      DTypeBit(DType::kF32),
      "int4/int8 weight-only (MatMulNBits): `y[m,n] = act(x[m,k] · wᵀ + bias)`, "
      "w[n,k] = (codes − zero_points) · scales of k's block (zero points of the codes' "
      "width, or f32; 2^(bits−1) when absent), dequantized in registers from 4- or 8-bit "
      "panels, f32 accumulation; 4-bit codes u8 [n,ceil(k/2)] two per byte, low nibble "
      "first (u4 [n,k], one per byte, in older plans), 8-bit codes u8 [n,k]"));
  t.push_back(
      {.name = "conv",
       .inputs = {Req("x", kF32Only), Weight("w", kF32Only),
                  Weight("bias", kF32Only, /*optional=*/true)},
       .outputs = {Req("y", kF32Only)},
       .params = {PositiveParam("batch"), PositiveParam("in_ch"), PositiveParam("in_h"),
                  PositiveParam("in_w"), PositiveParam("out_ch"), PositiveParam("out_h"),
                  PositiveParam("out_w"), PositiveParam("k_h"), PositiveParam("k_w"),
                  PositiveParam("group"), PositiveParam("stride_h"), PositiveParam("stride_w"),
                  PositiveParam("dil_h"), PositiveParam("dil_w"), SizeParam("pad_top"),
                  SizeParam("pad_left"), SizeParam("pad_bottom"), SizeParam("pad_right")},
       .doc = "oneDNN 2-D convolution, NCHW: x [batch,in_ch,in_h,in_w], w "
              "[out_ch,in_ch/group,k_h,k_w], bias [out_ch] → y "
              "[batch,out_ch,out_h,out_w] (1-D convolutions as in_h = 1)"});
  t.push_back({.name = "matmul",
               .inputs = {Req("a", kF32Only), Req("b", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {PositiveParam("batch"), SizeParam("m"), PositiveParam("k"),
                          SizeParam("n"), FlagParam("broadcast_a", "a is one [m,k] matrix"),
                          FlagParam("broadcast_b", "b is one [k,n] matrix")},
               .doc = "oneDNN batched matmul of activations: `y[i] = a[i] · b[i]`, "
                      "y [batch,m,n]"});
  t.push_back({.name = "layer_norm",
               .inputs = {Req("x", kF32Only), Req("gamma", kF32Only), Opt("beta", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("rows"), SizeParam("h"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "x, y [rows,h]; gamma, beta [h]; over the last axis"});
  t.push_back({.name = "rms_norm",
               .inputs = {Req("x", kF32Only), Req("gamma", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("rows"), SizeParam("h"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "y = x / sqrt(mean(x²) + epsilon) · gamma over the last axis"});
  t.push_back({.name = "rotary",
               .inputs = {Req("x", kF32Only), Req("cos", kF32Only), Req("sin", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {OptionalFlag("interleaved", "GPT-J's pairs (2j, 2j+1); absent: 0")},
               .doc = "rotate-half (or interleaved) RoPE over the first r = cos's last dim of "
                      "x's last axis; cos, sin [.., r] broadcast to x's rows"});
  t.push_back({.name = "skip_layer_norm",
               .inputs = {Req("x", kF32Only), Req("skip", kF32Only), Req("gamma", kF32Only),
                          Opt("beta", kF32Only), Opt("bias", kF32Only)},
               .outputs = {Req("y", kF32Only), Opt("sum", kF32Only)},
               .params = {SizeParam("rows"), SizeParam("h"),
                          PositiveParam("skip_rows", "divides rows"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "sum = x + skip (+ bias), skip [skip_rows,h] repeats over rows"});
  t.push_back({.name = "skip_rms_norm",
               .inputs = {Req("x", kF32Only), Req("skip", kF32Only), Req("gamma", kF32Only),
                          Opt("bias", kF32Only)},
               .outputs = {Req("y", kF32Only), Opt("sum", kF32Only)},
               .params = {SizeParam("rows"), SizeParam("h"),
                          PositiveParam("skip_rows", "divides rows"), FloatParam("epsilon")},
               .inplace_ok = true,
               .doc = "sum = x + skip (+ bias); y = sum / sqrt(mean(sum²) + epsilon) · gamma"});
  t.push_back(
      {.name = "attention",
       .inputs = {Req("qkv", kF32Only), Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kBool)),
                  Opt("cos", kF32Only), Opt("sin", kF32Only)},
       .outputs = {Req("y", kF32Only)},
       .params = {SizeParam("batch"), SizeParam("seq"), PositiveParam("num_heads"),
                  PositiveParam("head_size"), FloatParam("scale"), FlagParam("causal"),
                  OptionalPositive("kv_heads", "divides num_heads; absent: num_heads"),
                  OptionalFlag("rotary_interleaved", "cos/sin rotate GPT-J's pairs; absent: 0")},
       .doc = "qkv [B,S,(N+2·Nkv)·D] → y [B,S,N·D]; mask additive (f32) or bool, rank ≤ "
              "4, broadcastable to [B,N,S,S]; cos/sin [1|B,S,R] rotate Q and K"});
  t.push_back({.name = "head_attention",
               .inputs = {Req("q", kF32Only), Req("k", kF32Only), Req("v", kF32Only),
                          Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kBool)),
                          Opt("block_table", DTypeBit(DType::kI64))},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("batch"), SizeParam("seq"), SizeParam("kv_seq"),
                          PositiveParam("num_heads"), PositiveParam("head_size"),
                          FloatParam("scale"), FlagParam("causal"),
                          OptionalPositive("kv_heads", "divides num_heads; absent: num_heads"),
                          OptionalPositive("block_size", "paged: slots per block"),
                          OptionalPositive("blocks", "paged: blocks in the pool")},
               .doc =
                   "kiln.Attention: q [B,N,S,D], k/v [B,Nkv,L,D] → y [B,S,N·D]; mask additive "
                   "(f32) or bool, rank ≤ 4, broadcastable to [B,N,S,L]; causal: query i sees keys "
                   "j ≤ L−S+i. Paged (block_table [B, L/block_size], with block_size and "
                   "blocks): k/v are pools [blocks,Nkv,block_size,D]"});
  t.push_back(
      {.name = "embed_layer_norm",
       .inputs = {Req("input_ids", kIndexTypes), Same("segment_ids", 0, true),
                  Same("position_ids", 0, true), Req("word", kF32Only), Req("pos", kF32Only),
                  Opt("segment", kF32Only), Req("gamma", kF32Only), Req("beta", kF32Only)},
       .outputs = {Req("y", kF32Only), Opt("sum", kF32Only)},
       .params = {SizeParam("batch"), SizeParam("seq"), PositiveParam("hidden"),
                  FloatParam("epsilon")},
       .doc = "ids [B,S]; position ids [B,S], [1,S] or [S]; y and sum (the embedding sum, "
              "optional) [B,S,hidden]"});
  t.push_back({.name = "pool",
               .inputs = {Req("hidden", kF32Only),
                          Opt("mask", DTypeBit(DType::kF32) | DTypeBit(DType::kI64))},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("batch"), SizeParam("seq"), SizeParam("hidden"),
                          StringParam("mode", {"mean", "cls", "last"}), FlagParam("normalize")},
               .doc = "hidden [B,S,H], mask [B,S] → y [B,H]; last: the row of the last "
                      "nonzero mask entry (zeros if none)"});
  // Packed-token programs (docs/packing.md): tokens [1, T, ...], lengths [N] int64, checked
  // at run time (no negative length, no more than T tokens in all).
  t.push_back({.name = "packed_attention",
               .inputs = {Req("qkv", kF32Only), Req("lengths", DTypeBit(DType::kI64))},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("tokens"), SizeParam("sequences"), PositiveParam("num_heads"),
                          PositiveParam("head_size"), FloatParam("scale"),
                          OptionalPositive("kv_heads", "divides num_heads; absent: num_heads")},
               .doc = "qkv [1,T,(N+2·Nkv)·D] → y [1,T,N·D]: attention within each sequence; "
                      "tokens of no sequence get zeros"});
  t.push_back({.name = "packed_pool",
               .inputs = {Req("hidden", kF32Only), Req("lengths", DTypeBit(DType::kI64))},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("tokens"), SizeParam("sequences"), SizeParam("hidden"),
                          StringParam("mode", {"mean", "cls"}), FlagParam("normalize")},
               .doc = "hidden [1,T,H] → y [N,H]: each sequence's mean or first token (zeros "
                      "for an empty one)"});
  t.push_back(PackedPositionsContract());
  t.push_back(PackedCumSumContract());
  t.push_back(EltwiseContract());
  t.push_back(GatherContract());
  for (KernelContract& k : StridedCopyContracts()) t.push_back(std::move(k));
  for (KernelContract& k : IndexContracts()) t.push_back(std::move(k));
  t.push_back(CumSumContract(DTypeBit(DType::kF32) | DTypeBit(DType::kF64) | DTypeBit(DType::kI32) |
                                 DTypeBit(DType::kI64) | DTypeBit(DType::kU32) |
                                 DTypeBit(DType::kU64),
                             "ONNX CumSum along `axis` (floats accumulate in their own type, "
                             "as the reference)"));
  t.push_back(CacheWriteContract());
  t.push_back({.name = "glu",
               .inputs = {Req("x", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("rows"), SizeParam("f"),
                          StringParam("activation", {"silu", "gelu", "gelu_tanh"})},
               .doc = "x [rows,2f] = [a|b] → y [rows,f] = act(a)·b (SwiGLU, GeGLU)"});
  t.push_back({.name = "gelu",
               .inputs = {Req("x", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("n", "elements"), FlagParam("tanh", "ONNX `approximate`")},
               .inplace_ok = true});
  t.push_back({.name = "softmax",
               .inputs = {Req("x", kF32Only)},
               .outputs = {Req("y", kF32Only)},
               .params = {SizeParam("rows"), SizeParam("n")},
               .inplace_ok = true,
               .doc = "x [rows,n], over the last axis"});
  return t;
}

}  // namespace kiln::contracts_internal
