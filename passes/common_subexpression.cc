// cse: merges nodes that compute the same thing into the first of them.
//  - Constants with equal dtype, dims and bytes (weight dedup). Only constants sharing
//    dtype and dims with another are hashed (bytes hashed once, then BitwiseEqual on a
//    hash match; the same storage is equal without reading it).
//  - Nodes of ops with the kPure trait with the same domain/op, output count, attributes
//    and input Values (any order for kCommutative ops). Float attributes compare by bit
//    pattern, tensor attributes by bytes.
// Why: exporters rebuild the same attention-mask arithmetic and shape computations in
// every layer, and duplicate tied or repeated weights; one copy is enough.
// Nodes are visited in topological order and inputs compared after earlier merges, so a
// chain of duplicates collapses in one run. The survivor keeps its output names and
// gains the merged node's provenance (a constant keeps its own: see Merge); a graph output that
// pointed at a merged-away value keeps its name (GraphOutput::name) and now points at the survivor.
// Limits: outputs must have equal types, or one of them fully unknown (the survivor then
// takes the known type); Dropout merges only in inference form (training_mode absent or
// constant false), since training masks are random. Not global value numbering: no
// algebraic identities beyond commutativity.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "passes/no_ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t HashString(std::string_view s) {
  return absl::Hash<absl::string_view>()(absl::string_view(s.data(), s.size()));
}

uint64_t HashShape(const Tensor& t) {
  uint64_t h = static_cast<uint64_t>(t.dtype());
  for (int64_t d : t.dims()) h = Mix(h, static_cast<uint64_t>(d));
  return h;
}

uint64_t HashBytes(const Tensor& t) {
  if (t.NumBytes() == 0 || t.raw() == nullptr) return 0;
  return absl::Hash<absl::string_view>()(
      absl::string_view(reinterpret_cast<const char*>(t.raw()), t.NumBytes()));
}

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

// Equality with floats by bit pattern and tensors by bytes.
struct AttrEqual {
  bool operator()(const Attribute& a, const Attribute& b) const {
    if (a.index() != b.index()) return false;
    if (const float* x = std::get_if<float>(&a))
      return FloatBits(*x) == FloatBits(std::get<float>(b));
    if (const auto* x = std::get_if<std::vector<float>>(&a)) {
      const auto& y = std::get<std::vector<float>>(b);
      if (x->size() != y.size()) return false;
      for (size_t i = 0; i < x->size(); ++i)
        if (FloatBits((*x)[i]) != FloatBits(y[i])) return false;
      return true;
    }
    if (const Tensor* x = std::get_if<Tensor>(&a)) return x->BitwiseEqual(std::get<Tensor>(b));
    if (const int64_t* x = std::get_if<int64_t>(&a)) return *x == std::get<int64_t>(b);
    if (const std::string* x = std::get_if<std::string>(&a)) return *x == std::get<std::string>(b);
    if (const auto* x = std::get_if<std::vector<int64_t>>(&a))
      return *x == std::get<std::vector<int64_t>>(b);
    return std::get<std::vector<std::string>>(a) == std::get<std::vector<std::string>>(b);
  }
};

uint64_t HashAttr(const Attribute& a) {
  uint64_t h = a.index();
  if (const int64_t* v = std::get_if<int64_t>(&a)) return Mix(h, static_cast<uint64_t>(*v));
  if (const float* v = std::get_if<float>(&a)) return Mix(h, FloatBits(*v));
  if (const std::string* v = std::get_if<std::string>(&a)) return Mix(h, HashString(*v));
  if (const Tensor* v = std::get_if<Tensor>(&a)) return Mix(Mix(h, HashShape(*v)), HashBytes(*v));
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a)) {
    for (int64_t x : *v) h = Mix(h, static_cast<uint64_t>(x));
    return h;
  }
  if (const auto* v = std::get_if<std::vector<float>>(&a)) {
    for (float x : *v) h = Mix(h, FloatBits(x));
    return h;
  }
  for (const std::string& s : std::get<std::vector<std::string>>(a)) h = Mix(h, HashString(s));
  return h;
}

bool AttrsEqual(const Node& a, const Node& b) {
  if (a.attrs().size() != b.attrs().size()) return false;
  auto it = b.attrs().begin();
  for (const auto& [name, value] : a.attrs()) {
    if (name != it->first || !AttrEqual()(value, it->second)) return false;
    ++it;
  }
  return true;
}

bool ValueLess(const Value& a, const Value& b) {
  const int ia = a ? a.node->id() : -1, ib = b ? b.node->id() : -1;
  return ia != ib ? ia < ib : a.index < b.index;
}

