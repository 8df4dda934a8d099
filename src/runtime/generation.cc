// kiln::GenerationSession (include/kiln/generation.h): prefill through the plan's model
// program with an empty past, then one decode step per token with the cache passed as both
// past and present.
#include "kiln/generation.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

int FindInput(const Plan& plan, std::string_view name) {
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    if (plan.inputs[i].name == name) return static_cast<int>(i);
  return -1;
}

absl::Status NotADecoder(const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat("GenerationSession: ", why,
                   " (compile a KV-cache decoder with --decode-context; docs/generation.md)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GenerationSession>> GenerationSession::Create(
    std::shared_ptr<const Executor> executor) {
  if (executor == nullptr)
    return absl::InvalidArgumentError("GenerationSession: the executor is null");
  std::unique_ptr<GenerationSession> s(new GenerationSession(std::move(executor)));
  const Plan& plan = s->executor_->plan();
  const PlanBucket* decode = nullptr;
  for (const PlanBucket& b : plan.buckets)
    if (b.program == PlanProgram::kDecode) {
      decode = &b;
      break;
    }
  if (decode == nullptr) return NotADecoder("the plan has no decode program");
  if (decode->in_place.empty()) return NotADecoder("the plan's decode program has no cache");
  s->ids_ = FindInput(plan, "input_ids");
  s->mask_ = FindInput(plan, "attention_mask");
  s->positions_ = FindInput(plan, "position_ids");
  if (s->ids_ < 0 || s->mask_ < 0 || s->positions_ < 0)
    return NotADecoder("the plan lacks input_ids, attention_mask or position_ids");
  for (int i : {s->ids_, s->mask_, s->positions_})
    if (plan.inputs[i].dtype != DType::kI64 || plan.inputs[i].dims.size() != 2)
      return NotADecoder(absl::StrCat("input '", plan.inputs[i].name, "' is not int64 [batch, n]"));
  for (size_t o = 0; o < plan.outputs.size(); ++o)
    if (plan.outputs[o].name == "logits") s->logits_ = static_cast<int>(o);
  if (s->logits_ < 0) return NotADecoder("the plan has no output 'logits'");
  const PlanTensorSig& logits = plan.outputs[s->logits_];
  if (logits.dtype != DType::kF32 || logits.dims.size() != 3 || !logits.dims[2].is_known())
    return NotADecoder("output 'logits' is not f32 [batch, sequence, vocab] with a fixed vocab");
  s->vocab_ = logits.dims[2].value();

  std::string past_symbol;
  for (const PlanInPlace& ip : decode->in_place) {
    const PlanTensorSig& past = plan.inputs[ip.input];
    if (past.dtype != DType::kF32 || past.dims.size() != 4 || !past.dims[1].is_known() ||
        !past.dims[3].is_known() || !past.dims[2].is_symbol())
      return NotADecoder(
          absl::StrCat("cache input '", past.name, "' is not f32 [batch, heads, past, head]"));
    if (!past_symbol.empty() && past_symbol != past.dims[2].symbol())
      return NotADecoder("the cache inputs disagree on the past length symbol");
    past_symbol = past.dims[2].symbol();
    Cache c;
    c.input = ip.input;
    c.output = ip.output;
    c.heads = past.dims[1].value();
    c.head = past.dims[3].value();
    s->caches_.push_back(std::move(c));
  }
  const Dim& seq = plan.inputs[s->ids_].dims[1];
  std::set<int64_t> capacities, prefill;
  for (const PlanBucket& b : plan.buckets) {
    auto past = b.bindings.find(past_symbol);
    if (past == b.bindings.end()) continue;
    if (b.program == PlanProgram::kDecode) {
      capacities.insert(past->second);
    } else if (past->second == 0) {
      if (seq.is_known())
        prefill.insert(seq.value());
      else if (auto it = b.bindings.find(seq.symbol()); it != b.bindings.end())
        prefill.insert(it->second);
    }
  }
  if (prefill.empty()) return NotADecoder("the plan has no prefill bucket (an empty past)");
  s->capacities_.assign(capacities.begin(), capacities.end());
  s->prefill_lengths_.assign(prefill.begin(), prefill.end());
  return s;
}

absl::StatusOr<int64_t> GenerationSession::length(int b) const {
  if (b < 0 || b >= batch())
    return absl::InvalidArgumentError(
        absl::StrFormat("sequence %d is out of range (the session holds %d)", b, batch()));
  return lengths_[b];
}

int64_t GenerationSession::cache_bytes() const {
  int64_t n = 0;
  for (const Cache& c : caches_) n += static_cast<int64_t>(c.data.size() * sizeof(float));
  return n;
}

absl::Status GenerationSession::CheckIds(std::span<const int64_t> ids, const char* what) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: token id %d (at %d) is outside the vocabulary [0, %d)", what, ids[i], i, vocab_));
  return absl::OkStatus();
}

// Moves every cache (and the mask) to `capacity` slots, keeping each sequence's filled slots.
absl::Status GenerationSession::Grow(int64_t capacity) {
  const int64_t nb = batch();
  for (Cache& c : caches_) {
    std::vector<float> next;
    const int64_t planes = nb * c.heads;
    int64_t elems = 0;
    if (MulOverflows(planes * c.head, capacity, &elems))
      return absl::ResourceExhaustedError("the cache size overflows");
    next.assign(static_cast<size_t>(elems), 0.0f);
    const int64_t keep = std::min(capacity, capacity_);
    for (int64_t p = 0; p < planes && keep > 0; ++p)
      std::memcpy(next.data() + p * capacity * c.head, c.data.data() + p * capacity_ * c.head,
                  static_cast<size_t>(keep * c.head) * sizeof(float));
    c.data = std::move(next);
  }
  mask_data_.assign(static_cast<size_t>(nb * capacity), 0);
  for (int64_t b = 0; b < nb; ++b) std::fill_n(mask_data_.begin() + b * capacity, lengths_[b], 1);
  capacity_ = capacity;
  return absl::OkStatus();
}

// Checks `prompts` and runs them through the smallest prefill bucket that holds the
// longest (right-padded, positions 0 .. s-1, empty pasts): the outputs and that length.
absl::StatusOr<GenerationSession::PrefillRun> GenerationSession::RunPrefill(
    std::span<const std::vector<int64_t>> prompts, const char* what) const {
  const Plan& plan = executor_->plan();
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no prompts given"));
  const int64_t nb = static_cast<int64_t>(prompts.size());
  int64_t longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty())
      return absl::InvalidArgumentError(absl::StrFormat("%s: prompt %d is empty", what, b));
    KILN_RETURN_IF_ERROR(CheckIds(prompts[b], absl::StrCat(what, ": prompt ", b).c_str()));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts[b].size()));
  }
  if (longest >= max_context())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a prompt of %d tokens does not fit the plan's maximum context of %d tokens "
        "(the prompt and at least one generated token; compile with a larger --decode-context)",
        what, longest, max_context()));
  auto fit = std::lower_bound(prefill_lengths_.begin(), prefill_lengths_.end(), longest);
  if (fit == prefill_lengths_.end())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a prompt of %d tokens is longer than the plan's prefill buckets (sequence "
        "%s; compile with a larger --profile sequence)",
        what, longest, absl::StrJoin(prefill_lengths_, ", ")));
  PrefillRun run;
  run.longest = longest;
  const int64_t s = run.seq = *fit;

  std::vector<int64_t> ids(static_cast<size_t>(nb * s), 0), mask(ids.size(), 0), pos(ids.size());
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t j = 0; j < s; ++j) {
      const bool real = j < static_cast<int64_t>(prompts[b].size());
      ids[b * s + j] = real ? prompts[b][j] : 0;
      mask[b * s + j] = real ? 1 : 0;
      pos[b * s + j] = j;
    }
  std::vector<TensorView> in(plan.inputs.size());
  in[ids_] = {DType::kI64, {nb, s}, ids.data()};
  in[mask_] = {DType::kI64, {nb, s}, mask.data()};
  in[positions_] = {DType::kI64, {nb, s}, pos.data()};
  for (const Cache& c : caches_) in[c.input] = {DType::kF32, {nb, c.heads, 0, c.head}, nullptr};
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].dtype == DType::kUndefined)
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: the plan's input '%s' is not one a generation session feeds", what,
                          plan.inputs[i].name));
  std::vector<std::vector<int64_t>> in_dims;
  for (const TensorView& v : in) in_dims.push_back(v.dims);
  absl::StatusOr<std::vector<std::vector<int64_t>>> out_dims = executor_->OutputDims(in_dims);
  if (!out_dims.ok())
    return absl::Status(out_dims.status().code(),
                        absl::StrCat(what, " of ", nb, " sequences of up to ", longest,
                                     " tokens: ", out_dims.status().message()));
  std::vector<MutableTensorView> views;
  for (size_t o = 0; o < out_dims->size(); ++o) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(plan.outputs[o].dtype, (*out_dims)[o]));
    views.push_back({t.dtype(), t.dims(), t.raw()});
    run.outputs.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(executor_->Run(in, views));
  for (const Cache& c : caches_)
    if (run.outputs[c.output].dims() != std::vector<int64_t>{nb, c.heads, s, c.head})
      return KILN_INTERNAL("%s: present output %d is %s, not [%d,%d,%d,%d]", what, c.output,
                           absl::StrJoin(run.outputs[c.output].dims(), "x"), nb, c.heads, s,
                           c.head);
  return run;
}

