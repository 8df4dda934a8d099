// ONNX ModelProto -> kiln IR: the public entry points and the graph builder. Steps, in
// the order their errors are reported: parse; default-domain opset (7..27); model limits;
// one Unimplemented error listing every unsupported op; initializers (Constant nodes);
// graph inputs (Input nodes; inputs that are also initializers stay constants, recorded as
// overridable: Graph::PromoteToInput); nodes in
// two passes (create and define outputs, then resolve input names, so ONNX's
// topological-order rule is not relied on); opset canonicalization; value_info and output
// types; graph outputs; TopoSort (a cycle is InvalidArgument naming a node on it).
// Limits: no subgraphs, sparse tensors, model-local functions or training info. See
// docs/importer.md for what is accepted, canonicalized and rejected.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "kiln/ir/ops.h"
#include "kiln/onnx/importer.h"
#include "kiln/support/status.h"
#include "onnx/defs/schema.h"
#include "src/onnx/import_internal.h"

namespace kiln {
namespace onnx_import {
namespace {

std::string NormalizeDomain(const std::string& d) { return d == "ai.onnx" ? "" : d; }

std::string FullOpName(const std::string& domain, const std::string& op) {
  return domain.empty() ? op : absl::StrCat(domain, ".", op);
}

// Number of entries once trailing empty names (omitted optional values) are dropped.
template <typename Names>
int TrimmedCount(const Names& names) {
  int n = names.size();
  while (n > 0 && names.Get(n - 1).empty()) --n;
  return n;
}

// Optional inputs that precede required ones, so they count in min_inputs:
// kiln.EmbedLayerNorm(input_ids, segment_ids?, position_ids?, word_emb, pos_emb,
// segment_emb?, gamma, beta) (docs/fused-ops.md) and onnxruntime's
// EmbedLayerNormalization(input_ids, segment_ids?, word, pos, segment?, gamma, beta, ...).
bool OptionalInputSlot(const OpInfo& info, int i) {
  if (info.domain == "com.microsoft" && info.name == "EmbedLayerNormalization")
    return i == 1 || i == 4;  // segment_ids, segment_embedding
  return info.domain == "kiln" && info.name == "EmbedLayerNorm" && (i == 1 || i == 2 || i == 5);
}

struct PendingNode {
  const onnx::NodeProto* proto;
  std::string name;  // ONNX name or synthesized "<op>_<index>"
  std::string domain;
  Node* node;  // nullptr for ONNX Constant nodes (already complete)
  std::string where;
};

class Importer {
 public:
  Importer(const ImportOptions& options, std::string model_dir)
      : ctx_{options, std::move(model_dir), 0} {}

  // Takes each initializer's raw_data out of `model` (TakeTensorFromProto), so the proto and
  // the tensors built from it are not both held whole.
  absl::StatusOr<std::unique_ptr<Graph>> Import(onnx::ModelProto& model) {
    KILN_RETURN_IF_ERROR(ReadOpset(model));
    if (!model.has_graph()) return absl::InvalidArgumentError("model has no graph");
    onnx::GraphProto& g = *model.mutable_graph();
    graph_ = std::make_unique<Graph>();
    graph_->set_opset(opset_);
    graph_->set_name(g.name());
    const int64_t total = int64_t{g.node_size()} + g.initializer_size() + g.input_size();
    if (total > ctx_.options.max_nodes)
      return absl::InvalidArgumentError(
          absl::StrCat("model has ", total, " nodes, initializers and inputs; the limit is ",
                       ctx_.options.max_nodes, " (ImportOptions.max_nodes)"));
    if (g.sparse_initializer_size() > 0)
      return absl::UnimplementedError(absl::StrCat(
          "sparse initializer '", g.sparse_initializer(0).values().name(), "' is not supported"));
    NameNodes(g);
    KILN_RETURN_IF_ERROR(CheckSupport());
    KILN_RETURN_IF_ERROR(AddInitializers(g));
    KILN_RETURN_IF_ERROR(AddInputs(g));
    for (PendingNode& p : pending_) KILN_RETURN_IF_ERROR(CreateNode(p));
    for (PendingNode& p : pending_) KILN_RETURN_IF_ERROR(ResolveInputs(p));
    for (PendingNode& p : pending_)
      if (p.node) KILN_RETURN_IF_ERROR(CanonicalizeNode(*graph_, p.node, opset_, names_));
    KILN_RETURN_IF_ERROR(ApplyValueInfo(g));
    KILN_RETURN_IF_ERROR(AddOutputs(g));
    KILN_RETURN_IF_ERROR(graph_->TopoSort());
    return std::move(graph_);
  }

 private:
  absl::Status ReadOpset(const onnx::ModelProto& model) {
    std::optional<int64_t> opset;
    for (const auto& imp : model.opset_import()) {
      if (!NormalizeDomain(imp.domain()).empty()) continue;
      if (opset && *opset != imp.version())
        return absl::InvalidArgumentError(
            absl::StrCat("model imports the default ONNX domain twice (opsets ", *opset, " and ",
                         imp.version(), ")"));
      opset = imp.version();
    }
    if (!opset) {
      // A model of other domains only (ai.onnx.ml, training) is valid ONNX that kiln does
      // not support; a model importing nothing at all is malformed.
      std::vector<std::string> others;
      for (const auto& imp : model.opset_import()) others.push_back(imp.domain());
      if (others.empty())
        return absl::InvalidArgumentError("model has no opset_import for the default ONNX domain");
      return absl::UnimplementedError(
          absl::StrCat("model has no opset_import for the default ONNX domain, only for: ",
                       absl::StrJoin(others, ", ")));
    }
    if (*opset < kMinOpset || *opset > kMaxOpset)
      return absl::UnimplementedError(absl::StrCat("opset ", *opset,
                                                   " is not supported (kiln imports default-"
                                                   "domain opsets ",
                                                   kMinOpset, " to ", kMaxOpset, ")"));
    opset_ = *opset;
    // kiln's own domain (fused ops, docs/fused-ops.md) exists in version 1 only.
    for (const auto& imp : model.opset_import())
      if (imp.domain() == "kiln" && imp.version() != 1)
        return absl::UnimplementedError(absl::StrCat("opset ", imp.version(),
                                                     " of domain 'kiln' is not supported "
                                                     "(kiln imports version 1)"));
    return absl::OkStatus();
  }

  void NameNodes(const onnx::GraphProto& g) {
    pending_.reserve(g.node_size());
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& np = g.node(i);
      PendingNode p;
      p.proto = &np;
      p.domain = NormalizeDomain(np.domain());
      p.name = np.name().empty() ? absl::StrCat(np.op_type(), "_", i) : np.name();
      p.node = nullptr;
      p.where = DescribeOnnxNode(p.name, p.domain, np.op_type(), opset_);
      pending_.push_back(std::move(p));
    }
  }

  // One error listing every unsupported op with the nodes that use it.
  absl::Status CheckSupport() {
    struct Entry {
      std::string label;
      std::vector<std::string> nodes;
    };
    std::vector<Entry> entries;
    absl::flat_hash_map<std::string, size_t> index;
    for (const PendingNode& p : pending_) {
      const std::string& op = p.proto->op_type();
      const OpInfo* info = FindOp(p.domain, op);
      if (info == nullptr) info = FindContribOp(p.domain, op);
      std::string label = op.empty() ? "<empty op_type>" : FullOpName(p.domain, op);
      bool ok = info != nullptr && !(p.domain.empty() && op == "Input");
      if (ok && p.domain.empty() && info->since_opset > opset_) {
        ok = false;
        absl::StrAppend(&label, " [kiln needs opset >= ", info->since_opset, "]");
      }
      if (ok) continue;
      auto [it, inserted] = index.try_emplace(label, entries.size());
      if (inserted) entries.push_back({label, {}});
      entries[it->second].nodes.push_back(p.name);
    }
    if (entries.empty()) return absl::OkStatus();
    std::vector<std::string> parts;
    for (const Entry& e : entries) {
      if (e.nodes.size() == 1) {
        parts.push_back(absl::StrCat(e.label, " (node '", e.nodes[0], "')"));
        continue;
      }
      constexpr size_t kMaxNames = 5;
      std::vector<std::string> quoted;
      for (size_t i = 0; i < e.nodes.size() && i < kMaxNames; ++i)
        quoted.push_back(absl::StrCat("'", e.nodes[i], "'"));
      if (e.nodes.size() > kMaxNames) quoted.push_back("...");
      parts.push_back(absl::StrCat(e.label, " (", e.nodes.size(),
                                   " nodes: ", absl::StrJoin(quoted, ", "), ")"));
    }
    return absl::UnimplementedError(
        absl::StrCat("unsupported ops: ", absl::StrJoin(parts, ", "), " at opset ", opset_));
  }

  absl::Status Define(const std::string& name, Value v, std::string by) {
    auto [it, inserted] = names_.try_emplace(name, v);
    if (!inserted)
      return absl::InvalidArgumentError(absl::StrCat(
          by, " defines value '", name, "', which is already defined by ", definers_[name]));
    definers_[name] = std::move(by);
    return absl::OkStatus();
  }

  absl::Status AddInitializers(onnx::GraphProto& g) {
    for (onnx::TensorProto& tp : *g.mutable_initializer()) {
      if (tp.name().empty()) return absl::InvalidArgumentError("an initializer has no name");
      const std::string what = absl::StrCat("initializer '", tp.name(), "'");
      if (names_.contains(tp.name()))
        return absl::InvalidArgumentError(absl::StrCat(what, " is defined twice"));
      KILN_ASSIGN_OR_RETURN(Tensor t, TakeTensorFromProto(tp, what, ctx_));
      Node* c = graph_->AddConstant(tp.name(), std::move(t));
      c->add_provenance(tp.name());
      KILN_RETURN_IF_ERROR(Define(tp.name(), c->output(0), what));
    }
    return absl::OkStatus();
  }

  absl::Status AddInputs(const onnx::GraphProto& g) {
    absl::flat_hash_set<std::string> seen;
    for (const onnx::ValueInfoProto& vi : g.input()) {
      if (vi.name().empty()) return absl::InvalidArgumentError("a graph input has no name");
      const std::string what = absl::StrCat("graph input '", vi.name(), "'");
      if (!seen.insert(vi.name()).second)
        return absl::InvalidArgumentError(absl::StrCat(what, " is declared twice"));
      auto it = names_.find(vi.name());
      if (it != names_.end()) {
        // Also an initializer: kiln treats it as a constant, which a run may override
        // (Graph::PromoteToInput, docs/importer.md).
        Type declared;
        if (vi.has_type()) {
          KILN_ASSIGN_OR_RETURN(declared, TypeFromProto(vi.type(), what, false, ctx_.options));
        }
        graph_->add_overridable_initializer(vi.name(), std::move(declared));
        const DType have = it->second.type().dtype;
        if (vi.has_type() && vi.type().has_tensor_type() &&
            vi.type().tensor_type().elem_type() != 0 &&
            vi.type().tensor_type().elem_type() != DTypeToOnnx(have))
          return absl::InvalidArgumentError(
              absl::StrCat(what, " declares element type ", vi.type().tensor_type().elem_type(),
                           " but its initializer is ", std::string(DTypeName(have))));
        continue;
      }
      if (!vi.has_type()) return absl::InvalidArgumentError(absl::StrCat(what, " has no type"));
      KILN_ASSIGN_OR_RETURN(Type type, TypeFromProto(vi.type(), what, false, ctx_.options));
      Node* in = graph_->AddInput(vi.name(), std::move(type));
      in->add_provenance(vi.name());
      KILN_RETURN_IF_ERROR(Define(vi.name(), in->output(0), what));
    }
    return absl::OkStatus();
  }

  absl::Status CheckArity(const PendingNode& p, const OpInfo& info, int n_in, int n_out) {
    const onnx::NodeProto& np = *p.proto;
    auto range = [](int lo, int hi) {
      if (hi < 0) return absl::StrCat("at least ", lo);
      if (lo == hi) return absl::StrCat(lo);
      return absl::StrCat(lo, " to ", hi);
    };
    // Before the opset that turned some attributes into inputs, the op takes fewer inputs.
    const std::optional<int> legacy =
        p.domain.empty() ? LegacyInputCount(np.op_type(), opset_) : std::nullopt;
    const int min_in = legacy ? *legacy : info.min_inputs;
    const int max_in = legacy ? *legacy : info.max_inputs;
    if (n_in < min_in || (max_in >= 0 && n_in > max_in))
      return absl::InvalidArgumentError(
          absl::StrCat(p.where, " has ", n_in, " inputs; expected ", range(min_in, max_in),
                       legacy ? absl::StrCat(" (at opset ", opset_,
                                             " its other operands are "
                                             "attributes)")
                              : ""));
    if (n_out < info.min_outputs || (info.max_outputs >= 0 && n_out > info.max_outputs))
      return absl::InvalidArgumentError(absl::StrCat(p.where, " has ", n_out, " outputs; expected ",
                                                     range(info.min_outputs, info.max_outputs)));
    for (int i = 0; i < min_in; ++i)
      if (np.input(i).empty() && !OptionalInputSlot(info, i))
        return absl::InvalidArgumentError(
            absl::StrCat(p.where, " input ", i, " is required but its name is empty"));
    for (int i = 0; i < info.min_outputs; ++i)
      if (np.output(i).empty())
        return absl::InvalidArgumentError(
            absl::StrCat(p.where, " output ", i, " is required but its name is empty"));
    return absl::OkStatus();
  }

  // A default-domain attribute whose type is not the one the ONNX schema gives it (a `perm`
  // of floats) is refused: every kernel reads attributes by type, and would take a
  // mistyped one for an absent one and use its default. The schemas are the onnx library's
  // (Debian 12: onnx 1.12, opsets to 17; a later opset gets the latest schema it has, and
  // an attribute that schema does not know is kept unchecked).
  absl::Status CheckAttributeType(const PendingNode& p, const onnx::AttributeProto& ap) {
    if (!p.domain.empty() && p.domain != "ai.onnx") return absl::OkStatus();
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(p.proto->op_type(), static_cast<int>(opset_), "");
    if (schema == nullptr) return absl::OkStatus();
    const auto it = schema->attributes().find(ap.name());
    if (it == schema->attributes().end()) return absl::OkStatus();
    const onnx::AttributeProto::AttributeType type = AttributeTypeOf(ap);
    if (type == it->second.type || type == onnx::AttributeProto::UNDEFINED) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        p.where, " attribute '", ap.name(), "' is ", onnx::AttributeProto_AttributeType_Name(type),
        "; the ONNX schema ", p.proto->op_type(), "-", schema->since_version(), " has ",
        onnx::AttributeProto_AttributeType_Name(it->second.type)));
  }

  absl::StatusOr<std::map<std::string, Attribute>> ReadAttributes(const PendingNode& p) {
    std::map<std::string, Attribute> attrs;
    for (const onnx::AttributeProto& ap : p.proto->attribute()) {
      if (ap.name().empty())
        return absl::InvalidArgumentError(absl::StrCat(p.where, " has an attribute without name"));
      KILN_RETURN_IF_ERROR(CheckAttributeType(p, ap));
      KILN_ASSIGN_OR_RETURN(Attribute a, AttributeFromProto(ap, p.where, ctx_));
      if (!attrs.emplace(ap.name(), std::move(a)).second)
        return absl::InvalidArgumentError(
            absl::StrCat(p.where, " has attribute '", ap.name(), "' twice"));
    }
    return attrs;
  }

  // An ONNX Constant node's value: exactly one of value, value_float(s), value_int(s).
  absl::StatusOr<Tensor> ConstantValue(const PendingNode& p) {
    static const auto* kUnsupported =
        new absl::flat_hash_set<std::string>{"sparse_value", "value_string", "value_strings"};
    static const auto* kKnown = new absl::flat_hash_set<std::string>{
        "value", "value_float", "value_floats", "value_int", "value_ints"};
    for (const onnx::AttributeProto& ap : p.proto->attribute()) {
      if (kUnsupported->contains(ap.name()))
        return absl::UnimplementedError(absl::StrCat(p.where, " attribute '", ap.name(),
                                                     "': sparse and string constants are "
                                                     "not supported"));
      if (!kKnown->contains(ap.name()))
        return absl::InvalidArgumentError(
            absl::StrCat(p.where, " has unknown attribute '", ap.name(), "'"));
    }
    KILN_ASSIGN_OR_RETURN(auto attrs, ReadAttributes(p));
    if (attrs.size() != 1)
      return absl::InvalidArgumentError(
          absl::StrCat(p.where,
                       " must have exactly one of value, value_float, value_floats, value_int, "
                       "value_ints; it has ",
                       attrs.size()));
    // Not a structured binding: clang 14 (the fuzz build's compiler) cannot capture one in
    // a lambda.
    const std::string& name = attrs.begin()->first;
    const auto& a = attrs.begin()->second;
    auto bad_type = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat(p.where, " attribute '", name, "' has the wrong type"));
    };
    if (name == "value") {
      if (const Tensor* t = std::get_if<Tensor>(&a)) return *t;
      return bad_type();
    }
    if (name == "value_float") {
      if (const float* f = std::get_if<float>(&a)) return Tensor::ScalarF32(*f);
      return bad_type();
    }
    if (name == "value_int") {
      if (const int64_t* i = std::get_if<int64_t>(&a)) return Tensor::ScalarI64(*i);
      return bad_type();
    }
    if (name == "value_floats") {
      if (const auto* v = std::get_if<std::vector<float>>(&a)) return VectorF32(*v);
      return bad_type();
    }
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a))  // value_ints
      return VectorI64(*v);
    return bad_type();
  }

  // A node kiln exported carries its full provenance in doc_string (see exporter.cc);
  // any other node's provenance is its own name.
  static std::vector<std::string> ProvenanceOf(const onnx::NodeProto& np, const std::string& name) {
    constexpr absl::string_view kPrefix = "kiln provenance: ";
    const std::string& doc = np.doc_string();
    if (doc.size() > kPrefix.size() &&
        absl::string_view(doc).substr(0, kPrefix.size()) == kPrefix) {
      std::vector<std::string> out = absl::StrSplit(doc.substr(kPrefix.size()), '\n');
      out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
      if (!out.empty()) return out;
    }
    return {name};
  }

  absl::Status CreateNode(PendingNode& p) {
    const onnx::NodeProto& np = *p.proto;
    const OpInfo* info = FindOp(p.domain, np.op_type());  // non-null after CheckSupport
    if (info == nullptr) info = FindContribOp(p.domain, np.op_type());
    if (info == nullptr) return KILN_INTERNAL("%s not in the catalogue", p.where);
    const int n_in = TrimmedCount(np.input());
    const int n_out = TrimmedCount(np.output());
    KILN_RETURN_IF_ERROR(CheckArity(p, *info, n_in, n_out));
    if (p.domain.empty() && np.op_type() == "Constant") {
      KILN_ASSIGN_OR_RETURN(Tensor t, ConstantValue(p));
      Node* c = graph_->AddConstant(np.output(0), std::move(t));
      c->add_provenance(p.name);
      return Define(np.output(0), c->output(0), p.where);
    }
    KILN_ASSIGN_OR_RETURN(auto attrs, ReadAttributes(p));
    Node* node = graph_->AddNode(np.op_type(), {}, n_out, p.domain);
    for (auto& [k, v] : attrs) node->set_attr(k, std::move(v));
    node->set_provenance(ProvenanceOf(np, p.name));
    p.node = node;
    for (int k = 0; k < n_out; ++k) {
      if (np.output(k).empty()) continue;  // omitted optional output
      node->set_output_name(k, np.output(k));
      KILN_RETURN_IF_ERROR(Define(np.output(k), node->output(k), p.where));
    }
    return absl::OkStatus();
  }

  absl::Status ResolveInputs(PendingNode& p) {
    if (p.node == nullptr) return absl::OkStatus();
    const onnx::NodeProto& np = *p.proto;
    const int n_in = TrimmedCount(np.input());
    for (int k = 0; k < n_in; ++k) {
      const std::string& name = np.input(k);
      Value v;
      if (!name.empty()) {
        auto it = names_.find(name);
        if (it == names_.end())
          return absl::InvalidArgumentError(
              absl::StrCat(p.where, " input ", k, " '", name,
                           "' is not defined by any node, graph input or initializer"));
        v = it->second;
      }
      graph_->AddNodeInput(p.node, v);
    }
    return absl::OkStatus();
  }

  // Records a declared type on a value computed by a node. Graph inputs and constants
  // keep the types they already have.
  void RecordType(Value v, Type declared) {
    if (v.node->is_input() || v.node->is_constant()) return;
    Type t = v.type();
    if (declared.dtype != DType::kUndefined) t.dtype = declared.dtype;
    if (declared.shape) t.shape = std::move(declared.shape);
    v.node->set_output_type(v.index, std::move(t));
  }

  absl::Status ApplyValueInfo(const onnx::GraphProto& g) {
    for (const onnx::ValueInfoProto& vi : g.value_info()) {
      auto it = names_.find(vi.name());
      if (it == names_.end() || !vi.has_type() || !vi.type().has_tensor_type()) continue;
      KILN_ASSIGN_OR_RETURN(
          Type t, TypeFromProto(vi.type(), absl::StrCat("value_info '", vi.name(), "'"), true,
                                ctx_.options));
      RecordType(it->second, std::move(t));
    }
    return absl::OkStatus();
  }

  absl::Status AddOutputs(const onnx::GraphProto& g) {
    absl::flat_hash_set<std::string> seen;
    for (const onnx::ValueInfoProto& vi : g.output()) {
      if (vi.name().empty()) return absl::InvalidArgumentError("a graph output has no name");
      const std::string what = absl::StrCat("graph output '", vi.name(), "'");
      if (!seen.insert(vi.name()).second)
        return absl::InvalidArgumentError(absl::StrCat(what, " is declared twice"));
      auto it = names_.find(vi.name());
      if (it == names_.end())
        return absl::InvalidArgumentError(
            absl::StrCat(what, " is not produced by any node, graph input or initializer"));
      if (vi.has_type()) {
        KILN_ASSIGN_OR_RETURN(Type t, TypeFromProto(vi.type(), what, true, ctx_.options));
        RecordType(it->second, std::move(t));
      }
      graph_->AddOutput(vi.name(), it->second);
    }
    if (g.output_size() == 0) return absl::InvalidArgumentError("graph has no outputs");
    return absl::OkStatus();
  }

  TensorContext ctx_;
  int64_t opset_ = 0;
  std::unique_ptr<Graph> graph_;
  std::vector<PendingNode> pending_;
  absl::flat_hash_map<std::string, Value> names_;
  absl::flat_hash_map<std::string, std::string> definers_;
};

// An open regular file of at most INT_MAX bytes (protobuf's parse limit), closed on scope
// exit.
struct SmallFile {
  int fd = -1;
  size_t size = 0;
  SmallFile() = default;
  SmallFile(SmallFile&& o) noexcept : fd(std::exchange(o.fd, -1)), size(o.size) {}
  SmallFile(const SmallFile&) = delete;
  ~SmallFile() {
    if (fd >= 0) close(fd);
  }
};

absl::StatusOr<SmallFile> OpenSmallFile(const std::string& path) {
  SmallFile f;
  f.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    const std::string msg = absl::StrCat("cannot open '", path, "': ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  struct stat st;
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  if (st.st_size > INT_MAX)
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is larger than 2 GiB; store the weights as external data"));
  f.size = static_cast<size_t>(st.st_size);
  return f;
}

// Reads a whole regular file of at most INT_MAX bytes.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(SmallFile f, OpenSmallFile(path));
  std::string data(f.size, '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t r = read(f.fd, data.data() + done, data.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::InvalidArgumentError(absl::StrCat("read of '", path, "' failed"));
    done += static_cast<size_t>(r);
  }
  return data;
}

std::string FolderOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace
}  // namespace onnx_import

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxBytes(std::string_view bytes,
                                                       const std::string& model_dir,
                                                       const ImportOptions& options) {
  if (bytes.empty()) return absl::InvalidArgumentError("model bytes are empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return absl::InvalidArgumentError("model is larger than 2 GiB; use external data");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return absl::InvalidArgumentError(
        "cannot parse ModelProto: the bytes are truncated or not an ONNX model");
  onnx_import::Importer importer(options, model_dir);
  return importer.Import(model);
}

namespace onnx_import {
namespace {

// Parsed straight from the file (protobuf reads it through a buffer): the file's bytes
// are never held beside the parsed proto.
absl::StatusOr<onnx::ModelProto> ParseModelFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(SmallFile f, OpenSmallFile(path));
  if (f.size == 0) return absl::InvalidArgumentError("model bytes are empty");
  onnx::ModelProto model;
  google::protobuf::io::FileInputStream in(f.fd, /*block_size=*/1 << 20);
  if (!model.ParseFromZeroCopyStream(&in) || in.GetErrno() != 0)
    return absl::InvalidArgumentError(
        "cannot parse ModelProto: the bytes are truncated or not an ONNX model");
  return model;
}

}  // namespace
}  // namespace onnx_import

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path,
                                                      const ImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, onnx_import::ParseModelFile(path));
  onnx_import::Importer importer(options, onnx_import::FolderOf(path));
  return importer.Import(model);
}

absl::StatusOr<std::vector<std::string>> OnnxGraphInputNames(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(const onnx::ModelProto model, onnx_import::ParseModelFile(path));
  absl::flat_hash_set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> names;
  for (const onnx::ValueInfoProto& vi : model.graph().input())
    if (!initializers.contains(vi.name())) names.push_back(vi.name());
  return names;
}

absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, onnx_import::ReadSmallFile(path));
  onnx::TensorProto tp;
  if (bytes.empty() || !tp.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return absl::InvalidArgumentError(absl::StrCat("cannot parse a TensorProto from '", path, "'"));
  onnx_import::TensorContext ctx{ImportOptions{}, onnx_import::FolderOf(path), 0};
  const std::string what = absl::StrCat("tensor '", tp.name(), "' in '", path, "'");
  return onnx_import::TensorFromProto(tp, what, ctx);
}

}  // namespace kiln
