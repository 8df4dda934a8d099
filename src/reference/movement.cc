// Reference kernels for data movement and shape ops: Gather, Slice, Concat, Split,
// Reshape, Transpose, Unsqueeze, Squeeze, Expand, Flatten, Shape, ConstantOfShape, Range,
// Identity, Dropout (inference), Trilu, CumSum, ArgMax, and Tile, Pad (every mode),
// GatherElements, GatherND, ScatterND (all reductions), OneHot, NonZero, Size, TopK,
// Compress, ReverseSequence, CenterCropPad.
//
// Each kernel follows its opset-21 ONNX signature (the importer canonicalizes older forms).
// Data is moved as raw elements of DTypeSize bytes, so one code path serves every dtype;
// only ops that compute (CumSum, ArgMax, Range, TopK, ScatterND reductions) dispatch on the
// element type.
// Every input tensor is checked against its buffer before any read (CheckedKernel), every
// index and axis is validated, and sizes derived from input *values* (ConstantOfShape,
// Range, Expand, Reshape, Tile, Pad, OneHot) go through overflow-checked arithmetic and
// Tensor::Create, so a hostile value yields a status, never a crash or a huge allocation.
// Files: shape ops (Reshape, Transpose, Unsqueeze, Squeeze, Expand, Flatten, Shape, Size,
// ConstantOfShape, Identity, Dropout) and the single entry point are here; slicing and
// joining in movement_slice.cc, gather/scatter in movement_gather.cc, index-computing ops
// in movement_index.cc, data-driven selection in movement_select.cc, shared validation in
// movement_internal.h.
// Limits: Dropout runs in inference form only (training with ratio > 0 is Unimplemented);
// strings are not supported.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernels.h"
#include "reference/movement_internal.h"

namespace kiln::reference {
namespace movement {
namespace {

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

Outputs Size(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Required(in, 0, "data"));
  return One(Tensor::ScalarI64(data->NumElements()));
}

}  // namespace

void RegisterShapeKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Reshape", &CheckedKernel<Reshape>);
  add("Transpose", &CheckedKernel<Transpose>);
  add("Unsqueeze", &CheckedKernel<Unsqueeze>);
  add("Squeeze", &CheckedKernel<Squeeze>);
  add("Expand", &CheckedKernel<Expand>);
  add("Flatten", &CheckedKernel<Flatten>);
  add("Shape", &CheckedKernel<Shape>);
  add("ConstantOfShape", &CheckedKernel<ConstantOfShape>);
  add("Identity", &CheckedKernel<Identity>);
  add("Dropout", &CheckedKernel<Dropout>);
  add("Size", &CheckedKernel<Size>);
}

}  // namespace movement

void RegisterMovementKernels(KernelTable& table) {
  movement::RegisterShapeKernels(table);
  movement::RegisterSliceKernels(table);
  movement::RegisterGatherKernels(table);
  movement::RegisterIndexKernels(table);
  movement::RegisterSelectKernels(table);
}

}  // namespace kiln::reference
