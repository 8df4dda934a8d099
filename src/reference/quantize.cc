// Quantization reference kernels: QuantizeLinear, DequantizeLinear (opset-21 forms:
// per-tensor, per-axis and blocked scales) and DynamicQuantizeLinear — what onnxruntime's
// quantizers write into `model_quantized.onnx` files (MatMulInteger is in math.cc).
// Arithmetic follows onnxruntime's CPU kernels so that an imported model's integers agree
// with its own run: QuantizeLinear divides in f32 (double for i32 inputs) and rounds half
// to even before adding the zero point and saturating; DequantizeLinear computes
// f32(x - zero_point) · scale in f32; DynamicQuantizeLinear's range always holds 0 and a
// range of width 0 (an all-zero tensor) gets scale 1, as onnxruntime does (the ONNX spec
// divides by zero there).
// A NaN quantizes to the zero point (the spec says nothing; a C++ cast of NaN to an integer
// is undefined). Quantized dtypes: u8, i8, u16, i16, i4, u4, i2, u2 (and i32 in
// DequantizeLinear), the float8 types but e8m0, and f4e2m1: a float target is the quotient
// rounded to nearest even (`saturate` says what happens beyond its range, kiln/ir/narrow.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/narrow.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

// For each element of x, the element of scale (and zero point) that applies to it.
class ScaleIndex {
 public:
  // scale: rank 0 or one element (per tensor), 1-D of x.dims[axis] (per axis), or x's rank
  // with dims[axis] = ceil(x.dims[axis] / block_size) (blocked, block_size > 0).
  static absl::StatusOr<ScaleIndex> Make(const Tensor& x, const Tensor& scale, int64_t axis_attr,
                                         int64_t block_size) {
    ScaleIndex s;
    if (block_size < 0)
      return absl::InvalidArgumentError(absl::StrCat("block_size ", block_size, " is negative"));
    if (block_size == 0 && scale.NumElements() == 1 && scale.rank() <= 1) return s;
    if (x.rank() == 0)
      return absl::InvalidArgumentError("a scalar input takes only a one-element scale");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, static_cast<int>(x.rank())));
    const std::vector<int64_t>& d = x.dims();
    s.mode_ = block_size == 0 ? kAxis : kBlocked;
    s.dim_ = d[axis];
    s.inner_ = 1;
    for (size_t i = static_cast<size_t>(axis) + 1; i < d.size(); ++i) s.inner_ *= d[i];
    if (s.mode_ == kAxis) {
      if (scale.rank() != 1 || scale.dims()[0] != s.dim_)
        return absl::InvalidArgumentError(absl::StrCat("per-axis scale must be 1-D of ", s.dim_,
                                                       " (input ", DimsStr(d), ", axis ", axis,
                                                       "), got ", DimsStr(scale.dims())));
      return s;
    }
    s.block_ = block_size;
    s.blocks_ = s.dim_ == 0 ? 0 : 1 + (s.dim_ - 1) / block_size;  // no overflow near INT64_MAX
    std::vector<int64_t> want = d;
    want[axis] = s.blocks_;
    if (scale.dims() != want)
      return absl::InvalidArgumentError(
          absl::StrCat("blocked scale must be ", DimsStr(want), " (input ", DimsStr(d), ", axis ",
                       axis, ", block_size ", block_size, "), got ", DimsStr(scale.dims())));
    return s;
  }

  int64_t operator()(int64_t i) const {
    switch (mode_) {
      case kTensor:
        return 0;
      case kAxis:
        return (i / inner_) % dim_;
      case kBlocked: {
        const int64_t outer = i / (inner_ * dim_);
        const int64_t c = (i / inner_) % dim_;
        return (outer * blocks_ + c / block_) * inner_ + i % inner_;
      }
    }
    return 0;
  }

 private:
  enum Mode { kTensor, kAxis, kBlocked };
  Mode mode_ = kTensor;
  int64_t dim_ = 1, inner_ = 1, block_ = 1, blocks_ = 1;
};

