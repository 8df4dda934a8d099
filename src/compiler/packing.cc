// The packed-token program (packing.h): signature and mask checks, the rewrite, the proof.
#include "compiler/packing.h"

#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/ops.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"

namespace kiln::compiler {
namespace {

absl::Status Refuse(const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat("packing: ", why));
}

bool IsSym(const Dim& d, const std::string& s) { return d.is_symbol() && d.symbol() == s; }

bool UsesSymbol(const Type& t, const std::string& s) {
  if (!t.shape) return false;
  for (const Dim& d : *t.shape)
    if (IsSym(d, s)) return true;
  return false;
}

// The mask patterns the checks evaluate: per run, each row's number of leading ones out of
// kProbeSeq positions (every length 1..4 appears, in two orders, so that a mask built from
// anything but each row's own attention_mask values is caught).
constexpr int64_t kProbeBatch = 4, kProbeSeq = 4;
constexpr int64_t kProbeLengths[2][kProbeBatch] = {{4, 2, 1, 3}, {1, 3, 4, 2}};

struct Probe {
  int64_t batch = 0;
  std::vector<int64_t> lengths;  // per row
  bool Visible(int64_t b, int64_t j) const { return j < lengths[b]; }
};

// The node of `to` (a Clone of `from`) that is `n` of `from`: Clone copies the nodes in
// order.
Node* Counterpart(const Graph& from, const Node* n, const Graph& to) {
  auto t = to.nodes().begin();
  for (auto f = from.nodes().begin(); f != from.nodes().end() && t != to.nodes().end(); ++f, ++t)
    if (f->get() == n) return t->get();
  return nullptr;
}

// Evaluates `v` (a value of g) on the reference executor with the attention mask of
// `probe` and every other input zeros.
absl::StatusOr<Tensor> Evaluate(const Graph& g, const PackedSignature& sig, Value v,
                                const Probe& probe) {
  std::unique_ptr<Graph> e = g.Clone();
  Node* n = Counterpart(g, v.node, *e);
  if (n == nullptr) return absl::InternalError("packing: probe node lost in the clone");
  e->ClearOutputs();
  e->AddOutput("probe", n->output(v.index));
  e->RemoveDeadNodes();
  absl::flat_hash_map<std::string, Tensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const NodeOutput& in = g.inputs()[i]->output_info(0);
    Tensor t(in.type.dtype, {probe.batch, kProbeSeq});
    if (static_cast<int>(i) == sig.mask_input)
      for (int64_t b = 0; b < probe.batch; ++b)
        for (int64_t j = 0; j < kProbeSeq; ++j)
          t.SetFromDouble(b * kProbeSeq + j, probe.Visible(b, j) ? 1.0 : 0.0);
    inputs.emplace(in.name, std::move(t));
  }
  absl::StatusOr<std::vector<Tensor>> out = RunReference(*e, inputs);
  if (!out.ok())
    return Refuse(absl::StrCat("evaluating ", v.node->Describe(),
                               " on a sample mask failed: ", out.status().message()));
  return std::move((*out)[0]);
}

std::vector<Probe> Probes(const PackedSignature& sig) {
  std::vector<Probe> probes;
  const int64_t batch = sig.batch.empty() ? sig.fixed_batch : kProbeBatch;
  for (const auto& lengths : kProbeLengths) {
    Probe p{batch, {}};
    for (int64_t b = 0; b < batch; ++b) p.lengths.push_back(lengths[b % kProbeBatch]);
    probes.push_back(std::move(p));
  }
  return probes;
}

