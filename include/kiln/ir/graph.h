// The kiln IR: a static DAG of Nodes owned by a Graph. A Value is a handle
// (producer node, output index); ONNX tensor names are metadata only. Use lists are
// maintained by the Graph API (AddNode, SetInput, ReplaceAllUsesWith, RemoveNode):
// never edit them by hand. Graph inputs are nodes of op "Input"; constants are nodes of
// op "Constant" whose "value" attribute holds a shared Tensor.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kiln/ir/tensor.h"

namespace kiln {

// One dimension: a known non-negative size, a named symbol ("batch"), or unknown.
class Dim {
 public:
  Dim() = default;  // unknown
  static Dim Known(int64_t v) {
    Dim d;
    d.value_ = v;
    return d;
  }
  static Dim Symbol(std::string s) {
    Dim d;
    d.symbol_ = std::move(s);
    return d;
  }
  bool is_known() const { return value_ >= 0; }
  bool is_symbol() const { return !symbol_.empty(); }
  bool is_unknown() const { return !is_known() && !is_symbol(); }
  int64_t value() const { return value_; }
  const std::string& symbol() const { return symbol_; }
  std::string ToString() const;  // "128", "batch", "?"
  bool operator==(const Dim& o) const { return value_ == o.value_ && symbol_ == o.symbol_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }

 private:
  int64_t value_ = -1;
  std::string symbol_;
};

// dtype + shape; `shape` is nullopt when even the rank is unknown.
struct Type {
  DType dtype = DType::kUndefined;
  std::optional<std::vector<Dim>> shape;

  static Type Of(const Tensor& t);
  static Type Static(DType dt, absl::Span<const int64_t> dims);
  bool has_rank() const { return shape.has_value(); }
  int rank() const { return shape ? static_cast<int>(shape->size()) : -1; }
  // All dims known.
  bool is_static() const;
  std::optional<std::vector<int64_t>> StaticDims() const;
  std::string ToString() const;  // "f32[batch,128,384]", "i64[]", "f32[*]"
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

using Attribute = std::variant<int64_t, float, std::string, Tensor, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>>;

class Node;

// A handle to one output of one node. A null Value (node == nullptr) marks an omitted
// optional input.
struct Value {
  Node* node = nullptr;
  int index = 0;
  explicit operator bool() const { return node != nullptr; }
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Value& o) const { return !(*this == o); }
  // Convenience accessors (node must be non-null).
  const Type& type() const;
  const std::string& name() const;
};

struct Use {
  Node* user = nullptr;
  int operand = 0;
  bool operator==(const Use& o) const { return user == o.user && operand == o.operand; }
};

struct NodeOutput {
  Type type;
  std::string name;  // ONNX tensor name, for I/O and diagnostics only
  std::vector<Use> uses;
};

class Graph;

class Node {
 public:
  int id() const { return id_; }
  const std::string& op() const { return op_; }
  const std::string& domain() const { return domain_; }  // "" = ONNX default domain
  Graph* graph() const { return graph_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  Value input(int i) const { return inputs_[i]; }
  const std::vector<Value>& inputs() const { return inputs_; }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  Value output(int i = 0) { return Value{this, i}; }
  const NodeOutput& output_info(int i) const { return outputs_[i]; }
  // Types and names of outputs may be set by passes; uses may not.
  void set_output_type(int i, Type t) { outputs_[i].type = std::move(t); }
  void set_output_name(int i, std::string n) { outputs_[i].name = std::move(n); }

  const std::map<std::string, Attribute>& attrs() const { return attrs_; }
  bool has_attr(const std::string& name) const { return attrs_.count(name) > 0; }
  void set_attr(const std::string& name, Attribute a) { attrs_[name] = std::move(a); }
  void erase_attr(const std::string& name) { attrs_.erase(name); }
  // Typed getters: nullopt / nullptr when absent or of another type.
  std::optional<int64_t> attr_int(const std::string& name) const;
  std::optional<float> attr_float(const std::string& name) const;
  const std::string* attr_string(const std::string& name) const;
  const Tensor* attr_tensor(const std::string& name) const;
  const std::vector<int64_t>* attr_ints(const std::string& name) const;
  const std::vector<float>* attr_floats(const std::string& name) const;
  int64_t attr_int_or(const std::string& name, int64_t dflt) const;
  float attr_float_or(const std::string& name, float dflt) const;

  // ONNX node names this node came from (fusions union them).
  const std::vector<std::string>& provenance() const { return provenance_; }
  void add_provenance(const std::string& name) { provenance_.push_back(name); }
  void set_provenance(std::vector<std::string> p) { provenance_ = std::move(p); }

  bool is_input() const { return op_ == "Input" && domain_.empty(); }
  bool is_constant() const { return op_ == "Constant" && domain_.empty(); }
  // For Constant nodes: the value. nullptr otherwise.
  const Tensor* constant_value() const { return is_constant() ? attr_tensor("value") : nullptr; }

  // "node 'name' (Op, opset N)" for error messages.
  std::string Describe() const;

 private:
  friend class Graph;
  Node() = default;
  int id_ = 0;
  std::string op_;
  std::string domain_;
  Graph* graph_ = nullptr;
  std::vector<Value> inputs_;
  std::vector<NodeOutput> outputs_;
  std::map<std::string, Attribute> attrs_;
  std::vector<std::string> provenance_;
};

struct GraphOutput {
  std::string name;
  Value value;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Deep copy (constant storage stays shared).
  std::unique_ptr<Graph> Clone() const;

