// Reference kernels for data movement and shape ops: Gather, Slice, Concat, Split,
// Reshape, Transpose, Unsqueeze, Squeeze, Expand, Flatten, Shape, ConstantOfShape, Range,
// Identity, Dropout (inference), Trilu, CumSum, ArgMax, and Tile, Pad (every mode),
// GatherElements, ScatterND (all reductions), OneHot, NonZero, Size, TopK.
//
// Each kernel follows its opset-21 ONNX signature (the importer canonicalizes older forms).
// Data is moved as raw elements of DTypeSize bytes, so one code path serves every dtype;
// only ops that compute (CumSum, ArgMax, Range, TopK, ScatterND reductions) dispatch on the
// element type.
// Every input tensor is checked against its buffer before any read (CheckedKernel), every
// index and axis is validated, and sizes derived from input *values* (ConstantOfShape,
// Range, Expand, Reshape, Tile, Pad, OneHot) go through overflow-checked arithmetic and
// Tensor::Create, so a hostile value yields a status, never a crash or a huge allocation.
// Limits: Dropout runs in inference form only (training with ratio > 0 is Unimplemented);
// strings are not supported.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

using Inputs = absl::Span<const Tensor* const>;
using Outputs = absl::StatusOr<std::vector<Tensor>>;

absl::Status Invalid(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

std::string DimsString(absl::Span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

// --- Input access and validation ---

const Tensor* Optional(Inputs in, size_t i) { return i < in.size() ? in[i] : nullptr; }

absl::StatusOr<const Tensor*> Required(Inputs in, size_t i, std::string_view what) {
  const Tensor* t = Optional(in, i);
  if (t == nullptr)
    return Invalid(absl::StrCat("required input ", i, " (", std::string(what), ") is missing"));
  return t;
}

// A tensor is usable when its dtype has a size and its buffer holds all its elements.
absl::Status CheckTensor(const Tensor& t, const std::string& label) {
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

bool IsIndexType(DType t) { return t == DType::kI32 || t == DType::kI64; }

// Reads a 0-D or 1-D int32/int64 tensor (shapes, axes, starts ...).
absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, std::string_view what) {
  if (!IsIndexType(t.dtype()))
    return Invalid(absl::StrCat(std::string(what), " must be int32 or int64, got ",
                                std::string(DTypeName(t.dtype()))));
  if (t.rank() > 1)
    return Invalid(
        absl::StrCat(std::string(what), " must be 0-D or 1-D, got shape ", t.ShapeString()));
  return ToInt64Vector(t);
}

// Reads a tensor that must hold exactly one element (scalar-like inputs).
absl::Status CheckOneElement(const Tensor& t, std::string_view what) {
  if (t.NumElements() != 1 || t.rank() > 1)
    return Invalid(
        absl::StrCat(std::string(what), " must be a scalar, got shape ", t.ShapeString()));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReadScalarInt(const Tensor& t, std::string_view what) {
  if (!IsIndexType(t.dtype()))
    return Invalid(absl::StrCat(std::string(what), " must be int32 or int64"));
  KILN_RETURN_IF_ERROR(CheckOneElement(t, what));
  return t.GetAsInt64(0);
}

// Normalizes a list of axes against `rank`; duplicates are an error.
absl::StatusOr<std::vector<int>> NormalizeAxes(absl::Span<const int64_t> axes, int rank) {
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

int64_t Product(absl::Span<const int64_t> d, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= d[i];  // dims of a checked tensor: no overflow
  return p;
}

std::vector<Tensor> One(Tensor t) {
  std::vector<Tensor> v;
  v.push_back(std::move(t));
  return v;
}

// out[i] = in[base + sum_k idx_k * in_strides[k]] for every multi-index idx of `out`.
// Callers guarantee every such source offset is inside `in`.
void StridedCopy(const Tensor& in, int64_t base, absl::Span<const int64_t> in_strides,
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

// --- Kernels ---

Outputs Gather(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, Required(in, 1, "indices"));
  if (!IsIndexType(indices->dtype())) return Invalid("indices must be int32 or int64");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), data->rank()));
  const std::vector<int64_t>& dd = data->dims();
  const int64_t axis_dim = dd[axis];
  std::vector<int64_t> idx = ToInt64Vector(*indices);
  for (int64_t& i : idx) {
    if (i < -axis_dim || i >= axis_dim)
      return Invalid(
          absl::StrCat("index ", i, " is out of range for axis ", axis, " of size ", axis_dim));
    if (i < 0) i += axis_dim;
  }
  std::vector<int64_t> od(dd.begin(), dd.begin() + axis);
  od.insert(od.end(), indices->dims().begin(), indices->dims().end());
  od.insert(od.end(), dd.begin() + axis + 1, dd.end());
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  const int64_t outer = Product(dd, 0, axis);
  const size_t chunk =
      static_cast<size_t>(Product(dd, axis + 1, dd.size())) * DTypeSize(data->dtype());
  const int64_t n = static_cast<int64_t>(idx.size());
  if (chunk > 0) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(out.raw() + (o * n + j) * chunk, data->raw() + (o * axis_dim + idx[j]) * chunk,
                    chunk);
  }
  return One(std::move(out));
}

