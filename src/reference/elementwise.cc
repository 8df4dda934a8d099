// Elementwise reference kernels: unary math, binary arithmetic and comparisons with
// multidirectional (numpy) broadcasting, variadic Min/Max/Sum/Mean, logic ops, Where,
// Clip and Cast. Semantics follow the ONNX spec (opset 21 forms):
//  - integers are computed in their own type with two's-complement wrap-around (never
//    through double), integer Div truncates toward zero, integer division by zero is an
//    InvalidArgument error rather than undefined behaviour;
//  - floats are computed in double and rounded once to the output type (for f16/bf16 via
//    f32, as ONNX Runtime and numpy do); + - * / and sqrt therefore give the correctly
//    rounded f32 result, transcendental functions are at least as accurate as f32 libm;
//  - Min/Max propagate NaN (numpy.minimum/maximum);
//  - Cast float->int truncates, saturates out-of-range values and maps NaN to 0 (the spec
//    leaves these undefined); to a 4- or 2-bit integer it then wraps, as the onnx test
//    data does; to a narrow float it rounds as kiln/ir/narrow.h says (`saturate`,
//    `round_mode`); Cast to/from string is Unimplemented.
// Unsupported dtypes give Unimplemented naming the dtype. Clarity beats speed here.
// This file holds Where, Clip and Cast and the single entry point; the unary and binary
// families live in elementwise_unary.cc and elementwise_binary.cc.
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/narrow.h"
#include "kiln/support/status.h"
#include "reference/elementwise_internal.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace elementwise {
namespace {

// ---------------------------------------------------------------------------------------
// Where, Clip, Cast.

Result WhereKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* c, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* y, Arg(in, 2, node.op()));
  if (c->dtype() != DType::kBool)
    return absl::InvalidArgumentError(
        absl::StrCat("condition must be bool, got ", DName(c->dtype())));
  KILN_RETURN_IF_ERROR(SameDType(*x, *y, node.op()));
  const size_t es = DTypeSize(x->dtype());
  if (es == 0) return UnsupportedDType(node.op(), x->dtype());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, BroadcastShapes(c->dims(), x->dims()));
  KILN_ASSIGN_OR_RETURN(dims, BroadcastShapes(dims, y->dims()));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x->dtype(), dims));
  const uint8_t* pc = c->data<uint8_t>();
  const std::byte* px = x->raw();
  const std::byte* py = y->raw();
  std::byte* po = out.raw();
  WalkBroadcast<3>(out.dims(), {&c->dims(), &x->dims(), &y->dims()},
                   [&](int64_t i, const std::array<int64_t, 3>& o) {
                     const std::byte* src = pc[o[0]] ? px + o[1] * es : py + o[2] * es;
                     std::memcpy(po + i * es, src, es);
                   });
  return std::vector<Tensor>{std::move(out)};
}

Result ClipKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const Tensor* lo = OptArg(in, 1);
  const Tensor* hi = OptArg(in, 2);
  for (const Tensor* b : {lo, hi}) {
    if (b == nullptr) continue;
    KILN_RETURN_IF_ERROR(SameDType(*x, *b, node.op()));
    if (b->NumElements() != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("min/max must be scalars, got shape ", b->ShapeString()));
  }
  return One(Visit(x->dtype(), node.op(), [&](auto tr) -> absl::StatusOr<Tensor> {
    using T = decltype(tr);
    using C = typename T::C;
    if constexpr (T::kBool) {
      return UnsupportedDType(node.op(), x->dtype());
    } else {
      const bool has_lo = lo != nullptr, has_hi = hi != nullptr;
      const C l = has_lo ? T::Load(lo->raw(), 0) : C{};
      const C h = has_hi ? T::Load(hi->raw(), 0) : C{};
      return Map1<T, T>(*x, [&](C v) {
        if (has_lo && v < l) v = l;
        if (has_hi && v > h) v = h;
        return v;
      });
    }
  }));
}

template <typename To, typename FromC>
typename To::C ConvertValue(FromC v) {
  using TC = typename To::C;
  if constexpr (To::kFloat) {
    return static_cast<double>(v);
  } else if constexpr (To::kBool) {
    return v != FromC{0};
  } else if constexpr (std::is_floating_point_v<FromC>) {
    return SaturatingFromDouble<To>(v);
  } else {
    return static_cast<TC>(v);  // integer narrowing wraps (C++20 modular conversion)
  }
}

// How a cast to a narrow float rounds: `saturate` (Cast's attribute, default 1) and, for
// f8e8m0, `round_mode` (opset 24, default "up").
struct NarrowCast {
  bool saturate = true;
  E8M0Rounding e8m0 = E8M0Rounding::kUp;
};