  // Nodes in their current order (topological once TopoSort or the importer ran).
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }

  // Appends a node. `inputs` may contain null Values for omitted optional inputs.
  Node* AddNode(std::string op, std::vector<Value> inputs, int num_outputs,
                std::string domain = "");
  // Inserts a node immediately before `before` (keeps topological order for rewrites).
  Node* InsertNodeBefore(Node* before, std::string op, std::vector<Value> inputs, int num_outputs,
                         std::string domain = "");
  // Graph input: an "Input" node with one output named `name` of type `type`.
  Node* AddInput(const std::string& name, Type type);
  // Constant node holding `value`, output named `name`.
  Node* AddConstant(const std::string& name, Tensor value);

  void SetInput(Node* node, int index, Value v);
  void AddNodeInput(Node* node, Value v);
  // Rewires every use of `from` (and graph outputs) to `to`. When `to` has no known rank,
  // it takes `from`'s type (both denote the same tensor).
  void ReplaceAllUsesWith(Value from, Value to);
  // Removes a node. Fails if any of its outputs is used or is a graph output.
  absl::Status RemoveNode(Node* node);
  // Removes nodes not reachable backwards from the graph outputs. Returns count removed.
  int RemoveDeadNodes();

  const std::vector<Node*>& inputs() const { return inputs_; }  // "Input" nodes in order
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  void AddOutput(std::string name, Value v) { outputs_.push_back({std::move(name), v}); }
  void SetOutputValue(int i, Value v) { outputs_[i].value = v; }
  void ClearOutputs() { outputs_.clear(); }

  // Reorders nodes topologically (stable: keeps the current order where it can).
  // Fails naming a node on the cycle if the graph is cyclic.
  absl::Status TopoSort();

  // Opset of the default ONNX domain the graph was imported with (for diagnostics).
  int64_t opset() const { return opset_; }
  void set_opset(int64_t v) { opset_ = v; }
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // The node with `id`, or null when it was removed (constant time).
  Node* FindNodeById(int id) const;

  // Graph inputs that are also initializers, with the input's declared type (unknown when
  // it declared none). By the ONNX IR a feed overrides such an initializer; kiln imports them
  // as constants (an ahead-of-time compile folds them), and PromoteToInput(name) turns one
  // into a graph input — of the declared type when it has a rank, else the initializer's —
  // when a run feeds it (`kiln run MODEL.onnx --input`), and drops it from this list.
  // NotFound when no constant has that name. Passes may fold such a constant away: promote
  // before optimizing.
  const std::map<std::string, Type>& overridable_initializers() const { return overridable_; }
  void add_overridable_initializer(std::string name, Type declared) {
    overridable_[std::move(name)] = std::move(declared);
  }
  absl::Status PromoteToInput(const std::string& name);

 private:
  using NodeList = std::list<std::unique_ptr<Node>>;
  Node* NewNode(std::string op, std::vector<Value> inputs, int num_outputs, std::string domain);
  NodeList nodes_;
  // Each live node's place in nodes_ by id: constant-time lookup, insertion before a node
  // and removal, so passes that rewrite node by node stay linear in the graph's size
  // (list iterators survive splice and sort).
  absl::flat_hash_map<int, NodeList::iterator> where_;
  std::vector<Node*> inputs_;
  std::vector<GraphOutput> outputs_;
  int next_id_ = 0;
  int64_t opset_ = 0;
  std::string name_;
  std::map<std::string, Type> overridable_;
};

}  // namespace kiln