Outputs Slice(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* st, Required(in, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(const Tensor* en, Required(in, 2, "ends"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ReadInts(*st, "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ReadInts(*en, "ends"));
  const size_t n = starts.size();
  if (ends.size() != n)
    return Invalid(absl::StrCat("starts has ", n, " values but ends has ", ends.size()));
  std::vector<int64_t> axes(n), steps(n, 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (const Tensor* t = Optional(in, 3)) {
    KILN_ASSIGN_OR_RETURN(axes, ReadInts(*t, "axes"));
    if (axes.size() != n)
      return Invalid(absl::StrCat("axes has ", axes.size(), " values, want ", n));
  }
  if (const Tensor* t = Optional(in, 4)) {
    KILN_ASSIGN_OR_RETURN(steps, ReadInts(*t, "steps"));
    if (steps.size() != n)
      return Invalid(absl::StrCat("steps has ", steps.size(), " values, want ", n));
  }
  const int r = data->rank();
  KILN_ASSIGN_OR_RETURN(std::vector<int> ax, NormalizeAxes(axes, r));
  const std::vector<int64_t>& dd = data->dims();
  std::vector<int64_t> first(r, 0), step(r, 1), od = dd;
  for (size_t i = 0; i < n; ++i) {
    const int a = ax[i];
    const int64_t d = dd[a];
    int64_t s = starts[i], e = ends[i], k = steps[i];
    if (k == 0) return Invalid(absl::StrCat("step for axis ", axes[i], " is 0"));
    if (s < 0) s += d;
    if (e < 0) e += d;
    int64_t len = 0;
    if (k > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      if (e > s) len = (e - s - 1) / k + 1;
    } else if (d > 0) {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      // -k may overflow for INT64_MIN; any |k| > d yields at most one element.
      const int64_t mag = k < -d ? d + 1 : -k;
      if (s > e) len = (s - e - 1) / mag + 1;
    }
    od[a] = len;
    first[a] = len > 0 ? s : 0;
    step[a] = len > 1 ? k : 1;  // |k| <= d here, so step * stride cannot overflow
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  const std::vector<int64_t> strides = Strides(dd);
  int64_t base = 0;
  std::vector<int64_t> in_strides(r);
  for (int a = 0; a < r; ++a) {
    base += first[a] * strides[a];
    in_strides[a] = step[a] * strides[a];
  }
  StridedCopy(*data, base, in_strides, out);
  return One(std::move(out));
}

Outputs Concat(const Node& node, Inputs in) {
  const std::optional<int64_t> axis_attr = node.attr_int("axis");
  if (!axis_attr) return Invalid("attribute 'axis' is required");
  if (in.empty()) return Invalid("needs at least one input");
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] == nullptr) return Invalid(absl::StrCat("input ", i, " is missing"));
  const Tensor& first = *in[0];
  const int r = first.rank();
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(*axis_attr, r));
  std::vector<int64_t> od = first.dims();
  od[axis] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = *in[i];
    if (t.dtype() != first.dtype())
      return Invalid(absl::StrCat("input ", i, " has dtype ", std::string(DTypeName(t.dtype())),
                                  ", input 0 has ", std::string(DTypeName(first.dtype()))));
    if (t.rank() != r)
      return Invalid(absl::StrCat("input ", i, " has rank ", t.rank(), ", input 0 has ", r));
    for (int a = 0; a < r; ++a)
      if (a != axis && t.dims()[a] != first.dims()[a])
        return Invalid(absl::StrCat("input ", i, " shape ", DimsString(t.dims()),
                                    " does not match input 0 shape ", DimsString(first.dims()),
                                    " off axis ", axis));
    if (AddOverflows(od[axis], t.dims()[axis], &od[axis]))
      return Invalid("concatenated dimension overflows");
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(first.dtype(), od));
  const int64_t outer = Product(od, 0, axis);
  const size_t inner = static_cast<size_t>(Product(od, axis + 1, r)) * DTypeSize(first.dtype());
  const size_t out_row = static_cast<size_t>(od[axis]) * inner;
  size_t offset = 0;
  for (const Tensor* t : in) {
    const size_t row = static_cast<size_t>(t->dims()[axis]) * inner;
    if (row > 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(out.raw() + o * out_row + offset, t->raw() + o * row, row);
    offset += row;
  }
  return One(std::move(out));
}

Outputs Split(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), data->rank()));
  const int num = node.num_outputs();
  if (num < 1) return Invalid("Split needs at least one output");
  if (auto attr = node.attr_int("num_outputs"); attr && *attr != num)
    return Invalid(absl::StrCat("num_outputs is ", *attr, " but the node has ", num, " outputs"));
  const int64_t d = data->dims()[axis];
  std::vector<int64_t> sizes;
  if (const Tensor* t = Optional(in, 1)) {
    KILN_ASSIGN_OR_RETURN(sizes, ReadInts(*t, "split"));
    if (static_cast<int>(sizes.size()) != num)
      return Invalid(
          absl::StrCat("split has ", sizes.size(), " entries but the node has ", num, " outputs"));
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0 || AddOverflows(sum, s, &sum))
        return Invalid(absl::StrCat("invalid split sizes ", DimsString(sizes)));
    }
    if (sum != d)
      return Invalid(absl::StrCat("split sizes ", DimsString(sizes), " sum to ", sum, ", axis ",
                                  axis, " has size ", d));
  } else {
    // Opset 18: chunks of ceil(d / num); the last one takes what is left.
    const int64_t chunk = d / num + (d % num != 0 ? 1 : 0);
    sizes.assign(num, chunk);
    sizes.back() = d - chunk * (num - 1);
    if (sizes.back() < 0)
      return Invalid(
          absl::StrCat("cannot split a dimension of ", d, " into ", num, " chunks of ", chunk));
  }
  const std::vector<int64_t> strides = Strides(data->dims());
  std::vector<Tensor> outs;
  int64_t pos = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> od = data->dims();
    od[axis] = s;
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
    StridedCopy(*data, pos * strides[axis], strides, out);
    pos += s;
    outs.push_back(std::move(out));
  }
  return outs;
}

