// Kernel choice for the CPU target: maps a node with static operands to one of the
// optimized kernel ids of docs/plan-kernels.md with its parameters, when the node meets
// that kernel's dtype and shape rules exactly; everything else becomes a "ref" step whose
// node travels as IR text. The rules here mirror the executor's checks at Create, so a
// node that does not fit is sent to ref rather than rejected later.
// Limits: f32 only; LayerNormalization/EmbedLayerNorm with extra outputs go to ref.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/lower.h"
#include "kiln/ir/ops.h"
#include "kiln/ir/text.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"

namespace kiln::compiler {
namespace {

using Dims = std::vector<int64_t>;

bool Present(const Node& n, int i) { return i < n.num_inputs() && n.input(i); }

Dims InDims(const Node& n, int i) { return n.input(i).type().StaticDims().value_or(Dims{}); }
DType InType(const Node& n, int i) { return n.input(i).type().dtype; }
Dims OutDims(const Node& n, int i) { return n.output_info(i).type.StaticDims().value_or(Dims{}); }

int64_t Product(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

PlanParam Int(const char* name, int64_t v) { return PlanParam{name, v}; }
PlanParam Real(const char* name, double v) { return PlanParam{name, v}; }
PlanParam Str(const char* name, std::string v) { return PlanParam{name, std::move(v)}; }

bool AllF32(const Node& n, std::initializer_list<int> inputs) {
  for (int i : inputs)
    if (Present(n, i) && InType(n, i) != DType::kF32) return false;
  for (int i = 0; i < n.num_outputs(); ++i)
    if (n.output_info(i).type.dtype != DType::kF32) return false;
  return true;
}

// A vector operand: absent (when allowed) or exactly [h].
bool VectorOk(const Node& n, int i, int64_t h, bool optional) {
  if (!Present(n, i)) return optional;
  return InDims(n, i) == Dims{h};
}

// A constant, possibly seen through alias ops: it lowers to a weight buffer.
bool IsWeight(Value v) {
  while (v && IsAliasOp(*v.node)) v = v.node->input(0);
  return v && v.node->is_constant();
}

std::optional<KernelChoice> Linear(const Node& n) {
  if (!Present(n, 0) || !Present(n, 1) || !AllF32(n, {0, 1, 2}) || n.num_outputs() != 1)
    return std::nullopt;
  // The executor prepacks w (and bias) at Create: they must be weights.
  if (!IsWeight(n.input(1)) || (Present(n, 2) && !IsWeight(n.input(2)))) return std::nullopt;
  const Dims x = InDims(n, 0), w = InDims(n, 1);
  if (x.empty() || w.size() != 2) return std::nullopt;
  const int64_t trans = n.attr_int_or("trans_w", 0);
  if (trans != 0 && trans != 1) return std::nullopt;
  const int64_t k = x.back();
  const int64_t wk = trans ? w[1] : w[0], nn = trans ? w[0] : w[1];
  if (wk != k || !VectorOk(n, 2, nn, true)) return std::nullopt;
  const std::string* act = n.attr_string("activation");
  const std::string activation = act ? *act : "none";
  if (activation != "none" && activation != "gelu" && activation != "gelu_tanh" &&
      activation != "relu" && activation != "tanh")
    return std::nullopt;
  Dims y(x.begin(), x.end() - 1);
  y.push_back(nn);
  if (OutDims(n, 0) != y) return std::nullopt;
  return KernelChoice{"linear",
                      {Int("m", Product(x, 0, x.size() - 1)), Int("k", k), Int("n", nn),
                       Int("trans_w", trans), Str("activation", activation)},
                      false,
                      3};
}

std::optional<KernelChoice> LayerNorm(const Node& n) {
  if (!Present(n, 0) || !Present(n, 1) || !AllF32(n, {0, 1, 2}) || n.num_outputs() != 1)
    return std::nullopt;
  const Dims x = InDims(n, 0);
  if (x.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int_or("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return std::nullopt;
  const int64_t h = x.back();
  if (!VectorOk(n, 1, h, false) || !VectorOk(n, 2, h, true) || OutDims(n, 0) != x)
    return std::nullopt;
  return KernelChoice{"layer_norm",
                      {Int("rows", Product(x, 0, x.size() - 1)), Int("h", h),
                       Real("epsilon", n.attr_float_or("epsilon", 1e-5f))},
                      true,
                      3};
}

std::optional<KernelChoice> SkipLayerNorm(const Node& n) {
  if (!Present(n, 0) || !Present(n, 1) || !Present(n, 2) || !AllF32(n, {0, 1, 2, 3, 4}) ||
      n.num_outputs() > 2)
    return std::nullopt;
  const Dims x = InDims(n, 0);
  Dims skip = InDims(n, 1);
  if (x.empty() || skip.empty()) return std::nullopt;
  // skip broadcasts by repeating whole rows: leading ones aside, it is a suffix of x.
  size_t lead = 0;
  while (lead + 1 < skip.size() && skip[lead] == 1) ++lead;
  skip.erase(skip.begin(), skip.begin() + lead);
  if (skip.size() > x.size() || !std::equal(skip.begin(), skip.end(), x.end() - skip.size()))
    return std::nullopt;
  const int64_t h = x.back();
  const int64_t rows = Product(x, 0, x.size() - 1);
  const int64_t skip_rows = Product(skip, 0, skip.size() - 1);
  if (skip_rows <= 0 || rows % skip_rows != 0) return std::nullopt;
  if (!VectorOk(n, 2, h, false) || !VectorOk(n, 3, h, true) || !VectorOk(n, 4, h, true))
    return std::nullopt;
  for (int i = 0; i < n.num_outputs(); ++i)
    if (OutDims(n, i) != x) return std::nullopt;
  return KernelChoice{"skip_layer_norm",
                      {Int("rows", rows), Int("h", h), Int("skip_rows", skip_rows),
                       Real("epsilon", n.attr_float_or("epsilon", 1e-5f))},
                      true,
                      5};
}

std::optional<KernelChoice> Attention(const Node& n) {
  if (!Present(n, 0) || n.num_outputs() != 1 || !AllF32(n, {0})) return std::nullopt;
  const Dims qkv = InDims(n, 0);
  const auto heads = n.attr_int("num_heads");
  const auto scale = n.attr_float("scale");
  const int64_t causal = n.attr_int_or("causal", 0);
  if (qkv.size() != 3 || !heads || *heads <= 0 || !scale || (causal != 0 && causal != 1))
    return std::nullopt;
  const int64_t b = qkv[0], s = qkv[1];
  if (qkv[2] % (3 * *heads) != 0) return std::nullopt;
  const int64_t d = qkv[2] / (3 * *heads);
  if (Present(n, 1)) {
    const DType mt = InType(n, 1);
    if (mt != DType::kF32 && mt != DType::kBool) return std::nullopt;
    const Dims m = InDims(n, 1);
    if (m.size() > 4) return std::nullopt;
    const Dims full = {b, *heads, s, s};
    for (size_t i = 0; i < m.size(); ++i) {
      const int64_t want = full[4 - m.size() + i];
      if (m[i] != 1 && m[i] != want) return std::nullopt;
    }
  }
  if (OutDims(n, 0) != Dims{b, s, *heads * d}) return std::nullopt;
  return KernelChoice{"attention",
                      {Int("batch", b), Int("seq", s), Int("num_heads", *heads),
                       Int("head_size", d), Real("scale", *scale), Int("causal", causal)},
                      false,
                      2};
}

std::optional<KernelChoice> EmbedLayerNorm(const Node& n) {
  // input_ids, segment_ids?, position_ids?, word, pos, segment?, gamma, beta
  if (n.num_outputs() != 1 || n.num_inputs() != 8) return std::nullopt;
  for (int i : {0, 3, 4, 6, 7})
    if (!Present(n, i)) return std::nullopt;
  if (Present(n, 1) != Present(n, 5)) return std::nullopt;
  if (!AllF32(n, {3, 4, 5, 6, 7})) return std::nullopt;
  const DType id = InType(n, 0);
  if (id != DType::kI64 && id != DType::kI32) return std::nullopt;
  const Dims ids = InDims(n, 0);
  if (ids.size() != 2) return std::nullopt;
  const int64_t b = ids[0], s = ids[1];
  const Dims word = InDims(n, 3), pos = InDims(n, 4);
  if (word.size() != 2 || pos.size() != 2) return std::nullopt;
  const int64_t h = word[1];
  if (pos[1] != h) return std::nullopt;
  if (Present(n, 1) && (InType(n, 1) != id || InDims(n, 1) != ids)) return std::nullopt;
  if (Present(n, 5)) {
    const Dims seg = InDims(n, 5);
    if (seg.size() != 2 || seg[1] != h) return std::nullopt;
  }
  if (Present(n, 2)) {
    const Dims p = InDims(n, 2);
    if (InType(n, 2) != id || (p != ids && p != Dims{1, s} && p != Dims{s})) return std::nullopt;
  } else if (s > pos[0]) {
    return std::nullopt;
  }
  if (!VectorOk(n, 6, h, false) || !VectorOk(n, 7, h, false)) return std::nullopt;
  if (OutDims(n, 0) != Dims{b, s, h}) return std::nullopt;
  return KernelChoice{"embed_layer_norm",
                      {Int("batch", b), Int("seq", s), Int("hidden", h),
                       Real("epsilon", n.attr_float_or("epsilon", 1e-12f))},
                      false,
                      8};
}

std::optional<KernelChoice> Pool(const Node& n) {
  if (!Present(n, 0) || n.num_outputs() != 1 || !AllF32(n, {0})) return std::nullopt;
  const Dims hid = InDims(n, 0);
  if (hid.size() != 3) return std::nullopt;
  const int64_t b = hid[0], s = hid[1], h = hid[2];
  if (Present(n, 1)) {
    const DType mt = InType(n, 1);
    if ((mt != DType::kF32 && mt != DType::kI64) || InDims(n, 1) != Dims{b, s}) return std::nullopt;
  }
  const std::string* mode = n.attr_string("mode");
  const int64_t normalize = n.attr_int_or("normalize", 0);
  if (!mode || (*mode != "mean" && *mode != "cls") || (normalize != 0 && normalize != 1))
    return std::nullopt;
  if (*mode == "cls" && s < 1) return std::nullopt;
  if (OutDims(n, 0) != Dims{b, h}) return std::nullopt;
  return KernelChoice{"pool",
                      {Int("batch", b), Int("seq", s), Int("hidden", h), Str("mode", *mode),
                       Int("normalize", normalize)},
                      false,
                      2};
}

std::optional<KernelChoice> Gelu(const Node& n) {
  if (!Present(n, 0) || n.num_outputs() != 1 || !AllF32(n, {0})) return std::nullopt;
  const std::string* a = n.attr_string("approximate");
  const std::string approx = a ? *a : "none";
  if (approx != "none" && approx != "tanh") return std::nullopt;
  const Dims x = InDims(n, 0);
  if (OutDims(n, 0) != x) return std::nullopt;
  return KernelChoice{
      "gelu", {Int("n", Product(x, 0, x.size())), Int("tanh", approx == "tanh" ? 1 : 0)}, true, 1};
}

std::optional<KernelChoice> Softmax(const Node& n) {
  if (!Present(n, 0) || n.num_outputs() != 1 || !AllF32(n, {0})) return std::nullopt;
  const Dims x = InDims(n, 0);
  if (x.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int_or("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1 || OutDims(n, 0) != x) return std::nullopt;
  return KernelChoice{
      "softmax", {Int("rows", Product(x, 0, x.size() - 1)), Int("n", x.back())}, true, 1};
}

}  // namespace

bool IsAliasOp(const Node& n) {
  if (!n.domain().empty() || n.num_outputs() != 1 || !Present(n, 0)) return false;
  const std::string& op = n.op();
  return op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" ||
         op == "Identity";
}

std::optional<KernelChoice> ChooseKernel(const Node& n) {
  if (n.domain() == "kiln") {
    if (n.op() == "Linear") return Linear(n);
    if (n.op() == "SkipLayerNorm") return SkipLayerNorm(n);
    if (n.op() == "MultiHeadAttention") return Attention(n);
    if (n.op() == "EmbedLayerNorm") return EmbedLayerNorm(n);
    if (n.op() == "Pool") return Pool(n);
    return std::nullopt;
  }
  if (!n.domain().empty()) return std::nullopt;
  if (n.op() == "LayerNormalization") return LayerNorm(n);
  if (n.op() == "Gelu") return Gelu(n);
  if (n.op() == "Softmax") return Softmax(n);
  return std::nullopt;
}

absl::StatusOr<std::string> RefNodeText(const Node& n) {
  if (!HasReferenceKernel(n.domain(), n.op()))
    return absl::UnimplementedError(
        absl::StrCat(n.Describe(), ": no CPU kernel (optimized or reference) for this op"));
  Graph g;
  g.set_name("step");
  g.set_opset(n.graph() ? n.graph()->opset() : 0);
  std::vector<Value> operands;
  int k = 0;
  for (const Value& v : n.inputs()) {
    if (!v) {
      operands.push_back(Value{});
      continue;
    }
    const auto dims = v.type().StaticDims();
    if (!dims) return KILN_INTERNAL("%s: operand without static dims", n.Describe());
    operands.push_back(
        g.AddInput(absl::StrCat("x", k++), Type::Static(v.type().dtype, *dims))->output(0));
  }
  Node* m = g.AddNode(n.op(), operands, n.num_outputs(), n.domain());
  for (const auto& [name, attr] : n.attrs()) m->set_attr(name, attr);
  for (int i = 0; i < n.num_outputs(); ++i) {
    m->set_output_type(i, n.output_info(i).type);
    m->set_output_name(i, n.output_info(i).name);
  }
  m->set_provenance(n.provenance());
  for (int i = 0; i < n.num_outputs(); ++i) g.AddOutput(absl::StrCat("y", i), m->output(i));
  std::string text = PrintGraph(g);
  if (absl::StatusOr<std::unique_ptr<Graph>> back = ParseGraph(text); !back.ok())
    return KILN_INTERNAL("%s: its ref step IR text does not parse: %s", n.Describe(),
                         std::string(back.status().message()));
  return text;
}

}  // namespace kiln::compiler
