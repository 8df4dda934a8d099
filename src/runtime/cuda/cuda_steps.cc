// The CUDA kernel table (cuda_steps.h), compute kernels: linear and matmul (cuBLASLt), the
// norms, attention, embed_layer_norm, pool, softmax. Each Prepare applies the kernel's
// device-neutral rule (runtime/kernel_rules.h) or, for cuda-only kernels, its own, and
// fills the kernel's Args; Launch sets the device pointers. The data-movement family is in
// cuda_steps_movement.cc.
#include "runtime/cuda/cuda_steps.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/eltwise.h"
#include "kernels/cuda/embed.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/glu.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/rotary.h"
#include "kernels/cuda/softmax.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/kernel_rules.h"

namespace kiln::runtime {

cuda::ElemType ElemTypeOf(DType t) {
  switch (t) {
    case DType::kF32:
      return cuda::ElemType::kF32;
    case DType::kF16:
      return cuda::ElemType::kF16;
    case DType::kBF16:
      return cuda::ElemType::kBF16;
    case DType::kF64:
      return cuda::ElemType::kF64;
    case DType::kI8:
      return cuda::ElemType::kI8;
    case DType::kU8:
      return cuda::ElemType::kU8;
    case DType::kI16:
      return cuda::ElemType::kI16;
    case DType::kU16:
      return cuda::ElemType::kU16;
    case DType::kI32:
      return cuda::ElemType::kI32;
    case DType::kU32:
      return cuda::ElemType::kU32;
    case DType::kI64:
      return cuda::ElemType::kI64;
    case DType::kU64:
      return cuda::ElemType::kU64;
    default:
      return cuda::ElemType::kBool;
  }
}

cuda::LinearAct LinearActOf(ActivationKind a) {
  switch (a) {
    case ActivationKind::kGeluErf:
      return cuda::LinearAct::kGeluErf;
    case ActivationKind::kGeluTanh:
      return cuda::LinearAct::kGeluTanh;
    case ActivationKind::kRelu:
      return cuda::LinearAct::kRelu;
    case ActivationKind::kTanh:
      return cuda::LinearAct::kTanh;
    case ActivationKind::kNone:
      break;
  }
  return cuda::LinearAct::kNone;
}

absl::Status LaunchStatus(cudaError_t e, const char* kernel) {
  return CudaStatus(e, absl::StrCat("launching ", kernel));
}

absl::StatusOr<cuda::FlashLaunch> InitFlash(const cuda::FlashAttentionArgs& a, int sm,
                                            const char* kernel) {
  const cuda::FlashLaunch launch = cuda::ChooseFlashLaunch(sm, a.head_size);
  if (const char* why = cuda::FlashAttentionUnsupported(a, launch))
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": ", why));
  KILN_RETURN_IF_ERROR(CudaStatus(cuda::FlashAttentionInit(a.dtype, a.head_size, launch),
                                  absl::StrCat(kernel, ": setting its shared-memory size")));
  return launch;
}

void SetFlashQkv(cuda::FlashAttentionArgs& a, const void* qkv) {
  const int64_t nd = a.heads * a.head_size, kvd = a.kv_heads * a.head_size;
  const auto* row = static_cast<const std::byte*>(qkv);
  const int64_t elem = 2;  // fp16 / bf16
  a.q = row;
  a.k = row + nd * elem;
  a.v = row + (nd + kvd) * elem;
}

uint32_t PointerAlignment(const PlanBuffer& b) {
  uint32_t a = 256;
  while (a > 1 && b.offset % a != 0) a /= 2;
  return a;
}

void MaskStrides(const std::vector<int64_t>& m, int64_t stride_out[4]) {
  int64_t stride = 1;
  for (size_t i = 0; i < m.size(); ++i) {
    const size_t d = m.size() - 1 - i;      // mask dim
    const int t = 3 - static_cast<int>(i);  // target dim
    stride_out[t] = m[d] == 1 ? 0 : stride;
    stride *= m[d];
  }
}