Outputs Reshape(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* sh, Required(in, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*sh, "shape"));
  if (sh->rank() != 1) return Invalid("shape must be 1-D");
  const bool allowzero = node.attr_int_or("allowzero", 0) != 0;
  std::vector<int64_t> od(shape.size());
  int infer = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t v = shape[i];
    if (v == -1) {
      if (infer >= 0) return Invalid(absl::StrCat("shape ", DimsString(shape), " has two -1"));
      infer = static_cast<int>(i);
      continue;
    }
    if (v < -1) return Invalid(absl::StrCat("shape ", DimsString(shape), " has a negative dim"));
    if (v == 0) {
      has_zero = true;
      if (!allowzero) {
        if (static_cast<int>(i) >= data->rank())
          return Invalid(absl::StrCat("shape ", DimsString(shape), " copies dim ", i,
                                      " but the input has rank ", data->rank()));
        v = data->dims()[i];
      }
    }
    od[i] = v;
    if (MulOverflows(known, v, &known))
      return Invalid(absl::StrCat("shape ", DimsString(shape), " overflows"));
  }
  if (allowzero && has_zero && infer >= 0)
    return Invalid("with allowzero=1 the shape may not contain both 0 and -1");
  const int64_t n = data->NumElements();
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      return Invalid(absl::StrCat("cannot infer -1 in ", DimsString(shape), " for input shape ",
                                  DimsString(data->dims())));
    od[infer] = n / known;
  } else if (known != n) {
    return Invalid(absl::StrCat("cannot reshape ", DimsString(data->dims()), " (", n,
                                " elements) to ", DimsString(od)));
  }
  return One(data->Reshaped(od));
}

Outputs Transpose(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  const int r = data->rank();
  std::vector<int64_t> perm(r);
  if (const std::vector<int64_t>* p = node.attr_ints("perm")) {
    perm = *p;
  } else {
    for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
  }
  if (static_cast<int>(perm.size()) != r)
    return Invalid(absl::StrCat("perm ", DimsString(perm), " does not match rank ", r));
  std::vector<bool> seen(r, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p])
      return Invalid(absl::StrCat("perm ", DimsString(perm), " is not a permutation"));
    seen[p] = true;
  }
  const std::vector<int64_t> strides = Strides(data->dims());
  std::vector<int64_t> od(r), in_strides(r);
  for (int i = 0; i < r; ++i) {
    od[i] = data->dims()[perm[i]];
    in_strides[i] = strides[perm[i]];
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  StridedCopy(*data, 0, in_strides, out);
  return One(std::move(out));
}

Outputs Unsqueeze(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* ax, Required(in, 1, "axes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadInts(*ax, "axes"));
  const int out_rank = data->rank() + static_cast<int>(axes.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormalizeAxes(axes, out_rank));
  std::vector<bool> inserted(out_rank, false);
  for (int a : norm) inserted[a] = true;
  std::vector<int64_t> od;
  int j = 0;
  for (int i = 0; i < out_rank; ++i) od.push_back(inserted[i] ? 1 : data->dims()[j++]);
  return One(data->Reshaped(od));
}

Outputs Squeeze(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  const int r = data->rank();
  std::vector<bool> drop(r, false);
  if (const Tensor* ax = Optional(in, 1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadInts(*ax, "axes"));
    KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormalizeAxes(axes, r));
    for (int a : norm) {
      if (data->dims()[a] != 1)
        return Invalid(absl::StrCat("cannot squeeze axis ", a, " of size ", data->dims()[a]));
      drop[a] = true;
    }
  } else {
    for (int a = 0; a < r; ++a) drop[a] = data->dims()[a] == 1;
  }
  std::vector<int64_t> od;
  for (int a = 0; a < r; ++a)
    if (!drop[a]) od.push_back(data->dims()[a]);
  return One(data->Reshaped(od));
}

Outputs Expand(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Tensor* sh, Required(in, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*sh, "shape"));
  for (int64_t v : shape)
    if (v < 0) return Invalid(absl::StrCat("shape ", DimsString(shape), " has a negative dim"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> od, BroadcastShapes(data->dims(), shape));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  const int r = static_cast<int>(od.size());
  const int lead = r - data->rank();
  const std::vector<int64_t> strides = Strides(data->dims());
  std::vector<int64_t> in_strides(r, 0);
  for (int a = lead; a < r; ++a)
    in_strides[a] = data->dims()[a - lead] == 1 ? 0 : strides[a - lead];
  StridedCopy(*data, 0, in_strides, out);
  return One(std::move(out));
}

