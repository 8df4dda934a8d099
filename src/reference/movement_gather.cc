// Gather/scatter reference kernels: Gather, GatherElements, GatherND (with batch_dims),
// ScatterND and ScatterElements (every reduction; Scatter, deprecated, is ScatterElements)
// and OneHot. Every index is range-checked (negative indices
// count from the end) before any element moves. See movement.cc for the safety rules.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/movement_internal.h"

namespace kiln::reference::movement {
namespace {

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

// GatherElements / ScatterElements: for each element of `it` (data's rank, each dim at
// most data's but on `axis`), the flat offset in data of that element's position with
// the axis coordinate replaced by its (range-checked) index.
absl::StatusOr<std::vector<int64_t>> ElementTargets(const Tensor& data, const Tensor& it,
                                                    int axis) {
  if (!IsIndexType(it.dtype())) return Invalid("indices must be int32 or int64");
  const int r = data.rank();
  if (it.rank() != r)
    return Invalid(absl::StrCat("indices rank ", it.rank(), " differs from data rank ", r));
  for (int a = 0; a < r; ++a)
    if (a != axis && it.dims()[a] > data.dims()[a])
      return Invalid(absl::StrCat("indices shape ", DimsString(it.dims()), " exceeds data shape ",
                                  DimsString(data.dims())));
  const int64_t n = it.NumElements(), ad = data.dims()[axis];
  const std::vector<int64_t> strides = Strides(data.dims());
  std::vector<int64_t> targets(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = it.GetAsInt64(i);
    if (v < -ad || v >= ad)
      return Invalid(
          absl::StrCat("index ", v, " is out of range for axis ", axis, " of size ", ad));
    if (v < 0) v += ad;
    int64_t off = 0;
    for (int a = 0; a < r; ++a) off += (a == axis ? v : idx[a]) * strides[a];
    targets[i] = off;
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[a] < it.dims()[a]) break;
      idx[a] = 0;
    }
  }
  return targets;
}

Outputs GatherElements(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* it, Required(in, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), data->rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> src, ElementTargets(*data, *it, axis));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), it->dims()));
  const size_t es = DTypeSize(data->dtype());
  for (size_t i = 0; i < src.size(); ++i)
    std::memcpy(out.raw() + i * es, data->raw() + src[i] * es, es);
  return One(std::move(out));
}

// ONNX GatherND: with b = batch_dims and k = indices.shape[-1], each k-tuple of indices
// selects a slice data[batch..., i_0, ..., i_{k-1}, :] from its own batch entry;
// out.shape = indices.shape[:-1] + data.shape[b + k:].
Outputs GatherND(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* it, Required(in, 1, "indices"));
  if (it->dtype() != DType::kI64) return Invalid("indices must be int64");
  const int r = data->rank(), q = it->rank();
  if (r < 1 || q < 1)
    return Invalid(absl::StrCat("data rank ", r, " and indices rank ", q, " must be >= 1"));
  const int64_t b = node.attr_int_or("batch_dims", 0);
  if (b < 0 || b >= std::min(r, q))
    return Invalid(absl::StrCat("batch_dims ", b, " must be in [0, min(data rank ", r,
                                ", indices rank ", q, "))"));
  const std::vector<int64_t>& dd = data->dims();
  const std::vector<int64_t>& id = it->dims();
  for (int64_t a = 0; a < b; ++a)
    if (dd[a] != id[a])
      return Invalid(absl::StrCat("batch dim ", a, " differs: data ", DimsString(dd), ", indices ",
                                  DimsString(id)));
  const int64_t k = id[q - 1];
  if (k < 1 || k > r - b)
    return Invalid(absl::StrCat("indices last dim ", k, " must be in [1, ", r - b, "]"));
  std::vector<int64_t> od(id.begin(), id.end() - 1);
  od.insert(od.end(), dd.begin() + b + k, dd.end());
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(data->dtype(), od));
  const std::vector<int64_t> strides = Strides(dd);
  const int64_t batches = Product(id, 0, b);
  const int64_t per_batch = Product(id, b, q - 1);    // index tuples per batch entry
  const int64_t batch_stride = Product(dd, b, r);     // data elements per batch entry
  std::vector<int64_t> offsets(batches * per_batch);  // element offset of each slice in data
  for (int64_t g = 0; g < batches * per_batch; ++g) {
    int64_t off = (g / per_batch) * batch_stride;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t d = dd[b + j];
      int64_t v = it->GetAsInt64(g * k + j);
      if (v < -d || v >= d)
        return Invalid(
            absl::StrCat("index ", v, " is out of range for axis ", b + j, " of size ", d));
      if (v < 0) v += d;
      off += v * strides[b + j];
    }
    offsets[g] = off;
  }
  const size_t es = DTypeSize(data->dtype());
  const size_t slice = static_cast<size_t>(Product(dd, b + k, r)) * es;
  if (slice > 0)
    for (size_t g = 0; g < offsets.size(); ++g)
      std::memcpy(out.raw() + g * slice, data->raw() + offsets[g] * es, slice);
  return One(std::move(out));
}