// Integer and float targets of QuantizeLinear (f8e8m0 is a scale type, not one of them).
bool IsQuantType(DType d) {
  return d == DType::kU8 || d == DType::kI8 || d == DType::kU16 || d == DType::kI16 ||
         IsNarrowInt(d) || (IsNarrowFloat(d) && d != DType::kF8E8M0);
}

// rne(v) + zp, saturated to `d`'s range; NaN gives zp.
double Saturate(double rounded, double zp, DType d) {
  if (std::isnan(rounded)) rounded = 0;
  const auto [lo, hi] = IntegerRange(d);
  return std::clamp(rounded + zp, lo, hi);
}

absl::Status CheckZeroPoint(const Tensor* zp, const Tensor& scale) {
  if (zp != nullptr && zp->dims() != scale.dims() &&
      !(zp->NumElements() == 1 && scale.NumElements() == 1))
    return absl::InvalidArgumentError(absl::StrCat("zero point ", DimsStr(zp->dims()),
                                                   " and scale ", DimsStr(scale.dims()),
                                                   " differ in shape"));
  return absl::OkStatus();
}

// The quantized dtype: the zero point's, else `output_dtype`, else u8.
absl::StatusOr<DType> QuantizedDType(const Node& node, const Tensor* zp) {
  const int64_t attr = node.attr_int_or("output_dtype", 0);
  std::optional<DType> from_attr;
  if (attr != 0) {
    from_attr = DTypeFromOnnx(static_cast<int32_t>(attr));
    if (!from_attr || !IsQuantType(*from_attr))
      return absl::UnimplementedError(
          absl::StrCat("QuantizeLinear to ONNX dtype ", attr,
                       " is not supported (u8, i8, u16, i16, the 4- and 2-bit integers, the "
                       "float8 types but e8m0, and f4e2m1 are)"));
  }
  if (zp == nullptr) return from_attr.value_or(DType::kU8);
  if (!IsQuantType(zp->dtype())) return UnsupportedDType(node.op(), zp->dtype());
  if (from_attr && *from_attr != zp->dtype())
    return absl::InvalidArgumentError(absl::StrCat(
        "output_dtype ", DName(*from_attr), " differs from the zero point's ", DName(zp->dtype())));
  return zp->dtype();
}