namespace {

using StepPtr = std::unique_ptr<CudaStep>;

// ---- linear / matmul ----------------------------------------------------------------

// y = act(x · w' + bias) (+ residual). cuBLASLt fuses bias, bias+ReLU and bias+tanh-GELU
// (its GELU epilogue is the tanh form); an erf GELU or a tanh activation runs in place
// after the GEMM as an eltwise launch.
class LinearStep final : public CudaStep {
 public:
  // `post`: the in-place activation after the GEMM, used when `act` needs one.
  LinearStep(cuda::GemmDesc desc, int64_t bias_offset, ActivationKind act, cuda::EltwiseArgs post)
      : desc_(desc), bias_offset_(bias_offset), act_(act), post_(post) {}

  absl::Status Init(const CudaInitEnv& env) override {
    cuda::GemmDesc d = desc_;
    if (bias_offset_ >= 0) d.bias = env.weights + bias_offset_;
    return CublasStatus(gemm_.Init(env.lt, d, env.workspace_bytes),
                        "cuBLASLt: choosing the linear GEMM's algorithm");
  }

  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    KILN_RETURN_IF_ERROR(CublasStatus(gemm_.Run(env.lt, io.In(0), io.In(1), io.In(3), io.Out(0),
                                                env.workspace, env.workspace_bytes, env.stream),
                                      "cuBLASLt matmul (linear)"));
    if (act_ != ActivationKind::kGeluErf && act_ != ActivationKind::kTanh) return absl::OkStatus();
    cuda::EltwiseArgs a = post_;
    a.in[0].data = io.Out(0);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Eltwise(a, env.stream), "linear's activation");
  }

 private:
  cuda::GemmDesc desc_;
  int64_t bias_offset_;
  ActivationKind act_;
  cuda::EltwiseArgs post_;
  cuda::LtGemm gemm_;
};

absl::StatusOr<StepPtr> PrepareLinear(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const LinearRule r, CheckLinear(c));
  cuda::GemmDesc d;
  d.dtype = ElemTypeOf(c.In(0)->dtype);
  d.m = r.m;
  d.n = r.n;
  d.k = r.k;
  d.trans_w = r.trans_w;
  d.residual = r.has_residual;
  d.allow_tf32 = c.Int("tf32", 0) != 0;
  d.align_x = PointerAlignment(*c.In(0));
  d.align_w = PointerAlignment(*c.In(1));
  if (r.has_residual) d.align_residual = PointerAlignment(*c.In(3));
  d.align_y = PointerAlignment(*c.Out(0));
  if (r.activation == ActivationKind::kRelu) d.epilogue = cuda::GemmEpilogue::kRelu;
  if (r.activation == ActivationKind::kGeluTanh) d.epilogue = cuda::GemmEpilogue::kGeluTanh;
  cuda::EltwiseArgs post;
  if (r.activation == ActivationKind::kGeluErf || r.activation == ActivationKind::kTanh) {
    cuda::EltwiseArgs& a = post;
    a.op = r.activation == ActivationKind::kGeluErf ? cuda::EltOp::kGelu : cuda::EltOp::kTanh;
    a.domain = cuda::EltDomainKind::kF32;
    if (!cuda::EltwiseLayout({r.m * r.n}, {{r.m * r.n}}, &a)) return c.Err("activation layout");
    a.in[0].type = d.dtype;
    a.out_type = d.dtype;
  }
  return StepPtr(new LinearStep(d, r.has_bias ? c.In(2)->offset : -1, r.activation, post));
}

class MatMulStep final : public CudaStep {
 public:
  explicit MatMulStep(cuda::GemmDesc desc) : desc_(desc) {}
  absl::Status Init(const CudaInitEnv& env) override {
    return CublasStatus(gemm_.Init(env.lt, desc_, env.workspace_bytes),
                        "cuBLASLt: choosing the matmul's algorithm");
  }
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    return CublasStatus(gemm_.Run(env.lt, io.In(0), io.In(1), nullptr, io.Out(0), env.workspace,
                                  env.workspace_bytes, env.stream),
                        "cuBLASLt matmul");
  }

 private:
  cuda::GemmDesc desc_;
  cuda::LtGemm gemm_;
};

