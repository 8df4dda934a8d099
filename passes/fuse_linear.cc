// fuse-linear: turns projections with constant weights into kiln.Linear
// (docs/fused-ops.md) and folds a following activation into it (the BiasGelu epilogue).
//   MatMul(x, W) (+ b)          -> Linear(x, W, b)            W constant [K,N], b [N]
//   MatMul(x, Transpose(W)) (+ b) -> Linear(x, W, b){trans_w=1}  W constant [N,K]
//   Gemm(A, B, C){alpha=1, beta, transB} -> Linear(A, B, beta·C){trans_w=transB}
//   act(Linear(...)) -> Linear(...){activation}   act: Gelu (none|tanh), Relu, Tanh
// Roots: MatMul, Gemm, then the activation ops. Cheap match: a constant rank-2 weight
// (or a Transpose of one, which -O1 leaves only when the constant is shared, e.g. tied
// embeddings); the bias is the other operand of the MatMul's only user when that is an
// Add of a constant that broadcasts as [N] ([N], [1,..,1,N]); any other Add (a residual)
// stays and the Linear has no bias. The activation is absorbed when its input is a
// Linear without activation whose only use it is.
// Near-misses (reported, nothing fused): a bias-like constant Add whose shape does not
// broadcast as [N]; a MatMul followed by a [N] constant bias whose weight is not a
// constant or not 2-D; a Gemm with transA=1, alpha != 1, non-constant B, or a C that
// is not constant or broadcasts over rows ([M,1], [M,N]).
// Reshapes around a Linear (GPT-2's Conv1D: Reshape(x,[-1,K]) -> Gemm -> Reshape(
// [B,S,N])) are dropped, since kiln.Linear maps [..., K] to [..., N] row by row:
//   Reshape(Linear(Reshape(x [L..., K] -> [M..., K])) -> [L..., N]) == Linear(x)
// exact (same rows, same order) when the first Reshape keeps the last dim K and the second
// restores x's leading dims L exactly (known sizes or the same symbols, from the stored
// types). When x has more dims whose trailing ones multiply to K (attention's merged heads
// [B,S,h,d] -> [B*S,h*d] before fuse-attention), the first Reshape becomes
// Reshape(x, [0,..,0,K]). Runs before the activation absorption so that a following Gelu
// is absorbed too.
// kiln.BlockQuantLinear (int4/int8 weight-only, imported from MatMulNBits) takes a following
// constant [N] bias Add into its bias input, and the Reshape pairs and activations as above.
// Limits: a batched (rank > 2) weight, MatMul(W, x) with the constant first, and
// activations other than the four listed stay unfused; a Reshape pair that changes the
// leading dims (or whose types are unknown) stays.
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::DimsString;
using rewrite::IsOp;
using rewrite::NodeLabel;
using rewrite::OtherOperand;
using rewrite::ValueLabel;

struct LinearMatch {
  Value x;
  Value w;  // the constant weight
  int64_t trans_w = 0;
  Node* transpose = nullptr;  // MatMul(x, Transpose(W)) form
  Node* root = nullptr;       // the MatMul or Gemm
  Node* bias_add = nullptr;
  std::optional<Tensor> bias;  // as [N]
  Value bias_value;            // the original bias operand (reused when already [N])
  std::vector<const Node*> Nodes() const {
    std::vector<const Node*> out;
    for (const Node* n : {transpose, root, bias_add})
      if (n != nullptr) out.push_back(n);
    return out;
  }
};

// W or Transpose(W) with W a constant: (value, trans_w, transpose node).
struct Weight {
  Value w;
  int64_t trans = 0;
  Node* transpose = nullptr;
};
std::optional<Weight> ConstantWeight(Value v) {
  if (!v) return std::nullopt;
  if (ConstantOf(v)) return Weight{v, 0, nullptr};
  Node* t = rewrite::ProducerIs(v, "Transpose");
  if (t == nullptr || t->num_inputs() != 1 || !ConstantOf(t->input(0))) return std::nullopt;
  const Tensor* c = ConstantOf(t->input(0));
  const std::vector<int64_t>* perm = t->attr_ints("perm");
  if (c->rank() != 2 || (perm != nullptr && *perm != std::vector<int64_t>{1, 0}))
    return std::nullopt;
  return Weight{t->input(0), 1, t};
}

// Out-features N of a rank-2 weight.
int64_t OutFeatures(const Tensor& w, int64_t trans) { return trans ? w.dims()[0] : w.dims()[1]; }

// Rank of `v` when known, else 1 (only an exact [N] bias is accepted then).
int RankOr1(Value v) { return v.type().has_rank() ? v.type().rank() : 1; }

// A rank-2 constant weight of the input's dtype.
bool WeightFits(const Tensor* wt, DType dt) {
  return wt != nullptr && wt->rank() == 2 && wt->dtype() == dt;
}

// The Add after `out` when it adds a constant: (add, constant operand).
std::pair<Node*, Value> ConstantAddAfter(const Graph& g, Value out) {
  Node* user = rewrite::SingleUser(g, out);
  if (!IsOp(user, "Add")) return {nullptr, Value{}};
  const Value b = OtherOperand(user, out);
  if (b == out || !ConstantOf(b)) return {nullptr, Value{}};
  return {user, b};
}

// A constant bias Add whose constant broadcasts as [n] onto a rank-`rank` value.
std::optional<Tensor> BiasVector(Value b, int64_t n, int rank, DType dt) {
  const Tensor* t = ConstantOf(b);
  if (t == nullptr || t->dtype() != dt) return std::nullopt;
  return rewrite::AsVector(*t, n, rank);
}

// MatMul / Gemm (+ bias) with a constant weight -> kiln.Linear.
class LinearRule final : public fusion::FusionRule<LinearMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "MatMul") || IsOp(&n, "Gemm"); }

  std::optional<LinearMatch> Recognize(const Graph& g, Node* n, fusion::FusionSession&) override {
    return IsOp(n, "MatMul") ? RecognizeMatMul(g, n) : RecognizeGemm(n);
  }

  std::string Check(const Graph&, LinearMatch& m, fusion::FusionSession&) override {
    return IsOp(m.root, "MatMul") ? CheckMatMul(m) : CheckGemm(m);
  }

  // Linear(x, W, b){trans_w}, replacing the root (and the bias Add).
  absl::Status Rewrite(Graph& g, LinearMatch& m, fusion::FusionSession& s) override {
    Node* last = m.bias_add ? m.bias_add : m.root;
    std::vector<Value> in = {m.x, m.w};
    if (m.bias) {
      Value b = m.bias_value;
      if (ConstantOf(b)->dims() != m.bias->dims() || !ConstantOf(b)->BitwiseEqual(*m.bias))
        b = rewrite::InsertConstant(g, last, absl::StrCat(b.name(), "_vector"), *m.bias)->output(0);
      in.push_back(b);
    }
    Node* lin = g.InsertNodeBefore(last, "Linear", std::move(in), 1, "kiln");
    if (m.trans_w) lin->set_attr("trans_w", int64_t{1});
    lin->set_provenance({});
    rewrite::UnionProvenance(lin, m.Nodes());
    lin->set_output_type(0, last->output_info(0).type);
    lin->set_output_name(0, last->output_info(0).name);
    g.ReplaceAllUsesWith(last->output(0), lin->output(0));
    s.Count(IsOp(m.root, "Gemm") ? "Linear from Gemm"
            : m.bias_add         ? "Linear from MatMul+Add"
                                 : "Linear from MatMul");
    if (m.transpose) s.Count("Linear with trans_w from Transpose");
    std::vector<Node*> dead = {m.root};
    if (m.bias_add) dead.push_back(m.bias_add);
    s.RemoveIfDead(g, dead);  // `m`'s nodes may be gone after this
    return absl::OkStatus();
  }

  std::string_view Kind(const LinearMatch&) const override { return "linear"; }
  // The root and its bias Add (not the weight's Transpose).
  std::vector<const Node*> Involved(const LinearMatch& m) const override {
    std::vector<const Node*> out = {m.root};
    if (m.bias_add != nullptr) out.push_back(m.bias_add);
    return out;
  }
  std::string MissCounter(const LinearMatch&) const override { return "linear missed"; }

 private:
  // MatMul(x, W | Transpose(W)) and the constant Add after it, if any. A weight that is
  // not a 2-D constant makes a candidate (a near-miss) only when a [N] constant bias Add
  // follows: what looks like a projection.
  static std::optional<LinearMatch> RecognizeMatMul(const Graph& g, Node* mm) {
    if (mm->num_inputs() != 2 || !mm->input(0) || !mm->input(1)) return std::nullopt;
    LinearMatch m;
    m.root = mm;
    m.x = mm->input(0);
    const DType dt = m.x.type().dtype;
    if (!IsFloat(dt) || ConstantOf(m.x)) return std::nullopt;
    std::tie(m.bias_add, m.bias_value) = ConstantAddAfter(g, mm->output(0));
    if (std::optional<Weight> w = ConstantWeight(mm->input(1))) {
      m.w = w->w;
      m.trans_w = w->trans;
      m.transpose = w->transpose;
    }
    if (!WeightFits(m.w ? ConstantOf(m.w) : nullptr, dt)) {
      const std::optional<int64_t> n = rewrite::StaticLastDim(mm->output(0));
      if (m.bias_add == nullptr || !n || !BiasVector(m.bias_value, *n, RankOr1(mm->output(0)), dt))
        return std::nullopt;
    }
    return m;
  }

  static std::string CheckMatMul(LinearMatch& m) {
    Node* mm = m.root;
    const DType dt = m.x.type().dtype;
    const Tensor* wt = m.w ? ConstantOf(m.w) : nullptr;
    if (!WeightFits(wt, dt)) {
      const Value wv = mm->input(1);
      return wt == nullptr
                 ? absl::StrCat("weight ", ValueLabel(wv), " is not a constant")
                 : absl::StrCat("weight ", ValueLabel(wv), " has shape ", DimsString(wt->dims()),
                                " (", std::string(DTypeName(wt->dtype())),
                                "); only 2-D weights of the input's dtype fuse");
    }
    if (m.bias_add != nullptr) {
      const int64_t n = OutFeatures(*wt, m.trans_w);
      m.bias = BiasVector(m.bias_value, n, RankOr1(mm->output(0)), dt);
      if (!m.bias)
        return absl::StrCat("bias ", ValueLabel(m.bias_value), " has shape ",
                            DimsString(ConstantOf(m.bias_value)->dims()),
                            "; only [N] (or [1,..,1,N]) with N = ", n, " fuses");
    }
    return "";
  }

  static std::optional<LinearMatch> RecognizeGemm(Node* gemm) {
    if (gemm->num_inputs() < 2 || !gemm->input(0) || !gemm->input(1)) return std::nullopt;
    LinearMatch m;
    m.root = gemm;
    m.x = gemm->input(0);
    m.w = gemm->input(1);
    if (gemm->num_inputs() > 2) m.bias_value = gemm->input(2);
    if (!IsFloat(m.x.type().dtype) || ConstantOf(m.x)) return std::nullopt;
    return m;
  }

  static std::string CheckGemm(LinearMatch& m) {
    Node* gemm = m.root;
    const DType dt = m.x.type().dtype;
    if (gemm->attr_int_or("transA", 0) != 0)
      return absl::StrCat("Gemm ", NodeLabel(gemm),
                          " has transA=1; kiln.Linear does not transpose X");
    const float alpha = gemm->attr_float_or("alpha", 1.0f);
    if (alpha != 1.0f)
      return absl::StrCat("Gemm ", NodeLabel(gemm), " has alpha=", alpha, "; only alpha=1 fuses");
    const Tensor* wt = ConstantOf(m.w);
    if (!WeightFits(wt, dt))
      return absl::StrCat("Gemm ", NodeLabel(gemm), " weight B ", ValueLabel(m.w),
                          " is not a 2-D constant");
    m.trans_w = gemm->attr_int_or("transB", 0) != 0 ? 1 : 0;
    const Value c = m.bias_value;
    if (!c) return "";
    const Tensor* ct = ConstantOf(c);
    const int64_t n = OutFeatures(*wt, m.trans_w);
    std::optional<Tensor> v;
    if (ct != nullptr && ct->dtype() == dt) v = rewrite::AsVector(*ct, n, 2, true);
    if (!v)
      return ct == nullptr ? absl::StrCat("Gemm ", NodeLabel(gemm), " bias C ", ValueLabel(c),
                                          " is not a constant")
                           : absl::StrCat("Gemm ", NodeLabel(gemm), " bias C has shape ",
                                          DimsString(ct->dims()),
                                          "; only [N], [1,N] or a scalar with N = ", n, " fuses");
    const double beta = gemm->attr_float_or("beta", 1.0f);
    if (beta != 1.0 || v->dims() != ct->dims()) {
      Tensor scaled(dt, {n});
      for (int64_t i = 0; i < n; ++i) scaled.SetFromDouble(i, beta * v->GetAsDouble(i));
      v = std::move(scaled);
    }
    m.bias = std::move(v);
    return "";
  }
};

// kiln.Linear or kiln.BlockQuantLinear: [..., K] -> [..., N] row by row, with an
// `activation` epilogue.
bool IsLinear(const Node* n) {
  return (n->op() == "Linear" || n->op() == "BlockQuantLinear") && n->domain() == "kiln" &&
         n->num_outputs() == 1;
}

// BlockQuantLinear(x, ...) + constant [N] -> BlockQuantLinear(x, ..., b): MatMulNBits files
// whose bias is an Add after the op (onnxruntime's quantizer leaves the model's Add).
struct QuantBias {
  Node* lin = nullptr;
  Node* add = nullptr;
  Tensor bias;
};

class BlockQuantBiasRule final : public fusion::FusionRule<QuantBias> {
 public:
  bool IsRoot(const Node& n) const override {
    return n.op() == "BlockQuantLinear" && n.domain() == "kiln" && n.num_outputs() == 1;
  }

  std::optional<QuantBias> Recognize(const Graph& g, Node* lin, fusion::FusionSession&) override {
    if (lin->num_inputs() < 3 || (lin->num_inputs() > 4 && lin->input(4))) return std::nullopt;
    const std::string* act = lin->attr_string("activation");
    if (act != nullptr && *act != "none") return std::nullopt;
    const Tensor* w = ConstantOf(lin->input(1));
    auto [add, b] = ConstantAddAfter(g, lin->output(0));
    if (w == nullptr || w->rank() != 2 || add == nullptr) return std::nullopt;
    const DType dt = lin->output_info(0).type.dtype;  // X's (f32, f16 or bf16)
    if (dt == DType::kUndefined) return std::nullopt;
    std::optional<Tensor> v = BiasVector(b, w->dims()[0], RankOr1(lin->output(0)), dt);
    if (!v) return std::nullopt;
    return QuantBias{lin, add, *std::move(v)};
  }

  std::string Check(const Graph&, QuantBias&, fusion::FusionSession&) override { return ""; }

  absl::Status Rewrite(Graph& g, QuantBias& q, fusion::FusionSession& s) override {
    Node* c = rewrite::InsertConstant(g, q.lin, absl::StrCat(q.lin->output_info(0).name, "_bias"),
                                      std::move(q.bias));
    while (q.lin->num_inputs() < 4) g.AddNodeInput(q.lin, Value());
    if (q.lin->num_inputs() == 4)
      g.AddNodeInput(q.lin, c->output(0));
    else
      g.SetInput(q.lin, 4, c->output(0));
    rewrite::UnionProvenance(q.lin, q.add);
    q.lin->set_output_type(0, q.add->output_info(0).type);
    q.lin->set_output_name(0, q.add->output_info(0).name);
    g.ReplaceAllUsesWith(q.add->output(0), q.lin->output(0));
    s.RemoveIfDead(g, {q.add});
    s.Count("bias into BlockQuantLinear");
    return absl::OkStatus();
  }

  std::string_view Kind(const QuantBias&) const override { return ""; }
  std::vector<const Node*> Involved(const QuantBias& q) const override { return {q.lin, q.add}; }
};

// Reshape(Linear(Reshape(x, _), ...), _) around a Linear, with what the rewrite needs.
struct ReshapePair {
  Node* lin = nullptr;
  Node* r1 = nullptr;  // Reshape(x) read by the Linear
  Node* r2 = nullptr;  // Reshape(Linear)
  int lead = 0;        // x's leading dims that r2 restores
  Dim k;               // the Linear's input size
};

// Reshape(Linear(Reshape(x, _), ...), _) -> Linear(x, ...) when the first Reshape keeps
// x's last dim and the second restores x's leading dims; when x has more dims whose
// trailing ones multiply to K (attention's merged heads [B,S,h,d] -> [B*S,h*d]), the
// first Reshape becomes Reshape(x, [0,..,0,K]) instead (see the file comment). A clean-up
// of what LinearRule fused: nothing reported.
class SinkReshapesRule final : public fusion::FusionRule<ReshapePair> {
 public:
  bool IsRoot(const Node& n) const override { return IsLinear(&n); }

  std::optional<ReshapePair> Recognize(const Graph& g, Node* lin, fusion::FusionSession&) override {
    if (lin->num_inputs() < 1 || !lin->input(0)) return std::nullopt;
    Node* r1 = rewrite::ProducerIs(lin->input(0), "Reshape");
    Node* r2 = rewrite::SingleUser(g, lin->output(0));
    if (r1 == nullptr || !IsOp(r2, "Reshape") || r1->num_inputs() < 1 || !r1->input(0) ||
        r2->input(0) != lin->output(0))
      return std::nullopt;
    const Value x = r1->input(0);
    const Type& xt = x.type();
    const Type& r1t = r1->output_info(0).type;
    const Type& yt = lin->output_info(0).type;
    const Type& r2t = r2->output_info(0).type;
    if (!xt.has_rank() || !r1t.has_rank() || !yt.has_rank() || !r2t.has_rank() || r1t.rank() < 1 ||
        yt.rank() < 1 || r2t.rank() < 1 || xt.rank() < r2t.rank() || xt.dtype != r1t.dtype ||
        yt.dtype != r2t.dtype)
      return std::nullopt;
    auto same = [](const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; };
    const std::vector<Dim>& xd = *xt.shape;
    const std::vector<Dim>& r2d = *r2t.shape;
    const ReshapePair p{lin, r1, r2, r2t.rank() - 1, r1t.shape->back()};
    if (!same(yt.shape->back(), r2d.back())) return std::nullopt;
    for (int i = 0; i < p.lead; ++i)
      if (!same(xd[i], r2d[i])) return std::nullopt;
    // x's dims from `lead` on must multiply to K.
    if (xt.rank() == r2t.rank()) {
      if (!same(xd.back(), p.k)) return std::nullopt;
    } else {
      if (!p.k.is_known()) return std::nullopt;
      int64_t prod = 1;
      for (int i = p.lead; i < xt.rank(); ++i)
        if (!xd[i].is_known() || MulOverflows(prod, xd[i].value(), &prod)) return std::nullopt;
      if (prod != p.k.value()) return std::nullopt;
    }
    return p;
  }

  std::string Check(const Graph&, ReshapePair&, fusion::FusionSession&) override { return ""; }

  absl::Status Rewrite(Graph& g, ReshapePair& p, fusion::FusionSession& s) override {
    Node* lin = p.lin;
    const Value x = p.r1->input(0);
    const Type& xt = x.type();
    const Type& r2t = p.r2->output_info(0).type;
    Value in = x;
    if (xt.rank() != r2t.rank()) {
      std::vector<int64_t> spec(p.lead, 0);
      spec.push_back(p.k.value());
      Node* shape = rewrite::InsertConstant(g, lin, "", Tensor::FromI64({p.lead + 1}, spec));
      Node* r = g.InsertNodeBefore(lin, "Reshape", {x, shape->output(0)}, 1);
      std::vector<Dim> rd(xt.shape->begin(), xt.shape->begin() + p.lead);
      rd.push_back(p.k);
      r->set_output_type(0, Type{xt.dtype, rd});
      r->set_provenance(p.r1->provenance());
      in = r->output(0);
      s.Count("Reshape before Linear kept as [..., K]");
    }
    g.SetInput(lin, 0, in);
    rewrite::UnionProvenance(lin, p.r1);
    rewrite::UnionProvenance(lin, p.r2);
    lin->set_output_type(0, r2t);
    lin->set_output_name(0, p.r2->output_info(0).name);
    g.ReplaceAllUsesWith(p.r2->output(0), lin->output(0));
    s.RemoveIfDead(g, {p.r2, p.r1});
    s.Count("reshapes around Linear removed");
    return absl::OkStatus();
  }

