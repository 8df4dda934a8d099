// The CPU kernel table (cpu_steps.h): one prepared-step class per kernel id of target cpu.
// Each Prepare applies the kernel's device-neutral rule (kernel_rules.h) to a step whose
// contract StepChecker already checked, and fills the kernel's Args; Run sets the operand
// pointers and calls kernels/cpu.
// ref steps: ref_step.cc.
#include "runtime/cpu/cpu_steps.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cache_write.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/cumsum.h"
#include "kernels/cpu/eltwise.h"
#include "kernels/cpu/embed_layer_norm.h"
#include "kernels/cpu/gather.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/rotary.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cpu/strided_copy.h"
#include "runtime/kernel_rules.h"

namespace kiln::runtime {
namespace {

using StepPtr = std::unique_ptr<CpuStep>;

class CopyStep final : public CpuStep {
 public:
  explicit CopyStep(int64_t bytes) : bytes_(bytes) {}
  absl::Status Run(const cpu::CpuContext&, const StepIo& io) const override {
    if (bytes_ > 0 && io.In(0) != io.Out(0)) std::memmove(io.Out(0), io.In(0), bytes_);
    return absl::OkStatus();
  }

 private:
  int64_t bytes_;
};

absl::StatusOr<StepPtr> PrepareCopy(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const CopyRule r, CheckCopy(c));
  return StepPtr(new CopyStep(r.bytes));
}

class LinearStep final : public CpuStep {
 public:
  LinearStep(const cpu::PackedLinear* linear, int64_t m, std::string impl)
      : linear_(linear), m_(m), impl_(std::move(impl)) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return linear_->Run(ctx, io.In<float>(0), m_, io.Out<float>(0));
  }
  std::string_view Impl() const override { return impl_; }

 private:
  const cpu::PackedLinear* linear_;
  int64_t m_;
  std::string impl_;
};

cpu::Activation ActivationOf(ActivationKind k) {
  switch (k) {
    case ActivationKind::kNone:
      return cpu::Activation::kNone;
    case ActivationKind::kGeluErf:
      return cpu::Activation::kGeluErf;
    case ActivationKind::kGeluTanh:
      return cpu::Activation::kGeluTanh;
    case ActivationKind::kRelu:
      return cpu::Activation::kRelu;
    case ActivationKind::kTanh:
      return cpu::Activation::kTanh;
  }
  return cpu::Activation::kNone;
}

absl::StatusOr<StepPtr> PrepareLinear(const StepChecker& c, CpuPrepareEnv& env) {
  KILN_ASSIGN_OR_RETURN(const LinearRule r, CheckLinear(c));
  const int64_t m = r.m, k = r.k, n = r.n;
  const bool trans_w = r.trans_w;
  const cpu::Activation activation = ActivationOf(r.activation);
  const PlanBuffer *w = c.In(1), *bias = c.In(2);
  const LinearKey key{w->offset, bias ? bias->offset : -1,    k, n,
                      trans_w,   static_cast<int>(activation)};
  auto it = env.linears.find(key);
  if (it == env.linears.end()) {
    const uint8_t* blob = c.plan().weights.data();
    const float* bp = bias ? reinterpret_cast<const float*>(blob + bias->offset) : nullptr;
    // Borrowed: the plan's weights outlive the executor's PackedLinears (plan_ is held by
    // the Executor base, destroyed after them), so no plain copy of every weight is kept.
    cpu::LinearDesc desc{k, n, trans_w, activation};
    desc.bf16_weights = r.weight_dtype == DType::kBF16;
    auto packed = cpu::PackedLinear::Create(desc, blob + w->offset, bp, env.ctx,
                                            std::max<int64_t>(m, 1), /*borrow_weights=*/true);
    if (!packed.ok()) return c.Err("prepacking the weights: %s", packed.status().message());
    it = env.linears.emplace(key, *std::move(packed)).first;
  }
  // Create the oneDNN primitive for this bucket's m now, not on the first run.
  std::string impl;
  if (m > 0) {
    auto name = it->second->ImplName(env.ctx, m);
    if (!name.ok()) return c.Err("preparing m=%d: %s", m, name.status().message());
    impl = *std::move(name);
  }
  return StepPtr(new LinearStep(it->second.get(), m, std::move(impl)));
}

// conv: oneDNN's convolution (kernels/cpu/conv.h), one primitive per step (its shapes are
// the bucket's), the weights reordered at prepare.
class ConvStep final : public CpuStep {
 public:
  explicit ConvStep(std::unique_ptr<cpu::PackedConv> conv)
      : conv_(std::move(conv)), impl_(conv_->ImplName()) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return conv_->Run(ctx, io.In<float>(0), io.Out<float>(0));
  }
  std::string_view Impl() const override { return impl_; }

 private:
  std::unique_ptr<cpu::PackedConv> conv_;
  std::string impl_;
};