// y[i] = a[i] · b[i] over `batch` strided items; a broadcast operand is one matrix.
absl::StatusOr<StepPtr> PrepareMatMul(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const MatMulRule r, CheckMatMul(c));
  const int64_t batch = r.batch, m = r.m, k = r.k, n = r.n;
  if (batch > 0x7fffffff) return c.Err("batch %d exceeds cuBLASLt's int32 batch count", batch);
  cuda::GemmDesc d;
  d.dtype = ElemTypeOf(c.In(0)->dtype);
  d.m = m;
  d.n = n;
  d.k = k;
  d.batch = batch;
  d.stride_x = r.broadcast_a ? 0 : m * k;
  d.stride_w = r.broadcast_b ? 0 : k * n;
  d.stride_y = m * n;
  d.allow_tf32 = c.Int("tf32", 0) != 0;
  d.align_x = PointerAlignment(*c.In(0));
  d.align_w = PointerAlignment(*c.In(1));
  d.align_y = PointerAlignment(*c.Out(0));
  return StepPtr(new MatMulStep(d));
}

// ---- norms ------------------------------------------------------------------------------

class NormStep final : public CudaStep {
 public:
  explicit NormStep(cuda::NormArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::NormArgs a = a_;
    a.x = io.In(0);
    int i = 1;
    if (cuda::IsSkipNorm(a.kind)) a.skip = io.In(i++);
    a.gamma = io.In(i++);
    if (!cuda::IsRmsNorm(a.kind)) a.beta = io.In(i++);
    if (cuda::IsSkipNorm(a.kind)) a.bias = io.In(i++);
    a.y = io.Out(0);
    a.sum = io.ops->out.size() > 1 ? io.Out(1) : nullptr;
    return LaunchStatus(cuda::Norm(a, env.stream), "norm");
  }

 private:
  cuda::NormArgs a_;
};

absl::StatusOr<StepPtr> PrepareNorm(const StepChecker& c, cuda::NormKind kind) {
  KILN_ASSIGN_OR_RETURN(const NormRule r,
                        CheckNorm(c, cuda::IsSkipNorm(kind), cuda::IsRmsNorm(kind)));
  cuda::NormLaunch l;
  if (r.rows > 0 && !cuda::ChooseNormLaunch(ElemTypeOf(c.In(0)->dtype), r.h, false, &l))
    return c.Err("h %d is beyond the CUDA norm kernel's %d elements", r.h, cuda::kNormMaxRow);
  if (r.rows > 0x7fffffff) return c.Err("rows %d exceeds the grid", r.rows);
  cuda::NormArgs a;
  a.kind = kind;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.rows = r.rows;
  a.h = r.h;
  a.skip_rows = r.skip_rows > 0 ? r.skip_rows : 1;
  a.eps = r.eps;
  return StepPtr(new NormStep(a));
}

absl::StatusOr<StepPtr> PrepareLayerNorm(const StepChecker& c) {
  return PrepareNorm(c, cuda::NormKind::kLayerNorm);
}
absl::StatusOr<StepPtr> PrepareSkipLayerNorm(const StepChecker& c) {
  return PrepareNorm(c, cuda::NormKind::kSkipLayerNorm);
}
class RotaryStep final : public CudaStep {
 public:
  explicit RotaryStep(cuda::RotaryArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::RotaryArgs a = a_;
    a.x = io.In(0);
    a.cos = io.In(1);
    a.sin = io.In(2);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Rotary(a, env.stream), "rotary");
  }

 private:
  cuda::RotaryArgs a_;
};

absl::StatusOr<StepPtr> PrepareRotary(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const RotaryRule r, CheckRotary(c));
  if (r.rows.n * r.d / 256 >= 0x7fffffff) return c.Err("x has more elements than the grid takes");
  cuda::RotaryArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.d = r.d;
  a.r = r.r;
  a.interleaved = r.interleaved;
  a.rows = r.rows;
  return StepPtr(new RotaryStep(a));
}

class GluStep final : public CudaStep {
 public:
  explicit GluStep(cuda::GluArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::GluArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Glu(a, env.stream), "glu");
  }

 private:
  cuda::GluArgs a_;
};

absl::StatusOr<StepPtr> PrepareGlu(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const GluRule r, CheckGlu(c));
  if (r.rows * r.f / 256 >= 0x7fffffff) return c.Err("y has more elements than the grid takes");
  cuda::GluArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.rows = r.rows;
  a.f = r.f;
  a.act = r.activation == "silu"   ? cuda::GluAct::kSilu
          : r.activation == "gelu" ? cuda::GluAct::kGelu
                                   : cuda::GluAct::kGeluTanh;
  return StepPtr(new GluStep(a));
}