// An attention node's mask is a key-padding mask of attention_mask: broadcastable to
// [B, N, S, S] with one value per (batch row, key) — 0 (additive) or true (bool) where the
// key is visible, <= -1e30 / -inf or false where it is padding.
absl::Status CheckAttentionMask(const Graph& g, const PackedSignature& sig, const Node& att) {
  for (const Probe& probe : Probes(sig)) {
    absl::StatusOr<Tensor> m = Evaluate(g, sig, att.input(1), probe);
    if (!m.ok()) return m.status();
    const bool is_bool = m->dtype() == DType::kBool;
    std::vector<int64_t> d = m->dims();
    if (d.size() > 4 || d.empty() || d.back() != kProbeSeq)
      return Refuse(absl::StrCat(att.Describe(), ": its mask has shape [", absl::StrJoin(d, ","),
                                 "], not one value per key"));
    d.insert(d.begin(), 4 - d.size(), 1);  // [B or 1, N or 1, S or 1, S]
    if (d[0] != 1 && d[0] != probe.batch)
      return Refuse(absl::StrCat(att.Describe(), ": its mask has ", d[0], " batch rows"));
    // Whatever it is broadcast over (heads, queries), each value must be attention_mask's
    // key padding for its batch row and key.
    for (int64_t b = 0; b < probe.batch; ++b)
      for (int64_t n = 0; n < d[1]; ++n)
        for (int64_t q = 0; q < d[2]; ++q)
          for (int64_t j = 0; j < kProbeSeq; ++j) {
            const int64_t at = (((d[0] == 1 ? 0 : b) * d[1] + n) * d[2] + q) * kProbeSeq + j;
            const double x = m->GetAsDouble(at);
            const bool visible = probe.Visible(b, j);
            const bool ok = is_bool ? (x != 0) == visible : visible ? x == 0.0 : x <= -1e30;
            if (!ok)
              return Refuse(absl::StrCat(
                  att.Describe(), ": its mask is not attention_mask's key padding (batch row ", b,
                  ", query ", q, ", key ", j, " is ", x, " where attention_mask is ",
                  visible ? 1 : 0, ")"));
          }
  }
  return absl::OkStatus();
}

// A mean pool's mask must be attention_mask itself ([B, S], 1 visible, 0 padding).
absl::Status CheckPoolMask(const Graph& g, const PackedSignature& sig, const Node& pool) {
  for (const Probe& probe : Probes(sig)) {
    absl::StatusOr<Tensor> m = Evaluate(g, sig, pool.input(1), probe);
    if (!m.ok()) return m.status();
    if (m->dims() != std::vector<int64_t>{probe.batch, kProbeSeq})
      return Refuse(absl::StrCat(pool.Describe(), ": its mask is not [batch, sequence]"));
    for (int64_t b = 0; b < probe.batch; ++b)
      for (int64_t j = 0; j < kProbeSeq; ++j)
        if (m->GetAsDouble(b * kProbeSeq + j) != (probe.Visible(b, j) ? 1.0 : 0.0))
          return Refuse(absl::StrCat(pool.Describe(), ": its mask is not attention_mask"));
  }
  return absl::OkStatus();
}

bool IsPooling(const Node& n) { return n.domain() == "kiln" && n.op() == "Pool"; }
bool IsAttention(const Node& n) { return n.domain() == "kiln" && n.op() == "MultiHeadAttention"; }
bool Present(const Node& n, int i) { return i < n.num_inputs() && n.input(i); }

// Gather(hidden [B, S, H], scalar 0, axis 1): the first token of each sequence, as BERT's
// pooler and the classification heads take it (hidden[:, 0]).
bool IsFirstToken(const Node& n, const std::string& sequence) {
  if (!n.domain().empty() || n.op() != "Gather" || n.attr_int_or("axis", 0) != 1 || !Present(n, 1))
    return false;
  const Tensor* idx = n.input(1).node->constant_value();
  const Type& t = n.input(0).type();
  return idx && idx->rank() == 0 && idx->GetAsInt64(0) == 0 && t.rank() == 3 &&
         IsSym((*t.shape)[1], sequence);
}

// Rewires every use of `from` except by `keep` to `to`.
void RedirectUses(Graph& g, Value from, Value to, const Node* keep) {
  std::vector<Use> uses;
  for (const Use& u : from.node->output_info(from.index).uses)
    if (u.user != keep) uses.push_back(u);
  for (const Use& u : uses) g.SetInput(u.user, u.operand, to);
}

