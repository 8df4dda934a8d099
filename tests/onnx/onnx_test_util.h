// Helpers for the importer tests: build ONNX ModelProtos in C++ through the onnx proto
// API, serialize them, and find nodes in the imported IR.
#pragma once

#include <cctype>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/onnx/importer.h"
#include "onnx/onnx_pb.h"

namespace kiln::testing {

inline onnx::ModelProto MakeModel(int64_t opset = 17, const std::string& name = "g") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name(name);
  return m;
}

// dims: >= 0 value, -1 unknown dim; `params` gives dim_param names for entries "".
inline onnx::ValueInfoProto* SetTensorType(onnx::ValueInfoProto* vi, int32_t elem,
                                           const std::vector<std::string>& dims) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (d == "?") continue;
    if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '-'))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
  return vi;
}

inline onnx::ValueInfoProto* AddInput(onnx::ModelProto& m, const std::string& name,
                                      int32_t elem = onnx::TensorProto::FLOAT,
                                      const std::vector<std::string>& dims = {"2", "3"}) {
  auto* vi = m.mutable_graph()->add_input();
  vi->set_name(name);
  return SetTensorType(vi, elem, dims);
}

inline onnx::ValueInfoProto* AddOutput(onnx::ModelProto& m, const std::string& name,
                                       int32_t elem = onnx::TensorProto::FLOAT,
                                       const std::vector<std::string>& dims = {"2", "3"}) {
  auto* vi = m.mutable_graph()->add_output();
  vi->set_name(name);
  return SetTensorType(vi, elem, dims);
}

inline onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op,
                                const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs,
                                const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline onnx::AttributeProto* AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return a;
}
inline onnx::AttributeProto* AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
  return a;
}
inline onnx::AttributeProto* AttrInts(onnx::NodeProto* n, const std::string& name,
                                      const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return a;
}
inline onnx::AttributeProto* AttrFloats(onnx::NodeProto* n, const std::string& name,
                                        const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
  return a;
}

inline void FillF32(onnx::TensorProto* t, const std::string& name, const std::vector<int64_t>& dims,
                    const std::vector<float>& vals, bool raw = true) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  if (raw) {
    std::string bytes(vals.size() * 4, '\0');
    std::memcpy(bytes.data(), vals.data(), bytes.size());
    t->set_raw_data(bytes);
  } else {
    for (float v : vals) t->add_float_data(v);
  }
}

inline onnx::TensorProto* AddInitF32(onnx::ModelProto& m, const std::string& name,
                                     const std::vector<int64_t>& dims,
                                     const std::vector<float>& vals, bool raw = true) {
  auto* t = m.mutable_graph()->add_initializer();
  FillF32(t, name, dims, vals, raw);
  return t;
}

inline onnx::TensorProto* AddInitI64(onnx::ModelProto& m, const std::string& name,
                                     const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& vals) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : vals) t->add_int64_data(v);
  return t;
}

// The values of an f32 tensor.
inline std::vector<float> F32s(const Tensor& t) {
  std::vector<float> v(t.NumElements());
  std::memcpy(v.data(), t.raw(), t.NumBytes());
  return v;
}

inline std::string Serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

inline absl::StatusOr<std::unique_ptr<Graph>> Import(const onnx::ModelProto& m,
                                                     const ImportOptions& o = {}) {
  return ImportOnnxBytes(Serialize(m), "", o);
}

// The node whose first provenance entry is `name` (nullptr if none).
inline Node* FindNode(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (!n->provenance().empty() && n->provenance().front() == name && !n->is_constant())
      return n.get();
  return nullptr;
}

// The Constant node whose output is named `name`.
inline Node* FindConstant(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->is_constant() && n->output_info(0).name == name) return n.get();
  return nullptr;
}

// A fresh, empty per-test folder under KILN_TEST_TMPDIR.
inline std::string FreshTmpDir(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(KILN_TEST_TMPDIR) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace kiln::testing
