// Reference kernels that compute indices or sequences: Range (exact integer and numpy-
// style float), CumSum/CumProd, ArgMax/ArgMin (NaN as the extreme, as numpy), NonZero and TopK.
// These dispatch on the element type (VisitNumeric). See movement.cc for the safety rules.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/movement_internal.h"

namespace kiln::reference::movement {
namespace {

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

// CumSum / CumProd: the running sum or product along `axis` (an input), exclusive (the
// identity first) and/or reverse; integers wrap.
template <bool kProd>
Outputs Cumulative(const Node& node, Inputs in) {
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
        T acc = kProd ? T(1) : T(0);
        for (int64_t step = 0; step < len; ++step) {
          const int64_t j = reverse ? len - 1 - step : step;
          const int64_t off = (o * len + j) * inner + i;
          const T v = A::Load(x->raw(), off);
          if (exclusive) A::Store(out.raw(), off, acc);
          acc = kProd ? WrapMul(acc, v) : WrapAdd(acc, v);
          if (!exclusive) A::Store(out.raw(), off, acc);
        }
      }
    return absl::OkStatus();
  }));
  return One(std::move(out));
}

// ArgMax / ArgMin: the first (or with select_last_index the last) position of the
// extreme value along `axis`; NaN counts as the extreme, as in numpy.
template <bool kMax>
Outputs ArgExtreme(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), x->rank()));
  const bool keepdims = node.attr_int_or("keepdims", 1) != 0;
  const bool last = node.attr_int_or("select_last_index", 0) != 0;
  const int64_t outer = Product(x->dims(), 0, axis), len = x->dims()[axis],
                inner = Product(x->dims(), axis + 1, x->rank());
  if (len == 0)
    return Invalid(absl::StrCat(kMax ? "ArgMax" : "ArgMin", " over axis ", axis, " of size 0"));
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
          const bool better = kMax ? Greater(v, best) : Less(v, best);
          const bool worse = kMax ? Greater(best, v) : Less(best, v);
          if (last ? !worse : better) {
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

void RegisterIndexKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Range", &CheckedKernel<Range>);
  add("CumSum", &CheckedKernel<Cumulative<false>>);
  add("CumProd", &CheckedKernel<Cumulative<true>>);
  add("ArgMax", &CheckedKernel<ArgExtreme<true>>);
  add("ArgMin", &CheckedKernel<ArgExtreme<false>>);
  add("NonZero", &CheckedKernel<NonZero>);
  add("TopK", &CheckedKernel<TopK>);
}

}  // namespace kiln::reference::movement