Node* AddKilnNode(Graph& g, const std::string& op, std::vector<Value> inputs, const Node* like) {
  Node* n = g.AddNode(op, std::move(inputs), 1, "kiln");
  if (like) n->set_provenance(like->provenance());
  return n;
}

// The one value every element of `v` has when `v` is a constant integer tensor with all
// elements equal, seen through the ops that only move, repeat or pick elements (BERT-family
// exports slice, expand or gather a zero `token_type_ids` buffer to the batch's shape when
// the model takes no token types); nullopt otherwise.
std::optional<int64_t> UniformConstant(Value v) {
  // Gathers pick elements of their data input (input 0): all equal, so are the picks. (An
  // index out of the buffer's range fails the padded program; the packed one never
  // gathers. In the exports this serves, the indices are the position ids and the buffer is
  // as long as the position table, whose lookup fails the same way in both.)
  bool cast = false;  // a Cast keeps only 0 certainly (another value may not fit)
  while (v && v.node->domain().empty() &&
         (v.node->op() == "Expand" || v.node->op() == "Slice" || v.node->op() == "Unsqueeze" ||
          v.node->op() == "Squeeze" || v.node->op() == "Reshape" || v.node->op() == "Identity" ||
          v.node->op() == "Cast" || v.node->op() == "Gather" || v.node->op() == "GatherElements")) {
    cast |= v.node->op() == "Cast";
    v = v.node->input(0);
  }
  const Tensor* c = v ? v.node->constant_value() : nullptr;
  if (c == nullptr || !IsInteger(c->dtype()) || c->NumElements() == 0) return std::nullopt;
  const int64_t first = c->GetAsInt64(0);
  if (cast && first != 0) return std::nullopt;
  for (int64_t i = 1; i < c->NumElements(); ++i)
    if (c->GetAsInt64(i) != first) return std::nullopt;
  return first;
}

// A CumSum along the sequence axis of a [batch, sequence] value that its packed form
// computes exactly: forward (a reverse sum would add the padding after a row's tokens), of
// a dtype both targets' packed_cumsum take.
bool IsSequenceCumSum(const Node& n, const PackedSignature& sig) {
  if (!n.domain().empty() || n.op() != "CumSum" || n.num_inputs() != 2 || !n.input(0) ||
      !n.input(1) || n.attr_int_or("reverse", 0) != 0)
    return false;
  const Type& t = n.input(0).type();
  const DType dt = t.dtype;
  if (t.rank() != 2 || !IsSym((*t.shape)[1], sig.sequence) ||
      (dt != DType::kI32 && dt != DType::kI64 && dt != DType::kF32))
    return false;
  const Tensor* axis = n.input(1).node->constant_value();
  if (axis == nullptr || axis->NumElements() != 1 || !IsInteger(axis->dtype())) return false;
  const int64_t a = axis->GetAsInt64(0);
  return a == 1 || a == -1;
}

}  // namespace

absl::StatusOr<PackedSignature> FindPackedSignature(const Graph& g) {
  PackedSignature sig;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const NodeOutput& in = g.inputs()[i]->output_info(0);
    if (absl::AsciiStrToLower(in.name).find("mask") != std::string::npos &&
        IsInteger(in.type.dtype))
      sig.mask_input = static_cast<int>(i);
  }
  if (sig.mask_input < 0)
    return Refuse(
        "the graph has no integer attention mask input (named *mask*), so nothing says "
        "which positions are padding");
  const Type& mt = g.inputs()[sig.mask_input]->output_info(0).type;
  if (!mt.shape || mt.rank() != 2 || !(*mt.shape)[1].is_symbol() ||
      (!(*mt.shape)[0].is_symbol() && !(*mt.shape)[0].is_known()))
    return Refuse(absl::StrCat("the attention mask is ", mt.ToString(),
                               ", not [batch, sequence] with a symbolic sequence"));
  sig.sequence = (*mt.shape)[1].symbol();
  if ((*mt.shape)[0].is_symbol())
    sig.batch = (*mt.shape)[0].symbol();
  else
    sig.fixed_batch = (*mt.shape)[0].value();
  for (const std::string& s : {std::string(kTokensSymbol), std::string(kSequencesSymbol)})
    if (s == sig.batch || s == sig.sequence)
      return Refuse(absl::StrCat("the model's own symbol '", s, "' is a name packing needs"));
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (static_cast<int>(i) == sig.mask_input) continue;
    const NodeOutput& in = g.inputs()[i]->output_info(0);
    if (!IsInteger(in.type.dtype) || !in.type.shape || *in.type.shape != *mt.shape)
      return Refuse(absl::StrCat("input '", in.name, "' ", in.type.ToString(),
                                 " is neither per-token (integer ", mt.ToString(),
                                 ") nor the attention mask"));
    sig.token_inputs.push_back(static_cast<int>(i));
  }
  std::set<std::pair<const Node*, int>> checked;  // mask values already proven (layers share one)
  for (const auto& node : g.nodes()) {
    const Node& n = *node;
    if (IsAttention(n)) {
      if (n.attr_int_or("causal", 0) != 0)
        return Refuse(
            absl::StrCat(n.Describe(), " is causal (a decoder): packing is for encoders"));
      if (Present(n, 2) || Present(n, 3))
        return Refuse(absl::StrCat(n.Describe(),
                                   " applies rotary tables, which packing does not "
                                   "carry yet"));
      if (!Present(n, 1))
        return Refuse(absl::StrCat(n.Describe(),
                                   " has no mask: padded execution attends the "
                                   "padding, so packing would change its result"));
      if (checked.insert({n.input(1).node, n.input(1).index}).second)
        if (absl::Status s = CheckAttentionMask(g, sig, n); !s.ok()) return s;
    } else if (IsPooling(n)) {
      const std::string* mode = n.attr_string("mode");
      if (mode && *mode == "mean") {
        if (!Present(n, 1))
          return Refuse(absl::StrCat(n.Describe(), " averages without a mask (padding included)"));
        if (absl::Status s = CheckPoolMask(g, sig, n); !s.ok()) return s;
      }
    }
  }
  return sig;
}