absl::StatusOr<StepPtr> PrepareRmsNorm(const StepChecker& c) {
  return PrepareNorm(c, cuda::NormKind::kRmsNorm);
}
absl::StatusOr<StepPtr> PrepareSkipRmsNorm(const StepChecker& c) {
  return PrepareNorm(c, cuda::NormKind::kSkipRmsNorm);
}

// ---- attention --------------------------------------------------------------------------

// The simple kernel's arguments both attention rules share, after the limits it has.
template <typename Rule>
absl::StatusOr<cuda::AttentionArgs> SimpleAttentionArgs(const StepChecker& c, const Rule& r) {
  if (r.head_size > cuda::kAttentionMaxHeadSize)
    return c.Err("head_size %d is beyond the CUDA attention kernel's %d", r.head_size,
                 cuda::kAttentionMaxHeadSize);
  if (r.heads > 65535 || r.batch > 65535)
    return c.Err("batch %d or num_heads %d exceeds the kernel's grid (65535)", r.batch, r.heads);
  cuda::AttentionArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.batch = r.batch;
  a.seq = r.seq;
  a.heads = r.heads;
  a.kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  a.causal = r.causal;
  if (r.mask_dtype != DType::kUndefined) {
    a.mask_type = ElemTypeOf(r.mask_dtype);
    MaskStrides(r.mask_dims, a.mask_stride);
  }
  return a;
}

class AttentionStep final : public CudaStep {
 public:
  explicit AttentionStep(cuda::AttentionArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::AttentionArgs a = a_;
    a.qkv = io.In(0);
    a.mask = io.In(1);
    if (a.rotary_dim > 0) {
      a.cos = io.In(2);
      a.sin = io.In(3);
    }
    a.y = io.Out(0);
    return LaunchStatus(cuda::Attention(a, env.stream), "attention");
  }

 private:
  cuda::AttentionArgs a_;
};

absl::StatusOr<StepPtr> PrepareAttention(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const AttentionRule r, CheckAttention(c));
  KILN_ASSIGN_OR_RETURN(cuda::AttentionArgs a, SimpleAttentionArgs(c, r));
  a.rotary_dim = r.rotary_dim;
  a.rotary_batch_stride = r.rotary_per_batch ? r.seq * r.rotary_dim : 0;
  a.rotary_interleaved = r.rotary_interleaved;
  return StepPtr(new AttentionStep(a));
}

class HeadAttentionStep final : public CudaStep {
 public:
  explicit HeadAttentionStep(cuda::AttentionArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::AttentionArgs a = a_;
    a.q = io.In(0);
    a.k = io.In(1);
    a.v = io.In(2);
    a.mask = io.In(3);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Attention(a, env.stream), "head_attention");
  }

 private:
  cuda::AttentionArgs a_;
};

absl::StatusOr<StepPtr> PrepareHeadAttention(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const HeadAttentionRule r, CheckHeadAttention(c));
  if (r.paged.block_size > 0) return PrepareCudaPagedAttention(c, r);
  KILN_ASSIGN_OR_RETURN(cuda::AttentionArgs a, SimpleAttentionArgs(c, r));
  a.kv_seq = r.kv_seq;
  return StepPtr(new HeadAttentionStep(a));
}

// flash_attention: attention's rule; Q, K and V are views of the packed qkv row
// (q = row, k = row + N·D, v = row + (N + Nkv)·D) and y [B, S, N·D]. The launch shape is the
// device's (ChooseFlashLaunch), fixed at Init.
class FlashAttentionStep final : public CudaStep {
 public:
  explicit FlashAttentionStep(cuda::FlashAttentionArgs a) : a_(a) {}
  absl::Status Init(const CudaInitEnv& env) override {
    KILN_ASSIGN_OR_RETURN(launch_, InitFlash(a_, env.sm, "flash_attention"));
    return absl::OkStatus();
  }
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::FlashAttentionArgs a = a_;
    SetFlashQkv(a, io.In(0));
    a.mask = io.In(1);
    a.y = io.Out(0);
    return LaunchStatus(cuda::FlashAttention(a, launch_, env.stream), "flash_attention");
  }

 private:
  cuda::FlashAttentionArgs a_;
  cuda::FlashLaunch launch_;
};

