// Internal to the data-movement kernel files (movement.cc, movement_slice.cc,
// movement_gather.cc, movement_index.cc): input validation (CheckedKernel checks every
// input against its buffer before a kernel reads it), integer-list readers, strided
// copies, and typed element access for the few ops that compute. See movement.cc for the
// safety rules every kernel follows.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "reference/kernels.h"

namespace kiln::reference::movement {

// Each family file registers its kernels; RegisterMovementKernels calls them.
void RegisterShapeKernels(KernelTable& table);   // movement.cc
void RegisterSliceKernels(KernelTable& table);   // movement_slice.cc
void RegisterGatherKernels(KernelTable& table);  // movement_gather.cc
void RegisterIndexKernels(KernelTable& table);   // movement_index.cc
void RegisterSelectKernels(KernelTable& table);  // movement_select.cc

using Inputs = absl::Span<const Tensor* const>;
using Outputs = absl::StatusOr<std::vector<Tensor>>;

inline absl::Status Invalid(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

inline std::string DimsString(absl::Span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

// --- Input access and validation ---

inline const Tensor* Optional(Inputs in, size_t i) { return i < in.size() ? in[i] : nullptr; }

inline absl::StatusOr<const Tensor*> Required(Inputs in, size_t i, std::string_view what) {
  const Tensor* t = Optional(in, i);
  if (t == nullptr)
    return Invalid(absl::StrCat("required input ", i, " (", std::string(what), ") is missing"));
  return t;
}

// A tensor is usable when its dtype has a size and its buffer holds all its elements.
inline absl::Status CheckTensor(const Tensor& t, const std::string& label) {
  if (DTypeSize(t.dtype()) == 0)
    return absl::UnimplementedError(
        absl::StrCat(label, " has unsupported dtype ", std::string(DTypeName(t.dtype()))));
  KILN_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(t.dims()));
  int64_t bytes;
  if (MulOverflows(n, static_cast<int64_t>(DTypeSize(t.dtype())), &bytes))
    return Invalid(absl::StrCat(label, " byte size overflows"));
  if (bytes > 0 && (t.storage() == nullptr || t.storage()->size() < static_cast<size_t>(bytes)))
    return Invalid(absl::StrCat(label, " (", t.ShapeString(), ") has a buffer of ",
                                t.storage() ? t.storage()->size() : 0, " bytes, needs ", bytes));
  return absl::OkStatus();
}

// Validates every present input, then runs the kernel.
template <KernelFn F>
Outputs CheckedKernel(const Node& node, Inputs in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != nullptr) KILN_RETURN_IF_ERROR(CheckTensor(*in[i], absl::StrCat("input ", i)));
  return F(node, in);
}

inline bool IsIndexType(DType t) { return t == DType::kI32 || t == DType::kI64; }

// Reads a 0-D or 1-D int32/int64 tensor (shapes, axes, starts ...).
inline absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, std::string_view what) {
  if (!IsIndexType(t.dtype()))
    return Invalid(absl::StrCat(std::string(what), " must be int32 or int64, got ",
                                std::string(DTypeName(t.dtype()))));
  if (t.rank() > 1)
    return Invalid(
        absl::StrCat(std::string(what), " must be 0-D or 1-D, got shape ", t.ShapeString()));
  return ToInt64Vector(t);
}

// Reads a tensor that must hold exactly one element (scalar-like inputs).
inline absl::Status CheckOneElement(const Tensor& t, std::string_view what) {
  if (t.NumElements() != 1 || t.rank() > 1)
    return Invalid(
        absl::StrCat(std::string(what), " must be a scalar, got shape ", t.ShapeString()));
  return absl::OkStatus();
}

inline absl::StatusOr<int64_t> ReadScalarInt(const Tensor& t, std::string_view what) {
  if (!IsIndexType(t.dtype()))
    return Invalid(absl::StrCat(std::string(what), " must be int32 or int64"));
  KILN_RETURN_IF_ERROR(CheckOneElement(t, what));
  return t.GetAsInt64(0);
}

// Normalizes a list of axes against `rank`; duplicates are an error.
inline absl::StatusOr<std::vector<int>> NormalizeAxes(absl::Span<const int64_t> axes, int rank) {
  std::vector<int> out;
  std::vector<bool> seen(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int ax, NormalizeAxis(a, rank));
    if (seen[ax]) return Invalid(absl::StrCat("axis ", a, " is repeated"));
    seen[ax] = true;
    out.push_back(ax);
  }
  return out;
}

