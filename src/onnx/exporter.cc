// IR -> ONNX. Names: every value gets a unique tensor name (its own name when it has a
// unique one, else "kiln_<node id>_<output>"); graph outputs keep their names, through an
// Identity node when the value carries a different name. Attributes map one to one.
#include "kiln/onnx/exporter.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/narrow.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* tp) {
  tp->set_name(name);
  tp->set_data_type(DTypeToOnnx(t.dtype()));
  for (int64_t d : t.dims()) tp->add_dims(d);
  if (IsSubByte(t.dtype())) {  // packed in files
    std::string packed(static_cast<size_t>(PackedBytes(t.dtype(), t.NumElements())), '\0');
    PackSubByte(t.data<uint8_t>(), t.NumElements(), t.dtype(),
                reinterpret_cast<uint8_t*>(packed.data()));
    tp->set_raw_data(std::move(packed));
    return;
  }
  tp->set_raw_data(reinterpret_cast<const char*>(t.raw()), t.NumBytes());
}

void TypeToProto(const Type& t, onnx::TypeProto* tp) {
  auto* tt = tp->mutable_tensor_type();
  tt->set_elem_type(DTypeToOnnx(t.dtype));
  if (!t.shape) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : *t.shape) {
    auto* dim = shape->add_dim();
    if (d.is_known())
      dim->set_dim_value(d.value());
    else if (d.is_symbol())
      dim->set_dim_param(d.symbol());
  }
}

absl::Status AttrToProto(const std::string& name, const Attribute& a, onnx::AttributeProto* ap) {
  ap->set_name(name);
  if (const auto* v = std::get_if<int64_t>(&a)) {
    ap->set_type(onnx::AttributeProto::INT);
    ap->set_i(*v);
  } else if (const auto* f = std::get_if<float>(&a)) {
    ap->set_type(onnx::AttributeProto::FLOAT);
    ap->set_f(*f);
  } else if (const auto* s = std::get_if<std::string>(&a)) {
    ap->set_type(onnx::AttributeProto::STRING);
    ap->set_s(*s);
  } else if (const auto* t = std::get_if<Tensor>(&a)) {
    ap->set_type(onnx::AttributeProto::TENSOR);
    TensorToProto(*t, "", ap->mutable_t());
  } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) {
    ap->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : *is) ap->add_ints(x);
  } else if (const auto* fs = std::get_if<std::vector<float>>(&a)) {
    ap->set_type(onnx::AttributeProto::FLOATS);
    for (float x : *fs) ap->add_floats(x);
  } else if (const auto* ss = std::get_if<std::vector<std::string>>(&a)) {
    ap->set_type(onnx::AttributeProto::STRINGS);
    for (const auto& x : *ss) ap->add_strings(x);
  } else {
    return KILN_INTERNAL("attribute '%s' has an unknown kind", name);
  }
  return absl::OkStatus();
}

// The default-domain opset of an exported graph: kExportOpset, or the opset that
// introduced the newest op in it (the importer maps older versions onto kiln's forms,
// which later opsets keep: an op import added from a newer opset, e.g. the TensorScatter
// of a GroupQueryAttention expansion, needs its own opset to read back). The IR version
// is the one that opset came with (onnx's helper.VERSION_TABLE).
std::pair<int64_t, int64_t> ExportVersions(const Graph& g) {
  int64_t opset = kExportOpset;
  for (const auto& n : g.nodes())
    if (n->domain().empty())
      if (const OpInfo* info = FindOp("", n->op()))
        opset = std::max<int64_t>(opset, info->since_opset);
  const int64_t ir = opset <= 21 ? 9 : opset == 22 ? 10 : opset == 23 ? 11 : opset == 24 ? 12 : 13;
  return {opset, ir};
}

}  // namespace

absl::StatusOr<std::string> ExportOnnxBytes(const Graph& g) {
  onnx::ModelProto model;
  const auto [opset_version, ir_version] = ExportVersions(g);
  model.set_ir_version(ir_version);
  model.set_producer_name("kiln");
  model.set_producer_version(KILN_VERSION);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(opset_version);
  bool uses_kiln_domain = false;
  onnx::GraphProto* gp = model.mutable_graph();
  gp->set_name(g.name().empty() ? "kiln" : g.name());

  // Unique names per value. Graph input names are fixed by the signature; a value that a
  // graph output designates takes that output's name (the first such output, and not for
  // graph inputs), so no Identity is needed; any other value keeps its own name when that
  // is unique and unclaimed, else gets "kiln_<node id>_<output>".
  absl::flat_hash_map<std::pair<const Node*, int>, std::string> names;
  absl::flat_hash_set<std::string> taken;
  for (const Node* in : g.inputs()) {
    names[{in, 0}] = in->output_info(0).name;
    taken.insert(in->output_info(0).name);
  }
  for (const auto& o : g.outputs()) {
    const std::pair<const Node*, int> key{o.value.node, o.value.index};
    if (names.contains(key) || taken.contains(o.name)) continue;
    names[key] = o.name;
    taken.insert(o.name);
  }
  for (const auto& o : g.outputs()) taken.insert(o.name);  // reserved for Identity outputs
  absl::flat_hash_map<std::string, int> name_count;
  for (const auto& p : g.nodes())
    for (int i = 0; i < p->num_outputs(); ++i)
      if (!p->output_info(i).name.empty()) name_count[p->output_info(i).name]++;
  for (const auto& p : g.nodes()) {
    for (int i = 0; i < p->num_outputs(); ++i) {
      const std::pair<const Node*, int> key{p.get(), i};
      if (names.contains(key)) continue;
      const std::string& n = p->output_info(i).name;
      const bool ok = !n.empty() && name_count[n] == 1 && !taken.contains(n);
      names[key] = ok ? n : absl::StrCat("kiln_", p->id(), "_", i);
      taken.insert(names[key]);
    }
  }
  absl::flat_hash_set<std::string> node_names;
  auto name_of = [&](Value v) { return v ? names.at({v.node, v.index}) : std::string(); };

  for (const auto& p : g.nodes()) {
    const Node& n = *p;
    if (n.is_input()) {
      auto* vi = gp->add_input();
      vi->set_name(name_of(Value{p.get(), 0}));
      TypeToProto(n.output_info(0).type, vi->mutable_type());
      continue;
    }
    if (n.is_constant()) {
      TensorToProto(*n.constant_value(), name_of(Value{p.get(), 0}), gp->add_initializer());
      continue;
    }
    auto* np = gp->add_node();
    np->set_op_type(n.op());
    if (!n.domain().empty()) {
      np->set_domain(n.domain());
      uses_kiln_domain |= n.domain() == "kiln";
    }
    // The name is the first ONNX node this came from (unique names; a suffix otherwise);
    // the whole provenance travels in doc_string, which the importer reads back.
    std::string node_name =
        n.provenance().empty() ? absl::StrCat("kiln_node_", n.id()) : n.provenance().front();
    if (!node_names.insert(node_name).second) {
      node_name = absl::StrCat(node_name, "#", n.id());
      node_names.insert(node_name);
    }
    np->set_name(node_name);
    if (!n.provenance().empty())
      np->set_doc_string(absl::StrCat("kiln provenance: ", absl::StrJoin(n.provenance(), "\n")));
    for (const Value& v : n.inputs()) np->add_input(name_of(v));
    for (int i = 0; i < n.num_outputs(); ++i) {
      Value v{p.get(), i};
      np->add_output(name_of(v));
      const Type& t = n.output_info(i).type;
      if (t.dtype != DType::kUndefined) {
        auto* vi = gp->add_value_info();
        vi->set_name(name_of(v));
        TypeToProto(t, vi->mutable_type());
      }
    }
    for (const auto& [k, a] : n.attrs())
      KILN_RETURN_IF_ERROR(AttrToProto(k, a, np->add_attribute()));
  }
  for (const auto& o : g.outputs()) {
    std::string vname = name_of(o.value);
    if (vname != o.name) {
      auto* id = gp->add_node();
      id->set_op_type("Identity");
      id->set_name(absl::StrCat("kiln_output_", o.name));
      id->add_input(vname);
      id->add_output(o.name);
    }
    auto* vi = gp->add_output();
    vi->set_name(o.name);
    TypeToProto(o.value.type(), vi->mutable_type());
  }
  if (uses_kiln_domain) {
    auto* k = model.add_opset_import();
    k->set_domain("kiln");
    k->set_version(1);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return absl::InternalError("cannot serialize the ONNX model (over 2 GiB?)");
  return bytes;
}

absl::Status ExportOnnxFile(const Graph& g, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxBytes(g));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::DataLossError(absl::StrCat("failed writing '", path, "'"));
  return absl::OkStatus();
}

}  // namespace kiln
