// Private pieces of the ONNX importer, shared by its .cc files (and by its tests):
// TensorProto decoding (tensor_proto.cc), external-data resolution (external_data.cc),
// AttributeProto/TypeProto conversion (attributes.cc) and opset canonicalization
// (canonicalize.cc). Keeps onnx headers out of include/kiln.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/ops.h"
#include "kiln/onnx/importer.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {

// Limits and the folder that external data must stay beneath, plus the running total of
// tensor bytes decoded so far (checked against options.max_total_bytes).
struct TensorContext {
  ImportOptions options;
  std::string model_dir;  // empty: external data is rejected
  int64_t total_bytes = 0;
};

// TensorProto -> Tensor with full validation (dtype, dims, limits, data size). `what`
// names the tensor in messages, e.g. "initializer 'w'" or "node 'c' (Constant, opset 17)
// attribute 'value'".
absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& tp, std::string_view what,
                                       TensorContext& ctx);
// The same, but leaves `tp` without its raw_data: 64 KiB or more (element-aligned, as
// heap strings are) becomes the tensor's Storage (a view owning the released string)
// instead of being copied, so importing a model does not hold its weights twice.
absl::StatusOr<Tensor> TakeTensorFromProto(onnx::TensorProto& tp, std::string_view what,
                                           TensorContext& ctx);

// ONNX data-type code -> DType; InvalidArgument for unknown codes and UNDEFINED,
// Unimplemented for types ONNX knows and kiln does not (string, complex, float8, int4...).
absl::StatusOr<DType> DTypeFromOnnxCode(int32_t code, std::string_view what);

// Exactly `nbytes` bytes of external data described by `tp.external_data()`: a view of a
// private mapping of the file for large ranges aligned to `element_bytes`, else a fresh
// Storage they are read into. Enforces the path rules documented in docs/importer.md.
absl::StatusOr<std::shared_ptr<Storage>> ReadExternalData(const onnx::TensorProto& tp,
                                                          int64_t nbytes, size_t element_bytes,
                                                          std::string_view what,
                                                          const std::string& model_dir);

// TypeProto -> Type. `allow_undefined_dtype` lets elem_type 0 mean "unknown" (value_info,
// graph outputs); graph inputs must declare a dtype.
absl::StatusOr<Type> TypeFromProto(const onnx::TypeProto& tp, std::string_view what,
                                   bool allow_undefined_dtype, const ImportOptions& options);

// AttributeProto -> Attribute. GRAPH(S), SPARSE_TENSOR(S), TENSORS, TYPE_PROTO(S) ->
// Unimplemented. `where` is the node's description.
// The attribute's type: its `type` field, or (very old exporters) the one value field set.
onnx::AttributeProto::AttributeType AttributeTypeOf(const onnx::AttributeProto& ap);
absl::StatusOr<Attribute> AttributeFromProto(const onnx::AttributeProto& ap, std::string_view where,
                                             TensorContext& ctx);

// 1-D tensors from attribute values. (Tensor::FromI64/FromF32 memcpy from a null
// pointer when the span is empty, which is undefined behaviour; these avoid that.)
Tensor VectorI64(absl::Span<const int64_t> v);
Tensor VectorF32(absl::Span<const float> v);

// "node 'name' (Op, opset N)", the same text as Node::Describe().
std::string DescribeOnnxNode(std::string_view name, std::string_view domain, std::string_view op,
                             int64_t opset);

// Rewrites `node` (already built from ONNX, inputs resolved) into its opset-21
// signature. May add nodes (Constants for attributes that became inputs, the Flatten/
// Reshape around a pre-13 Softmax) to `graph`. `names` holds every tensor name already in
// use; new values get fresh names and are added to it; a value the rewrite replaces keeps
// its ONNX name (names[name] is the replacement).
// onnxruntime's com.microsoft ops kiln imports (contrib_ops.cc): their arity, or nullptr.
// They are not in the op catalogue: ExpandContribOp replaces each such node at import.
const OpInfo* FindContribOp(std::string_view domain, std::string_view op);
// Replaces `node` (a FindContribOp op, inputs resolved) by the standard ops it computes;
// its outputs' users and ONNX names move to the expansion and the node is removed.
// Unimplemented for the forms kiln does not take (named).
absl::Status ExpandContribOp(Graph& graph, Node* node,
                             absl::flat_hash_map<std::string, Value>& names);

// The input count of `op`'s attribute form at `opset` (Slice before 10, Clip before 11,
// Squeeze before 13, ...: the operands that later became inputs are attributes there), or
// nullopt when the op at that opset takes the catalogue's inputs.
std::optional<int> LegacyInputCount(const std::string& op, int64_t opset);

absl::Status CanonicalizeNode(Graph& graph, Node* node, int64_t opset,
                              absl::flat_hash_map<std::string, Value>& names);

}  // namespace kiln::onnx_import