  std::string_view Kind(const ReshapePair&) const override { return ""; }
  std::vector<const Node*> Involved(const ReshapePair& p) const override {
    return {p.r1, p.lin, p.r2};
  }
};

// act(Linear(...)) -> Linear(...){activation=act}: nothing reported (the Linear was).
struct Activation {
  Node* act = nullptr;
  Node* lin = nullptr;
  std::string name;  // the Linear's activation attribute
};

class ActivationRule final : public fusion::FusionRule<Activation> {
 public:
  bool IsRoot(const Node& n) const override {
    return IsOp(&n, "Gelu") || IsOp(&n, "Relu") || IsOp(&n, "Tanh");
  }

  std::optional<Activation> Recognize(const Graph& g, Node* act, fusion::FusionSession&) override {
    if (act->num_inputs() != 1 || !act->input(0)) return std::nullopt;
    Node* lin = act->input(0).node;
    if (!IsLinear(lin) || !rewrite::HasSingleUse(g, act->input(0))) return std::nullopt;
    const std::string* cur = lin->attr_string("activation");
    if (cur != nullptr && *cur != "none") return std::nullopt;
    Activation a{act, lin, ""};
    if (IsOp(act, "Gelu")) {
      const std::string* approx = act->attr_string("approximate");
      if (approx == nullptr || *approx == "none")
        a.name = "gelu";
      else if (*approx == "tanh")
        a.name = "gelu_tanh";
      else
        return std::nullopt;
    } else {
      a.name = IsOp(act, "Relu") ? "relu" : "tanh";
    }
    return a;
  }

  std::string Check(const Graph&, Activation&, fusion::FusionSession&) override { return ""; }

  absl::Status Rewrite(Graph& g, Activation& a, fusion::FusionSession& s) override {
    a.lin->set_attr("activation", a.name);
    rewrite::UnionProvenance(a.lin, a.act);
    a.lin->set_output_type(0, a.act->output_info(0).type);
    a.lin->set_output_name(0, a.act->output_info(0).name);
    g.ReplaceAllUsesWith(a.act->output(0), a.lin->output(0));
    s.RemoveIfDead(g, {a.act});
    s.Count(absl::StrCat("activation ", a.name));
    return absl::OkStatus();
  }

  std::string_view Kind(const Activation&) const override { return ""; }
  std::vector<const Node*> Involved(const Activation& a) const override { return {a.lin, a.act}; }
};

class FuseLinearPass final : public fusion::FusionPass {
 public:
  std::string_view name() const override { return "fuse-linear"; }
  std::string_view description() const override {
    return "MatMul(+bias) / Gemm with constant weights -> kiln.Linear; absorbs a following "
           "Gelu / Relu / Tanh";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    LinearRule linear;
    BlockQuantBiasRule quant_bias;
    SinkReshapesRule reshapes;
    ActivationRule activations;
    KILN_ASSIGN_OR_RETURN(const bool fused, Apply(g, ctx, linear));
    KILN_ASSIGN_OR_RETURN(const bool biased, Apply(g, ctx, quant_bias));
    KILN_ASSIGN_OR_RETURN(const bool sunk, Apply(g, ctx, reshapes));
    KILN_ASSIGN_OR_RETURN(const bool absorbed, Apply(g, ctx, activations));
    return fused || biased || sunk || absorbed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseLinearPass() { return std::make_unique<FuseLinearPass>(); }

}  // namespace kiln