absl::StatusOr<StepPtr> PrepareConv(const StepChecker& c, CpuPrepareEnv& env) {
  KILN_ASSIGN_OR_RETURN(const ConvRule r, CheckConv(c));
  const uint8_t* blob = c.plan().weights.data();
  const PlanBuffer *w = c.In(1), *bias = c.In(2);
  const cpu::ConvDesc d{.batch = r.batch,
                        .in_ch = r.in_ch,
                        .in_h = r.in_h,
                        .in_w = r.in_w,
                        .out_ch = r.out_ch,
                        .out_h = r.out_h,
                        .out_w = r.out_w,
                        .k_h = r.k_h,
                        .k_w = r.k_w,
                        .group = r.group,
                        .stride_h = r.stride_h,
                        .stride_w = r.stride_w,
                        .dil_h = r.dil_h,
                        .dil_w = r.dil_w,
                        .pad_top = r.pad_top,
                        .pad_left = r.pad_left,
                        .pad_bottom = r.pad_bottom,
                        .pad_right = r.pad_right};
  auto conv = cpu::PackedConv::Create(
      d, reinterpret_cast<const float*>(blob + w->offset),
      bias ? reinterpret_cast<const float*>(blob + bias->offset) : nullptr, env.ctx);
  if (!conv.ok()) return c.Err("preparing the convolution: %s", conv.status().message());
  return StepPtr(new ConvStep(*std::move(conv)));
}

// quant_linear: kiln's int8 GEMM (kernels/cpu/qgemm.h), weights packed once per plan.
class QuantLinearStep final : public CpuStep {
 public:
  QuantLinearStep(const cpu::QuantGemm* gemm, int64_t m, int activation)
      : gemm_(gemm), m_(m), activation_(activation), impl_(gemm->ImplName()) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return gemm_->Run(ctx, io.In<float>(0), m_, io.Out<float>(0), activation_);
  }
  std::string_view Impl() const override { return impl_; }

 private:
  const cpu::QuantGemm* gemm_;
  int64_t m_;
  int activation_;
  std::string impl_;
};

absl::StatusOr<StepPtr> PrepareQuantLinear(const StepChecker& c, CpuPrepareEnv& env) {
  KILN_ASSIGN_OR_RETURN(const QuantLinearRule r, CheckQuantLinear(c));
  const PlanBuffer *w = c.In(1), *scale = c.In(2), *bias = c.In(3), *mul = c.In(4);
  const QuantKey key{
      w->offset, scale->offset, bias ? bias->offset : -1, mul ? mul->offset : -1, r.k,
      r.n,       r.x_absmax};
  auto it = env.quant_linears.find(key);
  if (it == env.quant_linears.end()) {
    const uint8_t* blob = c.plan().weights.data();
    auto packed = cpu::QuantGemm::Pack(
        env.ctx.isa, r.k, r.n, reinterpret_cast<const int8_t*>(blob + w->offset),
        reinterpret_cast<const float*>(blob + scale->offset),
        bias ? reinterpret_cast<const float*>(blob + bias->offset) : nullptr,
        mul ? reinterpret_cast<const float*>(blob + mul->offset) : nullptr, r.x_absmax);
    if (!packed.ok()) return c.Err("packing the int8 weights: %s", packed.status().message());
    it = env.quant_linears.emplace(key, *std::move(packed)).first;
  }
  return StepPtr(
      new QuantLinearStep(it->second.get(), r.m, static_cast<int>(ActivationOf(r.activation))));
}

// block_quant_linear: kiln's int4/int8 weight-only GEMM (kernels/cpu/blockq_gemm.h), weights
// packed once per plan.
class BlockQuantLinearStep final : public CpuStep {
 public:
  BlockQuantLinearStep(const cpu::BlockQuantGemm* gemm, int64_t m, int activation)
      : gemm_(gemm), m_(m), activation_(activation), impl_(gemm->ImplName()) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return gemm_->Run(ctx, io.In<float>(0), m_, io.Out<float>(0), activation_);
  }
  std::string_view Impl() const override { return impl_; }

 private:
  const cpu::BlockQuantGemm* gemm_;
  int64_t m_;
  int activation_;
  std::string impl_;
};

