#include "kiln/ir/graph.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"

namespace kiln {

std::string Dim::ToString() const {
  if (is_known()) return absl::StrCat(value_);
  if (is_symbol()) return symbol_;
  return "?";
}

Type Type::Of(const Tensor& t) { return Static(t.dtype(), t.dims()); }

Type Type::Static(DType dt, absl::Span<const int64_t> dims) {
  Type ty;
  ty.dtype = dt;
  ty.shape.emplace();
  for (int64_t d : dims) ty.shape->push_back(Dim::Known(d));
  return ty;
}

bool Type::is_static() const {
  if (!shape) return false;
  return std::all_of(shape->begin(), shape->end(), [](const Dim& d) { return d.is_known(); });
}

std::optional<std::vector<int64_t>> Type::StaticDims() const {
  if (!is_static()) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *shape) out.push_back(d.value());
  return out;
}

std::string Type::ToString() const {
  std::string s(DTypeName(dtype));
  if (!shape) return s + "[*]";
  absl::StrAppend(
      &s, "[",
      absl::StrJoin(*shape, ",", [](std::string* o, const Dim& d) { o->append(d.ToString()); }),
      "]");
  return s;
}

const Type& Value::type() const { return node->output_info(index).type; }
const std::string& Value::name() const { return node->output_info(index).name; }

namespace {
template <typename T>
const T* GetAttr(const std::map<std::string, Attribute>& attrs, const std::string& name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return nullptr;
  return std::get_if<T>(&it->second);
}
}  // namespace

std::optional<int64_t> Node::attr_int(const std::string& name) const {
  const int64_t* v = GetAttr<int64_t>(attrs_, name);
  return v ? std::optional<int64_t>(*v) : std::nullopt;
}
std::optional<float> Node::attr_float(const std::string& name) const {
  const float* v = GetAttr<float>(attrs_, name);
  return v ? std::optional<float>(*v) : std::nullopt;
}
const std::string* Node::attr_string(const std::string& name) const {
  return GetAttr<std::string>(attrs_, name);
}
const Tensor* Node::attr_tensor(const std::string& name) const {
  return GetAttr<Tensor>(attrs_, name);
}
const std::vector<int64_t>* Node::attr_ints(const std::string& name) const {
  return GetAttr<std::vector<int64_t>>(attrs_, name);
}
const std::vector<float>* Node::attr_floats(const std::string& name) const {
  return GetAttr<std::vector<float>>(attrs_, name);
}
int64_t Node::attr_int_or(const std::string& name, int64_t dflt) const {
  return attr_int(name).value_or(dflt);
}
float Node::attr_float_or(const std::string& name, float dflt) const {
  return attr_float(name).value_or(dflt);
}

std::string Node::Describe() const {
  std::string name = provenance_.empty() ? absl::StrCat("#", id_) : provenance_.front();
  std::string op = domain_.empty() ? op_ : absl::StrCat(domain_, ".", op_);
  const int64_t opset = graph_ ? graph_->opset() : 0;
  return absl::StrCat("node '", name, "' (", op, ", opset ", opset, ")");
}

Node* Graph::NewNode(std::string op, std::vector<Value> inputs, int num_outputs,
                     std::string domain) {
  auto node = std::unique_ptr<Node>(new Node());
  node->id_ = next_id_++;
  node->op_ = std::move(op);
  node->domain_ = std::move(domain);
  node->graph_ = this;
  node->outputs_.resize(num_outputs);
  Node* raw = node.get();
  raw->inputs_ = std::move(inputs);
  for (int i = 0; i < raw->num_inputs(); ++i) {
    Value v = raw->inputs_[i];
    if (v) v.node->outputs_[v.index].uses.push_back({raw, i});
  }
  nodes_.push_back(std::move(node));
  where_[raw->id_] = std::prev(nodes_.end());
  return raw;
}

Node* Graph::AddNode(std::string op, std::vector<Value> inputs, int num_outputs,
                     std::string domain) {
  return NewNode(std::move(op), std::move(inputs), num_outputs, std::move(domain));
}

Node* Graph::InsertNodeBefore(Node* before, std::string op, std::vector<Value> inputs,
                              int num_outputs, std::string domain) {
  Node* n = NewNode(std::move(op), std::move(inputs), num_outputs, std::move(domain));
  nodes_.splice(where_.at(before->id_), nodes_, std::prev(nodes_.end()));
  return n;
}

Node* Graph::AddInput(const std::string& name, Type type) {
  Node* n = NewNode("Input", {}, 1, "");
  n->outputs_[0].name = name;
  n->outputs_[0].type = std::move(type);
  inputs_.push_back(n);
  return n;
}

Node* Graph::AddConstant(const std::string& name, Tensor value) {
  Node* n = NewNode("Constant", {}, 1, "");
  n->outputs_[0].name = name;
  n->outputs_[0].type = Type::Of(value);
  n->attrs_["value"] = std::move(value);
  return n;
}

void Graph::SetInput(Node* node, int index, Value v) {
  Value old = node->inputs_[index];
  if (old) {
    auto& uses = old.node->outputs_[old.index].uses;
    auto it = std::find(uses.begin(), uses.end(), Use{node, index});
    if (it != uses.end()) uses.erase(it);
  }
  node->inputs_[index] = v;
  if (v) v.node->outputs_[v.index].uses.push_back({node, index});
}

void Graph::AddNodeInput(Node* node, Value v) {
  node->inputs_.push_back(v);
  if (v) v.node->outputs_[v.index].uses.push_back({node, node->num_inputs() - 1});
}

void Graph::ReplaceAllUsesWith(Value from, Value to) {
  if (from == to) return;
  // `to` computes the same tensor as `from`: keep what is known about its type (e.g. the
  // declared type of a graph output once the Identity in front of it is removed).
  Type& to_type = to.node->outputs_[to.index].type;
  const Type& from_type = from.node->outputs_[from.index].type;
  if ((to_type.dtype == DType::kUndefined || to_type.dtype == from_type.dtype) &&
      !to_type.has_rank() && from_type.dtype != DType::kUndefined) {
    to_type = from_type;
  }
  std::vector<Use> uses = from.node->outputs_[from.index].uses;
  for (const Use& u : uses) SetInput(u.user, u.operand, to);
  for (auto& o : outputs_)
    if (o.value == from) o.value = to;
}

absl::Status Graph::RemoveNode(Node* node) {
  for (int i = 0; i < node->num_outputs(); ++i) {
    if (!node->outputs_[i].uses.empty())
      return KILN_INTERNAL("RemoveNode: %s output %d still has uses", node->Describe(), i);
    for (const auto& o : outputs_)
      if (o.value == Value{node, i})
        return KILN_INTERNAL("RemoveNode: %s output %d is a graph output", node->Describe(), i);
  }
  for (int i = 0; i < node->num_inputs(); ++i) SetInput(node, i, Value{});
  if (node->is_input()) inputs_.erase(std::find(inputs_.begin(), inputs_.end(), node));
  const auto it = where_.find(node->id_);
  nodes_.erase(it->second);
  where_.erase(it);
  return absl::OkStatus();
}

int Graph::RemoveDeadNodes() {
  absl::flat_hash_set<const Node*> live;
  std::vector<const Node*> stack;
  for (const auto& o : outputs_)
    if (o.value && live.insert(o.value.node).second) stack.push_back(o.value.node);
  for (const Node* n : inputs_)
    if (live.insert(n).second) stack.push_back(n);  // graph inputs are the signature
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Value& v : n->inputs())
      if (v && live.insert(v.node).second) stack.push_back(v.node);
  }
  int removed = 0;
  // Walk backwards so users are removed before their producers.
  for (auto it = nodes_.rbegin(); it != nodes_.rend();) {
    Node* n = it->get();
    ++it;
    if (live.contains(n)) continue;
    for (int i = 0; i < n->num_inputs(); ++i) SetInput(n, i, Value{});
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (live.contains(it->get())) {
      ++it;
      continue;
    }
    where_.erase((*it)->id_);
    it = nodes_.erase(it);
    ++removed;
  }
  return removed;
}

absl::Status Graph::TopoSort() {
  // Kahn's algorithm over the current order; ties keep the current order.
  absl::flat_hash_map<const Node*, int> pending;
  absl::flat_hash_map<const Node*, size_t> position;
  std::vector<Node*> order;
  size_t pos = 0;
  for (const auto& p : nodes_) {
    position[p.get()] = pos++;
    int deps = 0;
    for (const Value& v : p->inputs())
      if (v) ++deps;
    pending[p.get()] = deps;
  }
  std::vector<Node*> ready;  // min-heap by original position
  auto cmp = [&](Node* a, Node* b) { return position[a] > position[b]; };
  for (const auto& p : nodes_)
    if (pending[p.get()] == 0) ready.push_back(p.get());
  std::make_heap(ready.begin(), ready.end(), cmp);
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), cmp);
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (int i = 0; i < n->num_outputs(); ++i) {
      for (const Use& u : n->outputs_[i].uses) {
        if (--pending[u.user] == 0) {
          ready.push_back(u.user);
          std::push_heap(ready.begin(), ready.end(), cmp);
        }
      }
    }
  }
  if (order.size() != nodes_.size()) {
    for (const auto& p : nodes_)
      if (pending[p.get()] > 0)
        return absl::InvalidArgumentError(
            absl::StrCat("graph has a cycle through ", p->Describe()));
  }
  absl::flat_hash_map<const Node*, size_t> rank;
  for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
  nodes_.sort([&](const auto& a, const auto& b) { return rank[a.get()] < rank[b.get()]; });
  return absl::OkStatus();
}

Node* Graph::FindNodeById(int id) const {
  const auto it = where_.find(id);
  return it == where_.end() ? nullptr : it->second->get();
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto g = std::make_unique<Graph>();
  g->opset_ = opset_;
  g->name_ = name_;
  // Two passes so that the copy does not depend on the node order.
  absl::flat_hash_map<const Node*, Node*> map;
  for (const auto& p : nodes_) {
    Node* n = g->NewNode(p->op_, {}, p->num_outputs(), p->domain_);
    for (int i = 0; i < p->num_outputs(); ++i) {
      n->outputs_[i].type = p->outputs_[i].type;
      n->outputs_[i].name = p->outputs_[i].name;
    }
    n->attrs_ = p->attrs_;
    n->provenance_ = p->provenance_;
    map[p.get()] = n;
  }
  for (const auto& p : nodes_) {
    Node* n = map.at(p.get());
    for (const Value& v : p->inputs())
      g->AddNodeInput(n, v ? Value{map.at(v.node), v.index} : Value{});
  }
  for (const Node* in : inputs_) g->inputs_.push_back(map.at(in));
  for (const auto& o : outputs_)
    g->outputs_.push_back({o.name, Value{map.at(o.value.node), o.value.index}});
  g->next_id_ = next_id_;
  g->overridable_ = overridable_;
  return g;
}

absl::Status Graph::PromoteToInput(const std::string& name) {
  Node* constant = nullptr;
  for (const auto& p : nodes_)
    if (p->is_constant() && p->outputs_[0].name == name) constant = p.get();
  if (constant == nullptr)
    return absl::NotFoundError(absl::StrCat("no initializer named '", name, "'"));
  auto declared = overridable_.find(name);
  Type type = constant->outputs_[0].type;
  if (declared != overridable_.end() && declared->second.has_rank()) type = declared->second;
  if (type.dtype == DType::kUndefined) type.dtype = constant->outputs_[0].type.dtype;
  if (declared != overridable_.end()) overridable_.erase(declared);
  Node* in = AddInput(name, std::move(type));
  in->provenance_ = constant->provenance_;
  ReplaceAllUsesWith(constant->output(0), in->output(0));
  KILN_RETURN_IF_ERROR(RemoveNode(constant));
  return TopoSort();
}

}  // namespace kiln
