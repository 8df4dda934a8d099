// Movement kernels that select or reorder along an axis by data: Compress (the slices whose
// condition is true; without an axis, of the flattened input), ReverseSequence (each batch
// row's first sequence_lens[b] time steps reversed, the rest kept) and CenterCropPad (each
// listed axis cropped or zero-padded to the wanted size around its centre, the odd element
// at the end). Raw element copies, every index checked (movement.cc's rules).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernels.h"
#include "reference/movement_internal.h"

namespace kiln::reference::movement {
namespace {

Outputs Compress(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Tensor* cond, Required(in, 1, "condition"));
  if (cond->dtype() != DType::kBool || cond->rank() != 1)
    return Invalid(absl::StrCat("condition must be a 1-D bool tensor, got ",
                                std::string(DTypeName(cond->dtype())), " ",
                                DimsString(cond->dims())));
  const size_t es = DTypeSize(x->dtype());
  // [outer, len, inner] view: the flattened input (axis absent) or the axis.
  int64_t outer = 1, len = x->NumElements(), inner = 1;
  int axis = -1;
  if (node.has_attr("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node.attr_int_or("axis", 0), x->rank()));
    const std::vector<int64_t>& d = x->dims();
    len = d[axis];
    for (int i = 0; i < axis; ++i) outer *= d[i];
    for (int i = axis + 1; i < x->rank(); ++i) inner *= d[i];
  }
  // A condition shorter than the axis selects only among its own length (numpy).
  const int64_t n = std::min(len, cond->NumElements());
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < n; ++i)
    if (cond->data<uint8_t>()[i] != 0) keep.push_back(i);
  std::vector<int64_t> od;
  if (axis < 0) {
    od = {static_cast<int64_t>(keep.size())};
  } else {
    od = x->dims();
    od[axis] = static_cast<int64_t>(keep.size());
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), od));
  const int64_t k = static_cast<int64_t>(keep.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(y.raw() + ((o * k + j) * inner) * es,
                  x->raw() + ((o * len + keep[j]) * inner) * es, static_cast<size_t>(inner) * es);
  return One(std::move(y));
}

Outputs ReverseSequence(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Tensor* lens_t, Required(in, 1, "sequence_lens"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lens, ReadInts(*lens_t, "sequence_lens"));
  if (x->rank() < 2) return Invalid("input must have rank >= 2");
  const int64_t batch_axis = node.attr_int_or("batch_axis", 1);
  const int64_t time_axis = node.attr_int_or("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return Invalid("batch_axis and time_axis must be 0 and 1, one each");
  const std::vector<int64_t>& d = x->dims();
  const int64_t batch = d[batch_axis], time = d[time_axis];
  if (static_cast<int64_t>(lens.size()) != batch)
    return Invalid(absl::StrCat("sequence_lens has ", lens.size(), " values for batch ", batch));
  for (int64_t l : lens)
    if (l < 0 || l > time)
      return Invalid(absl::StrCat("sequence length ", l, " is outside [0, ", time, "]"));
  int64_t inner = 1;
  for (int i = 2; i < x->rank(); ++i) inner *= d[i];
  const size_t es = DTypeSize(x->dtype());
  Tensor y = x->Clone();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < lens[b]; ++t) {
      const int64_t from_t = lens[b] - 1 - t;
      auto at = [&](int64_t tt) {
        return (batch_axis == 0 ? b * time + tt : tt * batch + b) * inner;
      };
      std::memcpy(y.raw() + at(t) * es, x->raw() + at(from_t) * es,
                  static_cast<size_t>(inner) * es);
    }
  return One(std::move(y));
}

Outputs CenterCropPad(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Required(in, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Tensor* shape_t, Required(in, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*shape_t, "shape"));
  const int r = x->rank();
  std::vector<int64_t> axes;
  if (const std::vector<int64_t>* a = node.attr_ints("axes")) {
    for (int64_t v : *a) {
      KILN_ASSIGN_OR_RETURN(int ax, NormalizeAxis(v, r));
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  if (shape.size() != axes.size())
    return Invalid(absl::StrCat("shape has ", shape.size(), " values for ", axes.size(), " axes"));
  const std::vector<int64_t>& d = x->dims();
  std::vector<int64_t> od = d;
  // Per axis: output position p reads input position p + shift when in range.
  std::vector<int64_t> shift(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = static_cast<int>(axes[i]);
    if (shape[i] < 0) return Invalid(absl::StrCat("shape value ", shape[i], " is negative"));
    od[a] = shape[i];
    shift[a] = (d[a] - shape[i]) / 2;  // crop: skip the lower half; pad: negative
    if (shape[i] > d[a]) shift[a] = -((shape[i] - d[a]) / 2);
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), od));  // zeros
  const int64_t n = y.NumElements();
  const size_t es = DTypeSize(x->dtype());
  const std::vector<int64_t> st = Strides(d);
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    bool inside = true;
    for (int a = 0; a < r; ++a) {
      const int64_t p = idx[a] + shift[a];
      if (p < 0 || p >= d[a]) inside = false;
      src += p * st[a];
    }
    if (inside) std::memcpy(y.raw() + i * es, x->raw() + src * es, es);
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[a] < od[a]) break;
      idx[a] = 0;
    }
  }
  return One(std::move(y));
}

}  // namespace

void RegisterSelectKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Compress", &CheckedKernel<Compress>);
  add("ReverseSequence", &CheckedKernel<ReverseSequence>);
  add("CenterCropPad", &CheckedKernel<CenterCropPad>);
}

}  // namespace kiln::reference::movement