absl::StatusOr<StepPtr> PrepareBlockQuantLinear(const StepChecker& c, CpuPrepareEnv& env) {
  KILN_ASSIGN_OR_RETURN(const BlockQuantLinearRule r, CheckBlockQuantLinear(c));
  const PlanBuffer *w = c.In(1), *scales = c.In(2), *zp = c.In(3), *bias = c.In(4);
  const cpu::CodeLayout layout = r.bits == 8            ? cpu::CodeLayout::kEightBit
                                 : r.two_codes_per_byte ? cpu::CodeLayout::kTwoPerByte
                                                        : cpu::CodeLayout::kOnePerByte;
  const BlockQuantKey key{
      w->offset,    scales->offset, zp ? zp->offset : -1, bias ? bias->offset : -1, r.k, r.n,
      r.block_size, layout};
  auto it = env.block_quant_linears.find(key);
  if (it == env.block_quant_linears.end()) {
    const uint8_t* blob = c.plan().weights.data();
    const bool int_zp = zp != nullptr && !r.float_zero_points;
    auto packed = cpu::BlockQuantGemm::Pack(
        env.ctx.isa, r.k, r.n, r.block_size, blob + w->offset,
        reinterpret_cast<const float*>(blob + scales->offset), int_zp ? blob + zp->offset : nullptr,
        bias ? reinterpret_cast<const float*>(blob + bias->offset) : nullptr, layout,
        r.float_zero_points ? reinterpret_cast<const float*>(blob + zp->offset) : nullptr);
    if (!packed.ok())
      return c.Err("packing the %d-bit weights: %s", r.bits, packed.status().message());
    it = env.block_quant_linears.emplace(key, *std::move(packed)).first;
  }
  return StepPtr(new BlockQuantLinearStep(it->second.get(), r.m,
                                          static_cast<int>(ActivationOf(r.activation))));
}

// matmul: one oneDNN batched matmul (primitive cached on first run); a broadcast `a` runs
// item by item (b is never broadcast with batch > 1: lowering folds a's batch into m).
class MatMulStep final : public CpuStep {
 public:
  explicit MatMulStep(MatMulRule r) : r_(r) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    if (r_.m == 0 || r_.n == 0) return absl::OkStatus();
    const float* a = io.In<float>(0);
    const float* b = io.In<float>(1);
    float* y = io.Out<float>(0);
    cpu::BatchedMatMulDesc d;
    d.m = r_.m;
    d.n = r_.n;
    d.k = r_.k;
    d.lda = r_.k;
    d.sa = r_.m * r_.k;
    d.ldb = r_.n;
    d.sb = r_.k * r_.n;
    d.ldc = r_.n;
    d.sc = r_.m * r_.n;
    if (!r_.broadcast_a && !r_.broadcast_b) {
      d.batch = r_.batch;
      return cpu::BatchedMatMul(ctx, d, a, b, y);
    }
    for (int64_t i = 0; i < r_.batch; ++i)
      KILN_RETURN_IF_ERROR(cpu::BatchedMatMul(ctx, d, r_.broadcast_a ? a : a + i * d.sa,
                                              r_.broadcast_b ? b : b + i * d.sb, y + i * d.sc));
    return absl::OkStatus();
  }

 private:
  MatMulRule r_;
};

absl::StatusOr<StepPtr> PrepareMatMul(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const MatMulRule r, CheckMatMul(c));
  return StepPtr(new MatMulStep(r));
}

struct LayerNormParams {
  int64_t rows = 0, h = 0;
  float eps = 0;
};

class LayerNormStep final : public CpuStep {
 public:
  explicit LayerNormStep(LayerNormParams p) : p_(p) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return cpu::LayerNorm(ctx, io.In<float>(0), io.In<float>(1), io.In<float>(2), p_.rows, p_.h,
                          p_.eps, io.Out<float>(0));
  }

 private:
  LayerNormParams p_;
};

class RmsNormStep final : public CpuStep {
 public:
  explicit RmsNormStep(LayerNormParams p) : p_(p) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return cpu::RmsNorm(ctx, io.In<float>(0), io.In<float>(1), p_.rows, p_.h, p_.eps,
                        io.Out<float>(0));
  }

 private:
  LayerNormParams p_;
};

// skip_layer_norm (x, skip, gamma, beta, bias) and skip_rms_norm (x, skip, gamma, bias).
class SkipNormStep final : public CpuStep {
 public:
  SkipNormStep(cpu::SkipLayerNormArgs a, bool has_sum) : a_(a), has_sum_(has_sum) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::SkipLayerNormArgs a = a_;
    a.x = io.In<float>(0);
    a.skip = io.In<float>(1);
    a.gamma = io.In<float>(2);
    a.beta = a.rms ? nullptr : io.In<float>(3);
    a.bias = io.In<float>(a.rms ? 3 : 4);
    a.y = io.Out<float>(0);
    a.sum = has_sum_ ? io.Out<float>(1) : nullptr;
    return cpu::SkipLayerNorm(ctx, a);
  }

 private:
  cpu::SkipLayerNormArgs a_;
  bool has_sum_;
};

absl::StatusOr<StepPtr> PrepareNorm(const StepChecker& c, bool skip, bool rms) {
  KILN_ASSIGN_OR_RETURN(const NormRule r, CheckNorm(c, skip, rms));
  if (!skip && rms) return StepPtr(new RmsNormStep({r.rows, r.h, r.eps}));
  if (!skip) return StepPtr(new LayerNormStep({r.rows, r.h, r.eps}));
  cpu::SkipLayerNormArgs a;
  a.skip_rows = r.skip_rows;
  a.rows = r.rows;
  a.h = r.h;
  a.eps = r.eps;
  a.rms = rms;
  return StepPtr(new SkipNormStep(a, r.has_sum));
}

