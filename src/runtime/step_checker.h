// The per-step checker every executor's kernel rules use at Create. It first checks the
// step against its kernel contract (plan/kernel_contract.h: arity, typed parameters in
// range, operand dtypes, weight-only operands) and resolves operands to base slots with the
// memory rules (no writes to weights or graph inputs, no overlap the kernel cannot take,
// aligned offsets, graph I/O within the bucket's sizes); a kernel's own rule then reads
// the already-checked parameters and relates them to the buffers' dims.
// Every error is InvalidArgument "bucket B step S (kernel, provenance): ...".
// Limits: parameters must have exactly the documented kinds; extra ones are ignored.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_format.h"
#include "kiln/support/status.h"
#include "plan/kernel_contract.h"
#include "runtime/plan_session.h"

namespace kiln::runtime {

// Where an operand's bytes live: slot of the run's base-pointer table, plus an offset.
// Slot layout: 0 = null (omitted input), 1 = arena, 2 = weights, then graph inputs, then
// graph outputs (BaseSlotOfInput / BaseSlotOfOutput).
struct Operand {
  uint32_t slot = 0;
  int64_t offset = 0;
};
inline constexpr uint32_t kNullSlot = 0, kArenaSlot = 1, kWeightSlot = 2;
inline uint32_t BaseSlotOfInput(int binding) { return 3 + static_cast<uint32_t>(binding); }
inline uint32_t BaseSlotOfOutput(int num_inputs, int binding) {
  return 3 + static_cast<uint32_t>(num_inputs) + static_cast<uint32_t>(binding);
}

// A step's operands resolved to slots.
struct StepOperands {
  std::vector<Operand> in, out;
};

// The operand pointers of one step in one run: base + offset over the run's slot table.
struct StepIo {
  std::byte* const* bases = nullptr;
  const StepOperands* ops = nullptr;

  const void* In(size_t i) const {
    return i < ops->in.size() && ops->in[i].slot != kNullSlot
               ? bases[ops->in[i].slot] + ops->in[i].offset
               : nullptr;
  }
  void* Out(size_t i) const { return bases[ops->out[i].slot] + ops->out[i].offset; }
  template <typename T>
  const T* In(size_t i) const {
    return static_cast<const T*>(In(i));
  }
  template <typename T>
  T* Out(size_t i) const {
    return static_cast<T*>(Out(i));
  }
};

// "bucket B step S (kernel, first provenance)" for messages.
std::string StepWhere(int b, int s, const PlanStep& step);

class StepChecker {
 public:
  StepChecker(const Plan& plan, int b, int s, const BucketIo& io, const KernelContract& contract)
      : plan_(plan),
        bucket_(plan.buckets[b]),
        step_(bucket_.steps[s]),
        io_(io),
        contract_(contract),
        where_(StepWhere(b, s, step_)) {}

  const Plan& plan() const { return plan_; }
  const PlanBucket& bucket() const { return bucket_; }
  const PlanStep& step() const { return step_; }
  const KernelContract& contract() const { return contract_; }
  const std::string& where() const { return where_; }

  template <typename... Args>
  absl::Status Err(const absl::FormatSpec<Args...>& fmt, const Args&... args) const {
    return absl::InvalidArgumentError(where_ + ": " + absl::StrFormat(fmt, args...));
  }
  // Prefixes an error from elsewhere with the step's location.
  absl::Status Wrap(const absl::Status& s) const;

  // The contract check and operand resolution (in this order); both must pass before a
  // kernel rule reads parameters or buffers.
  absl::Status CheckContract() const;
  absl::StatusOr<StepOperands> Resolve() const;

  // Parameters, already checked against the contract (present unless optional, of their
  // kind, in range). Optional ones absent: the fallback.
  const PlanParam* Find(std::string_view name) const;
  int64_t Int(std::string_view name, int64_t fallback = 0) const;
  bool Flag(std::string_view name) const { return Int(name) != 0; }
  double Float(std::string_view name) const;
  const std::string& String(std::string_view name) const;
  const std::vector<int64_t>& Ints(std::string_view name) const;

  // Product of sizes, or an error naming what it sizes.
  absl::StatusOr<int64_t> Product(std::initializer_list<int64_t> v, const char* what) const;

  // The buffer of input i (null when omitted or past the end) / output i (null past the end).
  const PlanBuffer* In(size_t i) const;
  const PlanBuffer* Out(size_t i) const;

  static int64_t Elems(const PlanBuffer& b);
  // `b` (when present) has exactly `n` elements.
  absl::Status N(const PlanBuffer* b, int64_t n, const char* what) const;
  // The last dim of b (when it has one) equals `n`.
  absl::Status LastDim(const PlanBuffer* b, int64_t n, const char* what, const char* param) const;

 private:
  const Plan& plan_;
  const PlanBucket& bucket_;
  const PlanStep& step_;
  const BucketIo& io_;
  const KernelContract& contract_;
  std::string where_;
};

}  // namespace kiln::runtime