Outputs Flatten(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "input"));
  const int r = data->rank();
  int64_t axis = node.attr_int_or("axis", 1);
  if (axis < -r || axis > r)
    return Invalid(absl::StrCat("axis ", axis, " is out of range for rank ", r));
  if (axis < 0) axis += r;
  const std::vector<int64_t>& d = data->dims();
  return One(data->Reshaped({Product(d, 0, axis), Product(d, axis, r)}));
}

Outputs Shape(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  const int64_t r = data->rank();
  int64_t start = node.attr_int_or("start", 0);
  int64_t end = node.attr_int_or("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  const int64_t n = std::max<int64_t>(end - start, 0);
  Tensor out(DType::kI64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = data->dims()[start + i];
  return One(std::move(out));
}

Outputs ConstantOfShape(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* sh, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*sh, "input"));
  if (sh->rank() != 1) return Invalid("input must be 1-D");
  for (int64_t v : shape)
    if (v < 0) return Invalid(absl::StrCat("shape ", DimsString(shape), " has a negative dim"));
  Tensor value = Tensor::ScalarF32(0.f);
  if (node.has_attr("value")) {
    const Tensor* v = node.attr_tensor("value");
    if (v == nullptr) return Invalid("attribute 'value' must be a tensor");
    KILN_RETURN_IF_ERROR(CheckTensor(*v, "attribute 'value'"));
    if (v->NumElements() != 1)
      return Invalid(
          absl::StrCat("attribute 'value' must have one element, has shape ", v->ShapeString()));
    value = *v;
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(value.dtype(), shape));
  const size_t es = DTypeSize(value.dtype());
  for (int64_t i = 0; i < out.NumElements(); ++i) std::memcpy(out.raw() + i * es, value.raw(), es);
  return One(std::move(out));
}

// Integer Range, exact in 128-bit arithmetic.
template <typename A>
absl::StatusOr<Tensor> IntegerRange(DType dt, const Tensor& s, const Tensor& l, const Tensor& d) {
  using T = typename A::Acc;
  const __int128 start = A::Load(s.raw(), 0), limit = A::Load(l.raw(), 0),
                 delta = A::Load(d.raw(), 0);
  if (delta == 0) return Invalid("delta is 0");
  const __int128 diff = limit - start;
  __int128 count = 0;
  if (diff != 0 && (diff > 0) == (delta > 0)) {
    const __int128 ad = delta > 0 ? delta : -delta;
    const __int128 adiff = diff > 0 ? diff : -diff;
    count = (adiff + ad - 1) / ad;
  }
  if (count > (__int128{1} << 40)) return absl::ResourceExhaustedError("Range output is too large");
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(dt, {static_cast<int64_t>(count)}));
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    A::Store(out.raw(), i, static_cast<T>(start + delta * i));
  return out;
}

// Floating Range: count and values computed in double as numpy.arange does
// (value i = start + i * delta, then rounded to the output type).
template <typename A>
absl::StatusOr<Tensor> FloatRange(DType dt, const Tensor& s, const Tensor& l, const Tensor& d) {
  using T = typename A::Acc;
  const double start = A::Load(s.raw(), 0), limit = A::Load(l.raw(), 0),
               delta = A::Load(d.raw(), 0);
  if (delta == 0) return Invalid("delta is 0");
  const double c = std::ceil((limit - start) / delta);
  if (std::isnan(c)) return Invalid("Range element count is NaN");
  if (c > static_cast<double>(int64_t{1} << 40))
    return absl::ResourceExhaustedError("Range output is too large");
  const int64_t count = c > 0 ? static_cast<int64_t>(c) : 0;
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(dt, {count}));
  for (int64_t i = 0; i < count; ++i)
    A::Store(out.raw(), i, static_cast<T>(start + static_cast<double>(i) * delta));
  return out;
}

Outputs Range(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* s, Required(in, 0, "start"));
  KILN_ASSIGN_OR_RETURN(const Tensor* l, Required(in, 1, "limit"));
  KILN_ASSIGN_OR_RETURN(const Tensor* d, Required(in, 2, "delta"));
  if (s->dtype() != l->dtype() || s->dtype() != d->dtype())
    return Invalid("start, limit and delta must have the same dtype");
  KILN_RETURN_IF_ERROR(CheckOneElement(*s, "start"));
  KILN_RETURN_IF_ERROR(CheckOneElement(*l, "limit"));
  KILN_RETURN_IF_ERROR(CheckOneElement(*d, "delta"));
  std::optional<Tensor> result;
  KILN_RETURN_IF_ERROR(VisitNumeric(s->dtype(), [&](auto a) -> absl::Status {
    using A = decltype(a);
    absl::StatusOr<Tensor> t;
    if constexpr (std::is_integral_v<typename A::Acc>) {
      t = IntegerRange<A>(s->dtype(), *s, *l, *d);
    } else {
      t = FloatRange<A>(s->dtype(), *s, *l, *d);
    }
    if (!t.ok()) return t.status();
    result = std::move(*t);
    return absl::OkStatus();
  }));
  return One(std::move(*result));
}

Outputs Identity(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "input"));
  return One(*data);
}

