// The CUDA kernel table's decoder kernels (cuda_steps.h; docs/generation.md): cache_write,
// tensor_scatter and head_attention over a paged cache (kernels/cuda/kv_cache.h). The paged
// attention's split count is the device's (Init: about two blocks per SM, capped by the run slot's
// workspace, where the splits' partial results go; stream-ordered scratch, as the packed steps use
// it).
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/kv_cache.h"
#include "runtime/cuda/cuda_steps.h"
#include "runtime/cuda/cuda_util.h"

namespace kiln::runtime {
namespace {

using StepPtr = std::unique_ptr<CudaStep>;

class CacheWriteStep final : public CudaStep {
 public:
  explicit CacheWriteStep(cuda::CacheWriteArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::CacheWriteArgs a = a_;
    a.cache = io.In(0);
    a.rows = io.In(1);
    a.positions = static_cast<const int64_t*>(io.In(2));
    if (a.block_size > 0) a.table = static_cast<const int64_t*>(io.In(3));
    a.y = io.Out(0);
    a.err = env.err;
    return LaunchStatus(cuda::CacheWrite(a, env.stream), "cache_write");
  }
  const char* DataError() const override {
    return "a cache position is outside the cache, or a block table names no block of the pool";
  }

 private:
  cuda::CacheWriteArgs a_;
};

class PagedAttentionStep final : public CudaStep {
 public:
  explicit PagedAttentionStep(cuda::PagedAttentionArgs a) : a_(a) {}
  absl::Status Init(const CudaInitEnv& env) override {
    a_.splits =
        cuda::PagedAttentionSplits(a_, 2 * std::max(env.multiprocessors, 1), env.workspace_bytes);
    return absl::OkStatus();
  }
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::PagedAttentionArgs a = a_;
    a.q = io.In(0);
    a.k = io.In(1);
    a.v = io.In(2);
    a.mask = io.In(3);
    a.table = static_cast<const int64_t*>(io.In(4));
    a.y = io.Out(0);
    a.err = env.err;
    if (cuda::PagedAttentionWorkspace(a) > env.workspace_bytes)
      return absl::InternalError("paged head_attention: its splits outgrow the workspace");
    a.partial = static_cast<float*>(env.workspace);
    return LaunchStatus(cuda::PagedAttention(a, env.stream), "head_attention");
  }
  const char* DataError() const override { return "the block table names no block of the pool"; }

 private:
  cuda::PagedAttentionArgs a_;
};

class TensorScatterStep final : public CudaStep {
 public:
  explicit TensorScatterStep(cuda::TensorScatterArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::TensorScatterArgs a = a_;
    a.cache = io.In(0);
    a.update = io.In(1);
    a.write_indices = static_cast<const int64_t*>(io.In(2));
    a.y = io.Out(0);
    a.err = env.err;
    return LaunchStatus(cuda::TensorScatter(a, env.stream), "tensor_scatter");
  }
  const char* DataError() const override {
    return "a write index is negative, or (mode linear) the update runs past the cache's end";
  }

 private:
  cuda::TensorScatterArgs a_;
};

// block_quant_linear: the weights are the uploaded plan's (fixed at Init); x and y per run.
}  // namespace

absl::StatusOr<StepPtr> PrepareCudaTensorScatter(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const TensorScatterRule r, CheckTensorScatter(c));
  if (r.elem_size != 1 && r.elem_size != 2 && r.elem_size != 4 && r.elem_size != 8)
    return c.Err("tensor_scatter: elements of %d bytes", r.elem_size);
  cuda::TensorScatterArgs a;
  a.batch = r.batch;
  a.outer = r.outer;
  a.cap = r.cap;
  a.seq = r.seq;
  a.inner = r.inner;
  a.elem_size = static_cast<int>(r.elem_size);
  a.circular = r.circular;
  a.cache_bytes = r.batch * r.outer * r.cap * r.inner * static_cast<int64_t>(r.elem_size);
  return StepPtr(new TensorScatterStep(a));
}

absl::StatusOr<StepPtr> PrepareCudaCacheWrite(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const CacheWriteRule r, CheckCacheWrite(c));
  const int64_t row_bytes = r.row * static_cast<int64_t>(r.elem_size);
  if (row_bytes % 4 != 0)
    return c.Err("a cache row of %d bytes is not whole 4-byte words", row_bytes);
  cuda::CacheWriteArgs a;
  a.batch = r.batch;
  a.heads = r.heads;
  a.slots = r.slots;
  a.seq = r.seq;
  a.row_bytes = row_bytes;
  a.cache_bytes = StepChecker::Elems(*c.In(0)) * static_cast<int64_t>(r.elem_size);
  a.width = r.paged.width;
  a.block_size = r.paged.block_size;
  a.blocks = r.paged.blocks;
  return StepPtr(new CacheWriteStep(a));
}

absl::StatusOr<StepPtr> PrepareCudaPagedAttention(const StepChecker& c,
                                                  const HeadAttentionRule& r) {
  if (r.head_size > cuda::kPagedAttentionMaxHeadSize)
    return c.Err("head_size %d is beyond the paged attention kernel's %d", r.head_size,
                 cuda::kPagedAttentionMaxHeadSize);
  if (r.heads > 65535 || r.batch * r.seq > 65535 || r.batch * r.seq * r.heads > 0x7fffffff)
    return c.Err(
        "batch·seq %d or num_heads %d exceeds the paged kernel's grid (65535 each, "
        "their product < 2^31)",
        r.batch * r.seq, r.heads);
  cuda::PagedAttentionArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.batch = r.batch;
  a.seq = r.seq;
  a.heads = r.heads;
  a.kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  a.causal = r.causal;
  a.width = r.paged.width;
  a.block_size = r.paged.block_size;
  a.blocks = r.paged.blocks;
  if (r.mask_dtype != DType::kUndefined) {
    a.mask_type = ElemTypeOf(r.mask_dtype);
    MaskStrides(r.mask_dims, a.mask_stride);
  }
  a.splits = 1;  // Init picks the device's
  return StepPtr(new PagedAttentionStep(a));
}

}  // namespace kiln::runtime
