// Internal to the CPU executor: the per-step checker used by the Create-time kernel
// rules (prepare_steps.cc, prepare_ref.cc). It reads typed parameters, fetches operand
// buffers, checks dtypes and element counts, and finally resolves operands to base slots,
// rejecting writes to read-only memory (weights, graph inputs) and overlaps the kernel
// cannot take. Every error is InvalidArgument "bucket B step S (kernel, provenance): ...".
// Limits: parameters must have exactly the documented types; extra ones are ignored.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "runtime/prepared_plan.h"

namespace kiln::runtime {

inline std::string DimsStr(const std::vector<int64_t>& d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

class StepChecker {
 public:
  StepChecker(const Plan& plan, int b, int s, const PreparedBucket& io)
      : plan_(plan),
        bucket_(plan.buckets[b]),
        step_(bucket_.steps[s]),
        io_(io),
        where_(StepWhere(b, s, step_)) {}

  const PlanStep& step() const { return step_; }

  template <typename... Args>
  absl::Status Err(const absl::FormatSpec<Args...>& fmt, const Args&... args) const {
    return absl::InvalidArgumentError(where_ + ": " + absl::StrFormat(fmt, args...));
  }

  absl::Status Arity(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const {
    if (step_.inputs.size() < min_in || step_.inputs.size() > max_in)
      return Err("takes %d to %d inputs, got %d", min_in, max_in, step_.inputs.size());
    if (step_.outputs.size() < min_out || step_.outputs.size() > max_out)
      return Err("takes %d to %d outputs, got %d", min_out, max_out, step_.outputs.size());
    return absl::OkStatus();
  }

  const PlanParam* Find(const char* name) const {
    for (const PlanParam& p : step_.params)
      if (p.name == name) return &p;
    return nullptr;
  }
  absl::StatusOr<int64_t> Int(const char* name, int64_t lo, int64_t hi) const {
    const PlanParam* p = Find(name);
    if (p == nullptr) return Err("missing parameter '%s'", name);
    const int64_t* v = std::get_if<int64_t>(&p->value);
    if (v == nullptr) return Err("parameter '%s' must be an int", name);
    if (*v < lo || *v > hi) return Err("parameter '%s' is %d, outside [%d, %d]", name, *v, lo, hi);
    return *v;
  }
  absl::StatusOr<int64_t> Size(const char* name) const {  // a non-negative size
    return Int(name, 0, std::numeric_limits<int64_t>::max());
  }
  absl::StatusOr<bool> Flag(const char* name) const {
    KILN_ASSIGN_OR_RETURN(int64_t v, Int(name, 0, 1));
    return v == 1;
  }
  absl::StatusOr<double> Double(const char* name) const {
    const PlanParam* p = Find(name);
    if (p == nullptr) return Err("missing parameter '%s'", name);
    const double* v = std::get_if<double>(&p->value);
    if (v == nullptr) return Err("parameter '%s' must be a float", name);
    if (!std::isfinite(*v)) return Err("parameter '%s' is not finite (%g)", name, *v);
    // Kernels take it as a float: a double outside the float range does not convert (UB).
    if (std::fabs(*v) > std::numeric_limits<float>::max())
      return Err("parameter '%s' (%g) is outside the f32 range", name, *v);
    return *v;
  }
  absl::StatusOr<std::string> String(const char* name) const {
    const PlanParam* p = Find(name);
    if (p == nullptr) return Err("missing parameter '%s'", name);
    const std::string* v = std::get_if<std::string>(&p->value);
    if (v == nullptr) return Err("parameter '%s' must be a string", name);
    return *v;
  }

  // Product of sizes, or an error naming what it sizes.
  absl::StatusOr<int64_t> Product(std::initializer_list<int64_t> v, const char* what) const {
    int64_t p = 1;
    for (int64_t x : v)
      if (MulOverflows(p, x, &p)) return Err("%s overflows int64", what);
    return p;
  }

  // The buffer of input i (null when omitted or past the end). Required inputs: error.
  absl::StatusOr<const PlanBuffer*> In(size_t i, const char* what, bool optional = false) const {
    if (i >= step_.inputs.size() || step_.inputs[i] == -1) {
      if (optional) return nullptr;
      return Err("input %d (%s) is required", i, what);
    }
    return &bucket_.buffers[step_.inputs[i]];
  }
  absl::StatusOr<const PlanBuffer*> Out(size_t i, const char* what) const {
    if (i >= step_.outputs.size()) return Err("output %d (%s) is required", i, what);
    return &bucket_.buffers[step_.outputs[i]];
  }

  static int64_t Elems(const PlanBuffer& b) {
    int64_t n = 1;
    for (int64_t d : b.dims) n *= d;  // ValidatePlan ruled out overflow
    return n;
  }
  absl::Status F32(const PlanBuffer* b, const char* what) const {
    if (b == nullptr || b->dtype == DType::kF32) return absl::OkStatus();
    return Err("%s must be f32, got %s", what, std::string(DTypeName(b->dtype)));
  }
  // f32 with exactly `n` elements.
  absl::Status F32N(const PlanBuffer* b, int64_t n, const char* what) const {
    KILN_RETURN_IF_ERROR(F32(b, what));
    if (b != nullptr && Elems(*b) != n)
      return Err("%s %s has %d elements; the parameters need %d", what, DimsStr(b->dims), Elems(*b),
                 n);
    return absl::OkStatus();
  }
  // The last dim of b (when it has one) equals `n`.
  absl::Status LastDim(const PlanBuffer* b, int64_t n, const char* what, const char* param) const {
    if (b == nullptr || b->dims.empty() || b->dims.back() == n) return absl::OkStatus();
    return Err("%s %s: last dim is not %s = %d", what, DimsStr(b->dims), param, n);
  }

  // Operands and the memory checks common to every kernel. `in_place` lets output 0 take
  // exactly input 0's bytes; `any_overlap` (copy, ref) lets outputs overlap inputs.
  // Operands and the memory checks common to every kernel. `in_place` lets output 0 take
  // exactly input 0's bytes; `any_overlap` (copy, ref) lets outputs overlap inputs.
  absl::Status Resolve(PreparedStep& p, bool in_place, bool any_overlap) const;

 private:
  const Plan& plan_;
  const PlanBucket& bucket_;
  const PlanStep& step_;
  const PreparedBucket& io_;
  std::string where_;
};

}  // namespace kiln::runtime