absl::StatusOr<StepPtr> PrepareLayerNorm(const StepChecker& c, CpuPrepareEnv&) {
  return PrepareNorm(c, false, false);
}
absl::StatusOr<StepPtr> PrepareSkipLayerNorm(const StepChecker& c, CpuPrepareEnv&) {
  return PrepareNorm(c, true, false);
}
absl::StatusOr<StepPtr> PrepareRmsNorm(const StepChecker& c, CpuPrepareEnv&) {
  return PrepareNorm(c, false, true);
}
absl::StatusOr<StepPtr> PrepareSkipRmsNorm(const StepChecker& c, CpuPrepareEnv&) {
  return PrepareNorm(c, true, true);
}

class RotaryStep final : public CpuStep {
 public:
  explicit RotaryStep(cpu::RotaryArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::RotaryArgs a = a_;
    a.x = io.In<float>(0);
    a.cos = io.In<float>(1);
    a.sin = io.In<float>(2);
    a.y = io.Out<float>(0);
    return cpu::Rotary(ctx, a);
  }

 private:
  cpu::RotaryArgs a_;
};

absl::StatusOr<StepPtr> PrepareRotary(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const RotaryRule r, CheckRotary(c));
  cpu::RotaryArgs a;
  a.d = r.d;
  a.r = r.r;
  a.interleaved = r.interleaved;
  a.rows = r.rows;
  return StepPtr(new RotaryStep(a));
}

// The run's attention mask (`m`, null: none) of `dims` into `out`, whose dims vector keeps
// its capacity across runs.
void BindMask(const std::vector<int64_t>& dims, const void* m, bool is_bool,
              cpu::AttentionMask& out) {
  out.dims.assign(dims.begin(), dims.end());
  out.additive = nullptr;
  out.boolean = nullptr;
  if (m == nullptr) return;
  if (is_bool)
    out.boolean = static_cast<const uint8_t*>(m);
  else
    out.additive = static_cast<const float*>(m);
}

class AttentionStep final : public CpuStep {
 public:
  AttentionStep(cpu::MultiHeadAttentionArgs a, bool mask_bool)
      : a_(std::move(a)), mask_bool_(mask_bool) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    // Per thread, so the mask dims vector keeps its capacity: no allocation per run.
    thread_local cpu::MultiHeadAttentionArgs a;
    a = a_;  // the vector assignment reuses a.mask.dims' capacity
    BindMask(a_.mask.dims, io.In(1), mask_bool_, a.mask);
    a.rotary = a_.rotary;
    if (a.rotary.dim > 0) {
      a.rotary.cos = io.In<float>(2);
      a.rotary.sin = io.In<float>(3);
    }
    a.qkv = io.In<float>(0);
    a.y = io.Out<float>(0);
    return cpu::MultiHeadAttention(ctx, a);
  }
  // MultiHeadAttention creates (and caches process-wide) oneDNN primitives for its shape on
  // first use, ~20 ms for S = 128: pay that at Create, once per shape, not in the first Run.
  // Zero qkv without a mask; results are discarded. Shapes over 64 MiB of qkv are skipped.
  void WarmUp(const cpu::CpuContext& ctx, WarmUpSet& done) const override {
    if (!done.insert({a_.batch, a_.seq, a_.num_heads, a_.head_size}).second) return;
    const int64_t y_elems = a_.batch * a_.seq * a_.num_heads * a_.head_size;
    if (y_elems == 0 || y_elems > (int64_t{16} << 20) / 3) return;
    std::vector<float> qkv(static_cast<size_t>(3 * y_elems)), y(static_cast<size_t>(y_elems));
    cpu::MultiHeadAttentionArgs a;
    a.qkv = qkv.data();  // a grouped qkv ((N + 2·Nkv)·D per row) is smaller: fits
    a.batch = a_.batch;
    a.seq = a_.seq;
    a.num_heads = a_.num_heads;
    a.num_kv_heads = a_.num_kv_heads;
    a.head_size = a_.head_size;
    a.scale = a_.scale;
    a.causal = a_.causal;
    a.y = y.data();
    (void)cpu::MultiHeadAttention(ctx, a);  // a failure here shows again in Run
  }

 private:
  cpu::MultiHeadAttentionArgs a_;
  bool mask_bool_;
};