absl::StatusOr<Tensor> CastTensor(const Tensor& x, DType to, const NarrowCast& how) {
  if (x.dtype() == DType::kString || to == DType::kString)
    return absl::UnimplementedError("Cast to or from string is not supported");
  const int64_t n = x.NumElements();
  // Narrow sources widen exactly first: narrow floats to f32, narrow integers are already
  // held as i8/u8.
  if (IsNarrowFloat(x.dtype())) {
    KILN_ASSIGN_OR_RETURN(Tensor wide, Tensor::Create(DType::kF32, x.dims()));
    for (int64_t i = 0; i < n; ++i)
      wide.data<float>()[i] = NarrowToFloat(x.data<uint8_t>()[i], x.dtype());
    return CastTensor(wide, to, how);
  }
  if (IsNarrowInt(x.dtype())) {
    const bool is_signed = x.dtype() == DType::kI4 || x.dtype() == DType::kI2;
    return CastTensor(Tensor(is_signed ? DType::kI8 : DType::kU8, x.dims(), x.storage()), to, how);
  }
  if (IsNarrowFloat(to)) {
    KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(to, x.dims()));
    uint8_t* q = y.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      const double v = x.GetAsDouble(i);
      q[i] = to == DType::kF8E8M0 ? E8M0FromFloat(static_cast<float>(v), how.saturate, how.e8m0)
                                  : NarrowFromDouble(v, to, how.saturate);
    }
    return y;
  }
  if (IsNarrowInt(to)) {  // through i64 (truncating, saturating) then wrapped, as i8 would be
    KILN_ASSIGN_OR_RETURN(Tensor wide, CastTensor(x, DType::kI64, how));
    KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(to, x.dims()));
    for (int64_t i = 0; i < n; ++i)
      y.data<uint8_t>()[i] = WrapNarrowInt(wide.data<int64_t>()[i], to);
    return y;
  }
  return Visit(x.dtype(), "Cast", [&](auto tf) -> absl::StatusOr<Tensor> {
    using TF = decltype(tf);
    return Visit(to, "Cast", [&](auto tt) -> absl::StatusOr<Tensor> {
      using TT = decltype(tt);
      return Map1<TF, TT>(x, [](typename TF::C v) { return ConvertValue<TT>(v); });
    });
  });
}

absl::StatusOr<NarrowCast> NarrowCastAttrs(const Node& node) {
  NarrowCast how;
  how.saturate = node.attr_int_or("saturate", 1) != 0;
  const std::string* attr = node.attr_string("round_mode");
  const std::string mode = attr ? *attr : "up";
  if (mode == "up") {
    how.e8m0 = E8M0Rounding::kUp;
  } else if (mode == "down") {
    how.e8m0 = E8M0Rounding::kDown;
  } else if (mode == "nearest") {
    how.e8m0 = E8M0Rounding::kNearest;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("round_mode '", mode, "' is not one of up, down, nearest"));
  }
  return how;
}

Result CastKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const std::optional<int64_t> code = node.attr_int("to");
  if (!code) return absl::InvalidArgumentError("Cast needs the 'to' attribute");
  const std::optional<DType> to =
      *code >= 0 && *code <= INT32_MAX ? DTypeFromOnnx(static_cast<int32_t>(*code)) : std::nullopt;
  if (!to) return absl::UnimplementedError(absl::StrCat("Cast to ONNX dtype ", *code));
  KILN_ASSIGN_OR_RETURN(NarrowCast how, NarrowCastAttrs(node));
  return One(CastTensor(*x, *to, how));
}

// CastLike: cast input 0 to the dtype of input 1.
Result CastLikeKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* like, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(NarrowCast how, NarrowCastAttrs(node));
  return One(CastTensor(*x, like->dtype(), how));
}

// BitCast (opset 26): x's bits read as `to`, which must be as wide. kiln holds sub-byte
// types one per byte, so those move their low bits (sign-extending into i4/i2); a byte
// read as bool becomes 0/1, as kiln keeps bools.
Result BitCastKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const std::optional<int64_t> code = node.attr_int("to");
  if (!code) return absl::InvalidArgumentError("BitCast needs the 'to' attribute");
  const std::optional<DType> to =
      *code >= 0 && *code <= INT32_MAX ? DTypeFromOnnx(static_cast<int32_t>(*code)) : std::nullopt;
  if (!to || *to == DType::kString || x->dtype() == DType::kString)
    return absl::UnimplementedError(absl::StrCat("BitCast to ONNX dtype ", *code));
  const int bits = DTypeBits(x->dtype());
  if (bits != DTypeBits(*to))
    return absl::InvalidArgumentError(absl::StrCat("BitCast from ", DName(x->dtype()), " (", bits,
                                                   " bits) to ", DName(*to), " (", DTypeBits(*to),
                                                   " bits)"));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(*to, x->dims()));
  if (y.NumBytes() > 0) std::memcpy(y.raw(), x->raw(), y.NumBytes());
  uint8_t* b = y.data<uint8_t>();
  const int64_t n = y.NumElements();
  if (bits < 8) {
    const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
    for (int64_t i = 0; i < n; ++i)
      b[i] = IsNarrowInt(*to) ? WrapNarrowInt(b[i] & mask, *to) : static_cast<uint8_t>(b[i] & mask);
  } else if (*to == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) b[i] = b[i] != 0 ? 1 : 0;
  }
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace
}  // namespace elementwise

void RegisterElementwiseKernels(KernelTable& t) {
  elementwise::RegisterUnaryKernels(t);
  elementwise::RegisterBinaryKernels(t);
  auto add = [&t](const std::string& op, KernelFn fn) { t[KernelKey("", op)] = fn; };
  add("Where", &elementwise::WhereKernel);
  add("Clip", &elementwise::ClipKernel);
  add("Cast", &elementwise::CastKernel);
  add("CastLike", &elementwise::CastLikeKernel);
  add("BitCast", &elementwise::BitCastKernel);
}

}  // namespace kiln::reference
