// AttributeProto -> kiln Attribute and TypeProto -> kiln Type. Attributes keep their ONNX
// names and types (INT -> int64_t, FLOAT -> float, STRING -> std::string, TENSOR ->
// Tensor, INTS/FLOATS/STRINGS -> vectors). Subgraphs, sparse tensors, tensor lists and
// type protos are Unimplemented. An attribute without a `type` (very old exporters) gets
// the type of the one field it sets. Limits: only tensor types (no sequences, maps or
// optionals) are accepted for graph inputs and outputs.
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "src/onnx/import_internal.h"

namespace kiln::onnx_import {

using onnx::AttributeProto;

std::string DescribeOnnxNode(std::string_view name, std::string_view domain, std::string_view op,
                             int64_t opset) {
  std::string full =
      domain.empty() ? std::string(op) : absl::StrCat(std::string(domain), ".", std::string(op));
  return absl::StrCat("node '", std::string(name), "' (", full, ", opset ", opset, ")");
}

Tensor VectorI64(absl::Span<const int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return v.empty() ? Tensor(DType::kI64, {0}) : Tensor::FromI64({n}, v);
}

Tensor VectorF32(absl::Span<const float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return v.empty() ? Tensor(DType::kF32, {0}) : Tensor::FromF32({n}, v);
}

absl::StatusOr<Type> TypeFromProto(const onnx::TypeProto& tp, std::string_view what,
                                   bool allow_undefined_dtype, const ImportOptions& options) {
  const std::string w(what);
  if (tp.value_case() == onnx::TypeProto::VALUE_NOT_SET)
    return absl::InvalidArgumentError(absl::StrCat(w, " has no type"));
  if (!tp.has_tensor_type())
    return absl::UnimplementedError(
        absl::StrCat(w,
                     ": only tensor types are supported (not sequence, map, optional or "
                     "sparse tensor)"));
  const onnx::TypeProto::Tensor& tt = tp.tensor_type();
  Type type;
  if (tt.elem_type() == 0) {
    if (!allow_undefined_dtype)
      return absl::InvalidArgumentError(absl::StrCat(w, " has no element type"));
  } else {
    KILN_ASSIGN_OR_RETURN(type.dtype, DTypeFromOnnxCode(tt.elem_type(), w));
  }
  if (!tt.has_shape()) return type;
  const onnx::TensorShapeProto& sp = tt.shape();
  if (sp.dim_size() > options.max_rank)
    return absl::InvalidArgumentError(absl::StrCat(w, ": rank ", sp.dim_size(),
                                                   " exceeds the limit of ", options.max_rank,
                                                   " (ImportOptions.max_rank)"));
  type.shape.emplace();
  for (int i = 0; i < sp.dim_size(); ++i) {
    const auto& d = sp.dim(i);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return absl::InvalidArgumentError(
            absl::StrCat(w, ": dimension ", i, " is negative (", d.dim_value(), ")"));
      type.shape->push_back(Dim::Known(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      type.shape->push_back(Dim::Symbol(d.dim_param()));
    } else {
      type.shape->push_back(Dim());
    }
  }
  return type;
}

namespace {

// The type an attribute without `type` most plausibly has: the one field it sets.
AttributeProto::AttributeType InferValueType(const AttributeProto& ap) {
  if (ap.has_f()) return AttributeProto::FLOAT;
  if (ap.has_i()) return AttributeProto::INT;
  if (ap.has_s()) return AttributeProto::STRING;
  if (ap.has_t()) return AttributeProto::TENSOR;
  if (ap.has_g()) return AttributeProto::GRAPH;
  if (ap.has_sparse_tensor()) return AttributeProto::SPARSE_TENSOR;
  if (ap.floats_size()) return AttributeProto::FLOATS;
  if (ap.ints_size()) return AttributeProto::INTS;
  if (ap.strings_size()) return AttributeProto::STRINGS;
  if (ap.tensors_size()) return AttributeProto::TENSORS;
  if (ap.graphs_size()) return AttributeProto::GRAPHS;
  return AttributeProto::UNDEFINED;
}

}  // namespace

AttributeProto::AttributeType AttributeTypeOf(const AttributeProto& ap) {
  return ap.has_type() ? ap.type() : InferValueType(ap);
}

absl::StatusOr<Attribute> AttributeFromProto(const AttributeProto& ap, std::string_view where,
                                             TensorContext& ctx) {
  const std::string w = absl::StrCat(std::string(where), " attribute '", ap.name(), "'");
  if (ap.has_ref_attr_name())
    return absl::UnimplementedError(absl::StrCat(w,
                                                 ": function attribute references are not "
                                                 "supported"));
  AttributeProto::AttributeType type = AttributeTypeOf(ap);
  switch (type) {
    case AttributeProto::FLOAT:
      return Attribute(ap.f());
    case AttributeProto::INT:
      return Attribute(static_cast<int64_t>(ap.i()));
    case AttributeProto::STRING:
      return Attribute(ap.s());
    case AttributeProto::TENSOR: {
      KILN_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(ap.t(), w, ctx));
      return Attribute(std::move(t));
    }
    case AttributeProto::FLOATS:
      return Attribute(std::vector<float>(ap.floats().begin(), ap.floats().end()));
    case AttributeProto::INTS:
      return Attribute(std::vector<int64_t>(ap.ints().begin(), ap.ints().end()));
    case AttributeProto::STRINGS:
      return Attribute(std::vector<std::string>(ap.strings().begin(), ap.strings().end()));
    case AttributeProto::GRAPH:
    case AttributeProto::GRAPHS:
      return absl::UnimplementedError(absl::StrCat(w, ": subgraph attributes are not supported"));
    case AttributeProto::SPARSE_TENSOR:
    case AttributeProto::SPARSE_TENSORS:
      return absl::UnimplementedError(absl::StrCat(w, ": sparse tensors are not supported"));
    case AttributeProto::TENSORS:
      return absl::UnimplementedError(absl::StrCat(w,
                                                   ": tensor-list attributes are not "
                                                   "supported"));
    case AttributeProto::TYPE_PROTO:
    case AttributeProto::TYPE_PROTOS:
      return absl::UnimplementedError(absl::StrCat(w,
                                                   ": type-proto attributes are not "
                                                   "supported"));
    case AttributeProto::UNDEFINED:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(w, " has no type and no value"));
}

}  // namespace kiln::onnx_import