absl::StatusOr<StepPtr> PrepareAttention(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(AttentionRule r, CheckAttention(c));
  cpu::MultiHeadAttentionArgs a;
  a.batch = r.batch;
  a.seq = r.seq;
  a.num_heads = r.heads;
  a.num_kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  a.causal = r.causal;
  a.mask.dims = std::move(r.mask_dims);
  a.rotary.dim = r.rotary_dim;
  a.rotary.per_batch = r.rotary_per_batch;
  a.rotary.interleaved = r.rotary_interleaved;
  return StepPtr(new AttentionStep(std::move(a), r.mask_dtype == DType::kBool));
}

class HeadAttentionStep final : public CpuStep {
 public:
  HeadAttentionStep(cpu::AttentionArgs a, bool mask_bool)
      : a_(std::move(a)), mask_bool_(mask_bool) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    // Per thread, so the mask dims vector keeps its capacity: no allocation per run.
    thread_local cpu::AttentionArgs a;
    a = a_;  // the vector assignment reuses a.mask.dims' capacity
    BindMask(a_.mask.dims, io.In(3), mask_bool_, a.mask);
    a.q = io.In<float>(0);
    a.k = io.In<float>(1);
    a.v = io.In<float>(2);
    a.y = io.Out<float>(0);
    if (a.paged.block_size > 0) a.paged.table = io.In<int64_t>(4);
    return cpu::Attention(ctx, a);
  }

 private:
  cpu::AttentionArgs a_;
  bool mask_bool_;
};

absl::StatusOr<StepPtr> PrepareHeadAttention(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(HeadAttentionRule r, CheckHeadAttention(c));
  cpu::AttentionArgs a;
  a.batch = r.batch;
  a.seq = r.seq;
  a.kv_seq = r.kv_seq;
  a.num_heads = r.heads;
  a.num_kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  a.causal = r.causal;
  a.mask.dims = std::move(r.mask_dims);
  a.paged = {nullptr, r.paged.width, r.paged.block_size, r.paged.blocks};
  return StepPtr(new HeadAttentionStep(std::move(a), r.mask_dtype == DType::kBool));
}

class EmbedStep final : public CpuStep {
 public:
  EmbedStep(cpu::EmbedLayerNormArgs a, bool ids_i32) : a_(a), ids_i32_(ids_i32) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::EmbedLayerNormArgs a = a_;
    if (ids_i32_) {
      a.input_ids32 = io.In<int32_t>(0);
      a.segment_ids32 = io.In<int32_t>(1);
      a.position_ids32 = io.In<int32_t>(2);
    } else {
      a.input_ids = io.In<int64_t>(0);
      a.segment_ids = io.In<int64_t>(1);
      a.position_ids = io.In<int64_t>(2);
    }
    a.word = io.In<float>(3);
    a.pos = io.In<float>(4);
    a.segment = io.In<float>(5);
    a.gamma = io.In<float>(6);
    a.beta = io.In<float>(7);
    a.y = io.Out<float>(0);
    a.sum = has_sum_ ? io.Out<float>(1) : nullptr;
    return cpu::EmbedLayerNorm(ctx, a);
  }
  bool has_sum_ = false;

 private:
  cpu::EmbedLayerNormArgs a_;
  bool ids_i32_;
};

absl::StatusOr<StepPtr> PrepareEmbed(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const EmbedRule r, CheckEmbedLayerNorm(c));
  cpu::EmbedLayerNormArgs a;
  a.position_rows = r.position_rows;
  a.word_rows = r.word_rows;
  a.pos_rows = r.pos_rows;
  a.segment_rows = r.segment_rows;
  a.batch = r.batch;
  a.seq = r.seq;
  a.hidden = r.hidden;
  a.eps = r.eps;
  auto step = std::make_unique<EmbedStep>(a, r.ids_i32);
  step->has_sum_ = c.Out(1) != nullptr;
  return StepPtr(std::move(step));
}

class PoolStep final : public CpuStep {
 public:
  PoolStep(cpu::PoolArgs a, bool mask_i64) : a_(a), mask_i64_(mask_i64) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::PoolArgs a = a_;
    a.hidden = io.In<float>(0);
    if (mask_i64_)
      a.mask_i64 = io.In<int64_t>(1);
    else
      a.mask = io.In<float>(1);
    a.y = io.Out<float>(0);
    return cpu::Pool(ctx, a);
  }

 private:
  cpu::PoolArgs a_;
  bool mask_i64_;
};

absl::StatusOr<StepPtr> PreparePool(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const PoolRule r, CheckPool(c));
  cpu::PoolArgs a;
  a.batch = r.batch;
  a.seq = r.seq;
  a.hidden_size = r.hidden;
  a.mode = r.cls ? cpu::PoolMode::kCls : r.last ? cpu::PoolMode::kLast : cpu::PoolMode::kMean;
  a.normalize = r.normalize;
  return StepPtr(new PoolStep(a, r.mask_dtype == DType::kI64));
}