Outputs Dropout(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  double ratio = 0.5;
  if (const Tensor* r = Optional(in, 1)) {
    if (!IsFloat(r->dtype())) return Invalid("ratio must be a floating-point scalar");
    KILN_RETURN_IF_ERROR(CheckOneElement(*r, "ratio"));
    ratio = r->GetAsDouble(0);
    if (!(ratio >= 0.0 && ratio < 1.0))
      return Invalid(absl::StrCat("ratio ", ratio, " is outside [0, 1)"));
  }
  bool training = false;
  if (const Tensor* t = Optional(in, 2)) {
    if (t->dtype() != DType::kBool) return Invalid("training_mode must be a bool scalar");
    KILN_RETURN_IF_ERROR(CheckOneElement(*t, "training_mode"));
    training = t->GetAsInt64(0) != 0;
  }
  if (training && ratio != 0.0)
    return absl::UnimplementedError("Dropout in training mode with a non-zero ratio");
  std::vector<Tensor> outs = One(*data);
  if (node.num_outputs() > 1) {
    KILN_ASSIGN_OR_RETURN(Tensor mask, Tensor::Create(DType::kBool, data->dims()));
    if (mask.NumBytes() > 0) std::memset(mask.raw(), 1, mask.NumBytes());
    outs.push_back(std::move(mask));
  }
  return outs;
}

Outputs Trilu(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "input"));
  if (data->rank() < 2) return Invalid(absl::StrCat("input rank ", data->rank(), " is below 2"));
  int64_t k = 0;
  if (const Tensor* kt = Optional(in, 1)) {
    KILN_ASSIGN_OR_RETURN(k, ReadScalarInt(*kt, "k"));
  }
  const bool upper = node.attr_int_or("upper", 1) != 0;
  Tensor out = data->Clone();
  const int r = data->rank();
  const int64_t rows = data->dims()[r - 2], cols = data->dims()[r - 1];
  const int64_t batch = Product(data->dims(), 0, r - 2);
  const size_t es = DTypeSize(data->dtype());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        // j - i cannot overflow (both are small non-negative dims).
        const bool keep = upper ? (j - i >= k) : (j - i <= k);
        if (!keep) std::memset(out.raw() + ((b * rows + i) * cols + j) * es, 0, es);
      }
  return One(std::move(out));
}

Outputs CumSum(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Tensor* at, Required(in, 1, "axis"));
  KILN_ASSIGN_OR_RETURN(int64_t axis_v, ReadScalarInt(*at, "axis"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_v, x->rank()));
  const bool exclusive = node.attr_int_or("exclusive", 0) != 0;
  const bool reverse = node.attr_int_or("reverse", 0) != 0;
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x->dtype(), x->dims()));
  const int64_t outer = Product(x->dims(), 0, axis), len = x->dims()[axis],
                inner = Product(x->dims(), axis + 1, x->rank());
  KILN_RETURN_IF_ERROR(VisitNumeric(x->dtype(), [&](auto a) -> absl::Status {
    using A = decltype(a);
    using T = typename A::Acc;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        T acc = T(0);
        for (int64_t step = 0; step < len; ++step) {
          const int64_t j = reverse ? len - 1 - step : step;
          const int64_t off = (o * len + j) * inner + i;
          const T v = A::Load(x->raw(), off);
          if (exclusive) {
            A::Store(out.raw(), off, acc);
            acc = WrapAdd(acc, v);
          } else {
            acc = WrapAdd(acc, v);
            A::Store(out.raw(), off, acc);
          }
        }
      }
    return absl::OkStatus();
  }));
  return One(std::move(out));
}

Outputs ArgMax(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), x->rank()));
  const bool keepdims = node.attr_int_or("keepdims", 1) != 0;
  const bool last = node.attr_int_or("select_last_index", 0) != 0;
  const int64_t outer = Product(x->dims(), 0, axis), len = x->dims()[axis],
                inner = Product(x->dims(), axis + 1, x->rank());
  if (len == 0) return Invalid(absl::StrCat("ArgMax over axis ", axis, " of size 0"));
  std::vector<int64_t> od = x->dims();
  if (keepdims) {
    od[axis] = 1;
  } else {
    od.erase(od.begin() + axis);
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(DType::kI64, od));
  KILN_RETURN_IF_ERROR(VisitNumeric(x->dtype(), [&](auto a) -> absl::Status {
    using A = decltype(a);
    using T = typename A::Acc;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t best_j = 0;
        T best = A::Load(x->raw(), o * len * inner + i);
        for (int64_t j = 1; j < len; ++j) {
          const T v = A::Load(x->raw(), (o * len + j) * inner + i);
          if (last ? !Greater(best, v) : Greater(v, best)) {
            best = v;
            best_j = j;
          }
        }
        out.data<int64_t>()[o * inner + i] = best_j;
      }
    return absl::OkStatus();
  }));
  return One(std::move(out));
}

// --- Optional extras ---

Outputs Size(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  return One(Tensor::ScalarI64(data->NumElements()));
}

