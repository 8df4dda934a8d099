// KV-cache signature detection and the decode rewrite (generation.h).
#include "compiler/generation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"

namespace kiln::compiler {
namespace {

int InputIndex(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i]->output_info(0).name == name) return static_cast<int>(i);
  return -1;
}

// The Concat's axis normalized against rank 4, or -1.
int64_t ConcatAxis(const Node& n) {
  const int64_t axis = n.attr_int_or("axis", 0);
  return axis < 0 ? axis + 4 : axis;
}

const Dim* DimAt(const Node& input, int d) {
  const Type& t = input.output_info(0).type;
  if (!t.has_rank() || t.rank() <= d) return nullptr;
  return &(*t.shape)[d];
}

}  // namespace

absl::StatusOr<KvSignature> FindKvSignature(const Graph& g) {
  KvSignature sig;
  sig.input_ids = InputIndex(g, "input_ids");
  sig.attention_mask = InputIndex(g, "attention_mask");
  sig.position_ids = InputIndex(g, "position_ids");
  for (const auto& [index, name] :
       {std::pair{sig.input_ids, "input_ids"}, std::pair{sig.attention_mask, "attention_mask"},
        std::pair{sig.position_ids, "position_ids"}})
    if (index < 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "--decode-context needs a KV-cache decoder with inputs input_ids, attention_mask and "
          "position_ids (optimum's names); this model has no input '",
          name, "'"));
  const Node& ids = *g.inputs()[sig.input_ids];
  const Node& positions = *g.inputs()[sig.position_ids];
  const Dim* b = DimAt(ids, 0);
  const Dim* s = DimAt(ids, 1);
  if (ids.output_info(0).type.rank() != 2 || !s->is_symbol())
    return absl::InvalidArgumentError(absl::StrCat(
        "--decode-context: input_ids must be [batch, sequence] with a symbolic sequence (the "
        "prompt lengths: give them with --profile sequence=..., not --shape), got ",
        ids.output_info(0).type.ToString()));
  sig.batch = b->is_symbol() ? b->symbol() : "";  // a fixed batch (--shape batch=N) is fine
  sig.sequence = s->symbol();
  if (positions.output_info(0).type.dtype != DType::kI64 ||
      positions.output_info(0).type.rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("--decode-context: position_ids must be int64 [batch, sequence], got ",
                     positions.output_info(0).type.ToString()));
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const Value v = g.outputs()[o].value;
    if (!v || v.node->op() != "Concat" || !v.node->domain().empty() || v.node->num_inputs() != 2 ||
        !v.node->input(0) || !v.node->input(0).node->is_input())
      continue;
    const Node& past = *v.node->input(0).node;
    const Dim* p = DimAt(past, 2);
    if (past.output_info(0).type.rank() != 4 || ConcatAxis(*v.node) != 2 || !p->is_symbol())
      continue;
    if (!sig.past.empty() && sig.past != p->symbol())
      return absl::InvalidArgumentError(
          absl::StrCat("--decode-context: past input '", past.output_info(0).name,
                       "' has past length '", p->symbol(), "', the others '", sig.past, "'"));
    sig.past = p->symbol();
    const int in = InputIndex(g, past.output_info(0).name);
    sig.caches.push_back({in, static_cast<int32_t>(o)});
  }
  if (sig.caches.empty())
    return absl::InvalidArgumentError(
        "--decode-context needs a KV-cache decoder: no graph output is a past input "
        "concatenated with this step's keys or values on axis 2 (present.* = Concat(past.*, "
        "new), as torch.onnx and optimum export with use_cache=True)");
  if (sig.past == sig.batch || sig.past == sig.sequence)
    return absl::InvalidArgumentError(
        absl::StrCat("--decode-context: the past length symbol '", sig.past,
                     "' is also a dim of input_ids; it must be a symbol of its own"));
  const Dim* t = DimAt(*g.inputs()[sig.attention_mask], 1);
  if (g.inputs()[sig.attention_mask]->output_info(0).type.rank() != 2 || t == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("--decode-context: attention_mask must be [batch, past + sequence], got ",
                     g.inputs()[sig.attention_mask]->output_info(0).type.ToString()));
  if (t->is_symbol() && t->symbol() != sig.past && t->symbol() != sig.sequence &&
      t->symbol() != sig.batch)
    sig.total = t->symbol();
  return sig;
}

absl::Status RewriteForDecode(Graph& g, const KvSignature& sig, int64_t capacity) {
  const Value positions = g.inputs()[sig.position_ids]->output(0);
  for (const PlanInPlace& pair : sig.caches) {
    Node* past = g.inputs()[pair.input];
    const std::string& name = past->output_info(0).name;
    const Value out = g.outputs()[pair.output].value;
    Node* concat = out.node;
    if (concat == nullptr || concat->op() != "Concat" || concat->num_inputs() != 2 ||
        concat->input(0) != past->output(0))
      return absl::InvalidArgumentError(absl::StrCat(
          "decode program: output '", g.outputs()[pair.output].name, "' is no longer past '", name,
          "' concatenated with this step's rows after "
          "specialization (",
          concat ? concat->Describe() : "nothing", ")"));
    for (const Use& u : past->output_info(0).uses)
      if (u.user != concat)
        return absl::InvalidArgumentError(absl::StrCat(
            "decode program: past input '", name, "' is read by ", u.user->Describe(),
            " besides the Concat that appends to it, so kiln cannot make it the cache"));
    Type cache = past->output_info(0).type;
    if (!cache.is_static() || !concat->output_info(0).type.is_static())
      return KILN_INTERNAL("decode program: '%s' is not static after specialization", name);
    (*cache.shape)[2] = Dim::Known(capacity);
    if (cache != concat->output_info(0).type)
      return absl::InvalidArgumentError(absl::StrCat(
          "decode program: output '", g.outputs()[pair.output].name, "' is ",
          concat->output_info(0).type.ToString(), ", not the cache ", cache.ToString()));
    past->set_output_type(0, cache);
    Node* write = g.InsertNodeBefore(concat, "CacheWrite",
                                     {past->output(0), concat->input(1), positions}, 1, "kiln");
    write->set_output_type(0, cache);
    write->set_output_name(0, concat->output_info(0).name);
    write->set_provenance(concat->provenance());
    g.ReplaceAllUsesWith(concat->output(0), write->output(0));
    KILN_RETURN_IF_ERROR(g.RemoveNode(concat));
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler
