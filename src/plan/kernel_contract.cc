// The kernel contract tables (kernel_contract.h) and the generic step check.
#include "plan/kernel_contract.h"

#include <cmath>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "plan/kernel_contracts_table.h"

namespace kiln {
namespace {

std::string S(std::string_view v) { return std::string(v); }

std::string Join(const std::vector<std::string_view>& v, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

template <typename... Args>
absl::Status Err(const absl::FormatSpec<Args...>& fmt, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(fmt, args...));
}

std::string ParamText(const ParamSpec& p) {
  std::string s = absl::StrCat("`", S(p.name), "`");
  switch (p.kind) {
    case ParamKind::kInt:
      if (p.lo == 0 && p.hi == 1)
        absl::StrAppend(&s, " 0/1");
      else if (p.hi == kMaxInt)
        absl::StrAppend(&s, " int ≥ ", p.lo);
      else
        absl::StrAppend(&s, " int ", p.lo, "..", p.hi);
      break;
    case ParamKind::kFloat:
      absl::StrAppend(&s, " float");
      break;
    case ParamKind::kString:
      if (p.choices.empty())
        absl::StrAppend(&s, " string");
      else
        absl::StrAppend(&s, " ", Join(p.choices, "\\|"));
      break;
    case ParamKind::kInts:
      absl::StrAppend(&s, " ints");
      break;
  }
  if (p.optional) absl::StrAppend(&s, " (optional)");
  if (!p.doc.empty()) absl::StrAppend(&s, ": ", S(p.doc));
  return s;
}

std::string OperandText(const KernelContract& c, const OperandSpec& o, bool variadic) {
  std::string s = absl::StrCat("`", S(o.name), "`");
  if (o.same_dtype_as >= 0)
    absl::StrAppend(&s, " as `", S(c.inputs[o.same_dtype_as].name), "`");
  else
    absl::StrAppend(&s, " ", DTypeSetText(o.dtypes));
  std::vector<std::string> notes;
  if (o.weight_only) notes.push_back("weight");
  if (o.optional) notes.push_back("optional");
  if (variadic) notes.push_back("any number");
  if (!notes.empty()) absl::StrAppend(&s, " (", absl::StrJoin(notes, ", "), ")");
  return s;
}

}  // namespace

const ParamSpec* KernelContract::FindParam(std::string_view n) const {
  for (const ParamSpec& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

size_t KernelContract::min_inputs() const {
  if (variadic_inputs) return 0;
  size_t n = inputs.size();
  while (n > 0 && inputs[n - 1].optional) --n;
  return n;
}

size_t KernelContract::min_outputs() const {
  if (variadic_outputs) return 0;
  size_t n = outputs.size();
  while (n > 0 && outputs[n - 1].optional) --n;
  return n;
}

std::string DTypeSetText(DTypeSet set) {
  if (set == kAnyDType) return "any";
  if (set == kAnyStorableDType) return "any, narrow types included";
  std::vector<std::string> names;
  for (unsigned t = 0; t <= static_cast<unsigned>(DType::kU2); ++t)
    if (set & (DTypeSet{1} << t)) names.emplace_back(DTypeName(static_cast<DType>(t)));
  if (names.empty()) return "none";
  if (names.size() == 1) return names[0];
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " or ", last);
}

const std::vector<KernelContract>& KernelContracts(PlanTarget target) {
  static const std::vector<KernelContract>* cpu =
      new std::vector<KernelContract>(contracts_internal::CpuContracts());
  static const std::vector<KernelContract>* cuda =
      new std::vector<KernelContract>(contracts_internal::CudaContracts());
  return target == PlanTarget::kCuda ? *cuda : *cpu;
}

const KernelContract* FindKernelContract(PlanTarget target, std::string_view kernel) {
  if (target != PlanTarget::kCpu && target != PlanTarget::kCuda) return nullptr;
  for (const KernelContract& c : KernelContracts(target))
    if (c.name == kernel) return &c;
  return nullptr;
}

absl::Status CheckStepContract(const KernelContract& c, const PlanBucket& bucket,
                               const PlanStep& step) {
  const size_t nin = step.inputs.size(), nout = step.outputs.size();
  if (!c.variadic_inputs && (nin < c.min_inputs() || nin > c.inputs.size()))
    return Err("takes %d to %d inputs, got %d", c.min_inputs(), c.inputs.size(), nin);
  if (!c.variadic_outputs &&
      (nout < std::max<size_t>(c.min_outputs(), 1) || nout > c.outputs.size()))
    return Err("takes %d to %d outputs, got %d", std::max<size_t>(c.min_outputs(), 1),
               c.outputs.size(), nout);
  for (const ParamSpec& spec : c.params) {
    const PlanParam* p = nullptr;
    for (const PlanParam& q : step.params)
      if (q.name == spec.name) p = &q;
    if (p == nullptr) {
      if (spec.optional) continue;
      return Err("missing parameter '%s'", spec.name);
    }
    switch (spec.kind) {
      case ParamKind::kInt: {
        const int64_t* v = std::get_if<int64_t>(&p->value);
        if (v == nullptr) return Err("parameter '%s' must be an int", spec.name);
        if (*v < spec.lo || *v > spec.hi)
          return Err("parameter '%s' is %d, outside [%d, %d]", spec.name, *v, spec.lo, spec.hi);
        break;
      }
      case ParamKind::kFloat: {
        const double* v = std::get_if<double>(&p->value);
        if (v == nullptr) return Err("parameter '%s' must be a float", spec.name);
        if (!std::isfinite(*v)) return Err("parameter '%s' is not finite (%g)", spec.name, *v);
        // Kernels take it as a float: a double outside the float range does not convert (UB).
        if (std::fabs(*v) > std::numeric_limits<float>::max())
          return Err("parameter '%s' (%g) is outside the f32 range", spec.name, *v);
        break;
      }
      case ParamKind::kString: {
        const std::string* v = std::get_if<std::string>(&p->value);
        if (v == nullptr) return Err("parameter '%s' must be a string", spec.name);
        if (!spec.choices.empty()) {
          bool known = false;
          for (std::string_view ch : spec.choices) known |= *v == ch;
          if (!known) return Err("unknown %s '%s' (%s)", spec.name, *v, Join(spec.choices, ", "));
        }
        break;
      }
      case ParamKind::kInts: {
        const auto* v = std::get_if<std::vector<int64_t>>(&p->value);
        if (v == nullptr) return Err("parameter '%s' must be a list of ints", spec.name);
        for (size_t i = 0; i < v->size(); ++i)
          if ((*v)[i] < spec.lo || (*v)[i] > spec.hi)
            return Err("parameter '%s'[%d] is %d, outside [%d, %d]", spec.name, i, (*v)[i], spec.lo,
                       spec.hi);
        break;
      }
    }
  }
  auto check = [&](const OperandSpec& spec, const PlanBuffer& b) -> absl::Status {
    if (spec.same_dtype_as >= 0) {
      const int32_t other =
          static_cast<size_t>(spec.same_dtype_as) < nin ? step.inputs[spec.same_dtype_as] : -1;
      if (other >= 0 && bucket.buffers[other].dtype != b.dtype)
        return Err("%s is %s but %s is %s", spec.name, std::string(DTypeName(b.dtype)),
                   c.inputs[spec.same_dtype_as].name,
                   std::string(DTypeName(bucket.buffers[other].dtype)));
    } else if (!(spec.dtypes & DTypeBit(b.dtype))) {
      return Err("%s must be %s, got %s", spec.name, DTypeSetText(spec.dtypes),
                 std::string(DTypeName(b.dtype)));
    }
    if (spec.weight_only && b.kind != PlanBufferKind::kWeight)
      return Err("%s must be a weight buffer (constant)", spec.name);
    return absl::OkStatus();
  };
  for (size_t i = 0; i < nin; ++i) {
    const OperandSpec& spec = c.variadic_inputs ? c.inputs[0] : c.inputs[i];
    if (step.inputs[i] == -1) {
      if (spec.optional || c.variadic_inputs) continue;
      return Err("input %d (%s) is required", i, spec.name);
    }
    KILN_RETURN_IF_ERROR(check(spec, bucket.buffers[step.inputs[i]]));
  }
  for (size_t i = 0; i < nout; ++i) {
    const OperandSpec& spec = c.variadic_outputs ? c.outputs[0] : c.outputs[i];
    if (step.outputs[i] < 0) return Err("output %d (%s) is required", i, spec.name);
    KILN_RETURN_IF_ERROR(check(spec, bucket.buffers[step.outputs[i]]));
  }
  return absl::OkStatus();
}

std::string KernelContractsMarkdown(PlanTarget target) {
  std::string md = "| kernel | inputs | outputs | params | rule |\n|---|---|---|---|---|\n";
  for (const KernelContract& c : KernelContracts(target)) {
    std::vector<std::string> ins, outs, params;
    for (const OperandSpec& o : c.inputs) ins.push_back(OperandText(c, o, c.variadic_inputs));
    for (const OperandSpec& o : c.outputs) outs.push_back(OperandText(c, o, c.variadic_outputs));
    for (const ParamSpec& p : c.params) params.push_back(ParamText(p));
    std::string rule(c.doc);
    if (c.inplace_ok) absl::StrAppend(&rule, rule.empty() ? "" : "; ", "`y` may be `x` in place");
    absl::StrAppend(&md, "| `", S(c.name), "` | ", absl::StrJoin(ins, ", "), " | ",
                    absl::StrJoin(outs, ", "), " | ",
                    params.empty() ? "—" : absl::StrJoin(params, ", "), " | ", rule, " |\n");
  }
  return md;
}

}  // namespace kiln