Outputs Tile(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Tensor* rt, Required(in, 1, "repeats"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, ReadInts(*rt, "repeats"));
  const int r = data->rank();
  if (rt->rank() != 1 || static_cast<int>(reps.size()) != r)
    return Invalid(absl::StrCat("repeats ", DimsString(reps), " must be 1-D of length ", r));
  std::vector<int64_t> od(r);
  for (int a = 0; a < r; ++a) {
    if (reps[a] < 0) return Invalid(absl::StrCat("repeats ", DimsString(reps), " is negative"));
    if (MulOverflows(data->dims()[a], reps[a], &od[a]))
      return Invalid("Tile output shape overflows");
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  const int64_t n = out.NumElements();
  const size_t es = DTypeSize(data->dtype());
  const std::vector<int64_t> strides = Strides(data->dims());
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (int a = 0; a < r; ++a) src += (idx[a] % data->dims()[a]) * strides[a];
    std::memcpy(out.raw() + i * es, data->raw() + src * es, es);
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[a] < od[a]) break;
      idx[a] = 0;
    }
  }
  return One(std::move(out));
}

// Source index along an axis of size d (> 0) for output position i (already shifted by
// the begin pad) in Pad's edge / reflect / wrap modes, as numpy.pad defines them.
int64_t PadSource(int64_t i, int64_t d, const std::string& mode) {
  if (i >= 0 && i < d) return i;
  if (mode == "edge") return i < 0 ? 0 : d - 1;
  if (mode == "wrap") return ((i % d) + d) % d;
  if (d == 1) return 0;  // reflect
  const int64_t period = 2 * (d - 1);
  i = ((i % period) + period) % period;
  return i < d ? i : period - i;
}

// Fills every output element of a non-constant Pad from its mapped source element.
void PadByMapping(const Tensor& data, absl::Span<const int64_t> before, const std::string& mode,
                  Tensor& out) {
  const int r = data.rank();
  const size_t es = DTypeSize(data.dtype());
  const std::vector<int64_t> strides = Strides(data.dims());
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    int64_t src = 0;
    for (int a = 0; a < r; ++a)
      src += PadSource(idx[a] - before[a], data.dims()[a], mode) * strides[a];
    std::memcpy(out.raw() + i * es, data.raw() + src * es, es);
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[a] < out.dims()[a]) break;
      idx[a] = 0;
    }
  }
}

Outputs Pad(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* pt, Required(in, 1, "pads"));
  const std::string* mode_attr = node.attr_string("mode");
  const std::string mode = mode_attr ? *mode_attr : "constant";
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    return Invalid(absl::StrCat("unknown Pad mode '", mode, "'"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadInts(*pt, "pads"));
  const int r = data->rank();
  std::vector<int64_t> axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  if (const Tensor* at = Optional(in, 3)) {
    KILN_ASSIGN_OR_RETURN(axes, ReadInts(*at, "axes"));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int> ax, NormalizeAxes(axes, r));
  const size_t na = ax.size();
  if (pads.size() != 2 * na)
    return Invalid(absl::StrCat("pads has ", pads.size(), " values, want ", 2 * na));
  std::vector<int64_t> before(r, 0), after(r, 0);
  for (size_t i = 0; i < na; ++i) {
    before[ax[i]] = pads[i];
    after[ax[i]] = pads[i + na];
  }
  std::vector<int64_t> od(r);
  for (int a = 0; a < r; ++a) {
    int64_t v;
    if (AddOverflows(data->dims()[a], before[a], &v) || AddOverflows(v, after[a], &v) || v < 0)
      return Invalid(absl::StrCat("pads ", DimsString(pads), " give a negative or huge dim"));
    od[a] = v;
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  const size_t es = DTypeSize(data->dtype());
  if (mode != "constant") {
    for (int a = 0; a < r; ++a)
      if (data->dims()[a] == 0 && od[a] > 0)
        return Invalid(absl::StrCat("Pad mode '", mode, "' cannot pad the empty axis ", a));
    PadByMapping(*data, before, mode, out);
    return One(std::move(out));
  }
  if (const Tensor* cv = Optional(in, 2)) {
    if (cv->dtype() != data->dtype()) return Invalid("constant_value must have the dtype of data");
    if (cv->NumElements() != 1) return Invalid("constant_value must be a scalar");
    for (int64_t i = 0; i < out.NumElements(); ++i) std::memcpy(out.raw() + i * es, cv->raw(), es);
  }
  // Copy every input element that lands inside the output (negative pads crop).
  const int64_t n = data->NumElements();
  const std::vector<int64_t> ostr = Strides(od);
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    bool inside = true;
    int64_t dst = 0;
    for (int a = 0; a < r; ++a) {
      const int64_t o = idx[a] + before[a];
      if (o < 0 || o >= od[a]) {
        inside = false;
        break;
      }
      dst += o * ostr[a];
    }
    if (inside) std::memcpy(out.raw() + dst * es, data->raw() + i * es, es);
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[a] < data->dims()[a]) break;
      idx[a] = 0;
    }
  }
  return One(std::move(out));
}

