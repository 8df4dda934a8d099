// Device-neutral kernel rules: for each kernel id shared by the targets, how a step's
// (contract-checked) parameters relate to its buffers' dims, returned as a small
// description that each backend turns into its kernel's Args. The CPU and CUDA tables
// (runtime/cpu/cpu_steps.cc, runtime/cuda/cuda_steps.cc) both call these, so a step that
// one executor accepts the other reads the same way.
// Errors: InvalidArgument "bucket B step S (kernel, provenance): ..." (StepChecker::Err).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/eltwise_common.h"
#include "kernels/strided_copy.h"
#include "plan/eltwise_ops.h"
#include "runtime/step_checker.h"

namespace kiln::runtime {

struct CopyRule {
  int64_t bytes = 0;
};
absl::StatusOr<CopyRule> CheckCopy(const StepChecker& c);

enum class ActivationKind { kNone, kGeluErf, kGeluTanh, kRelu, kTanh };

struct LinearRule {
  int64_t m = 0, k = 0, n = 0;
  bool trans_w = false;
  ActivationKind activation = ActivationKind::kNone;
  bool has_bias = false;
  bool has_residual = false;         // cuda: input 3, y = x·w' + bias + residual (activation none)
  DType weight_dtype = DType::kF32;  // cpu: f32, or bf16 (x rounded to bf16)
};
absl::StatusOr<LinearRule> CheckLinear(const StepChecker& c);

// quant_linear (int8 plans): x [m, k] f32, w [n, k] s8, w_scale [n], bias [n]?, x_mul [k]?
// -> y [m, n].
struct QuantLinearRule {
  int64_t m = 0, k = 0, n = 0;
  ActivationKind activation = ActivationKind::kNone;
  bool has_bias = false;
  bool has_x_mul = false;
  float x_absmax = 0;  // > 0: static activations
};
absl::StatusOr<QuantLinearRule> CheckQuantLinear(const StepChecker& c);

// block_quant_linear: int4 or int8 weight-only Linear. 4 bits (no `bits` param): w u8 [n,
// ceil(k/2)] (two codes per byte, low nibble first) or u4 [n,k] (one per byte: plans before
// 2026-12-06), zero points u4; bits = 8: w u8 [n, k], zero points u8. Zero points may be
// f32 instead (fractional, as HQQ writes them). Scales (and zero points) [n, kb].
struct BlockQuantLinearRule {
  int64_t m = 0, k = 0, n = 0, block_size = 0, blocks = 0;
  int bits = 4;
  ActivationKind activation = ActivationKind::kNone;
  bool has_zero_points = false;
  bool float_zero_points = false;  // zero points f32
  bool has_bias = false;
  bool two_codes_per_byte = false;  // 4 bits, w is u8
};
absl::StatusOr<BlockQuantLinearRule> CheckBlockQuantLinear(const StepChecker& c);

// block_quant_gather: rows of a block-quantized table (kiln.BlockQuantGather). w as
// block_quant_linear's ([n, ceil(k/2)] u8 two codes per byte, or [n, k] u4 / 8-bit u8),
// indices (i32 or i64, `rows` of them), scales and zero points [n, blocks] -> y f32 [rows, k].
struct BlockQuantGatherRule {
  int64_t rows = 0, k = 0, n = 0, block_size = 0, blocks = 0;
  int bits = 4;
  bool two_codes_per_byte = false;
  bool has_zero_points = false, float_zero_points = false;
  bool idx_i32 = false;
};
absl::StatusOr<BlockQuantGatherRule> CheckBlockQuantGather(const StepChecker& c);

// conv: 2-D NCHW convolution (cpu), its geometry as params.
struct ConvRule {
  int64_t batch = 0, in_ch = 0, in_h = 0, in_w = 0, out_ch = 0, out_h = 0, out_w = 0;
  int64_t k_h = 0, k_w = 0, group = 1, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool has_bias = false;
};
absl::StatusOr<ConvRule> CheckConv(const StepChecker& c);

// matmul: y[i] = a[i] · b[i] for i < batch, a [m,k], b [k,n], y [m,n] dense; a broadcast
// operand is one matrix read by every item.
struct MatMulRule {
  int64_t batch = 0, m = 0, k = 0, n = 0;
  bool broadcast_a = false, broadcast_b = false;
};
absl::StatusOr<MatMulRule> CheckMatMul(const StepChecker& c);

struct NormRule {
  int64_t rows = 0, h = 0, skip_rows = 0;
  float eps = 0;
  bool has_sum = false;  // output 1 (skip_layer_norm, skip_rms_norm)
};
// The four norms' operands, in order: x, skip (skip forms), gamma, beta (LayerNorm forms),
// bias (skip forms) -> y, sum (skip forms, optional):
//   layer_norm (skip, rms = false, false), skip_layer_norm (true, false),
//   rms_norm (false, true), skip_rms_norm (true, true).
absl::StatusOr<NormRule> CheckNorm(const StepChecker& c, bool skip, bool rms);

struct AttentionRule {
  int64_t batch = 0, seq = 0, heads = 0, head_size = 0;
  int64_t kv_heads = 0;  // divides heads (the plan's kv_heads, else heads)
  float scale = 1.0f;
  bool causal = false;
  int64_t rotary_dim = 0;                // R of the cos/sin tables [1 or B, S, R]; 0: no rotary
  bool rotary_per_batch = false;         // tables [B, S, R] (else [1, S, R])
  bool rotary_interleaved = false;       // the plan's rotary_interleaved flag
  DType mask_dtype = DType::kUndefined;  // kUndefined: no mask
  std::vector<int64_t> mask_dims;        // rank <= 4, broadcastable to [B, N, S, S]
};
absl::StatusOr<AttentionRule> CheckAttention(const StepChecker& c);

// head_attention (kiln.Attention): q [B, N, S, D], k and v [B, Nkv, L, D] -> y [B, S, N·D].
// A paged cache (kernels/cpu/paged_cache.h): `block_size` and `blocks` params, the pool
// [blocks, heads, block_size, row] and a block table [batch, slots / block_size].
struct PagedRule {
  int64_t block_size = 0, blocks = 0;  // 0: dense
  int64_t width = 0;                   // the table's columns
};

struct HeadAttentionRule {
  int64_t batch = 0, seq = 0, kv_seq = 0, heads = 0, kv_heads = 0, head_size = 0;
  float scale = 1.0f;
  bool causal = false;                   // bottom-right aligned; needs kv_seq >= seq
  DType mask_dtype = DType::kUndefined;  // kUndefined: no mask
  std::vector<int64_t> mask_dims;        // rank <= 4, broadcastable to [B, N, S, L]
  PagedRule paged;                       // k/v pools read through input 4
};
absl::StatusOr<HeadAttentionRule> CheckHeadAttention(const StepChecker& c);

struct EmbedRule {
  int64_t batch = 0, seq = 0, hidden = 0;
  float eps = 0;
  bool ids_i32 = false;
  int64_t position_rows = 0;  // B, or 1 ([1,S] / [S] position ids); 0: no position ids
  int64_t word_rows = 0, pos_rows = 0, segment_rows = 0;
};
absl::StatusOr<EmbedRule> CheckEmbedLayerNorm(const StepChecker& c);

struct PoolRule {
  int64_t batch = 0, seq = 0, hidden = 0;
  bool cls = false, last = false, normalize = false;  // mode "cls" / "last" (else "mean")
  DType mask_dtype = DType::kUndefined;               // kUndefined: no mask
};
absl::StatusOr<PoolRule> CheckPool(const StepChecker& c);

struct GeluRule {
  int64_t n = 0;
  bool tanh = false;
};
absl::StatusOr<GeluRule> CheckGelu(const StepChecker& c);

// glu: x [rows, 2f] -> y [rows, f] = act(x[:, :f]) · x[:, f:].
struct GluRule {
  int64_t rows = 0, f = 0;
  std::string activation;  // silu, gelu or gelu_tanh
};
absl::StatusOr<GluRule> CheckGlu(const StepChecker& c);

// The packed-token kernels (docs/packing.md): tokens T, sequences N, lengths [N] int64
// (checked at run time).
// packed_attention: qkv [1, T, (N + 2·Nkv)·D] -> y [1, T, N·D].
struct PackedAttentionRule {
  int64_t tokens = 0, sequences = 0, heads = 0, kv_heads = 0, head_size = 0;
  float scale = 1.0f;
};
absl::StatusOr<PackedAttentionRule> CheckPackedAttention(const StepChecker& c);
// packed_pool: hidden [1, T, H] -> y [N, H].
struct PackedPoolRule {
  int64_t tokens = 0, sequences = 0, hidden = 0;
  bool cls = false, normalize = false;
};
absl::StatusOr<PackedPoolRule> CheckPackedPool(const StepChecker& c);
// packed_positions: lengths [N], tokens [1, T] (dims only) -> y [1, T] int64.
struct PackedPositionsRule {
  int64_t tokens = 0, sequences = 0;
};
absl::StatusOr<PackedPositionsRule> CheckPackedPositions(const StepChecker& c);
// packed_cumsum: x, y [1, T] of one dtype, lengths [N].
struct PackedCumSumRule {
  int64_t tokens = 0, sequences = 0;
  DType dtype = DType::kUndefined;
  bool exclusive = false;
};
absl::StatusOr<PackedCumSumRule> CheckPackedCumSum(const StepChecker& c);

// cache_write: cache, y [batch, heads, slots, row]; new [batch, heads, seq, row];
// positions [batch, seq] (int64, checked against `slots` at run time).
struct CacheWriteRule {
  int64_t batch = 0, heads = 0, slots = 0, seq = 0, row = 0;
  size_t elem_size = 0;
  PagedRule paged;  // cache/y pools, input 3 the table
};
absl::StatusOr<CacheWriteRule> CheckCacheWrite(const StepChecker& c);

// tensor_scatter (ONNX TensorScatter): cache, y [batch, outer..., cap, inner...]; update the
// same with `seq` <= cap on the axis; write_indices [batch] int64 (checked at run time).
struct TensorScatterRule {
  int64_t batch = 0, outer = 0, cap = 0, seq = 0, inner = 0;
  size_t elem_size = 0;
  bool circular = false;
};
absl::StatusOr<TensorScatterRule> CheckTensorScatter(const StepChecker& c);

// pad (ONNX Pad, mode constant, no crop): y [x dims + begin + end] = `value` with x at
// offset `begin`; the strides of x placed in y.
struct PadRule {
  std::vector<int64_t> dims;  // x's
  std::vector<int64_t> x_strides, y_strides;
  int64_t y_offset = 0;  // elements: where x[0, ..., 0] lands
  int64_t y_elems = 0;
};
absl::StatusOr<PadRule> CheckPad(const StepChecker& c);

// eltwise: one ONNX elementwise op over numpy-broadcast operands (src/plan/eltwise_ops.h
// for the typing). The operands are the step's present inputs, in order; y may be input 0
// in place only where that input does not broadcast and has y's element size.
struct EltwiseRule {
  kernels::EltOp op = kernels::EltOp::kIdentity;
  EltDomain domain = EltDomain::kF32;
  kernels::EltDomainKind domain_kind = kernels::EltDomainKind::kF32;  // `domain` for kernels
  std::vector<DType> in_types;
  DType out_type = DType::kUndefined;
  kernels::BroadcastLayout layout;
};
absl::StatusOr<EltwiseRule> CheckEltwise(const StepChecker& c);

// gather (ONNX Gather on one axis): y = data viewed [outer, axis_dim, inner] gathered along
// the middle axis by `num_indices` indices, [outer, num_indices, inner].
struct GatherRule {
  int64_t outer = 0, axis_dim = 0, inner = 0, num_indices = 0;
  int64_t elem_size = 0;  // bytes per element of data and y
  bool idx_i32 = false;   // indices int32 (else int64)
};
absl::StatusOr<GatherRule> CheckGather(const StepChecker& c);

// The most dims the index kernels take (gather_nd's tuple, gather_elements' rank).
inline constexpr int kMaxIndexRank = 8;

// gather_nd (ONNX GatherND with batch_dims): for each of `batch` batches and `tuples`
// index tuples of k entries, the `slice` elements at Σ index_j · strides[j] of the batch
// are copied to y [batch, tuples, slice]; index j is in [-dims[j], dims[j]).
struct GatherNDRule {
  bool idx_i32 = false;
  int64_t elem_size = 0;
  int64_t batch = 1, batch_stride = 0, tuples = 0, slice = 1;
  int k = 0;
  int64_t dims[kMaxIndexRank] = {}, strides[kMaxIndexRank] = {};  // strides in elements
};
absl::StatusOr<GatherNDRule> CheckGatherND(const StepChecker& c);

// gather_elements (ONNX GatherElements): y has the indices' dims; y[i] = data at i with
// dim `axis` replaced by indices[i] (in [-axis_dim, axis_dim)).
struct GatherElementsRule {
  bool idx_i32 = false;
  int64_t elem_size = 0;
  int rank = 0, axis = 0;
  int64_t idx_dims[kMaxIndexRank] = {}, data_strides[kMaxIndexRank] = {};
  int64_t axis_dim = 0, n = 0;  // n: elements of y
};
absl::StatusOr<GatherElementsRule> CheckGatherElements(const StepChecker& c);

// cumsum (ONNX CumSum): x viewed [outer, len, inner], summed along len.
struct CumSumRule {
  DType dtype = DType::kUndefined;
  int64_t outer = 0, len = 0, inner = 0;
  bool exclusive = false, reverse = false;
};
absl::StatusOr<CumSumRule> CheckCumSum(const StepChecker& c);

// transpose / slice / expand / concat: the strided box copies that make y (concat: one per
// input, in input order), each checked on the host to touch only elements inside both
// buffers (overflow-safe), then collapsed (kernels/strided_copy.h).
struct StridedCopyRule {
  int64_t elem_size = 0;  // bytes per element of x and y
  std::vector<kernels::CopyBox> boxes;
};
// Dispatches on c.step().kernel; InvalidArgument for another kernel id.
absl::StatusOr<StridedCopyRule> CheckStridedCopy(const StepChecker& c);

// rotary: x [.., d] and tables cos, sin [.., r] (r even, ≤ d, same dims) whose leading dims
// broadcast (numpy) to x's; `rows` is that broadcast in units of rows (inputs x, cos, sin).
struct RotaryRule {
  int64_t d = 0, r = 0;
  bool interleaved = false;  // the plan's `interleaved` flag (absent: rotate-half)
  kernels::BroadcastLayout rows;
};
absl::StatusOr<RotaryRule> CheckRotary(const StepChecker& c);

struct SoftmaxRule {
  int64_t rows = 0, n = 0;
};
absl::StatusOr<SoftmaxRule> CheckSoftmax(const StepChecker& c);

}  // namespace kiln::runtime