// Sequence `dst` of the caches := row `src` of a prefill's present outputs (its first `len`
// slots), and its logits row := the prefill's at position len - 1.
void GenerationSession::TakePrefillRow(const PrefillRun& run, int64_t src, int64_t dst, int64_t len,
                                       float* logits_row) {
  const int64_t s = run.seq;
  for (Cache& c : caches_)
    for (int64_t h = 0; h < c.heads; ++h)
      std::memcpy(c.data.data() + (dst * c.heads + h) * capacity_ * c.head,
                  run.outputs[c.output].data<float>() + (src * c.heads + h) * s * c.head,
                  static_cast<size_t>(len * c.head) * sizeof(float));
  std::memcpy(logits_row, run.outputs[logits_].data<float>() + (src * s + len - 1) * vocab_,
              vocab_ * sizeof(float));
  lengths_[dst] = len;
  std::fill_n(mask_data_.begin() + dst * capacity_, capacity_, 0);
  std::fill_n(mask_data_.begin() + dst * capacity_, len, 1);
}

absl::StatusOr<Tensor> GenerationSession::Prefill(std::span<const std::vector<int64_t>> prompts) {
  KILN_ASSIGN_OR_RETURN(const PrefillRun run, RunPrefill(prompts, "Prefill"));
  const int64_t nb = static_cast<int64_t>(prompts.size());
  // The cache: the smallest capacity with a slot after the longest prompt.
  lengths_.assign(nb, 0);
  capacity_ = 0;
  for (Cache& c : caches_) c.data.clear();
  KILN_RETURN_IF_ERROR(
      Grow(*std::upper_bound(capacities_.begin(), capacities_.end(), run.longest)));
  KILN_ASSIGN_OR_RETURN(Tensor result, Tensor::Create(DType::kF32, {nb, vocab_}));
  for (int64_t b = 0; b < nb; ++b)
    TakePrefillRow(run, b, b, static_cast<int64_t>(prompts[b].size()),
                   result.data<float>() + b * vocab_);
  return result;
}

absl::StatusOr<Tensor> GenerationSession::Restart(int b, std::span<const int64_t> prompt) {
  if (lengths_.empty())
    return absl::FailedPreconditionError("Restart before Prefill: the session holds no sequences");
  KILN_RETURN_IF_ERROR(length(b).status());
  const std::vector<std::vector<int64_t>> one = {
      std::vector<int64_t>(prompt.begin(), prompt.end())};
  KILN_ASSIGN_OR_RETURN(const PrefillRun run, RunPrefill(one, "Restart"));
  if (run.longest >= capacity_)
    KILN_RETURN_IF_ERROR(
        Grow(*std::upper_bound(capacities_.begin(), capacities_.end(), run.longest)));
  KILN_ASSIGN_OR_RETURN(Tensor result, Tensor::Create(DType::kF32, {1, vocab_}));
  TakePrefillRow(run, 0, b, run.longest, result.data<float>());
  return result;
}