Outputs GatherElements(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* it, Required(in, 1, "indices"));
  if (!IsIndexType(it->dtype())) return Invalid("indices must be int32 or int64");
  const int r = data->rank();
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), r));
  if (it->rank() != r)
    return Invalid(absl::StrCat("indices rank ", it->rank(), " differs from data rank ", r));
  for (int a = 0; a < r; ++a)
    if (a != axis && it->dims()[a] > data->dims()[a])
      return Invalid(absl::StrCat("indices shape ", DimsString(it->dims()), " exceeds data shape ",
                                  DimsString(data->dims())));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), it->dims()));
  const int64_t n = out.NumElements();
  const int64_t ad = data->dims()[axis];
  const size_t es = DTypeSize(data->dtype());
  const std::vector<int64_t> strides = Strides(data->dims());
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = it->GetAsInt64(i);
    if (v < -ad || v >= ad)
      return Invalid(
          absl::StrCat("index ", v, " is out of range for axis ", axis, " of size ", ad));
    if (v < 0) v += ad;
    int64_t src = 0;
    for (int a = 0; a < r; ++a) src += (a == axis ? v : idx[a]) * strides[a];
    std::memcpy(out.raw() + i * es, data->raw() + src * es, es);
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[a] < it->dims()[a]) break;
      idx[a] = 0;
    }
  }
  return One(std::move(out));
}

Outputs ScatterND(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* it, Required(in, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(const Tensor* up, Required(in, 2, "updates"));
  const std::string* red_attr = node.attr_string("reduction");
  const std::string red = red_attr ? *red_attr : "none";
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return Invalid(absl::StrCat("unknown ScatterND reduction '", red, "'"));
  if (it->dtype() != DType::kI64) return Invalid("indices must be int64");
  if (up->dtype() != data->dtype()) return Invalid("updates must have the dtype of data");
  if (it->rank() < 1) return Invalid("indices must have rank >= 1");
  const int r = data->rank(), q = it->rank();
  const int64_t k = it->dims()[q - 1];
  if (k < 1 || k > r)
    return Invalid(absl::StrCat("indices last dim ", k, " must be in [1, ", r, "]"));
  // updates.shape == indices.shape[:-1] + data.shape[k:]
  std::vector<int64_t> want(it->dims().begin(), it->dims().end() - 1);
  want.insert(want.end(), data->dims().begin() + k, data->dims().end());
  if (up->dims() != want)
    return Invalid(
        absl::StrCat("updates shape ", DimsString(up->dims()), ", want ", DimsString(want)));
  Tensor out = data->Clone();
  const std::vector<int64_t> strides = Strides(data->dims());
  const int64_t groups = Product(it->dims(), 0, q - 1);
  const size_t slice = static_cast<size_t>(Product(data->dims(), k, r)) * DTypeSize(data->dtype());
  std::vector<int64_t> offsets(groups);  // element offset of each update slice in data
  for (int64_t g = 0; g < groups; ++g) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t d = data->dims()[j];
      int64_t v = it->GetAsInt64(g * k + j);
      if (v < -d || v >= d)
        return Invalid(absl::StrCat("index ", v, " is out of range for axis ", j, " of size ", d));
      if (v < 0) v += d;
      off += v * strides[j];
    }
    offsets[g] = off;
  }
  if (red == "none") {
    for (int64_t g = 0; g < groups; ++g)
      if (slice > 0)
        std::memcpy(out.raw() + offsets[g] * DTypeSize(data->dtype()), up->raw() + g * slice,
                    slice);
    return One(std::move(out));
  }
  const int64_t per = Product(data->dims(), k, r);  // elements per update slice
  KILN_RETURN_IF_ERROR(VisitNumeric(data->dtype(), [&](auto a) -> absl::Status {
    using A = decltype(a);
    using T = typename A::Acc;
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t e = 0; e < per; ++e) {
        const T cur = A::Load(out.raw(), offsets[g] + e), u = A::Load(up->raw(), g * per + e);
        T v;
        if (red == "add") {
          v = WrapAdd(cur, u);
        } else if (red == "mul") {
          v = WrapMul(cur, u);
        } else if (red == "max") {
          v = Greater(u, cur) ? u : cur;
        } else {
          v = Greater(cur, u) ? u : cur;
        }
        A::Store(out.raw(), offsets[g] + e, v);
      }
    return absl::OkStatus();
  }));
  return One(std::move(out));
}

Outputs OneHot(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, Required(in, 0, "indices"));
  KILN_ASSIGN_OR_RETURN(const Tensor* dt, Required(in, 1, "depth"));
  KILN_ASSIGN_OR_RETURN(const Tensor* vt, Required(in, 2, "values"));
  if (ind->dtype() == DType::kBool || dt->dtype() == DType::kBool)
    return Invalid("indices and depth must be numeric");
  KILN_RETURN_IF_ERROR(CheckOneElement(*dt, "depth"));
  if (vt->rank() != 1 || vt->NumElements() != 2)
    return Invalid(absl::StrCat("values must have shape [2], got ", vt->ShapeString()));
  const double depth_d = dt->GetAsDouble(0);
  if (!(depth_d >= 1 && depth_d < static_cast<double>(int64_t{1} << 40)))
    return Invalid(absl::StrCat("depth ", depth_d, " must be positive"));
  const int64_t depth = static_cast<int64_t>(depth_d);
  const int out_rank = ind->rank() + 1;
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", -1), out_rank));
  std::vector<int64_t> od = ind->dims();
  od.insert(od.begin() + axis, depth);
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(vt->dtype(), od));
  const size_t es = DTypeSize(vt->dtype());
  for (int64_t i = 0; i < out.NumElements(); ++i) std::memcpy(out.raw() + i * es, vt->raw(), es);
  const int64_t outer = Product(ind->dims(), 0, axis),
                inner = Product(ind->dims(), axis, ind->rank());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      // Non-integer indices truncate toward zero, as the ONNX reference casts to int64.
      int64_t v = ind->GetAsInt64(o * inner + i);
      if (v < -depth || v >= depth) continue;  // out of range: the row stays all off
      if (v < 0) v += depth;
      std::memcpy(out.raw() + ((o * depth + v) * inner + i) * es, vt->raw() + es, es);
    }
  return One(std::move(out));
}

