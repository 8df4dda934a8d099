// Projection merging shared by fuse-qkv and fuse-glu (projection_merge.h).
#include "passes/projection_merge.h"

#include <cstring>
#include <set>

#include "absl/strings/str_format.h"

namespace kiln::projection {

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::ProducerIs;

static bool IsLinear(const Node* n) { return n && n->domain() == "kiln" && n->op() == "Linear"; }
static bool IsBlockQuant(const Node* n) {
  return n && n->domain() == "kiln" && n->op() == "BlockQuantLinear";
}
static bool HasInput(const Node* n, int i) { return i < n->num_inputs() && n->input(i); }

// A kiln.BlockQuantLinear without activation: its constant operands into p ("" when ok).
static std::string AnalyzeBlockQuant(Node* n, const char* which, Projection* p) {
  const std::string* act = n->attr_string("activation");
  if (act && *act != "none")
    return absl::StrFormat("the %s projection has a fused activation (%s)", which, *act);
  p->block_quant = true;
  p->trans_w = 1;
  p->x = n->input(0);
  p->w = HasInput(n, 1) ? ConstantOf(n->input(1)) : nullptr;
  p->scales = HasInput(n, 2) ? ConstantOf(n->input(2)) : nullptr;
  p->zero_points = HasInput(n, 3) ? ConstantOf(n->input(3)) : nullptr;
  p->block_size = n->attr_int_or("block_size", 0);
  if (p->w == nullptr || (p->w->dtype() != DType::kU4 && p->w->dtype() != DType::kU8) ||
      p->w->rank() != 2 || p->scales == nullptr || p->scales->rank() != 2 ||
      p->scales->dims()[0] != p->n() ||
      (HasInput(n, 3) &&
       (p->zero_points == nullptr || p->zero_points->dims() != p->scales->dims())))
    return absl::StrFormat("the %s projection's block-quantized weights are not constants", which);
  return "";
}

std::string Analyze(const Graph& g, Value v, const char* which, Projection* p) {
  p->out = v;
  Node* n = v.node;
  Node* mm = nullptr;
  Value bias;
  if (IsBlockQuant(n)) {
    if (std::string why = AnalyzeBlockQuant(n, which, p); !why.empty()) return why;
    if (HasInput(n, 4)) bias = n->input(4);
    p->nodes = {n};
  } else if (IsLinear(n)) {
    const std::string* act = n->attr_string("activation");
    if (act && *act != "none")
      return absl::StrFormat("the %s projection has a fused activation (%s)", which, *act);
    p->trans_w = n->attr_int_or("trans_w", 0);
    if (p->trans_w != 0 && p->trans_w != 1)
      return absl::StrFormat("the %s projection has trans_w=%d", which, p->trans_w);
    p->x = n->input(0);
    p->w = ConstantOf(n->input(1));
    if (n->num_inputs() > 2) bias = n->input(2);
    p->nodes = {n};
  } else {
    if (IsOp(n, "Add") && n->num_inputs() == 2) {
      for (int i = 0; i < 2 && mm == nullptr; ++i) {
        Node* q = n->input(i).node;
        if (IsBlockQuant(q) && !HasInput(q, 4) && rewrite::HasSingleUse(g, q->output(0))) {
          if (std::string why = AnalyzeBlockQuant(q, which, p); !why.empty()) return why;
          bias = n->input(1 - i);
          p->nodes = {q, n};
          break;
        }
        if ((mm = ProducerIs(n->input(i), "MatMul"))) bias = n->input(1 - i);
      }
      if (!p->block_quant && (mm == nullptr || !rewrite::HasSingleUse(g, mm->output(0))))
        return absl::StrFormat("the %s projection is an Add, not MatMul + bias", which);
      if (!p->block_quant) p->nodes = {mm, n};
    } else if (IsOp(n, "MatMul")) {
      mm = n;
      p->nodes = {n};
    } else {
      return absl::StrFormat("the %s projection is %s, not a Linear or MatMul", which, n->op());
    }
    if (!p->block_quant) {
      if (mm->num_inputs() != 2) return "malformed MatMul";
      p->x = mm->input(0);
      p->w = ConstantOf(mm->input(1));
      if (!p->x.type().has_rank() || p->x.type().rank() < 2)
        return absl::StrFormat("the %s projection's input rank is unknown or below 2", which);
    }
  }
  if (!p->block_quant && (p->w == nullptr || p->w->rank() != 2 || !IsFloat(p->w->dtype())))
    return absl::StrFormat("the %s projection's weight is not a constant float matrix", which);
  // The bias has the output's dtype: the weight's, or X's for block-quantized codes.
  const DType out_dtype = p->block_quant ? p->x.type().dtype : p->w->dtype();
  if (bias) {
    p->bias = ConstantOf(bias);
    if (p->bias == nullptr || p->bias->NumElements() != p->n() || p->bias->dtype() != out_dtype)
      return absl::StrFormat("the %s projection's bias is not a constant vector of size %d", which,
                             p->n());
    for (int64_t d : p->bias->dims())
      if (d != 1 && d != p->n())
        return absl::StrFormat("the %s projection's bias has shape %s", which,
                               p->bias->ShapeString());
  }
  return "";
}

// Concatenates the weights along the output axis (columns of [K, N], rows of [N, K]).
static Tensor ConcatWeights(const std::vector<Projection>& ps) {
  const int64_t k = ps[0].k();
  int64_t total = 0;
  for (const Projection& p : ps) total += p.n();
  const DType dt = ps[0].w->dtype();
  const size_t es = DTypeSize(dt);
  const bool tw = ps[0].trans_w == 1;
  Tensor w(dt, tw ? std::vector<int64_t>{total, k} : std::vector<int64_t>{k, total});
  std::byte* dst = w.raw();
  if (tw) {
    for (const Projection& p : ps) {
      std::memcpy(dst, p.w->raw(), p.w->NumBytes());
      dst += p.w->NumBytes();
    }
  } else {
    for (int64_t r = 0; r < k; ++r)
      for (const Projection& p : ps) {
        const size_t row = static_cast<size_t>(p.n()) * es;
        std::memcpy(dst, p.w->raw() + r * row, row);
        dst += row;
      }
  }
  return w;
}

// Rows (output channels) of each projection's tensor `part` one after the other; a null
// part (absent zero points) is written out as `fill`.
static Tensor ConcatRows(const std::vector<Projection>& ps, const Tensor* Projection::*part,
                         DType dt, int64_t cols, double fill) {
  int64_t total = 0;
  for (const Projection& p : ps) total += p.n();
  Tensor t(dt, {total, cols});
  int64_t row = 0;
  for (const Projection& p : ps) {
    const int64_t count = p.n() * cols;
    if (p.*part != nullptr)
      std::memcpy(t.raw() + row * cols * static_cast<int64_t>(DTypeSize(dt)), (p.*part)->raw(),
                  static_cast<size_t>(count) * DTypeSize(dt));
    else
      for (int64_t i = 0; i < count; ++i) t.SetFromDouble(row * cols + i, fill);
    row += p.n();
  }
  return t;
}

static Tensor ConcatBiases(const std::vector<Projection>& ps) {
  int64_t total = 0;
  for (const Projection& p : ps) total += p.n();
  Tensor b(ps[0].bias->dtype(), {total});
  std::byte* dst = b.raw();
  for (const Projection& p : ps) {
    std::memcpy(dst, p.bias->raw(), p.bias->NumBytes());
    dst += p.bias->NumBytes();
  }
  return b;
}

Value ConstantBefore(Graph& g, Node* before, Tensor t, std::string name) {
  Node* c = g.InsertNodeBefore(before, "Constant", {}, 1);
  c->set_output_type(0, Type::Of(t));
  c->set_attr("value", std::move(t));
  c->set_output_name(0, std::move(name));
  return c->output(0);
}

std::string CheckGroup(const std::vector<Projection>& ps, const std::string& what,
                       const std::string& cross) {
  for (size_t i = 0; i < ps.size(); ++i)
    for (size_t j = i + 1; j < ps.size(); ++j)
      if (ps[i].out.node == ps[j].out.node) return what + " share a projection node";
  bool rest_same = true, all_same = true;
  for (size_t i = 1; i < ps.size(); ++i) {
    all_same &= ps[i].x == ps[0].x;
    rest_same &= ps[i].x == ps[1].x;
  }
  if (!all_same)
    return rest_same && ps.size() > 2 ? cross : what + " projections read different inputs";
  const Tensor* zero = nullptr;  // the first projection's zero points that has them
  for (const Projection& p : ps) {
    if (p.zero_points == nullptr) continue;
    if (zero != nullptr && p.zero_points->dtype() != zero->dtype())
      return "the projections' zero points differ in dtype";
    zero = p.zero_points;
  }
  for (const Projection& p : ps) {
    if (p.block_quant != ps[0].block_quant)
      return "some projections have block-quantized weights and some do not";
    if (p.block_quant &&
        (p.block_size != ps[0].block_size || p.scales->dims()[1] != ps[0].scales->dims()[1]))
      return "the block-quantized projections differ in block size";
    if (p.trans_w != ps[0].trans_w) return "the projections differ in trans_w";
    if (p.w->dtype() != ps[0].w->dtype()) return "the projection weights differ in dtype";
    if (p.k() != ps[0].k())
      return absl::StrFormat("the projection weights differ in input size (%d vs %d)", p.k(),
                             ps[0].k());
    if ((p.bias == nullptr) != (ps[0].bias == nullptr))
      return "some projections have a bias and some do not";
  }
  return "";
}

Node* InsertMerged(Graph& g, const std::vector<Projection>& ps, const rewrite::NodeOrder& order,
                   const std::string& name, Node** first_out) {
  std::vector<Node*> replaced;
  for (const Projection& p : ps) replaced.insert(replaced.end(), p.nodes.begin(), p.nodes.end());
  // The first replaced node in graph order: the merged Linear goes before it.
  Node* first = nullptr;
  if (order.Sort(replaced)) {
    first = replaced.front();
  } else {
    const std::set<const Node*> set(replaced.begin(), replaced.end());
    for (const auto& n : g.nodes())
      if (set.count(n.get())) {
        first = n.get();
        break;
      }
  }
  if (first_out) *first_out = first;
  auto named = [&](const char* suffix) { return name.empty() ? "" : name + suffix; };
  std::vector<Value> inputs = {ps[0].x,
                               ConstantBefore(g, first, ConcatWeights(ps), named("_weight"))};
  const bool quant = ps[0].block_quant;
  if (quant) {
    const int64_t kb = ps[0].scales->dims()[1];
    inputs.push_back(ConstantBefore(
        g, first, ConcatRows(ps, &Projection::scales, DType::kF32, kb, 0), named("_scales")));
    bool any_zero = false;
    for (const Projection& p : ps) any_zero |= p.zero_points != nullptr;
    // An absent zero point is MatMulNBits' default 2^(bits-1); the codes' dtype, and the
    // present zero points' (the codes' or f32), are the same in every projection (CheckGroup
    // checks them).
    const DType codes = ps[0].w->dtype();
    DType zero_dtype = codes;
    for (const Projection& p : ps)
      if (p.zero_points != nullptr) zero_dtype = p.zero_points->dtype();
    const double default_zero = codes == DType::kU8 ? 128 : 8;
    inputs.push_back(any_zero ? ConstantBefore(g, first,
                                               ConcatRows(ps, &Projection::zero_points, zero_dtype,
                                                          kb, default_zero),
                                               named("_zero_points"))
                              : Value());
  }
  if (ps[0].bias) inputs.push_back(ConstantBefore(g, first, ConcatBiases(ps), named("_bias")));
  while (!inputs.back()) inputs.pop_back();  // no zero points and no bias
  Node* lin = g.InsertNodeBefore(first, quant ? "BlockQuantLinear" : "Linear", inputs, 1, "kiln");
  if (quant)
    lin->set_attr("block_size", ps[0].block_size);
  else
    lin->set_attr("trans_w", ps[0].trans_w);
  lin->set_attr("activation", std::string("none"));
  int64_t total = 0;
  for (const Projection& p : ps) total += p.n();
  Type t = ps[0].out.type();
  if (!t.has_rank()) {
    t = ps[0].x.type();
    t.dtype = quant ? ps[0].x.type().dtype : ps[0].w->dtype();
  }
  if (t.shape && !t.shape->empty()) t.shape->back() = Dim::Known(total);
  lin->set_output_type(0, t);
  lin->set_output_name(0, name);
  for (const Projection& p : ps)
    rewrite::UnionProvenance(lin, std::vector<const Node*>(p.nodes.begin(), p.nodes.end()));
  return lin;
}

}  // namespace kiln::projection