// Inputs in comparison order: sorted for commutative ops.
std::vector<Value> KeyInputs(const Node& n) {
  std::vector<Value> in = n.inputs();
  while (!in.empty() && !in.back()) in.pop_back();  // trailing omitted == absent
  if (HasTrait(FindOp(n.domain(), n.op()), kCommutative))
    std::sort(in.begin(), in.end(), ValueLess);
  return in;
}

uint64_t NodeKey(const Node& n) {
  uint64_t h = Mix(HashString(n.domain()), HashString(n.op()));
  h = Mix(h, static_cast<uint64_t>(n.num_outputs()));
  for (const Value& v : KeyInputs(n))
    h = Mix(Mix(h, v ? static_cast<uint64_t>(v.node->id()) + 1 : 0),
            static_cast<uint64_t>(v.index));
  for (const auto& [name, value] : n.attrs()) h = Mix(Mix(h, HashString(name)), HashAttr(value));
  return h;
}

bool SameComputation(const Node& a, const Node& b) {
  return a.domain() == b.domain() && a.op() == b.op() && a.num_outputs() == b.num_outputs() &&
         KeyInputs(a) == KeyInputs(b) && AttrsEqual(a, b);
}

bool IsUnknown(const Type& t) { return t.dtype == DType::kUndefined && !t.shape; }

bool TypesCompatible(const Node& a, const Node& b) {
  for (int i = 0; i < a.num_outputs(); ++i) {
    const Type& x = a.output_info(i).type;
    const Type& y = b.output_info(i).type;
    if (x != y && !IsUnknown(x) && !IsUnknown(y)) return false;
  }
  return true;
}

bool SameConstant(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  if (a.storage() == b.storage()) return true;
  return a.BitwiseEqual(b);
}

class CommonSubexpressionPass final : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  std::string_view description() const override {
    return "merges equal constants and pure nodes computing the same values";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    // Constants worth hashing: those sharing dtype and dims with another constant.
    absl::flat_hash_map<uint64_t, int> shape_count;
    for (const auto& p : g.nodes())
      if (const Tensor* t = p->constant_value()) ++shape_count[HashShape(*t)];

    std::vector<Node*> order;
    for (const auto& p : g.nodes()) order.push_back(p.get());
    absl::flat_hash_map<uint64_t, std::vector<Node*>> constants, computations;
    bool changed = false;
    for (Node* n : order) {
      if (const Tensor* t = n->constant_value()) {
        const uint64_t shape_key = HashShape(*t);
        if (shape_count[shape_key] < 2) continue;
        std::vector<Node*>& bucket = constants[Mix(shape_key, HashBytes(*t))];
        Node* same = nullptr;
        for (Node* c : bucket)
          if (SameConstant(*c->constant_value(), *t)) {
            same = c;
            break;
          }
        if (same == nullptr) {
          bucket.push_back(n);
          continue;
        }
        if (same->constant_value()->storage() != t->storage())
          Count("deduplicated bytes", static_cast<int64_t>(t->NumBytes()));
        Count("deduplicated constants");
        KILN_RETURN_IF_ERROR(Merge(g, n, same));
        changed = true;
        continue;
      }
      if (n->is_input() || n->is_constant()) continue;
      if (!HasTrait(FindOp(n->domain(), n->op()), kPure)) continue;
      // Dropout's outputs are random in training mode: only the inference form is pure.
      if (rewrite::IsOp(n, "Dropout") && !noop::IsInferenceDropout(*n)) continue;
      std::vector<Node*>& bucket = computations[NodeKey(*n)];
      Node* same = nullptr;
      for (Node* c : bucket)
        if (SameComputation(*c, *n) && TypesCompatible(*c, *n)) {
          same = c;
          break;
        }
      if (same == nullptr) {
        bucket.push_back(n);
        continue;
      }
      Count("merged nodes");
      KILN_RETURN_IF_ERROR(Merge(g, n, same));
      changed = true;
    }
    return changed;
  }

 private:
  // Redirects every use of `dup` (and graph outputs) to `survivor`, then removes `dup`.
  // A surviving constant keeps its own provenance: constants become weights, not steps, so
  // no trace names them, and a scalar shared by every layer would otherwise collect one
  // name per layer (quadratic in the layers, as it was).
  static absl::Status Merge(Graph& g, Node* dup, Node* survivor) {
    for (int i = 0; i < dup->num_outputs(); ++i) {
      if (IsUnknown(survivor->output_info(i).type))
        survivor->set_output_type(i, dup->output_info(i).type);
      g.ReplaceAllUsesWith(dup->output(i), survivor->output(i));
    }
    if (!survivor->is_constant()) rewrite::UnionProvenance(survivor, dup);
    return g.RemoveNode(dup);
  }
};

}  // namespace

std::unique_ptr<Pass> CreateCommonSubexpressionPass() {
  return std::make_unique<CommonSubexpressionPass>();
}

}  // namespace kiln