Outputs NonZero(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "X"));
  if (x->dtype() == DType::kString) return absl::UnimplementedError("string NonZero");
  // A scalar is treated as a 1-element vector (numpy.nonzero does the same).
  const int r = std::max(x->rank(), 1);
  const int64_t n = x->NumElements();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < n; ++i)
    if (x->GetAsDouble(i) != 0.0) hits.push_back(i);
  const int64_t count = static_cast<int64_t>(hits.size());
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(DType::kI64, {r, count}));
  const std::vector<int64_t> strides =
      x->rank() == 0 ? std::vector<int64_t>{1} : Strides(x->dims());
  for (int64_t h = 0; h < count; ++h) {
    int64_t rem = hits[h];
    for (int a = 0; a < r; ++a) {
      out.data<int64_t>()[a * count + h] = rem / strides[a];
      rem %= strides[a];
    }
  }
  return One(std::move(out));
}

Outputs TopK(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Tensor* kt, Required(in, 1, "K"));
  if (kt->dtype() != DType::kI64) return Invalid("K must be int64");
  if (kt->rank() != 1 || kt->NumElements() != 1) return Invalid("K must have shape [1]");
  const int64_t k = kt->GetAsInt64(0);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", -1), x->rank()));
  const bool largest = node.attr_int_or("largest", 1) != 0;
  const int64_t len = x->dims()[axis];
  if (k < 0 || k > len)
    return Invalid(absl::StrCat("K ", k, " is outside [0, ", len, "] for axis ", axis));
  std::vector<int64_t> od = x->dims();
  od[axis] = k;
  KILN_ASSIGN_OR_RETURN(Tensor values, Tensor::Create(x->dtype(), od));
  KILN_ASSIGN_OR_RETURN(Tensor indices, Tensor::Create(DType::kI64, od));
  const int64_t outer = Product(x->dims(), 0, axis),
                inner = Product(x->dims(), axis + 1, x->rank());
  const size_t es = DTypeSize(x->dtype());
  KILN_RETURN_IF_ERROR(VisitNumeric(x->dtype(), [&](auto a) -> absl::Status {
    using A = decltype(a);
    using T = typename A::Acc;
    std::vector<int64_t> order(len);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return A::Load(x->raw(), (o * len + j) * inner + i); };
        std::iota(order.begin(), order.end(), 0);
        // Ties keep the lower index first (the spec's sorted=1 order); NaN ranks highest.
        std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
          const T vp = at(p), vq = at(q);
          return largest ? Greater(vp, vq) : Greater(vq, vp);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t dst = (o * k + j) * inner + i;
          std::memcpy(values.raw() + dst * es, x->raw() + ((o * len + order[j]) * inner + i) * es,
                      es);
          indices.data<int64_t>()[dst] = order[j];
        }
      }
    return absl::OkStatus();
  }));
  std::vector<Tensor> outs;
  outs.push_back(std::move(values));
  outs.push_back(std::move(indices));
  return outs;
}

}  // namespace

void RegisterMovementKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Gather", &CheckedKernel<Gather>);
  add("Slice", &CheckedKernel<Slice>);
  add("Concat", &CheckedKernel<Concat>);
  add("Split", &CheckedKernel<Split>);
  add("Reshape", &CheckedKernel<Reshape>);
  add("Transpose", &CheckedKernel<Transpose>);
  add("Unsqueeze", &CheckedKernel<Unsqueeze>);
  add("Squeeze", &CheckedKernel<Squeeze>);
  add("Expand", &CheckedKernel<Expand>);
  add("Flatten", &CheckedKernel<Flatten>);
  add("Shape", &CheckedKernel<Shape>);
  add("ConstantOfShape", &CheckedKernel<ConstantOfShape>);
  add("Range", &CheckedKernel<Range>);
  add("Identity", &CheckedKernel<Identity>);
  add("Dropout", &CheckedKernel<Dropout>);
  add("Trilu", &CheckedKernel<Trilu>);
  add("CumSum", &CheckedKernel<CumSum>);
  add("ArgMax", &CheckedKernel<ArgMax>);
  add("Size", &CheckedKernel<Size>);
  add("Tile", &CheckedKernel<Tile>);
  add("Pad", &CheckedKernel<Pad>);
  add("GatherElements", &CheckedKernel<GatherElements>);
  add("ScatterND", &CheckedKernel<ScatterND>);
  add("OneHot", &CheckedKernel<OneHot>);
  add("NonZero", &CheckedKernel<NonZero>);
  add("TopK", &CheckedKernel<TopK>);
}

}  // namespace kiln::reference
