// The CUDA kernel table's packed-token kernels (cuda_steps.h; docs/packing.md):
// packed_attention (the simple attention kernel per sequence), packed_flash_attention (the
// flash kernel's variable-length form), packed_pool, packed_positions and packed_cumsum (the
// cumsum kernel per sequence). Each step first
// turns the bucket's `lengths` input into int32 offsets in the run slot's workspace
// (PackedSegments, kernels/cuda/packed.h), then runs its kernel on them; the workspace is
// stream-ordered scratch, so the steps share nothing but the lengths input. Bad lengths
// (negative, or more tokens than the bucket's) raise the step's data error, and the
// offsets are all zero so nothing reads past the bucket.
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/packed.h"
#include "kernels/cuda/pool.h"
#include "runtime/cuda/cuda_steps.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/kernel_rules.h"

namespace kiln::runtime {
namespace {

using StepPtr = std::unique_ptr<CudaStep>;

// Host stand-in for the offsets, so that FlashAttentionUnsupported checks the packed form.
constexpr int32_t kPlaceholderOffsets[2] = {0, 0};

// `a` as its launches will be: the packed form with tile offsets (the run's workspace)
// and at most this many tiles (16 rows, the fewest a flash block takes).
cuda::FlashAttentionArgs AsLaunched(cuda::FlashAttentionArgs a) {
  a.cu_seqlens_q = a.cu_seqlens_kv = a.tile_cu = kPlaceholderOffsets;
  a.tiles = cuda::PackedTileBound(a.q_len, a.batch, 16);
  return a;
}

constexpr char kBadLengths[] =
    "sequence_lengths has a negative entry or adds up to more tokens than the bucket holds";

// The limits every packed kernel shares: int32 offsets for T tokens, N + 1 of them in the
// workspace.
absl::Status CheckPackedSizes(const StepChecker& c, int64_t tokens, int64_t sequences) {
  if (tokens > 0x7fffffff)
    return c.Err("tokens %d: the CUDA packed kernels take fewer than 2^31", tokens);
  // The workspace holds the token offsets and the tile offsets, N + 1 of each.
  const int64_t max_sequences =
      static_cast<int64_t>(cuda::kGemmWorkspaceBytes / (2 * sizeof(int32_t))) - 1;
  if (sequences < 1 || sequences > max_sequences)
    return c.Err("sequences %d: the CUDA packed kernels take 1 to %d", sequences, max_sequences);
  return absl::OkStatus();
}

struct Offsets {
  const int32_t* cu = nullptr;       // [N + 1] token offsets
  const int32_t* tile_cu = nullptr;  // [N + 1] tile offsets, when asked for
};

// Enqueues PackedSegments into the workspace; `zero` (optional) is the [T, row_bytes]
// output whose rows of no sequence are zero-filled; tile_rows > 0 asks for the tile
// offsets of a kernel taking that many query rows per block.
absl::StatusOr<Offsets> Segments(const CudaRunEnv& env, const void* lengths, int64_t sequences,
                                 int64_t tokens, void* zero, int64_t row_bytes,
                                 int64_t tile_rows = 0) {
  cuda::PackedSegmentsArgs s;
  s.lengths = static_cast<const int64_t*>(lengths);
  s.sequences = sequences;
  s.tokens = tokens;
  s.cu = static_cast<int32_t*>(env.workspace);
  s.zero = zero;
  s.zero_row_bytes = row_bytes;
  if (tile_rows > 0) {
    s.tile_cu = s.cu + sequences + 1;
    s.tile_rows = tile_rows;
  }
  s.err = env.err;
  KILN_RETURN_IF_ERROR(
      LaunchStatus(cuda::PackedSegments(s, env.stream), "the packed sequence offsets"));
  return Offsets{s.cu, s.tile_cu};
}

// ---- attention ----------------------------------------------------------------------------

// packed_attention: qkv [1, T, (N + 2·Nkv)·D] -> y [1, T, N·D], each sequence attending to
// itself on the simple kernel (any float dtype, head size <= 256); tokens of no sequence
// get zeros.
class PackedAttentionStep final : public CudaStep {
 public:
  PackedAttentionStep(cuda::AttentionArgs a, int64_t tokens, int64_t y_row_bytes)
      : a_(a), tokens_(tokens), y_row_bytes_(y_row_bytes) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::AttentionArgs a = a_;
    a.qkv = io.In(0);
    a.y = io.Out(0);
    KILN_ASSIGN_OR_RETURN(const Offsets off, Segments(env, io.In(1), a.batch, tokens_, a.y,
                                                      y_row_bytes_, cuda::kAttentionRowsPerBlock));
    a.cu_seqlens = off.cu;
    a.tile_cu = off.tile_cu;
    a.tiles = cuda::PackedTileBound(tokens_, a.batch, cuda::kAttentionRowsPerBlock);
    return LaunchStatus(cuda::Attention(a, env.stream), "packed_attention");
  }
  const char* DataError() const override { return kBadLengths; }