absl::Status GenerationSession::Fork(int src, int dst) {
  KILN_RETURN_IF_ERROR(length(src).status());
  KILN_RETURN_IF_ERROR(length(dst).status());
  if (src == dst) return absl::OkStatus();
  for (Cache& c : caches_) {
    const size_t plane = static_cast<size_t>(c.heads * capacity_ * c.head);
    std::memcpy(c.data.data() + dst * plane, c.data.data() + src * plane, plane * sizeof(float));
  }
  std::copy_n(mask_data_.begin() + src * capacity_, capacity_,
              mask_data_.begin() + dst * capacity_);
  lengths_[dst] = lengths_[src];
  return absl::OkStatus();
}

absl::StatusOr<Tensor> GenerationSession::Decode(std::span<const int64_t> next_ids) {
  const Plan& plan = executor_->plan();
  if (lengths_.empty())
    return absl::FailedPreconditionError("Decode before Prefill: the session holds no sequences");
  const int64_t nb = batch();
  if (static_cast<int64_t>(next_ids.size()) != nb)
    return absl::InvalidArgumentError(absl::StrFormat(
        "Decode: %d token ids for %d sequences (one per sequence)", next_ids.size(), nb));
  KILN_RETURN_IF_ERROR(CheckIds(next_ids, "Decode"));
  const int64_t longest = *std::max_element(lengths_.begin(), lengths_.end());
  if (longest >= capacity_) {
    auto next = std::upper_bound(capacities_.begin(), capacities_.end(), longest);
    if (next == capacities_.end()) {
      const int b =
          static_cast<int>(std::max_element(lengths_.begin(), lengths_.end()) - lengths_.begin());
      return absl::ResourceExhaustedError(absl::StrFormat(
          "Decode: sequence %d holds %d tokens, the plan's maximum context (the largest "
          "--decode-context is %d)",
          b, longest, max_context()));
    }
    KILN_RETURN_IF_ERROR(Grow(*next));
  }
  std::vector<int64_t> ids(next_ids.begin(), next_ids.end()), pos(lengths_);
  for (int64_t b = 0; b < nb; ++b) mask_data_[b * capacity_ + lengths_[b]] = 1;
  KILN_ASSIGN_OR_RETURN(Tensor logits, Tensor::Create(DType::kF32, {nb, 1, vocab_}));
  std::vector<TensorView> in(plan.inputs.size());
  std::vector<MutableTensorView> out(plan.outputs.size());
  in[ids_] = {DType::kI64, {nb, 1}, ids.data()};
  in[mask_] = {DType::kI64, {nb, capacity_}, mask_data_.data()};
  in[positions_] = {DType::kI64, {nb, 1}, pos.data()};
  out[logits_] = {DType::kF32, {nb, 1, vocab_}, logits.raw()};
  for (Cache& c : caches_) {
    in[c.input] = {DType::kF32, {nb, c.heads, capacity_, c.head}, c.data.data()};
    out[c.output] = {DType::kF32, {nb, c.heads, capacity_, c.head}, c.data.data()};
  }
  for (size_t o = 0; o < out.size(); ++o)
    if (out[o].dtype == DType::kUndefined)
      return absl::FailedPreconditionError(
          absl::StrFormat("Decode: the plan's output '%s' is not one a generation session takes",
                          plan.outputs[o].name));
  RunOptions options;
  options.program = PlanProgram::kDecode;
  if (absl::Status st = executor_->Run(in, out, nullptr, options); !st.ok()) {
    for (int64_t b = 0; b < nb; ++b) mask_data_[b * capacity_ + lengths_[b]] = 0;
    return absl::Status(st.code(), absl::StrCat("Decode: ", st.message()));
  }
  for (int64_t& len : lengths_) ++len;
  return Tensor(DType::kF32, {nb, vocab_}, logits.storage());
}

}  // namespace kiln
