// Single-node no-op forms (no_ops.h), removed by DCE and asked by the passes that meet
// them mid-rewrite.
#include "passes/no_ops.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "passes/rewrite_util.h"

namespace kiln::noop {
namespace {

using rewrite::IntList;
using rewrite::IsGraphOutput;

const Tensor* ConstantInput(const Node& n, int i) {
  return i < n.num_inputs() ? rewrite::ConstantOf(n.input(i)) : nullptr;
}

// A rank-known type with no unknown ("?") dims and a known dtype.
bool FullyDescribed(const Type& t) {
  if (t.dtype == DType::kUndefined || !t.shape) return false;
  return std::none_of(t.shape->begin(), t.shape->end(),
                      [](const Dim& d) { return d.is_unknown(); });
}

bool SameDescribedType(const Node& n) {
  const Type& in = n.input(0).type();
  const Type& out = n.output_info(0).type;
  return FullyDescribed(in) && in == out;
}

bool IsFullSlice(const Node& n) {
  if (n.num_inputs() < 3 || !SameDescribedType(n)) return false;
  const std::vector<Dim>& dims = *n.input(0).type().shape;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::optional<std::vector<int64_t>> starts = IntList(ConstantInput(n, 1));
  std::optional<std::vector<int64_t>> ends = IntList(ConstantInput(n, 2));
  if (!starts || !ends || starts->size() != ends->size()) return false;
  const size_t k = starts->size();
  std::vector<int64_t> axes(k), steps(k, 1);
  for (size_t i = 0; i < k; ++i) axes[i] = static_cast<int64_t>(i);
  if (n.num_inputs() > 3 && n.input(3)) {
    std::optional<std::vector<int64_t>> a = IntList(ConstantInput(n, 3));
    if (!a || a->size() != k) return false;
    axes = *a;
  }
  if (n.num_inputs() > 4 && n.input(4)) {
    std::optional<std::vector<int64_t>> s = IntList(ConstantInput(n, 4));
    if (!s || s->size() != k) return false;
    steps = *s;
  }
  for (size_t i = 0; i < k; ++i) {
    if (steps[i] != 1) return false;
    int64_t axis = axes[i];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    const Dim& d = dims[axis];
    int64_t s = (*starts)[i], e = (*ends)[i];
    if (d.is_known()) {
      const int64_t size = d.value();
      if (s < 0) s += size;
      if (e < 0) e += size;
      if (std::clamp<int64_t>(s, 0, size) != 0 || std::clamp<int64_t>(e, 0, size) != size)
        return false;
    } else if (s != 0 || e < std::numeric_limits<int32_t>::max()) {
      return false;  // symbolic dim: only the literal "0 to the end" form is provably full
    }
  }
  return true;
}

bool IsPermutation(const std::vector<int64_t>& p) {
  std::vector<bool> seen(p.size(), false);
  for (int64_t v : p) {
    if (v < 0 || v >= static_cast<int64_t>(p.size()) || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

}  // namespace

bool IsInferenceDropout(const Node& n) {
  if (n.num_inputs() < 3 || !n.input(2)) return true;
  return rewrite::BoolConstant(n.input(2)) == false;
}

bool IsIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::optional<std::vector<int64_t>> TransposePerm(const Node& node) {
  const Node* t = &node;
  const int in_rank = t->input(0) ? t->input(0).type().rank() : -1;
  std::vector<int64_t> p;
  if (const std::vector<int64_t>* attr = t->attr_ints("perm")) {
    p = *attr;
  } else {
    const int r = in_rank >= 0 ? in_rank : t->output_info(0).type.rank();
    if (r < 0) return std::nullopt;
    for (int i = r - 1; i >= 0; --i) p.push_back(i);
  }
  if (!IsPermutation(p)) return std::nullopt;
  if (in_rank >= 0 && in_rank != static_cast<int>(p.size())) return std::nullopt;
  return p;
}

bool IsIdentityTranspose(const Node& n) {
  std::optional<std::vector<int64_t>> p = TransposePerm(n);
  return p && IsIdentityPerm(*p);
}

Value NoOpSource(const Graph& g, Node& n) {
  if (!n.domain().empty() || n.num_inputs() < 1 || !n.input(0) || n.num_outputs() < 1) return {};
  const Value x = n.input(0);
  if (n.op() == "Identity") return x;
  if (n.op() == "Dropout") {
    if (n.num_outputs() > 1 && (!n.output_info(1).uses.empty() || IsGraphOutput(g, n.output(1))))
      return {};
    if (IsInferenceDropout(n)) return x;
    const Tensor* ratio = ConstantInput(n, 1);
    if (ratio && IsFloat(ratio->dtype()) && ratio->NumElements() == 1 &&
        ratio->GetAsDouble(0) == 0.0)
      return x;
    return {};
  }
  if (n.op() == "Cast") {
    const std::optional<int64_t> to = n.attr_int("to");
    if (!to || x.type().dtype == DType::kUndefined) return {};
    return DTypeFromOnnx(static_cast<int32_t>(*to)) == x.type().dtype ? x : Value{};
  }
  if (n.op() == "CastLike") {
    if (n.num_inputs() < 2 || !n.input(1)) return {};
    const DType dt = x.type().dtype;
    return dt != DType::kUndefined && dt == n.input(1).type().dtype ? x : Value{};
  }
  if (n.op() == "Reshape" || n.op() == "Expand") return SameDescribedType(n) ? x : Value{};
  if (n.op() == "Slice") return IsFullSlice(n) ? x : Value{};
  if (n.op() == "Transpose") return IsIdentityTranspose(n) ? x : Value{};
  return {};
}

}  // namespace kiln::noop