absl::StatusOr<StepPtr> PrepareFlashAttention(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const AttentionRule r, CheckAttention(c));
  if (!cuda::FlashHeadSizeSupported(r.head_size))
    return c.Err("head_size %d: the flash kernel takes 8, 16, 32, 64 or 128", r.head_size);
  cuda::FlashAttentionArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.batch = r.batch;
  a.q_len = a.kv_len = r.seq;
  if (r.rotary_dim > 0) return c.Err("flash_attention takes no rotary tables");
  a.heads = r.heads;
  a.kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  a.causal = r.causal;
  const int64_t nd = r.heads * r.head_size;  // CheckAttention bounded B·S·(N+2·Nkv)·D
  const int64_t row = (r.heads + 2 * r.kv_heads) * r.head_size;
  a.q_row_stride = a.kv_row_stride = row;
  a.q_batch_stride = a.kv_batch_stride = r.seq * row;
  a.y_row_stride = nd;
  a.y_batch_stride = r.seq * nd;
  if (r.mask_dtype != DType::kUndefined) {
    a.mask_type = ElemTypeOf(r.mask_dtype);
    MaskStrides(r.mask_dims, a.mask_stride);
  }
  if (const char* why = cuda::FlashAttentionUnsupported(a, cuda::FlashLaunch{}))
    return c.Err("flash_attention: %s", why);
  if (PointerAlignment(*c.In(0)) < 16 || PointerAlignment(*c.Out(0)) < 4)
    return c.Err("flash_attention needs qkv 16-byte and y 4-byte aligned (offsets %d, %d)",
                 c.In(0)->offset, c.Out(0)->offset);
  return StepPtr(new FlashAttentionStep(a));
}

// ---- embeddings, pooling, softmax -------------------------------------------------------

class EmbedStep final : public CudaStep {
 public:
  explicit EmbedStep(cuda::EmbedArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::EmbedArgs a = a_;
    a.input_ids = io.In(0);
    a.segment_ids = io.In(1);
    a.position_ids = io.In(2);
    a.word = io.In(3);
    a.pos = io.In(4);
    a.segment = io.In(5);
    a.gamma = io.In(6);
    a.beta = io.In(7);
    a.y = io.Out(0);
    a.sum = io.ops->out.size() > 1 ? io.Out(1) : nullptr;
    a.err = env.err;
    return LaunchStatus(cuda::EmbedLayerNorm(a, env.stream), "embed_layer_norm");
  }
  const char* DataError() const override {
    return "a token, position or segment id is outside its embedding table";
  }

 private:
  cuda::EmbedArgs a_;
};

absl::StatusOr<StepPtr> PrepareEmbed(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const EmbedRule r, CheckEmbedLayerNorm(c));
  cuda::NormLaunch l;
  const cuda::ElemType t = ElemTypeOf(c.In(3)->dtype);
  if (!cuda::ChooseNormLaunch(t, r.hidden, false, &l, cuda::kEmbedMaxThreads))
    return c.Err("hidden %d is beyond the CUDA kernel's %d elements", r.hidden,
                 cuda::kEmbedMaxHidden);
  cuda::EmbedArgs a;
  a.dtype = t;
  a.ids_i32 = r.ids_i32;
  a.position_rows = r.position_rows;
  a.batch = r.batch;
  a.seq = r.seq;
  a.hidden = r.hidden;
  a.word_rows = r.word_rows;
  a.pos_rows = r.pos_rows;
  a.segment_rows = r.segment_rows;
  a.eps = r.eps;
  return StepPtr(new EmbedStep(a));
}

class PoolStep final : public CudaStep {
 public:
  explicit PoolStep(cuda::PoolArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::PoolArgs a = a_;
    a.hidden = io.In(0);
    a.mask = io.In(1);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Pool(a, env.stream), "pool");
  }

 private:
  cuda::PoolArgs a_;
};

absl::StatusOr<StepPtr> PreparePool(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PoolRule r, CheckPool(c));
  if (r.normalize && r.hidden > cuda::kPoolMaxNormalizedHidden)
    return c.Err("normalize needs hidden <= %d on CUDA, got %d", cuda::kPoolMaxNormalizedHidden,
                 r.hidden);
  cuda::PoolArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.mask_type = r.mask_dtype == DType::kUndefined ? cuda::ElemType::kF32 : ElemTypeOf(r.mask_dtype);
  a.batch = r.batch;
  a.seq = r.seq;
  a.hidden_size = r.hidden;
  a.cls = r.cls;
  a.last = r.last;
  a.normalize = r.normalize;
  return StepPtr(new PoolStep(a));
}

class SoftmaxStep final : public CudaStep {
 public:
  explicit SoftmaxStep(cuda::SoftmaxArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::SoftmaxArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Softmax(a, env.stream), "softmax");
  }

 private:
  cuda::SoftmaxArgs a_;
};

absl::StatusOr<StepPtr> PrepareSoftmax(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const SoftmaxRule r, CheckSoftmax(c));
  if (r.rows > 0x7fffffff) return c.Err("rows %d exceeds the grid", r.rows);
  cuda::SoftmaxArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.rows = r.rows;
  a.n = r.n;
  return StepPtr(new SoftmaxStep(a));
}

// Kernels whose prepare lives in cuda_steps_movement.cc and cuda_steps_packed.cc.
template <const char* kId>
absl::StatusOr<StepPtr> Movement(const StepChecker& c) {
  return PrepareCudaMovement(kId, c);
}
template <const char* kId>
absl::StatusOr<StepPtr> Packed(const StepChecker& c) {
  return PrepareCudaPacked(kId, c);
}
constexpr char kPackedAttention[] = "packed_attention",
               kPackedFlashAttention[] = "packed_flash_attention", kPackedPool[] = "packed_pool",
               kPackedPositions[] = "packed_positions", kPackedCumSum[] = "packed_cumsum";
constexpr char kCopy[] = "copy", kEltwise[] = "eltwise", kGelu[] = "gelu",
               kTranspose[] = "transpose", kSlice[] = "slice", kExpand[] = "expand",
               kConcat[] = "concat", kGather[] = "gather", kGatherNd[] = "gather_nd",
               kGatherElements[] = "gather_elements", kCumSum[] = "cumsum", kReduce[] = "reduce",
               kPad[] = "pad";

struct Entry {
  std::string_view id;
  CudaPrepareFn prepare;
};
constexpr Entry kTable[] = {
    {"copy", Movement<kCopy>},
    {"linear", PrepareLinear},
    {"matmul", PrepareMatMul},
    {"layer_norm", PrepareLayerNorm},
    {"skip_layer_norm", PrepareSkipLayerNorm},
    {"skip_rms_norm", PrepareSkipRmsNorm},
    {"rotary", PrepareRotary},
    {"rms_norm", PrepareRmsNorm},
    {"attention", PrepareAttention},
    {"head_attention", PrepareHeadAttention},
    {"flash_attention", PrepareFlashAttention},
    {"embed_layer_norm", PrepareEmbed},
    {"pool", PreparePool},
    {"gelu", Movement<kGelu>},
    {"glu", PrepareGlu},
    {"softmax", PrepareSoftmax},
    {"eltwise", Movement<kEltwise>},
    {"transpose", Movement<kTranspose>},
    {"slice", Movement<kSlice>},
    {"expand", Movement<kExpand>},
    {"concat", Movement<kConcat>},
    {"gather", Movement<kGather>},
    {"gather_nd", Movement<kGatherNd>},
    {"gather_elements", Movement<kGatherElements>},
    {"cumsum", Movement<kCumSum>},
    {"reduce", Movement<kReduce>},
    {"packed_attention", Packed<kPackedAttention>},
    {"packed_flash_attention", Packed<kPackedFlashAttention>},
    {"packed_pool", Packed<kPackedPool>},
    {"packed_positions", Packed<kPackedPositions>},
    {"packed_cumsum", Packed<kPackedCumSum>},
    {"cache_write", PrepareCudaCacheWrite},
    {"tensor_scatter", PrepareCudaTensorScatter},
    {"block_quant_linear", PrepareCudaBlockQuantLinear},
    {"quant_linear", PrepareCudaQuantLinear},
    {"block_quant_gather", PrepareCudaBlockQuantGather},
    {"pad", Movement<kPad>},
};

}  // namespace

CudaPrepareFn FindCudaKernel(std::string_view kernel) {
  for (const Entry& e : kTable)
    if (e.id == kernel) return e.prepare;
  return nullptr;
}

std::vector<std::string_view> CudaKernelIds() {
  std::vector<std::string_view> ids;
  for (const Entry& e : kTable) ids.push_back(e.id);
  return ids;
}

}  // namespace kiln::runtime