class PackedAttentionStep final : public CpuStep {
 public:
  explicit PackedAttentionStep(cpu::PackedAttentionArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::PackedAttentionArgs a = a_;
    a.qkv = io.In<float>(0);
    a.lengths = io.In<int64_t>(1);
    a.y = io.Out<float>(0);
    return cpu::PackedAttention(ctx, a);
  }

 private:
  cpu::PackedAttentionArgs a_;
};

absl::StatusOr<StepPtr> PreparePackedAttention(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const PackedAttentionRule r, CheckPackedAttention(c));
  cpu::PackedAttentionArgs a;
  a.tokens = r.tokens;
  a.sequences = r.sequences;
  a.num_heads = r.heads;
  a.num_kv_heads = r.kv_heads;
  a.head_size = r.head_size;
  a.scale = r.scale;
  return StepPtr(new PackedAttentionStep(a));
}

class PackedPoolStep final : public CpuStep {
 public:
  explicit PackedPoolStep(cpu::PackedPoolArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::PackedPoolArgs a = a_;
    a.hidden = io.In<float>(0);
    a.lengths = io.In<int64_t>(1);
    a.y = io.Out<float>(0);
    return cpu::PackedPool(ctx, a);
  }

 private:
  cpu::PackedPoolArgs a_;
};

absl::StatusOr<StepPtr> PreparePackedPool(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const PackedPoolRule r, CheckPackedPool(c));
  cpu::PackedPoolArgs a;
  a.tokens = r.tokens;
  a.sequences = r.sequences;
  a.hidden_size = r.hidden;
  a.mode = r.cls ? cpu::PoolMode::kCls : cpu::PoolMode::kMean;
  a.normalize = r.normalize;
  return StepPtr(new PackedPoolStep(a));
}

class PackedPositionsStep final : public CpuStep {
 public:
  explicit PackedPositionsStep(PackedPositionsRule r) : r_(r) {}
  absl::Status Run(const cpu::CpuContext&, const StepIo& io) const override {
    return cpu::PackedPositions(io.In<int64_t>(0), r_.sequences, r_.tokens, io.Out<int64_t>(0));
  }

 private:
  PackedPositionsRule r_;
};

absl::StatusOr<StepPtr> PreparePackedPositions(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const PackedPositionsRule r, CheckPackedPositions(c));
  return StepPtr(new PackedPositionsStep(r));
}

class PackedCumSumStep final : public CpuStep {
 public:
  explicit PackedCumSumStep(cpu::PackedCumSumArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::PackedCumSumArgs a = a_;
    a.x = io.In(0);
    a.lengths = io.In<int64_t>(1);
    a.y = io.Out(0);
    return cpu::PackedCumSum(ctx, a);
  }

 private:
  cpu::PackedCumSumArgs a_;
};

absl::StatusOr<StepPtr> PreparePackedCumSum(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const PackedCumSumRule r, CheckPackedCumSum(c));
  cpu::PackedCumSumArgs a;
  a.tokens = r.tokens;
  a.sequences = r.sequences;
  a.dtype = r.dtype;
  a.exclusive = r.exclusive;
  return StepPtr(new PackedCumSumStep(a));
}

class GeluStep final : public CpuStep {
 public:
  GeluStep(int64_t n, bool tanh) : n_(n), tanh_(tanh) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return cpu::Gelu(ctx, io.In<float>(0), n_, tanh_, io.Out<float>(0));
  }

 private:
  int64_t n_;
  bool tanh_;
};

absl::StatusOr<StepPtr> PrepareGelu(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const GeluRule r, CheckGelu(c));
  return StepPtr(new GeluStep(r.n, r.tanh));
}

class GluStep final : public CpuStep {
 public:
  GluStep(int64_t rows, int64_t f, cpu::GluActivation act) : rows_(rows), f_(f), act_(act) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return cpu::Glu(ctx, io.In<float>(0), rows_, f_, act_, io.Out<float>(0));
  }

 private:
  int64_t rows_, f_;
  cpu::GluActivation act_;
};

absl::StatusOr<StepPtr> PrepareGlu(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const GluRule r, CheckGlu(c));
  const cpu::GluActivation act = r.activation == "silu"   ? cpu::GluActivation::kSilu
                                 : r.activation == "gelu" ? cpu::GluActivation::kGelu
                                                          : cpu::GluActivation::kGeluTanh;
  return StepPtr(new GluStep(r.rows, r.f, act));
}

class SoftmaxStep final : public CpuStep {
 public:
  SoftmaxStep(int64_t rows, int64_t n) : rows_(rows), n_(n) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    return cpu::Softmax(ctx, io.In<float>(0), rows_, n_, io.Out<float>(0));
  }

 private:
  int64_t rows_, n_;
};

absl::StatusOr<StepPtr> PrepareSoftmax(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const SoftmaxRule r, CheckSoftmax(c));
  return StepPtr(new SoftmaxStep(r.rows, r.n));
}

