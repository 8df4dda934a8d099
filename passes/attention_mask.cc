// Attention matcher, masks: classifies the Add / Where layers between Q·Kᵀ and the
// Softmax as a causal pattern (a constant upper triangle), an additive float mask (several
// are summed into one: a relative position bias beside the padding mask), a bool -inf
// mask or a Where with a finite fill, and checks the mask broadcasts to the scores
// (attention_match.h).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/attention_match_internal.h"
#include "passes/rewrite_util.h"

namespace kiln::attention::internal {

using rewrite::ConstantOf;

namespace {

// Masked-score fills at or below this count as "minus infinity" (-10000 of older
// transformers releases, float32 min of newer ones).
constexpr double kLargeNegative = -1e4;

// A constant [1, ..., 1, T, T] whose element (q, k) is `above` where k > q and `below`
// elsewhere, as decided by `is_above` / `is_below` per element.
template <typename A, typename B>
bool CausalConstant(Value v, A is_above, B is_below) {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || t->rank() < 2) return false;
  const int64_t s = t->dims().back();
  if (t->dims()[t->rank() - 2] != s || s < 2) return false;
  for (int i = 0; i + 2 < t->rank(); ++i)
    if (t->dims()[i] != 1) return false;
  for (int64_t q = 0; q < s; ++q)
    for (int64_t k = 0; k < s; ++k) {
      const double x = t->GetAsDouble(q * s + k);
      if (k > q ? !is_above(x) : !is_below(x)) return false;
    }
  return true;
}

// Empty when `mask` broadcasts to the scores; the reason otherwise. Dims shape inference
// left unknown are checked by the kernel at run time.
std::string CheckMaskShape(Value mask, const std::vector<Dim>& scores) {
  const std::vector<Dim>* m = ShapeOf(mask);
  if (m == nullptr) return "the mask's shape is unknown";
  std::string why;
  if (m->size() > 4) why = "has more than 4 dims";
  for (size_t i = 0; why.empty() && i < m->size(); ++i) {
    const Dim& md = (*m)[m->size() - 1 - i];
    const Dim& sd = scores[3 - i];
    if ((md.is_known() && md.value() == 1) || md == sd || md.is_unknown() || sd.is_unknown())
      continue;
    why = "does not broadcast to them";
  }
  if (why.empty()) return "";
  return absl::StrFormat(
      "mask has shape %s, which %s (scores [B, N, S, S] = %s); masks "
      "broadcastable to [B, N, S, S] such as [B, 1, 1, S], [B, 1, S, S] or "
      "[1, 1, S, S] are fused",
      DimsString(*m), why, DimsString(scores));
}

}  // namespace

std::optional<double> UniformConstant(Value v) {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || t->NumElements() < 1 || !IsFloat(t->dtype())) return std::nullopt;
  const double x = t->GetAsDouble(0);
  for (int64_t i = 1; i < t->NumElements(); ++i)
    if (t->GetAsDouble(i) != x) return std::nullopt;
  return x;
}

std::string AnalyzeMasks(const std::vector<MaskLayer>& layers, const std::vector<Dim>& scores,
                         AttentionBlock& b) {
  for (const MaskLayer& l : layers) {
    const Node* n = l.node;
    if (!l.is_where) {
      const Value m = n->input(1 - l.scores_operand);
      if (CausalConstant(
              m, [](double x) { return x <= kLargeNegative; }, [](double x) { return x == 0; })) {
        b.causal = true;
        continue;
      }
      if (!IsFloat(m.type().dtype))
        return absl::StrFormat("the additive mask has dtype %s; a float mask is expected",
                               std::string(DTypeName(m.type().dtype)));
      if (b.mask.kind == MaskKind::kAdditive) {
        // A second additive term (a relative position bias): summed into the mask.
        const std::string why = CheckMaskShape(m, scores);
        if (!why.empty()) return why;
        b.more_additive.push_back(m);
        continue;
      }
      if (b.mask.kind != MaskKind::kNone)
        return "the scores are masked twice (only one mask plus a causal pattern is fused)";
      b.mask = {MaskKind::kAdditive, m, true, 0};
      continue;
    }
    const Value cond = n->input(0);
    const bool keep = l.scores_operand == 1;
    const Value fill_v = n->input(keep ? 2 : 1);
    std::optional<double> fill = UniformConstant(fill_v);
    if (!fill || !(*fill <= kLargeNegative))
      return absl::StrFormat(
          "Where fills masked scores with %s; only -inf or a large "
          "negative constant (<= -1e4) is fused",
          fill ? absl::StrCat(*fill) : "a non-constant value");
    if (cond.type().dtype != DType::kBool) return "the Where mask condition is not bool";
    if (CausalConstant(
            cond, [&](double x) { return (x != 0) != keep; },
            [&](double x) { return (x != 0) == keep; })) {
      b.causal = true;
      continue;
    }
    if (b.mask.kind != MaskKind::kNone)
      return "the scores are masked twice (only one mask plus a causal pattern is fused)";
    if (std::isinf(*fill))
      b.mask = {keep ? MaskKind::kBoolKeep : MaskKind::kBoolDrop, cond, keep, *fill};
    else
      b.mask = {MaskKind::kWhereFill, cond, keep, *fill};
  }
  if (b.mask.kind != MaskKind::kNone) return CheckMaskShape(b.mask.value, scores);
  return "";
}

}  // namespace kiln::attention::internal
