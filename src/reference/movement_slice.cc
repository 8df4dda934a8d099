// Slicing and joining reference kernels: Slice, Concat, Split, Tile, Pad (constant,
// edge, reflect, wrap) and Trilu. Output sizes derived from input values go through
// overflow-checked arithmetic and Tensor::Create. See movement.cc for the safety rules.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/reference/slice.h"
#include "kiln/support/status.h"
#include "reference/movement_internal.h"

namespace kiln::reference::movement {
namespace {

Outputs Slice(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* st, Required(in, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(const Tensor* en, Required(in, 2, "ends"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ReadInts(*st, "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ReadInts(*en, "ends"));
  std::vector<int64_t> axes, steps;
  if (const Tensor* t = Optional(in, 3)) {
    KILN_ASSIGN_OR_RETURN(axes, ReadInts(*t, "axes"));
  }
  if (const Tensor* t = Optional(in, 4)) {
    KILN_ASSIGN_OR_RETURN(steps, ReadInts(*t, "steps"));
  }
  KILN_ASSIGN_OR_RETURN(const SliceBounds b,
                        NormalizeSlice(data->dims(), starts, ends, axes, steps));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), b.dims));
  const std::vector<int64_t> strides = Strides(data->dims());
  const int r = data->rank();
  int64_t base = 0;
  std::vector<int64_t> in_strides(r);
  for (int a = 0; a < r; ++a) {
    base += b.first[a] * strides[a];
    in_strides[a] = b.step[a] * strides[a];  // |step| <= dim here: no overflow
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

}  // namespace

void RegisterSliceKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Slice", &CheckedKernel<Slice>);
  add("Concat", &CheckedKernel<Concat>);
  add("Split", &CheckedKernel<Split>);
  add("Tile", &CheckedKernel<Tile>);
  add("Pad", &CheckedKernel<Pad>);
  add("Trilu", &CheckedKernel<Trilu>);
}

}  // namespace kiln::reference::movement

namespace kiln {

absl::StatusOr<SliceBounds> NormalizeSlice(const std::vector<int64_t>& data_dims,
                                           const std::vector<int64_t>& starts,
                                           const std::vector<int64_t>& ends,
                                           std::vector<int64_t> axes, std::vector<int64_t> steps) {
  using reference::movement::Invalid;
  const size_t n = starts.size();
  if (ends.size() != n)
    return Invalid(absl::StrCat("starts has ", n, " values but ends has ", ends.size()));
  if (axes.empty()) {
    axes.resize(n);
    std::iota(axes.begin(), axes.end(), 0);
  } else if (axes.size() != n) {
    return Invalid(absl::StrCat("axes has ", axes.size(), " values, want ", n));
  }
  if (steps.empty()) {
    steps.assign(n, 1);
  } else if (steps.size() != n) {
    return Invalid(absl::StrCat("steps has ", steps.size(), " values, want ", n));
  }
  const int r = static_cast<int>(data_dims.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int> ax, reference::movement::NormalizeAxes(axes, r));
  SliceBounds b{std::vector<int64_t>(r, 0), std::vector<int64_t>(r, 1), data_dims};
  for (size_t i = 0; i < n; ++i) {
    const int a = ax[i];
    const int64_t d = data_dims[a];
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
    b.dims[a] = len;
    b.first[a] = len > 0 ? s : 0;
    b.step[a] = len > 1 ? k : 1;  // |k| <= d here, so step * stride cannot overflow
  }
  return b;
}

}  // namespace kiln