inline int64_t Product(absl::Span<const int64_t> d, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= d[i];  // dims of a checked tensor: no overflow
  return p;
}

inline std::vector<Tensor> One(Tensor t) {
  std::vector<Tensor> v;
  v.push_back(std::move(t));
  return v;
}

// out[i] = in[base + sum_k idx_k * in_strides[k]] for every multi-index idx of `out`.
// Callers guarantee every such source offset is inside `in`.
inline void StridedCopy(const Tensor& in, int64_t base, absl::Span<const int64_t> in_strides,
                        Tensor& out) {
  const int64_t n = out.NumElements();
  if (n == 0) return;
  const size_t es = DTypeSize(in.dtype());
  const std::vector<int64_t>& dims = out.dims();
  const int r = out.rank();
  std::vector<int64_t> idx(r, 0);
  int64_t src = base;
  const std::byte* s = in.raw();
  std::byte* d = out.raw();
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(d + i * es, s + src * es, es);
    for (int k = r - 1; k >= 0; --k) {
      if (++idx[k] < dims[k]) {
        src += in_strides[k];
        break;
      }
      src -= (dims[k] - 1) * in_strides[k];
      idx[k] = 0;
    }
  }
}

// --- Typed element access for the ops that compute ---

template <typename T>
struct NativeAccess {
  using Acc = T;
  static T Load(const std::byte* p, int64_t i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return v;
  }
  static void Store(std::byte* p, int64_t i, T v) { std::memcpy(p + i * sizeof(T), &v, sizeof(T)); }
};

struct HalfAccess {
  using Acc = float;
  static float Load(const std::byte* p, int64_t i) {
    return HalfToFloat(NativeAccess<uint16_t>::Load(p, i));
  }
  static void Store(std::byte* p, int64_t i, float v) {
    NativeAccess<uint16_t>::Store(p, i, FloatToHalf(v));
  }
};

struct BF16Access {
  using Acc = float;
  static float Load(const std::byte* p, int64_t i) {
    return BF16ToFloat(NativeAccess<uint16_t>::Load(p, i));
  }
  static void Store(std::byte* p, int64_t i, float v) {
    NativeAccess<uint16_t>::Store(p, i, FloatToBF16(v));
  }
};

// Calls fn(Access{}) for a numeric (non-bool) dtype.
template <typename Fn>
absl::Status VisitNumeric(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kF32:
      return fn(NativeAccess<float>{});
    case DType::kF64:
      return fn(NativeAccess<double>{});
    case DType::kF16:
      return fn(HalfAccess{});
    case DType::kBF16:
      return fn(BF16Access{});
    case DType::kI8:
      return fn(NativeAccess<int8_t>{});
    case DType::kU8:
      return fn(NativeAccess<uint8_t>{});
    case DType::kI16:
      return fn(NativeAccess<int16_t>{});
    case DType::kU16:
      return fn(NativeAccess<uint16_t>{});
    case DType::kI32:
      return fn(NativeAccess<int32_t>{});
    case DType::kU32:
      return fn(NativeAccess<uint32_t>{});
    case DType::kI64:
      return fn(NativeAccess<int64_t>{});
    case DType::kU64:
      return fn(NativeAccess<uint64_t>{});
    default:
      return absl::UnimplementedError(
          absl::StrCat("dtype ", std::string(DTypeName(dt)), " is not supported"));
  }
}

// Wrapping addition (integer overflow wraps instead of being undefined).
template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<decltype(+a)>;  // promoted, so u16 * u16 cannot overflow int
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

// Total order for max-selection that puts NaN above every number (numpy argmax).
template <typename T>
bool Greater(T a, T b) {
  if (IsNan(a)) return !IsNan(b);
  if (IsNan(b)) return false;
  return a > b;
}

// Total order for min-selection that puts NaN below every number (numpy argmin).
template <typename T>
bool Less(T a, T b) {
  if (IsNan(a)) return !IsNan(b);
  if (IsNan(b)) return false;
  return a < b;
}

}  // namespace kiln::reference::movement
