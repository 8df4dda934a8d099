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
// Limits: a batched (rank > 2) weight, MatMul(W, x) with the constant first, and
// activations other than the four listed stay unfused; a Reshape pair that changes the
// leading dims (or whose types are unknown) stays.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/passes/fusion_report.h"
#include "kiln/support/status.h"
#include "passes/fusion_util.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using fusion::DimsString;
using fusion::NodeLabel;
using fusion::OtherOperand;
using fusion::ValueLabel;
using rewrite::ConstantOf;
using rewrite::IsOp;

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

class FuseLinearPass final : public Pass {
 public:
  std::string_view name() const override { return "fuse-linear"; }
  std::string_view description() const override {
    return "MatMul(+bias) / Gemm with constant weights -> kiln.Linear; absorbs a following "
           "Gelu / Relu / Tanh";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    ctx_ = &ctx;
    std::vector<int> roots, acts;
    for (const auto& n : g.nodes()) {
      if (IsOp(n.get(), "MatMul") || IsOp(n.get(), "Gemm")) roots.push_back(n->id());
      if (IsOp(n.get(), "Gelu") || IsOp(n.get(), "Relu") || IsOp(n.get(), "Tanh"))
        acts.push_back(n->id());
    }
    bool changed = false;
    for (int id : roots) {
      Node* n = g.FindNodeById(id);
      if (n == nullptr) continue;
      std::optional<LinearMatch> m = IsOp(n, "MatMul") ? MatchMatMul(g, n) : MatchGemm(g, n);
      if (!m) continue;
      Rewrite(g, *m);
      changed = true;
    }
    std::vector<int> linears;
    for (const auto& n : g.nodes())
      if (IsLinear(n.get())) linears.push_back(n->id());
    for (int id : linears) {
      Node* n = g.FindNodeById(id);
      if (n != nullptr && SinkReshapes(g, n)) changed = true;
    }
    for (int id : acts) {
      Node* n = g.FindNodeById(id);
      if (n != nullptr && AbsorbActivation(g, n)) changed = true;
    }
    return changed;
  }

 private:
  std::nullopt_t Miss(const std::vector<const Node*>& nodes, const std::string& why) {
    if (ctx_->fusion_report) ctx_->fusion_report->Missed("linear", nodes, why);
    Count("linear missed");
    return std::nullopt;
  }

  // The Add after `out` when it adds a constant: (add, constant operand).
  static std::pair<Node*, Value> ConstantAddAfter(const Graph& g, Value out) {
    Node* user = fusion::SingleUser(g, out);
    if (!IsOp(user, "Add")) return {nullptr, Value{}};
    const Value b = OtherOperand(user, out);
    if (b == out || !ConstantOf(b)) return {nullptr, Value{}};
    return {user, b};
  }

  // A constant bias Add whose constant broadcasts as [n] onto a rank-`rank` value.
  static std::optional<Tensor> BiasVector(Value b, int64_t n, int rank, DType dt) {
    const Tensor* t = ConstantOf(b);
    if (t == nullptr || t->dtype() != dt) return std::nullopt;
    return fusion::AsVector(*t, n, rank);
  }

  std::optional<LinearMatch> MatchMatMul(const Graph& g, Node* mm) {
    if (mm->num_inputs() != 2 || !mm->input(0) || !mm->input(1)) return std::nullopt;
    const Value x = mm->input(0);
    const DType dt = x.type().dtype;
    if (!IsFloat(dt) || ConstantOf(x)) return std::nullopt;
    auto [add, b] = ConstantAddAfter(g, mm->output(0));
    std::optional<Weight> w = ConstantWeight(mm->input(1));
    const Tensor* wt = w ? ConstantOf(w->w) : nullptr;
    if (wt == nullptr || wt->rank() != 2 || wt->dtype() != dt) {
      // Report only what looks like a projection: MatMul + a [N] constant bias Add.
      const std::optional<int64_t> n = fusion::StaticLastDim(mm->output(0));
      if (add != nullptr && n && BiasVector(b, *n, RankOr1(mm->output(0)), dt)) {
        const Value wv = mm->input(1);
        Miss({mm, add}, wt == nullptr
                            ? absl::StrCat("weight ", ValueLabel(wv), " is not a constant")
                            : absl::StrCat("weight ", ValueLabel(wv), " has shape ",
                                           DimsString(wt->dims()), " (",
                                           std::string(DTypeName(wt->dtype())),
                                           "); only 2-D weights of the input's dtype fuse"));
      }
      return std::nullopt;
    }
    LinearMatch m;
    m.x = x;
    m.w = w->w;
    m.trans_w = w->trans;
    m.transpose = w->transpose;
    m.root = mm;
    if (add != nullptr) {
      const int64_t n = OutFeatures(*wt, w->trans);
      m.bias = BiasVector(b, n, RankOr1(mm->output(0)), dt);
      if (!m.bias) {
        Miss({mm, add}, absl::StrCat("bias ", ValueLabel(b), " has shape ",
                                     DimsString(ConstantOf(b)->dims()),
                                     "; only [N] (or [1,..,1,N]) with N = ", n, " fuses"));
        return std::nullopt;
      }
      m.bias_add = add;
      m.bias_value = b;
    }
    return m;
  }

  std::optional<LinearMatch> MatchGemm(const Graph& g, Node* gemm) {
    if (gemm->num_inputs() < 2 || !gemm->input(0) || !gemm->input(1)) return std::nullopt;
    const Value a = gemm->input(0), bw = gemm->input(1);
    const Value c = gemm->num_inputs() > 2 ? gemm->input(2) : Value{};
    const DType dt = a.type().dtype;
    if (!IsFloat(dt) || ConstantOf(a)) return std::nullopt;
    if (gemm->attr_int_or("transA", 0) != 0)
      return Miss({gemm}, absl::StrCat("Gemm ", NodeLabel(gemm),
                                       " has transA=1; kiln.Linear does not transpose X"));
    const float alpha = gemm->attr_float_or("alpha", 1.0f);
    if (alpha != 1.0f)
      return Miss({gemm}, absl::StrCat("Gemm ", NodeLabel(gemm), " has alpha=", alpha,
                                       "; only alpha=1 fuses"));
    const Tensor* wt = ConstantOf(bw);
    if (wt == nullptr || wt->rank() != 2 || wt->dtype() != dt)
      return Miss({gemm}, absl::StrCat("Gemm ", NodeLabel(gemm), " weight B ",
                                       ValueLabel(bw), " is not a 2-D constant"));
    const int64_t trans = gemm->attr_int_or("transB", 0) != 0 ? 1 : 0;
    LinearMatch m;
    m.x = a;
    m.w = bw;
    m.trans_w = trans;
    m.root = gemm;
    if (c) {
      const Tensor* ct = ConstantOf(c);
      const int64_t n = OutFeatures(*wt, trans);
      std::optional<Tensor> v;
      if (ct != nullptr && ct->dtype() == dt) v = fusion::AsVector(*ct, n, 2, true);
      if (!v)
        return Miss({gemm}, ct == nullptr
                                ? absl::StrCat("Gemm ", NodeLabel(gemm), " bias C ",
                                               ValueLabel(c), " is not a constant")
                                : absl::StrCat("Gemm ", NodeLabel(gemm), " bias C has shape ",
                                               DimsString(ct->dims()),
                                               "; only [N], [1,N] or a scalar with N = ", n,
                                               " fuses"));
      const double beta = gemm->attr_float_or("beta", 1.0f);
      if (beta != 1.0 || v->dims() != ct->dims()) {
        Tensor scaled(dt, {n});
        for (int64_t i = 0; i < n; ++i) scaled.SetFromDouble(i, beta * v->GetAsDouble(i));
        v = std::move(scaled);
      }
      m.bias = std::move(v);
      m.bias_value = c;
    }
    return m;
  }

  // Linear(x, W, b){trans_w}, replacing the root (and the bias Add).
  void Rewrite(Graph& g, const LinearMatch& m) {
    Node* last = m.bias_add ? m.bias_add : m.root;
    std::vector<Value> in = {m.x, m.w};
    if (m.bias) {
      Value b = m.bias_value;
      if (ConstantOf(b)->dims() != m.bias->dims() || !ConstantOf(b)->BitwiseEqual(*m.bias))
        b = fusion::InsertConstant(g, last, absl::StrCat(b.name(), "_vector"), *m.bias)
                ->output(0);
      in.push_back(b);
    }
    Node* lin = g.InsertNodeBefore(last, "Linear", std::move(in), 1, "kiln");
    if (m.trans_w) lin->set_attr("trans_w", int64_t{1});
    lin->set_provenance({});
    rewrite::UnionProvenance(lin, m.Nodes());
    lin->set_output_type(0, last->output_info(0).type);
    lin->set_output_name(0, last->output_info(0).name);
    g.ReplaceAllUsesWith(last->output(0), lin->output(0));
    if (ctx_->fusion_report) ctx_->fusion_report->Fused("linear");
    Count(IsOp(m.root, "Gemm") ? "Linear from Gemm"
          : m.bias_add         ? "Linear from MatMul+Add"
                               : "Linear from MatMul");
    if (m.transpose) Count("Linear with trans_w from Transpose");
    std::vector<Node*> dead = {m.root};
    if (m.bias_add) dead.push_back(m.bias_add);
    fusion::RemoveIfDead(g, dead);  // `m`'s nodes may be gone after this
  }

  static bool IsLinear(const Node* n) {
    return n->op() == "Linear" && n->domain() == "kiln" && n->num_outputs() == 1;
  }

  // Reshape(Linear(Reshape(x, _), ...), _) -> Linear(x, ...) when the first Reshape keeps
  // x's last dim and the second restores x's leading dims; when x has more dims whose
  // trailing ones multiply to K (attention's merged heads [B,S,h,d] -> [B*S,h*d]), the
  // first Reshape becomes Reshape(x, [0,..,0,K]) instead (see the file comment).
  bool SinkReshapes(Graph& g, Node* lin) {
    if (lin->num_inputs() < 1 || !lin->input(0)) return false;
    Node* r1 = rewrite::ProducerIs(lin->input(0), "Reshape");
    Node* r2 = fusion::SingleUser(g, lin->output(0));
    if (r1 == nullptr || !IsOp(r2, "Reshape") || r1->num_inputs() < 1 || !r1->input(0) ||
        r2->input(0) != lin->output(0))
      return false;
    const Value x = r1->input(0);
    const Type& xt = x.type();
    const Type& r1t = r1->output_info(0).type;
    const Type& yt = lin->output_info(0).type;
    const Type& r2t = r2->output_info(0).type;
    if (!xt.has_rank() || !r1t.has_rank() || !yt.has_rank() || !r2t.has_rank() ||
        r1t.rank() < 1 || yt.rank() < 1 || r2t.rank() < 1 || xt.rank() < r2t.rank() ||
        xt.dtype != r1t.dtype || yt.dtype != r2t.dtype)
      return false;
    auto same = [](const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; };
    const std::vector<Dim>& xd = *xt.shape;
    const std::vector<Dim>& r2d = *r2t.shape;
    const Dim& k = r1t.shape->back();
    const int lead = r2t.rank() - 1;  // x's leading dims that R2 must restore
    if (!same(yt.shape->back(), r2d.back())) return false;
    for (int i = 0; i < lead; ++i)
      if (!same(xd[i], r2d[i])) return false;
    // x's dims from `lead` on must multiply to K.
    if (xt.rank() == r2t.rank()) {
      if (!same(xd.back(), k)) return false;
    } else {
      if (!k.is_known()) return false;
      int64_t prod = 1;
      for (int i = lead; i < xt.rank(); ++i)
        if (!xd[i].is_known() || MulOverflows(prod, xd[i].value(), &prod)) return false;
      if (prod != k.value()) return false;
    }
    Value in = x;
    if (xt.rank() != r2t.rank()) {
      std::vector<int64_t> spec(lead, 0);
      spec.push_back(k.value());
      Node* shape = fusion::InsertConstant(g, lin, "", Tensor::FromI64({lead + 1}, spec));
      Node* r = g.InsertNodeBefore(lin, "Reshape", {x, shape->output(0)}, 1);
      std::vector<Dim> rd(xd.begin(), xd.begin() + lead);
      rd.push_back(k);
      r->set_output_type(0, Type{xt.dtype, rd});
      r->set_provenance(r1->provenance());
      in = r->output(0);
      Count("Reshape before Linear kept as [..., K]");
    }
    g.SetInput(lin, 0, in);
    rewrite::UnionProvenance(lin, r1);
    rewrite::UnionProvenance(lin, r2);
    lin->set_output_type(0, r2t);
    lin->set_output_name(0, r2->output_info(0).name);
    g.ReplaceAllUsesWith(r2->output(0), lin->output(0));
    fusion::RemoveIfDead(g, {r2, r1});
    Count("reshapes around Linear removed");
    return true;
  }

  // act(Linear(...)) -> Linear(...){activation=act}
  bool AbsorbActivation(Graph& g, Node* act) {
    if (act->num_inputs() != 1 || !act->input(0)) return false;
    Node* lin = act->input(0).node;
    if (!IsLinear(lin) || !rewrite::HasSingleUse(g, act->input(0)))
      return false;
    const std::string* cur = lin->attr_string("activation");
    if (cur != nullptr && *cur != "none") return false;
    std::string name;
    if (IsOp(act, "Gelu")) {
      const std::string* approx = act->attr_string("approximate");
      if (approx == nullptr || *approx == "none") name = "gelu";
      else if (*approx == "tanh") name = "gelu_tanh";
      else return false;
    } else {
      name = IsOp(act, "Relu") ? "relu" : "tanh";
    }
    lin->set_attr("activation", name);
    rewrite::UnionProvenance(lin, act);
    lin->set_output_type(0, act->output_info(0).type);
    lin->set_output_name(0, act->output_info(0).name);
    g.ReplaceAllUsesWith(act->output(0), lin->output(0));
    fusion::RemoveIfDead(g, {act});
    Count(absl::StrCat("activation ", name));
    return true;
  }

  const PassContext* ctx_ = nullptr;
};

}  // namespace

std::unique_ptr<Pass> CreateFuseLinearPass() { return std::make_unique<FuseLinearPass>(); }

}  // namespace kiln