Result QuantizeLinearKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, Arg(in, 1, node.op()));
  const Tensor* zp = OptArg(in, 2);
  if (!IsFloat(x->dtype()) && x->dtype() != DType::kI32)
    return UnsupportedDType(node.op(), x->dtype());
  if (!IsFloat(scale->dtype())) return UnsupportedDType(node.op(), scale->dtype());
  KILN_RETURN_IF_ERROR(CheckZeroPoint(zp, *scale));
  KILN_ASSIGN_OR_RETURN(DType qt, QuantizedDType(node, zp));
  KILN_ASSIGN_OR_RETURN(ScaleIndex at, ScaleIndex::Make(*x, *scale, node.attr_int_or("axis", 1),
                                                        node.attr_int_or("block_size", 0)));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(qt, x->dims()));
  const bool f32_math = IsFloat(x->dtype()) && x->dtype() != DType::kF64;
  const bool saturate = node.attr_int_or("saturate", 1) != 0;
  for (int64_t i = 0; i < x->NumElements(); ++i) {
    const int64_t s = at(i);
    double q;  // x / scale, in f32 for f32/f16/bf16 inputs
    if (f32_math) {
      q = static_cast<float>(x->GetAsDouble(i)) / static_cast<float>(scale->GetAsDouble(s));
    } else {
      q = x->GetAsDouble(i) / scale->GetAsDouble(s);
    }
    if (IsNarrowFloat(qt)) {
      // Float targets round the quotient to nearest even; the float8 types ignore the zero
      // point (the spec requires it to be 0), f4e2m1 adds it, as the onnx reference does.
      if (qt == DType::kF4E2M1 && zp != nullptr) q += zp->GetAsDouble(s);
      y.data<uint8_t>()[i] = NarrowFromDouble(q, qt, saturate);
    } else {
      y.SetFromDouble(i, Saturate(std::nearbyint(q), zp ? zp->GetAsDouble(s) : 0.0, qt));
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Result DequantizeLinearKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, Arg(in, 1, node.op()));
  const Tensor* zp = OptArg(in, 2);
  if (!IsQuantType(x->dtype()) && x->dtype() != DType::kI32)
    return UnsupportedDType(node.op(), x->dtype());
  if (!IsFloat(scale->dtype())) return UnsupportedDType(node.op(), scale->dtype());
  if (zp != nullptr && zp->dtype() != x->dtype())
    return absl::InvalidArgumentError(
        absl::StrCat("zero point is ", DName(zp->dtype()), ", input is ", DName(x->dtype())));
  KILN_RETURN_IF_ERROR(CheckZeroPoint(zp, *scale));
  KILN_ASSIGN_OR_RETURN(ScaleIndex at, ScaleIndex::Make(*x, *scale, node.attr_int_or("axis", 1),
                                                        node.attr_int_or("block_size", 0)));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(scale->dtype(), x->dims()));
  const bool narrow_float = IsNarrowFloat(x->dtype());
  for (int64_t i = 0; i < x->NumElements(); ++i) {
    const int64_t s = at(i);
    // Integers subtract exactly in int64; float8/float4 values in f32.
    const double q = narrow_float
                         ? static_cast<double>(static_cast<float>(x->GetAsDouble(i)) -
                                               (zp ? static_cast<float>(zp->GetAsDouble(s)) : 0.0f))
                         : static_cast<double>(x->GetAsInt64(i) - (zp ? zp->GetAsInt64(s) : 0));
    if (scale->dtype() == DType::kF64) {
      y.SetFromDouble(i, q * scale->GetAsDouble(s));
    } else {
      y.SetFromDouble(i, static_cast<float>(q) * static_cast<float>(scale->GetAsDouble(s)));
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

// y = saturate(rne(x / scale) + zp) in u8, scale = (max(x, 0) - min(x, 0)) / 255 (1 when
// that is 0), zp = rne(clamp(-min / scale, 0, 255)).
Result DynamicQuantizeLinearKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (x->dtype() != DType::kF32) return UnsupportedDType(node.op(), x->dtype());
  const float* p = x->data<float>();
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < x->NumElements(); ++i) {
    if (p[i] < lo) lo = p[i];
    if (p[i] > hi) hi = p[i];
  }
  float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  if (!std::isfinite(scale))
    return absl::InvalidArgumentError("the input holds inf: no finite quantization scale");
  // A range so small (below 255 · 2^-149) that the scale underflows to 0: as an all-zero
  // tensor (x / 0 would be inf or NaN).
  if (!(scale > 0.0f)) scale = 1.0f;
  const float zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  Tensor y(DType::kU8, x->dims());
  uint8_t* q = y.data<uint8_t>();
  for (int64_t i = 0; i < x->NumElements(); ++i)
    q[i] = static_cast<uint8_t>(Saturate(std::nearbyint(p[i] / scale), zp, DType::kU8));
  Tensor s(DType::kF32, std::vector<int64_t>{});
  s.data<float>()[0] = scale;
  Tensor z(DType::kU8, std::vector<int64_t>{});
  z.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return std::vector<Tensor>{std::move(y), std::move(s), std::move(z)};
}

}  // namespace

void RegisterQuantizeKernels(KernelTable& t) {
  t[KernelKey("", "QuantizeLinear")] = &QuantizeLinearKernel;
  t[KernelKey("", "DequantizeLinear")] = &DequantizeLinearKernel;
  t[KernelKey("", "DynamicQuantizeLinear")] = &DynamicQuantizeLinearKernel;
}

}  // namespace kiln::reference