 private:
  cuda::AttentionArgs a_;
  int64_t tokens_, y_row_bytes_;
};

absl::StatusOr<StepPtr> PrepareAttention(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PackedAttentionRule r, CheckPackedAttention(c));
  KILN_RETURN_IF_ERROR(CheckPackedSizes(c, r.tokens, r.sequences));
  if (r.head_size > cuda::kAttentionMaxHeadSize)
    return c.Err("head_size %d is beyond the CUDA attention kernel's %d", r.head_size,
                 cuda::kAttentionMaxHeadSize);
  if (r.heads > 65535 || r.sequences > 65535)
    return c.Err("sequences %d or num_heads %d exceeds the kernel's grid (65535)", r.sequences,
                 r.heads);
  cuda::AttentionArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.batch = r.sequences;
  a.seq = r.tokens;  // the longest a sequence can be
  a.heads = r.heads;
  a.kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  const int64_t y_row_bytes =
      r.heads * r.head_size * static_cast<int64_t>(DTypeSize(c.Out(0)->dtype));
  return StepPtr(new PackedAttentionStep(a, r.tokens, y_row_bytes));
}

// packed_flash_attention: packed_attention's operands and rule on the flash kernel (fp16 /
// bf16, head size 8..128): Q, K, V are views of the qkv row, the offsets its cu_seqlens.
class PackedFlashAttentionStep final : public CudaStep {
 public:
  PackedFlashAttentionStep(cuda::FlashAttentionArgs a, int64_t y_row_bytes)
      : a_(a), y_row_bytes_(y_row_bytes) {}
  absl::Status Init(const CudaInitEnv& env) override {
    KILN_ASSIGN_OR_RETURN(launch_, InitFlash(AsLaunched(a_), env.sm, "packed_flash_attention"));
    return absl::OkStatus();
  }
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::FlashAttentionArgs a = a_;
    SetFlashQkv(a, io.In(0));
    a.y = io.Out(0);
    KILN_ASSIGN_OR_RETURN(const Offsets off, Segments(env, io.In(1), a.batch, a.q_len, a.y,
                                                      y_row_bytes_, launch_.block_q));
    a.cu_seqlens_q = a.cu_seqlens_kv = off.cu;
    a.tile_cu = off.tile_cu;
    a.tiles = cuda::PackedTileBound(a.q_len, a.batch, launch_.block_q);
    return LaunchStatus(cuda::FlashAttention(a, launch_, env.stream), "packed_flash_attention");
  }
  const char* DataError() const override { return kBadLengths; }

 private:
  cuda::FlashAttentionArgs a_;
  int64_t y_row_bytes_;
  cuda::FlashLaunch launch_;
};

absl::StatusOr<StepPtr> PrepareFlashAttention(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PackedAttentionRule r, CheckPackedAttention(c));
  KILN_RETURN_IF_ERROR(CheckPackedSizes(c, r.tokens, r.sequences));
  if (!cuda::FlashHeadSizeSupported(r.head_size))
    return c.Err("head_size %d: the flash kernel takes 8, 16, 32, 64 or 128", r.head_size);
  cuda::FlashAttentionArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.batch = r.sequences;
  a.q_len = a.kv_len = r.tokens;  // the longest a sequence can be
  a.heads = r.heads;
  a.kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  a.q_row_stride = a.kv_row_stride = (r.heads + 2 * r.kv_heads) * r.head_size;
  a.y_row_stride = r.heads * r.head_size;
  if (const char* why = cuda::FlashAttentionUnsupported(AsLaunched(a), cuda::FlashLaunch{}))
    return c.Err("packed_flash_attention: %s", why);
  if (PointerAlignment(*c.In(0)) < 16 || PointerAlignment(*c.Out(0)) < 4)
    return c.Err("packed_flash_attention needs qkv 16-byte and y 4-byte aligned (offsets %d, %d)",
                 c.In(0)->offset, c.Out(0)->offset);
  return StepPtr(new PackedFlashAttentionStep(a, a.y_row_stride * 2));
}