class EltwiseStep final : public CpuStep {
 public:
  explicit EltwiseStep(cpu::EltwiseArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::EltwiseArgs a = a_;
    int k = 0;
    for (size_t i = 0; i < io.ops->in.size(); ++i)
      if (io.ops->in[i].slot != kNullSlot) a.in[k++] = io.In(i);
    a.y = io.Out(0);
    return cpu::Eltwise(ctx, a);
  }

 private:
  cpu::EltwiseArgs a_;
};

absl::StatusOr<StepPtr> PrepareEltwise(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const EltwiseRule r, CheckEltwise(c));
  cpu::EltwiseArgs a;
  a.op = r.op;
  a.domain = r.domain_kind;
  a.layout = r.layout;
  for (size_t i = 0; i < r.in_types.size(); ++i) a.in_type[i] = r.in_types[i];
  a.out_type = r.out_type;
  return StepPtr(new EltwiseStep(a));
}

// gather / gather_nd / gather_elements: data, indices -> y, every index checked by the
// kernel before it reads.
template <typename Args, absl::Status (*kFn)(const cpu::CpuContext&, const Args&)>
class IndexStep final : public CpuStep {
 public:
  explicit IndexStep(Args a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    Args a = a_;
    a.data = io.In(0);
    a.indices = io.In(1);
    a.y = io.Out(0);
    return kFn(ctx, a);
  }

 private:
  Args a_;
};

absl::StatusOr<StepPtr> PrepareGather(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const GatherRule r, CheckGather(c));
  cpu::GatherArgs a;
  a.idx_i32 = r.idx_i32;
  a.elem_size = r.elem_size;
  a.outer = r.outer;
  a.axis_dim = r.axis_dim;
  a.inner = r.inner;
  a.num_indices = r.num_indices;
  return StepPtr(new IndexStep<cpu::GatherArgs, cpu::Gather>(a));
}

// block_quant_gather: the table's codes, scales and zero points are weights; indices -> y.
class BlockQuantGatherStep final : public CpuStep {
 public:
  explicit BlockQuantGatherStep(cpu::BlockQuantGatherArgs a, bool has_zp, bool float_zp)
      : a_(a), has_zp_(has_zp), float_zp_(float_zp) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::BlockQuantGatherArgs a = a_;
    a.codes = static_cast<const uint8_t*>(io.In(0));
    a.indices = io.In(1);
    a.scales = static_cast<const float*>(io.In(2));
    if (has_zp_ && float_zp_) a.float_zero_points = static_cast<const float*>(io.In(3));
    if (has_zp_ && !float_zp_) a.zero_points = static_cast<const uint8_t*>(io.In(3));
    a.y = static_cast<float*>(io.Out(0));
    return cpu::BlockQuantGather(ctx, a);
  }

 private:
  cpu::BlockQuantGatherArgs a_;
  bool has_zp_, float_zp_;
};

absl::StatusOr<StepPtr> PrepareBlockQuantGather(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const BlockQuantGatherRule r, CheckBlockQuantGather(c));
  cpu::BlockQuantGatherArgs a;
  a.idx_i32 = r.idx_i32;
  a.bits = r.bits;
  a.one_code_per_byte = !r.two_codes_per_byte;
  a.table_rows = r.n;
  a.k = r.k;
  a.block_size = r.block_size;
  a.num_indices = r.rows;
  return StepPtr(new BlockQuantGatherStep(a, r.has_zero_points, r.float_zero_points));
}

absl::StatusOr<StepPtr> PrepareGatherND(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const GatherNDRule r, CheckGatherND(c));
  cpu::GatherNDArgs a;
  a.idx_i32 = r.idx_i32;
  a.elem_size = r.elem_size;
  a.batch = r.batch;
  a.batch_stride = r.batch_stride;
  a.tuples = r.tuples;
  a.slice = r.slice;
  a.k = r.k;
  std::copy(r.dims, r.dims + r.k, a.dims);
  std::copy(r.strides, r.strides + r.k, a.strides);
  return StepPtr(new IndexStep<cpu::GatherNDArgs, cpu::GatherND>(a));
}

absl::StatusOr<StepPtr> PrepareGatherElements(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const GatherElementsRule r, CheckGatherElements(c));
  cpu::GatherElementsArgs a;
  a.idx_i32 = r.idx_i32;
  a.elem_size = r.elem_size;
  a.rank = r.rank;
  a.axis = r.axis;
  std::copy(r.idx_dims, r.idx_dims + r.rank, a.idx_dims);
  std::copy(r.data_strides, r.data_strides + r.rank, a.data_strides);
  a.axis_dim = r.axis_dim;
  a.n = r.n;
  return StepPtr(new IndexStep<cpu::GatherElementsArgs, cpu::GatherElements>(a));
}

