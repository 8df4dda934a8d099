// The CUDA kernel table's quantized ops (cuda_steps.h): block_quant_linear (int4/int8
// weight-only, MatMulNBits; kernels/cuda/block_quant.h), block_quant_gather (rows of such a
// table: a tied model's int4 embeddings) and quant_linear (an int8 plan's s8 × s8 GEMM;
// kernels/cuda/quant_linear.h).
#include "absl/strings/str_cat.h"
#include "kernels/cuda/block_quant.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/quant_linear.h"
#include "runtime/cuda/cuda_steps.h"
#include "runtime/cuda/cuda_util.h"

namespace kiln::runtime {
namespace {

using StepPtr = std::unique_ptr<CudaStep>;

// Points a quantized table's Args (codes, scales, zero points: block_quant_linear's and
// block_quant_gather's) into the uploaded weights; offset -1: absent.
template <typename Args>
void SetTable(Args& a, const std::byte* weights, int64_t w, int64_t scales, int64_t zp,
              bool float_zp) {
  a.codes = reinterpret_cast<const uint8_t*>(weights + w);
  a.scales = reinterpret_cast<const float*>(weights + scales);
  if (zp >= 0 && float_zp)
    a.float_zero_points = reinterpret_cast<const float*>(weights + zp);
  else if (zp >= 0)
    a.zero_points = reinterpret_cast<const uint8_t*>(weights + zp);
}

class BlockQuantStep final : public CudaStep {
 public:
  BlockQuantStep(cuda::BlockQuantArgs a, int64_t w, int64_t scales, int64_t zp, bool float_zp,
                 int64_t bias)
      : a_(a), w_(w), scales_(scales), zp_(zp), bias_(bias), float_zp_(float_zp) {}
  absl::Status Init(const CudaInitEnv& env) override {
    SetTable(a_, env.weights, w_, scales_, zp_, float_zp_);
    a_.bias = bias_ >= 0 ? env.weights + bias_ : nullptr;
    return absl::OkStatus();
  }
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::BlockQuantArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    return LaunchStatus(cuda::BlockQuantLinear(a, env.stream), "block_quant_linear");
  }

 private:
  cuda::BlockQuantArgs a_;
  int64_t w_, scales_, zp_, bias_;  // offsets in the weights blob (-1: absent)
  bool float_zp_;                   // zp_ holds f32 zero points
};

// quant_linear: QuantizeRows into the scratch, the s8 GEMM (cuBLASLt, s32 sums into the
// scratch), QuantEpilogue into y.
class QuantLinearStep final : public CudaStep {
 public:
  QuantLinearStep(const QuantLinearRule& r, cuda::ElemType dtype, cuda::QuantScratch scratch,
                  int64_t w, uint32_t w_align, int64_t w_scale, int64_t bias, int64_t x_mul)
      : r_(r),
        dtype_(dtype),
        scratch_(scratch),
        w_(w),
        w_align_(w_align),
        w_scale_(w_scale),
        bias_(bias),
        x_mul_(x_mul) {}

  absl::Status Init(const CudaInitEnv& env) override {
    weights_ = env.weights;
    cuda::GemmDesc d;
    d.dtype = cuda::ElemType::kI8;
    d.m = r_.m;
    d.n = r_.n;
    d.k = r_.k;
    d.trans_w = true;
    d.align_x = 256;  // q and the sums sit at 256-byte offsets of the scratch
    d.align_y = 256;
    d.align_w = w_align_;
    const cublasStatus_t s = gemm_.Init(env.lt, d, env.workspace_bytes);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED)
      return absl::FailedPreconditionError(absl::StrCat(
          "cuBLASLt has no int8 GEMM for m ", r_.m, ", n ", r_.n, ", k ", r_.k,
          " with the weights ", w_align_, "-byte aligned on this device (sm_", env.sm, ")"));
    return CublasStatus(s, "cuBLASLt: choosing the int8 GEMM's algorithm");
  }

  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    if (r_.m == 0) return absl::OkStatus();  // no rows (and no scratch)
    if (env.scratch == nullptr || env.scratch_bytes < scratch_.bytes)
      return absl::InternalError("quant_linear: the run slot's scratch is smaller than its need");
    auto* q = reinterpret_cast<int8_t*>(env.scratch);
    auto* sx = reinterpret_cast<float*>(env.scratch + scratch_.sx);
    auto* acc = reinterpret_cast<int32_t*>(env.scratch + scratch_.acc);
    cuda::QuantRowsArgs qa;
    qa.dtype = dtype_;
    qa.x = io.In(0);
    qa.x_mul = x_mul_ >= 0 ? reinterpret_cast<const float*>(weights_ + x_mul_) : nullptr;
    qa.q = q;
    qa.sx = sx;
    qa.m = r_.m;
    qa.k = r_.k;
    qa.x_absmax = r_.x_absmax;
    KILN_RETURN_IF_ERROR(
        LaunchStatus(cuda::QuantizeRows(qa, env.stream), "quant_linear's quantizer"));
    KILN_RETURN_IF_ERROR(CublasStatus(gemm_.Run(env.lt, q, weights_ + w_, nullptr, acc,
                                                env.workspace, env.workspace_bytes, env.stream),
                                      "cuBLASLt matmul (quant_linear, int8)"));
    cuda::QuantEpilogueArgs ea;
    ea.dtype = dtype_;
    ea.acc = acc;
    ea.sx = sx;
    ea.w_scale = reinterpret_cast<const float*>(weights_ + w_scale_);
    ea.bias = bias_ >= 0 ? reinterpret_cast<const float*>(weights_ + bias_) : nullptr;
    ea.y = io.Out(0);
    ea.m = r_.m;
    ea.n = r_.n;
    ea.act = LinearActOf(r_.activation);
    return LaunchStatus(cuda::QuantEpilogue(ea, env.stream), "quant_linear's epilogue");
  }

  int64_t ScratchBytes() const override { return scratch_.bytes; }

 private:
  QuantLinearRule r_;
  cuda::ElemType dtype_;
  cuda::QuantScratch scratch_;
  int64_t w_;
  uint32_t w_align_;
  int64_t w_scale_, bias_, x_mul_;  // offsets in the weights blob (-1: absent)
  const std::byte* weights_ = nullptr;
  cuda::LtGemm gemm_;
};