absl::StatusOr<std::unique_ptr<Graph>> PackGraph(const Graph& g, const PackedSignature& sig) {
  std::unique_ptr<Graph> p = g.Clone();
  Graph& pg = *p;
  const Dim tokens = Dim::Symbol(kTokensSymbol), sequences = Dim::Symbol(kSequencesSymbol);
  // Per-token inputs: [tokens], viewed as [1, tokens] by what read them.
  Value rows_like;  // a [1, tokens] value, for PackedPositions
  for (int i : sig.token_inputs) {
    Node* in = pg.inputs()[i];
    const DType dt = in->output_info(0).type.dtype;
    in->set_output_type(0, Type{dt, std::vector<Dim>{tokens}});
    Node* axes = pg.AddConstant(absl::StrCat(in->output_info(0).name, "/packed_axes"),
                                Tensor::FromI64({1}, {0}));
    Node* rows = pg.AddNode("Unsqueeze", {in->output(0), axes->output(0)}, 1);
    rows->set_output_name(0, absl::StrCat(in->output_info(0).name, "/packed_rows"));
    RedirectUses(pg, in->output(0), rows->output(0), rows);
    if (!rows_like) rows_like = rows->output(0);
  }
  Node* mask = pg.inputs()[sig.mask_input];
  const Value lengths = mask->output(0);
  std::vector<Node*> nodes;
  for (const auto& n : pg.nodes()) nodes.push_back(n.get());
  for (Node* n : nodes) {
    if (IsAttention(*n)) {
      Node* a = AddKilnNode(pg, "PackedAttention", {n->input(0), lengths}, n);
      for (const char* attr : {"num_heads", "num_kv_heads", "scale"})
        if (n->has_attr(attr)) a->set_attr(attr, n->attrs().at(attr));
      a->set_output_name(0, n->output_info(0).name);
      pg.ReplaceAllUsesWith(n->output(0), a->output(0));
    } else if (IsPooling(*n) || IsFirstToken(*n, sig.sequence)) {
      Node* a = AddKilnNode(pg, "PackedPool", {n->input(0), lengths}, n);
      if (IsPooling(*n)) {
        for (const char* attr : {"mode", "normalize"})
          if (n->has_attr(attr)) a->set_attr(attr, n->attrs().at(attr));
      } else {
        a->set_attr("mode", std::string("cls"));
      }
      a->set_output_name(0, n->output_info(0).name);
      pg.ReplaceAllUsesWith(n->output(0), a->output(0));
    } else if (IsSequenceCumSum(*n, sig)) {
      // Position ids counted from the tokens (RoBERTa: cumsum(ids != pad)): the same sum
      // within each sequence. Real tokens lead their rows, so each real position sums
      // exactly what the padded row sums before it.
      Node* c = AddKilnNode(pg, "PackedCumSum", {n->input(0), lengths}, n);
      if (n->attr_int_or("exclusive", 0) != 0) c->set_attr("exclusive", int64_t{1});
      c->set_output_name(0, n->output_info(0).name);
      pg.ReplaceAllUsesWith(n->output(0), c->output(0));
    } else if (n->domain() == "kiln" && n->op() == "EmbedLayerNorm") {
      if (!rows_like) return Refuse("no per-token input to take the token count from");
      if (!Present(*n, 2)) {
        // Implicit positions 0..S-1: row s of the position table for position s, which the
        // packed positions index instead.
        if (!n->input(4).node->constant_value())
          return Refuse(absl::StrCat(n->Describe(),
                                     ": its position table is computed, not a constant table"));
        Node* pos = AddKilnNode(pg, "PackedPositions", {lengths, rows_like}, n);
        pos->set_output_name(0, absl::StrCat(n->output_info(0).name, "/packed_positions"));
        pg.SetInput(n, 2, pos->output(0));
      }
      // Token types from a constant buffer (one value everywhere): that value per token,
      // computed from the token ids so that it has the packed rows.
      if (Present(*n, 1) && n->input(1).node->constant_value() == nullptr) {
        const std::optional<int64_t> type = UniformConstant(n->input(1));
        // Computed in the token ids' dtype (the rows' Unsqueeze has no type until shape
        // inference: its input's), then cast to the token types' when they differ.
        const Value ids = n->input(0);
        const DType ids_dt = ids.type().dtype != DType::kUndefined || ids.node->num_inputs() == 0
                                 ? ids.type().dtype
                                 : ids.node->input(0).type().dtype;
        const DType dt = n->input(1).type().dtype;
        if (type && IsInteger(ids_dt) && IsInteger(dt) && *type >= 0 && *type < 128) {
          Tensor zero(ids_dt, {}), value(ids_dt, {});
          zero.SetFromDouble(0, 0.0);
          value.SetFromDouble(0, static_cast<double>(*type));  // small: exact in any type
          const std::string name = absl::StrCat(n->output_info(0).name, "/packed_token_types");
          Node* z = pg.AddConstant(absl::StrCat(name, "_zero"), std::move(zero));
          Node* v = pg.AddConstant(absl::StrCat(name, "_value"), std::move(value));
          Node* mul = pg.AddNode("Mul", {ids, z->output(0)}, 1);
          Node* fill = pg.AddNode("Add", {mul->output(0), v->output(0)}, 1);
          if (ids_dt != dt) {
            fill = pg.AddNode("Cast", {fill->output(0)}, 1);
            fill->set_attr("to", static_cast<int64_t>(DTypeToOnnx(dt)));
          }
          fill->set_output_name(0, name);
          pg.SetInput(n, 1, fill->output(0));
        }
      }
    }
  }
  for (Node* n : nodes)
    if ((IsAttention(*n) || IsPooling(*n) || IsFirstToken(*n, sig.sequence)) &&
        !n->output_info(0).uses.empty())
      return absl::InternalError("packing: a replaced node is still read");
  // Outputs: per-token [1, tokens, ...] seen as [tokens, ...].
  for (size_t o = 0; o < pg.outputs().size(); ++o) {
    const Type& t = g.outputs()[o].value.type();
    if (!UsesSymbol(t, sig.sequence)) continue;
    if (t.rank() < 2 || !IsSym((*t.shape)[1], sig.sequence))
      return Refuse(absl::StrCat("output '", g.outputs()[o].name, "' ", t.ToString(),
                                 " is not [batch, sequence, ...]"));
    Node* axes = pg.AddConstant(absl::StrCat(pg.outputs()[o].name, "/packed_axes"),
                                Tensor::FromI64({1}, {0}));
    Node* sq = pg.AddNode("Squeeze", {pg.outputs()[o].value, axes->output(0)}, 1);
    sq->set_output_name(0, absl::StrCat(pg.outputs()[o].name, "/packed"));
    pg.SetOutputValue(static_cast<int>(o), sq->output(0));
  }
  pg.RemoveDeadNodes();
  for (const Use& u : mask->output_info(0).uses) {
    const Node& user = *u.user;
    if (user.domain() != "kiln" || (user.op() != "PackedAttention" && user.op() != "PackedPool" &&
                                    user.op() != "PackedPositions" && user.op() != "PackedCumSum"))
      return Refuse(absl::StrCat("the attention mask is also read by ", user.Describe(),
                                 ", which packing cannot rewrite"));
  }
  mask->set_output_name(0, kSequenceLengthsInput);
  mask->set_output_type(0, Type{DType::kI64, std::vector<Dim>{sequences}});
  KILN_RETURN_IF_ERROR(pg.TopoSort());
  return p;
}

absl::Status CheckPacked(const Graph& g) {
  enum class Rows { kNone, kTokens, kSequences, kLengths };
  std::map<std::pair<const Node*, int>, Rows> rows;
  auto of = [&](Value v) {
    auto it = rows.find({v.node, v.index});
    return it == rows.end() ? Rows::kNone : it->second;
  };
  // The leading dims of a value with rows: [1, tokens] or [sequences].
  auto leads = [](const Type& t, Rows r) {
    if (!t.shape) return false;
    if (r == Rows::kTokens)
      return t.rank() >= 2 && (*t.shape)[0].is_known() && (*t.shape)[0].value() == 1 &&
             IsSym((*t.shape)[1], kTokensSymbol);
    return t.rank() >= 1 && IsSym((*t.shape)[0], kSequencesSymbol);
  };
  // A value without rows broadcast against a rows value of rank `rank`: it must not stretch
  // over the row dims.
  auto broadcasts_over_rows = [](const Type& t, int rank, Rows r) {
    if (!t.shape) return true;
    const int lead = r == Rows::kTokens ? 2 : 1;
    for (int i = 0; i < t.rank(); ++i) {
      const int at = rank - t.rank() + i;
      if (at < lead && !((*t.shape)[i].is_known() && (*t.shape)[i].value() == 1)) return true;
    }
    return false;
  };
  for (const Node* in : g.inputs()) {
    const NodeOutput& o = in->output_info(0);
    rows[{in, 0}] = o.name == kSequenceLengthsInput ? Rows::kLengths : Rows::kTokens;
  }
  for (const auto& node : g.nodes()) {
    const Node& n = *node;
    if (n.is_input() || n.is_constant()) continue;
    std::vector<Rows> in(n.num_inputs(), Rows::kNone);
    Rows kind = Rows::kNone;
    bool mixed = false;
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (!n.input(i)) continue;
      in[i] = of(n.input(i));
      if (in[i] == Rows::kNone) continue;
      if (kind != Rows::kNone && kind != in[i]) mixed = true;
      kind = in[i];
    }
    if (kind == Rows::kNone) continue;  // reads no rows: weights, shapes, constants
    auto refuse = [&](const std::string& why) {
      return Refuse(absl::StrCat(n.Describe(), " ", why,
                                 "; packed execution needs every op between the inputs and "
                                 "the outputs to keep the tokens of different sequences apart"));
    };
    const OpInfo* info = FindOp(n.domain(), n.op());
    Rows out = kind;
    if (n.domain() == "kiln" && n.op() == "EmbedLayerNorm")
      for (const auto& [i, what] : {std::pair{1, "token type ids"}, std::pair{2, "position ids"}})
        if (n.input(i) && in[i] != Rows::kTokens)
          return refuse(absl::StrCat(
              "takes ", what, " that are not one per packed token (",
              in[i] == Rows::kNone ? "computed from shapes or constants, they would not restart "
                                     "at each sequence"
                                   : "per sequence",
              ")"));
    if (n.domain() == "kiln" && (n.op() == "PackedAttention" || n.op() == "PackedPool" ||
                                 n.op() == "PackedPositions" || n.op() == "PackedCumSum")) {
      const int li = n.op() == "PackedPositions" ? 0 : 1, xi = 1 - li;
      if (in[li] != Rows::kLengths || in[xi] != Rows::kTokens)
        return refuse("does not read packed tokens and the sequence lengths");
      out = n.op() == "PackedPool" ? Rows::kSequences : Rows::kTokens;
    } else if (kind == Rows::kLengths || mixed) {
      return refuse(kind == Rows::kLengths ? "reads the sequence lengths"
                                           : "combines per-token and per-sequence values");
    } else if (n.domain().empty() && n.op() == "Gather" && in[0] == Rows::kNone &&
               n.attr_int_or("axis", 0) == 0) {
      // A lookup of rows-indexed ids in a table (embeddings, a position buffer): row r of
      // the output is table[ids[r]], token-wise in the ids.
      if (!leads(n.input(1).type(), kind))
        return refuse("gathers by ids whose rows are not leading");
    } else if (info && (info->traits & kElementwise)) {
      const int rank = n.output_info(0).type.rank();
      for (int i = 0; i < n.num_inputs(); ++i) {
        if (!n.input(i)) continue;
        const Type& t = n.input(i).type();
        if (in[i] == kind ? t.rank() != rank : broadcasts_over_rows(t, rank, kind))
          return refuse(absl::StrCat("broadcasts input ", i, " ", t.ToString(), " over the rows"));
      }
    } else if (info && (info->traits & kRowwise)) {
      if (n.has_attr("axis")) {
        const int rank = n.input(0).type().rank();
        const int64_t axis = n.attr_int_or("axis", -1);
        if (rank < 0 || (axis != -1 && axis != rank - 1))
          return refuse("normalizes over an axis other than the last");
      }
      for (int i = 0; i < n.num_inputs(); ++i)
        if (n.input(i) && in[i] == kind && !leads(n.input(i).type(), kind))
          return refuse(absl::StrCat("reads input ", i, " ", n.input(i).type().ToString(),
                                     " whose rows are not the packed rows"));
    } else if (info && info->view == ViewKind::kReshape && in[0] == kind) {
      for (int i = 1; i < n.num_inputs(); ++i)
        if (n.input(i) && in[i] != Rows::kNone) return refuse("takes its shape from the rows");
      if (!leads(n.input(0).type(), kind) &&
          !(n.op() == "Unsqueeze" && n.input(0).node->is_input()))
        return refuse("reshapes a value whose rows are not leading");
    } else {
      return refuse(absl::StrCat("(", info ? "not token-wise" : "not in the op catalogue", ")"));
    }
    for (int o = 0; o < n.num_outputs(); ++o) {
      const Type& t = n.output_info(o).type;
      if (!n.output_info(o).uses.empty() || o == 0) {
        const bool squeezed_output = n.op() == "Squeeze" && out == Rows::kTokens && t.rank() >= 1 &&
                                     IsSym((*t.shape)[0], kTokensSymbol);
        if (!leads(t, out) && !squeezed_output)
          return refuse(
              absl::StrCat("gives ", t.ToString(), ", whose leading dims are not the ",
                           out == Rows::kTokens ? "packed tokens [1, tokens]" : "sequences"));
        rows[{&n, o}] = squeezed_output ? Rows::kNone : out;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler
