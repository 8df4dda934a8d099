// The CUDA kernel table's data-movement and elementwise half (cuda_steps.h): eltwise and
// gelu (the eltwise kernel), copy, transpose / slice / expand / concat (strided copies),
// the gathers, cumsum, reduce and pad. Every rule here checks, on the host, that each element
// the kernel will touch lies inside its buffer — only data (gathered indices, divisors) is
// checked on the device.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "absl/strings/str_join.h"
#include "kernels/cuda/eltwise.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/reduce.h"
#include "plan/eltwise_ops.h"
#include "runtime/cuda/cuda_steps.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/kernel_rules.h"

namespace kiln::runtime {
namespace {

using StepPtr = std::unique_ptr<CudaStep>;
using Dims = std::vector<int64_t>;

Dims Strides(const Dims& d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

int64_t Elems(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// ---- eltwise and gelu --------------------------------------------------------------------

class EltwiseStep final : public CudaStep {
 public:
  explicit EltwiseStep(cuda::EltwiseArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::EltwiseArgs a = a_;
    int k = 0;
    for (size_t i = 0; i < io.ops->in.size(); ++i)
      if (io.ops->in[i].slot != kNullSlot) a.in[k++].data = io.In(i);
    a.y = io.Out(0);
    a.err = env.err;
    return LaunchStatus(cuda::Eltwise(a, env.stream), "eltwise");
  }
  const char* DataError() const override { return "an integer division by zero"; }

 private:
  cuda::EltwiseArgs a_;
};

absl::StatusOr<StepPtr> PrepareEltwise(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const EltwiseRule r, CheckEltwise(c));
  cuda::EltwiseArgs a;
  a.op = r.op;
  a.domain = r.domain_kind;
  const kernels::BroadcastLayout& l = r.layout;
  a.rank = l.rank;
  a.n = l.n;
  a.contiguous = l.contiguous;
  a.num_inputs = l.num_inputs;
  for (int j = 0; j < cuda::kMaxRank; ++j) a.dims[j] = l.dims[j];
  for (size_t i = 0; i < r.in_types.size(); ++i) {
    a.in[i].type = ElemTypeOf(r.in_types[i]);
    for (int j = 0; j < cuda::kMaxRank; ++j) a.in[i].strides[j] = l.strides[i][j];
  }
  a.out_type = ElemTypeOf(r.out_type);
  return StepPtr(new EltwiseStep(a));
}

absl::StatusOr<StepPtr> PrepareGelu(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const GeluRule r, CheckGelu(c));
  cuda::EltwiseArgs a;
  a.op = r.tanh ? cuda::EltOp::kGeluTanh : cuda::EltOp::kGelu;
  a.domain = cuda::EltDomainKind::kF32;
  if (!cuda::EltwiseLayout({r.n}, {{r.n}}, &a)) return c.Err("gelu layout");
  a.in[0].type = a.out_type = ElemTypeOf(c.In(0)->dtype);
  return StepPtr(new EltwiseStep(a));
}

// ---- copies ------------------------------------------------------------------------------

class CopyStep final : public CudaStep {
 public:
  explicit CopyStep(int64_t bytes) : bytes_(bytes) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    if (bytes_ == 0 || io.In(0) == io.Out(0)) return absl::OkStatus();
    return CudaStatus(cudaMemcpyAsync(io.Out(0), io.In(0), static_cast<size_t>(bytes_),
                                      cudaMemcpyDeviceToDevice, env.stream),
                      "copy");
  }

 private:
  int64_t bytes_;
};

absl::StatusOr<StepPtr> PrepareCopy(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const CopyRule r, CheckCopy(c));
  return StepPtr(new CopyStep(r.bytes));
}

// One or more strided copies (concat: one per input).
class StridedStep final : public CudaStep {
 public:
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    for (size_t i = 0; i < copies_.size(); ++i) {
      cuda::StridedCopyArgs a = copies_[i];
      a.src = io.In(i);
      a.dst = io.Out(0);
      KILN_RETURN_IF_ERROR(LaunchStatus(cuda::StridedCopy(a, env.stream), "strided copy"));
    }
    return absl::OkStatus();
  }
  std::vector<cuda::StridedCopyArgs> copies_;
};

// transpose / slice / expand / concat: the shared rule's boxes (kernel_rules.h), one launch
// each.
absl::StatusOr<StepPtr> PrepareStrided(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const StridedCopyRule r, CheckStridedCopy(c));
  auto step = std::make_unique<StridedStep>();
  for (const kernels::CopyBox& b : r.boxes)
    step->copies_.push_back(cuda::StridedCopyFromBox(b, static_cast<int>(r.elem_size)));
  return StepPtr(std::move(step));
}

// pad: the value everywhere, then x into its box of y (kernel_rules.h's PadRule).
class PadStep final : public CudaStep {
 public:
  PadStep(cuda::StridedCopyArgs copy, int64_t y_elems, uint64_t bits)
      : copy_(copy), y_elems_(y_elems), bits_(bits) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    KILN_RETURN_IF_ERROR(LaunchStatus(
        cuda::Fill(io.Out(0), y_elems_, copy_.elem_size, bits_, env.stream), "pad (fill)"));
    cuda::StridedCopyArgs a = copy_;
    a.src = io.In(0);
    a.dst = io.Out(0);
    return LaunchStatus(cuda::StridedCopy(a, env.stream), "pad (copy)");
  }

 private:
  cuda::StridedCopyArgs copy_;
  int64_t y_elems_;
  uint64_t bits_;
};

absl::StatusOr<StepPtr> PreparePad(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const PadRule r, CheckPad(c));
  const DType dtype = c.Out(0)->dtype;
  const int elem = static_cast<int>(DTypeSize(dtype));
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8)
    return c.Err("pad: elements of %d bytes", elem);
  // The value in y's dtype, as the reference stores constant_value.
  Tensor v(dtype, {1});
  v.SetFromDouble(0, c.Float("value"));
  uint64_t bits = 0;
  std::memcpy(&bits, v.raw(), static_cast<size_t>(elem));
  cuda::StridedCopyArgs a;
  a.elem_size = elem;
  if (!cuda::CollapseCopy(r.dims, r.x_strides, r.y_strides, &a))
    return c.Err("pad: x %s is more than %d dims after merging", DimsStr(r.dims), cuda::kMaxRank);
  a.dst_offset = r.y_offset;
  return StepPtr(new PadStep(a, r.y_elems, bits));
}

// ---- gathers -----------------------------------------------------------------------------

template <typename Args, cudaError_t (*kFn)(const Args&, cudaStream_t)>
class IndexStep final : public CudaStep {
 public:
  explicit IndexStep(Args a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    Args a = a_;
    a.data = io.In(0);
    a.indices = io.In(1);
    a.y = io.Out(0);
    a.err = env.err;
    return LaunchStatus(kFn(a, env.stream), "gather");
  }
  const char* DataError() const override { return "an index is out of range"; }

 private:
  Args a_;
};

absl::StatusOr<StepPtr> PrepareGather(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const GatherRule r, CheckGather(c));
  cuda::GatherArgs a;
  a.idx_i32 = r.idx_i32;
  a.elem_size = static_cast<int>(r.elem_size);
  a.outer = r.outer;
  a.axis_dim = r.axis_dim;
  a.inner = r.inner;
  a.num_indices = r.num_indices;
  return StepPtr(new IndexStep<cuda::GatherArgs, cuda::Gather>(a));
}

static_assert(kMaxIndexRank == cuda::kMaxRank);

absl::StatusOr<StepPtr> PrepareGatherND(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const GatherNDRule r, CheckGatherND(c));
  cuda::GatherNDArgs a;
  a.idx_i32 = r.idx_i32;
  a.elem_size = static_cast<int>(r.elem_size);
  a.batch = r.batch;
  a.batch_stride = r.batch_stride;
  a.tuples = r.tuples;
  a.k = r.k;
  std::copy(r.dims, r.dims + r.k, a.dims);
  std::copy(r.strides, r.strides + r.k, a.strides);
  a.slice = r.slice;
  return StepPtr(new IndexStep<cuda::GatherNDArgs, cuda::GatherND>(a));
}

absl::StatusOr<StepPtr> PrepareGatherElements(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const GatherElementsRule r, CheckGatherElements(c));
  cuda::GatherElementsArgs a;
  a.idx_i32 = r.idx_i32;
  a.elem_size = static_cast<int>(r.elem_size);
  a.rank = r.rank;
  a.axis = r.axis;
  std::copy(r.idx_dims, r.idx_dims + r.rank, a.idx_dims);
  std::copy(r.data_strides, r.data_strides + r.rank, a.data_strides);
  a.axis_dim = r.axis_dim;
  a.n = r.n;
  return StepPtr(new IndexStep<cuda::GatherElementsArgs, cuda::GatherElements>(a));
}

// ---- cumsum, reduce ----------------------------------------------------------------------

class CumSumStep final : public CudaStep {
 public:
  explicit CumSumStep(cuda::CumSumArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::CumSumArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    return LaunchStatus(cuda::CumSum(a, env.stream), "cumsum");
  }

 private:
  cuda::CumSumArgs a_;
};

absl::StatusOr<StepPtr> PrepareCumSum(const StepChecker& c) {
  KILN_ASSIGN_OR_RETURN(const CumSumRule r, CheckCumSum(c));
  cuda::CumSumArgs a;
  a.type = ElemTypeOf(r.dtype);
  a.outer = r.outer;
  a.len = r.len;
  a.inner = r.inner;
  a.exclusive = r.exclusive;
  a.reverse = r.reverse;
  return StepPtr(new CumSumStep(a));
}

class ReduceStep final : public CudaStep {
 public:
  explicit ReduceStep(cuda::ReduceArgs a) : a_(a) {}
  absl::Status Launch(const CudaRunEnv& env, const StepIo& io) const override {
    cuda::ReduceArgs a = a_;
    a.x = io.In(0);
    a.y = io.Out(0);
    return LaunchStatus(cuda::Reduce(a, env.stream), "reduce");
  }

 private:
  cuda::ReduceArgs a_;
};

absl::StatusOr<StepPtr> PrepareReduce(const StepChecker& c) {
  const PlanBuffer &x = *c.In(0), &y = *c.Out(0);
  const Dims& axes = c.Ints("axes");
  const std::string& op = c.String("op");
  const size_t r = x.dims.size();
  if (r > static_cast<size_t>(cuda::kMaxRank))
    return c.Err("x %s has rank above %d", DimsStr(x.dims), cuda::kMaxRank);
  std::vector<bool> reduced(r, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] >= static_cast<int64_t>(r) || (i > 0 && axes[i] <= axes[i - 1]))
      return c.Err("axes must be ascending dims of x (rank %d)", r);
    reduced[axes[i]] = true;
  }
  const Dims xs = Strides(x.dims);
  cuda::ReduceArgs a;
  a.type = ElemTypeOf(x.dtype);
  static const std::pair<const char*, cuda::ReduceOp> kOps[] = {
      {"sum", cuda::ReduceOp::kSum},   {"mean", cuda::ReduceOp::kMean},
      {"max", cuda::ReduceOp::kMax},   {"min", cuda::ReduceOp::kMin},
      {"prod", cuda::ReduceOp::kProd}, {"l1", cuda::ReduceOp::kL1},
      {"l2", cuda::ReduceOp::kL2},     {"sum_square", cuda::ReduceOp::kSumSquare}};
  for (const auto& [name, v] : kOps)
    if (op == name) a.op = v;
  if ((x.dtype == DType::kI32 || x.dtype == DType::kI64) &&
      (a.op == cuda::ReduceOp::kMean || a.op == cuda::ReduceOp::kL2))
    return c.Err("reduce: an integer %s has no CUDA kernel", op);
  int64_t out = 1;
  for (size_t d = 0; d < r; ++d) {
    if (reduced[d]) {
      a.red_dims[a.red_rank] = x.dims[d];
      a.red_strides[a.red_rank++] = xs[d];
      a.group *= x.dims[d];
    } else {
      a.out_dims[a.out_rank] = x.dims[d];
      a.out_strides[a.out_rank++] = xs[d];
      out *= x.dims[d];
    }
  }
  if (StepChecker::Elems(y) != out)
    return c.Err("y %s does not hold x %s reduced over %s", DimsStr(y.dims), DimsStr(x.dims),
                 DimsStr(axes));
  a.out_count = out;
  return StepPtr(new ReduceStep(a));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaStep>> PrepareCudaMovement(std::string_view kernel,
                                                              const StepChecker& c) {
  if (kernel == "copy") return PrepareCopy(c);
  if (kernel == "eltwise") return PrepareEltwise(c);
  if (kernel == "gelu") return PrepareGelu(c);
  if (kernel == "transpose") return PrepareStrided(c);
  if (kernel == "slice") return PrepareStrided(c);
  if (kernel == "expand") return PrepareStrided(c);
  if (kernel == "concat") return PrepareStrided(c);
  if (kernel == "gather") return PrepareGather(c);
  if (kernel == "gather_nd") return PrepareGatherND(c);
  if (kernel == "gather_elements") return PrepareGatherElements(c);
  if (kernel == "cumsum") return PrepareCumSum(c);
  if (kernel == "reduce") return PrepareReduce(c);
  if (kernel == "pad") return PreparePad(c);
  return c.Err("no CUDA kernel '%s'", std::string(kernel));
}

}  // namespace kiln::runtime