class BlockQuantGatherStep final : public CudaStep {
 public:
  BlockQuantGatherStep(cuda::BlockQuantGatherArgs a, int64_t w, int64_t scales, int64_t zp,
                       bool float_zp)
      : a_(a), w_(w), scales_(scales), zp_(zp), float_zp_(float_zp) {}
  absl::Status Init(const CudaInitEnv& env) override {
    SetTable(a_, env.weights, w_, scales_, zp_, float_zp_);
    return absl::OkStatus();
  }
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::BlockQuantGatherArgs a = a_;
    a.indices = io.In(1);
    a.y = static_cast<float*>(io.Out(0));
    a.err = env.err;
    return LaunchStatus(cuda::BlockQuantGather(a, env.stream), "block_quant_gather");
  }
  const char* DataError() const override { return "an index is outside the table"; }

 private:
  cuda::BlockQuantGatherArgs a_;
  int64_t w_, scales_, zp_;  // offsets in the weights blob (-1: absent)
  bool float_zp_;
};

}  // namespace

absl::StatusOr<StepPtr> PrepareCudaBlockQuantGather(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const BlockQuantGatherRule r, CheckBlockQuantGather(c));
  if (r.rows > 0x7fffffff)
    return c.Err("rows %lld is beyond the kernel's grid (2^31 - 1 indices)",
                 static_cast<long long>(r.rows));
  cuda::BlockQuantGatherArgs a;
  a.idx_i32 = r.idx_i32;
  a.bits = r.bits;
  a.one_code_per_byte = !r.two_codes_per_byte;
  a.table_rows = r.n;
  a.k = r.k;
  a.block_size = r.block_size;
  a.num_indices = r.rows;
  return StepPtr(new BlockQuantGatherStep(a, c.In(0)->offset, c.In(2)->offset,
                                          c.In(3) ? c.In(3)->offset : -1, r.float_zero_points));
}

absl::StatusOr<StepPtr> PrepareCudaBlockQuantLinear(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const BlockQuantLinearRule r, CheckBlockQuantLinear(c));
  // As the CPU kernel's packing: a 4-bit code or zero point above 15 is a malformed plan
  // (the kernel would read only its low nibble).
  const uint8_t* blob = c.plan().weights.data();
  const PlanBuffer *w = c.In(1), *zp = c.In(3);
  for (const PlanBuffer* b :
       {r.two_codes_per_byte ? nullptr : w, r.float_zero_points ? nullptr : zp}) {
    if (b == nullptr || r.bits == 8) continue;
    const uint8_t* p = blob + b->offset;
    for (int64_t i = 0; i < b->bytes; ++i)
      if (p[i] > 15) return c.Err("a 4-bit code is %d at byte %d", int{p[i]}, i);
  }
  cuda::BlockQuantArgs a;
  a.dtype = ElemTypeOf(c.In(0)->dtype);
  a.m = r.m;
  a.k = r.k;
  a.n = r.n;
  a.block_size = r.block_size;
  a.bits = r.bits;
  a.one_code_per_byte = !r.two_codes_per_byte;
  a.act = LinearActOf(r.activation);
  return StepPtr(new BlockQuantStep(a, w->offset, c.In(2)->offset, zp ? zp->offset : -1,
                                    r.float_zero_points, c.In(4) ? c.In(4)->offset : -1));
}

absl::StatusOr<StepPtr> PrepareCudaQuantLinear(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const QuantLinearRule r, CheckQuantLinear(c));
  if (r.k % 4 != 0 || r.n % 4 != 0)
    return c.Err("k %lld and n %lld must be multiples of 4 (cuBLASLt's int8 GEMMs)",
                 static_cast<long long>(r.k), static_cast<long long>(r.n));
  if (r.m > 0x7fffffff)
    return c.Err("m %lld is beyond the quantizer's grid (2^31 - 1 rows)",
                 static_cast<long long>(r.m));
  // As the cpu kernel's packing: int8 weights are symmetric (a -128 is a malformed plan).
  const PlanBuffer* w = c.In(1);
  if (PointerAlignment(*w) < 4)
    return c.Err("w at weight offset %lld is not 4-byte aligned (cuBLASLt's int8 GEMMs)",
                 static_cast<long long>(w->offset));
  const auto* codes = reinterpret_cast<const int8_t*>(c.plan().weights.data() + w->offset);
  for (int64_t i = 0; i < w->bytes; ++i)
    if (codes[i] == -128)
      return c.Err("weight %lld is -128: int8 weights are symmetric, in [-127, 127]",
                   static_cast<long long>(i));
  cuda::QuantScratch scratch;
  if (!cuda::QuantScratchLayout(r.m, r.k, r.n, &scratch))
    return c.Err("its scratch (m·k bytes and m·n sums) overflows");
  return StepPtr(new QuantLinearStep(
      r, ElemTypeOf(c.In(0)->dtype), scratch, w->offset, PointerAlignment(*w), c.In(2)->offset,
      c.In(3) ? c.In(3)->offset : -1, c.In(4) ? c.In(4)->offset : -1));
}

}  // namespace kiln::runtime