// ---- pooling and positions ----------------------------------------------------------------

class PackedPoolStep final : public CudaStep {
 public:
  PackedPoolStep(cuda::PoolArgs a, int64_t tokens) : a_(a), tokens_(tokens) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::PoolArgs a = a_;
    a.hidden = io.In(0);
    a.y = io.Out(0);
    KILN_ASSIGN_OR_RETURN(const Offsets off, Segments(env, io.In(1), a.batch, tokens_, nullptr, 0));
    a.cu_seqlens = off.cu;
    return LaunchStatus(cuda::Pool(a, env.stream), "packed_pool");
  }
  const char* DataError() const override { return kBadLengths; }

 private:
  cuda::PoolArgs a_;
  int64_t tokens_;
};

absl::StatusOr<StepPtr> PreparePool(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PackedPoolRule r, CheckPackedPool(c));
  KILN_RETURN_IF_ERROR(CheckPackedSizes(c, r.tokens, r.sequences));
  if (r.normalize && r.hidden > cuda::kPoolMaxNormalizedHidden)
    return c.Err("normalize needs hidden <= %d on CUDA, got %d", cuda::kPoolMaxNormalizedHidden,
                 r.hidden);
  cuda::PoolArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.batch = r.sequences;
  a.seq = r.tokens;
  a.hidden_size = r.hidden;
  a.cls = r.cls;
  a.normalize = r.normalize;
  return StepPtr(new PackedPoolStep(a, r.tokens));
}

class PackedPositionsStep final : public CudaStep {
 public:
  explicit PackedPositionsStep(cuda::PackedPositionsArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::PackedPositionsArgs a = a_;
    a.y = static_cast<int64_t*>(io.Out(0));
    KILN_ASSIGN_OR_RETURN(const Offsets off,
                          Segments(env, io.In(0), a.sequences, a.tokens, nullptr, 0));
    a.cu = off.cu;
    return LaunchStatus(cuda::PackedPositions(a, env.stream), "packed_positions");
  }
  const char* DataError() const override { return kBadLengths; }

 private:
  cuda::PackedPositionsArgs a_;
};

absl::StatusOr<StepPtr> PreparePositions(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PackedPositionsRule r, CheckPackedPositions(c));
  KILN_RETURN_IF_ERROR(CheckPackedSizes(c, r.tokens, r.sequences));
  cuda::PackedPositionsArgs a;
  a.sequences = r.sequences;
  a.tokens = r.tokens;
  return StepPtr(new PackedPositionsStep(a));
}

// packed_cumsum: the cumsum kernel along each sequence's tokens (its accumulator, so bit for
// bit the padded program's), zeros for tokens of no sequence.
class PackedCumSumStep final : public CudaStep {
 public:
  PackedCumSumStep(cuda::CumSumArgs a, int64_t elem) : a_(a), elem_(elem) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::CumSumArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    KILN_ASSIGN_OR_RETURN(const Offsets off, Segments(env, io.In(1), a.outer, a.len, a.y, elem_));
    a.cu_seqlens = off.cu;
    return LaunchStatus(cuda::CumSum(a, env.stream), "packed_cumsum");
  }
  const char* DataError() const override { return kBadLengths; }

 private:
  cuda::CumSumArgs a_;
  int64_t elem_;
};

absl::StatusOr<StepPtr> PrepareCumSum(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PackedCumSumRule r, CheckPackedCumSum(c));
  KILN_RETURN_IF_ERROR(CheckPackedSizes(c, r.tokens, r.sequences));
  cuda::CumSumArgs a;
  a.type = ElemTypeOf(r.dtype);
  a.outer = r.sequences;
  a.inner = 1;
  a.len = r.tokens;
  a.exclusive = r.exclusive;
  return StepPtr(new PackedCumSumStep(a, static_cast<int64_t>(DTypeSize(r.dtype))));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaPacked(std::string_view kernel,
                                                            const StepChecker& c) {
  if (kernel == "packed_attention") return PrepareAttention(c);
  if (kernel == "packed_flash_attention") return PrepareFlashAttention(c);
  if (kernel == "packed_pool") return PreparePool(c);
  if (kernel == "packed_positions") return PreparePositions(c);
  if (kernel == "packed_cumsum") return PrepareCumSum(c);
  return absl::InternalError(absl::StrCat("no packed CUDA kernel '", std::string(kernel), "'"));
}

}  // namespace kiln::runtime