// The scatter ops' `reduction` attribute: none (the default), add, mul, max or min.
absl::StatusOr<std::string> Reduction(const Node& node) {
  const std::string* attr = node.attr_string("reduction");
  const std::string red = attr ? *attr : "none";
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return Invalid(absl::StrCat("unknown ", node.op(), " reduction '", red, "'"));
  return red;
}

// Writes update element u into out element o for every (o, u) of `moves`, in order:
// replacing it (reduction "none") or combining with it ("add", "mul", "max", "min";
// integers wrap, NaN wins max/min as in numpy).
absl::Status ScatterInto(Tensor& out, const Tensor& up,
                         const std::vector<std::pair<int64_t, int64_t>>& moves,
                         const std::string& red) {
  if (red == "none") {
    const size_t es = DTypeSize(out.dtype());
    for (const auto& [o, u] : moves) std::memcpy(out.raw() + o * es, up.raw() + u * es, es);
    return absl::OkStatus();
  }
  return VisitNumeric(out.dtype(), [&](auto a) -> absl::Status {
    using A = decltype(a);
    using T = typename A::Acc;
    for (const auto& [o, ui] : moves) {
      const T cur = A::Load(out.raw(), o), u = A::Load(up.raw(), ui);
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
      A::Store(out.raw(), o, v);
    }
    return absl::OkStatus();
  });
}

Outputs ScatterND(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* it, Required(in, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(const Tensor* up, Required(in, 2, "updates"));
  KILN_ASSIGN_OR_RETURN(const std::string red, Reduction(node));
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
  if (red == "none") {  // whole slices
    for (int64_t g = 0; g < groups; ++g)
      if (slice > 0)
        std::memcpy(out.raw() + offsets[g] * DTypeSize(data->dtype()), up->raw() + g * slice,
                    slice);
    return One(std::move(out));
  }
  const int64_t per = Product(data->dims(), k, r);  // elements per update slice
  std::vector<std::pair<int64_t, int64_t>> moves;   // (element in out, element in updates)
  moves.reserve(static_cast<size_t>(groups * per));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t e = 0; e < per; ++e) moves.push_back({offsets[g] + e, g * per + e});
  KILN_RETURN_IF_ERROR(ScatterInto(out, *up, moves, red));
  return One(std::move(out));
}

// ScatterElements (and the deprecated Scatter): out = data, then for every element i of
// indices, out at i's position with the axis coordinate replaced by indices[i] takes
// updates[i] (or combines with it by `reduction`).
Outputs ScatterElements(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Tensor* it, Required(in, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(const Tensor* up, Required(in, 2, "updates"));
  KILN_ASSIGN_OR_RETURN(const std::string red, Reduction(node));
  if (up->dtype() != data->dtype()) return Invalid("updates must have the dtype of data");
  if (up->dims() != it->dims())
    return Invalid(absl::StrCat("updates ", DimsString(up->dims()),
                                " must have the shape of indices ", DimsString(it->dims())));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", 0), data->rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dst, ElementTargets(*data, *it, axis));
  std::vector<std::pair<int64_t, int64_t>> moves;
  moves.reserve(dst.size());
  for (size_t i = 0; i < dst.size(); ++i) moves.push_back({dst[i], static_cast<int64_t>(i)});
  Tensor out = data->Clone();
  KILN_RETURN_IF_ERROR(ScatterInto(out, *up, moves, red));
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

}  // namespace

void RegisterGatherKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Gather", &CheckedKernel<Gather>);
  add("GatherElements", &CheckedKernel<GatherElements>);
  add("GatherND", &CheckedKernel<GatherND>);
  add("ScatterND", &CheckedKernel<ScatterND>);
  add("ScatterElements", &CheckedKernel<ScatterElements>);
  add("Scatter", &CheckedKernel<ScatterElements>);
  add("OneHot", &CheckedKernel<OneHot>);
}

}  // namespace kiln::reference::movement