class CumSumStep final : public CpuStep {
 public:
  explicit CumSumStep(cpu::CumSumArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::CumSumArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    return cpu::CumSum(ctx, a);
  }

 private:
  cpu::CumSumArgs a_;
};

absl::StatusOr<StepPtr> PrepareCumSum(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const CumSumRule r, CheckCumSum(c));
  cpu::CumSumArgs a;
  a.dtype = r.dtype;
  a.outer = r.outer;
  a.len = r.len;
  a.inner = r.inner;
  a.exclusive = r.exclusive;
  a.reverse = r.reverse;
  return StepPtr(new CumSumStep(a));
}

class CacheWriteStep final : public CpuStep {
 public:
  explicit CacheWriteStep(cpu::CacheWriteArgs a) : a_(a) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    cpu::CacheWriteArgs a = a_;
    a.cache = io.In(0);
    a.rows = io.In(1);
    a.positions = static_cast<const int64_t*>(io.In(2));
    a.y = io.Out(0);
    if (a.paged.block_size > 0) a.paged.table = static_cast<const int64_t*>(io.In(3));
    return cpu::CacheWrite(ctx, a);
  }

 private:
  cpu::CacheWriteArgs a_;
};

absl::StatusOr<StepPtr> PrepareCacheWrite(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(const CacheWriteRule r, CheckCacheWrite(c));
  cpu::CacheWriteArgs a;
  a.batch = r.batch;
  a.heads = r.heads;
  a.slots = r.slots;
  a.seq = r.seq;
  a.row_bytes = static_cast<size_t>(r.row) * r.elem_size;
  a.paged = {nullptr, r.paged.width, r.paged.block_size, r.paged.blocks};
  return StepPtr(new CacheWriteStep(a));
}

// transpose / slice / expand / concat: the shared rule's boxes, box i from input i for a
// concat, from input 0 otherwise.
class StridedStep final : public CpuStep {
 public:
  explicit StridedStep(StridedCopyRule r, bool per_input)
      : r_(std::move(r)), per_input_(per_input) {}
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override {
    for (size_t i = 0; i < r_.boxes.size(); ++i)
      KILN_RETURN_IF_ERROR(
          cpu::StridedCopy(ctx, r_.boxes[i], r_.elem_size, io.In(per_input_ ? i : 0), io.Out(0)));
    return absl::OkStatus();
  }

 private:
  StridedCopyRule r_;
  bool per_input_;
};

absl::StatusOr<StepPtr> PrepareStrided(const StepChecker& c, CpuPrepareEnv&) {
  KILN_ASSIGN_OR_RETURN(StridedCopyRule r, CheckStridedCopy(c));
  return StepPtr(new StridedStep(std::move(r), c.step().kernel == "concat"));
}

struct Entry {
  std::string_view id;
  CpuPrepareFn prepare;
};
constexpr Entry kTable[] = {
    {"copy", PrepareCopy},
    {"ref", PrepareRef},
    {"linear", PrepareLinear},
    {"conv", PrepareConv},
    {"quant_linear", PrepareQuantLinear},
    {"block_quant_linear", PrepareBlockQuantLinear},
    {"matmul", PrepareMatMul},
    {"layer_norm", PrepareLayerNorm},
    {"skip_layer_norm", PrepareSkipLayerNorm},
    {"rms_norm", PrepareRmsNorm},
    {"skip_rms_norm", PrepareSkipRmsNorm},
    {"rotary", PrepareRotary},
    {"attention", PrepareAttention},
    {"head_attention", PrepareHeadAttention},
    {"embed_layer_norm", PrepareEmbed},
    {"pool", PreparePool},
    {"packed_attention", PreparePackedAttention},
    {"packed_pool", PreparePackedPool},
    {"packed_positions", PreparePackedPositions},
    {"packed_cumsum", PreparePackedCumSum},
    {"eltwise", PrepareEltwise},
    {"gather", PrepareGather},
    {"block_quant_gather", PrepareBlockQuantGather},
    {"gather_nd", PrepareGatherND},
    {"gather_elements", PrepareGatherElements},
    {"cumsum", PrepareCumSum},
    {"cache_write", PrepareCacheWrite},
    {"gelu", PrepareGelu},
    {"glu", PrepareGlu},
    {"softmax", PrepareSoftmax},
    {"transpose", PrepareStrided},
    {"slice", PrepareStrided},
    {"expand", PrepareStrided},
    {"concat", PrepareStrided},
};

}  // namespace

CpuPrepareFn FindCpuKernel(std::string_view kernel) {
  for (const Entry& e : kTable)
    if (e.id == kernel) return e.prepare;
  return nullptr;
}

std::vector<std::string_view> CpuKernelIds() {
  std::vector<std::string_view> ids;
  for (const Entry& e : kTable) ids.push_back(e.id);
  return ids;
}

}  // namespace kiln::runtime
