// kiln::GenerationSession (include/kiln/generation.h): prefill through the plan's model
// program with an empty past, then one decode step per token with the block pools passed
// as both past and present and each sequence's block table.
#include "kiln/generation.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "runtime/cuda_backend.h"

namespace kiln {
namespace {

int FindInput(const std::vector<PlanTensorSig>& inputs, std::string_view name) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == name) return static_cast<int>(i);
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
  const bool paged =
      std::any_of(plan.signatures.begin(), plan.signatures.end(),
                  [](const PlanSignature& sig) { return sig.program == PlanProgram::kDecode; });
  if (!paged)
    return NotADecoder(
        "the plan's decode program keeps a contiguous cache, which sessions no longer drive "
        "(it was compiled before the paged cache): recompile the model");
  const PlanIo dio = IoOf(plan, PlanProgram::kDecode);
  s->ids_ = FindInput(plan.inputs, "input_ids");
  s->mask_ = FindInput(plan.inputs, "attention_mask");
  s->positions_ = FindInput(plan.inputs, "position_ids");
  s->table_ = FindInput(dio.inputs, "block_table");
  if (s->ids_ < 0 || s->mask_ < 0) return NotADecoder("the plan lacks input_ids or attention_mask");
  if (s->table_ < 0 || dio.inputs.size() != plan.inputs.size() + 1 ||
      dio.outputs.size() != plan.outputs.size())
    return NotADecoder("the decode program's inputs are not the model's and a block table");
  for (int i : {s->ids_, s->mask_, s->positions_})
    if (i >= 0 && (plan.inputs[i].dtype != DType::kI64 || plan.inputs[i].dims.size() != 2 ||
                   dio.inputs[i].name != plan.inputs[i].name))
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
    const PlanTensorSig& pool = dio.inputs[ip.input];
    if (past.dtype != DType::kF32 || past.dims.size() != 4 || !past.dims[2].is_symbol() ||
        pool.dims.size() != 4 ||
        !std::all_of(pool.dims.begin(), pool.dims.end(), [](const Dim& d) { return d.is_known(); }))
      return NotADecoder(absl::StrCat("cache input '", past.name,
                                      "' is not f32 [batch, heads, past, head] paged into "
                                      "[blocks, heads, block_size, head]"));
    if (!past_symbol.empty() && past_symbol != past.dims[2].symbol())
      return NotADecoder("the cache inputs disagree on the past length symbol");
    past_symbol = past.dims[2].symbol();
    const int64_t blocks = pool.dims[0].value(), bs = pool.dims[2].value();
    if ((s->blocks_ != 0 && (blocks != s->blocks_ || bs != s->block_size_)) || blocks < 2 || bs < 1)
      return NotADecoder("the cache pools disagree on their blocks");
    s->blocks_ = blocks;
    s->block_size_ = bs;
    Cache c;
    c.input = ip.input;
    c.output = ip.output;
    c.heads = pool.dims[1].value();
    c.head = pool.dims[3].value();
    s->caches_.push_back(c);
  }
  const Dim& seq = plan.inputs[s->ids_].dims[1];
  std::set<int64_t> capacities, prefill;
  for (const PlanBucket& b : plan.buckets) {
    auto past = b.bindings.find(past_symbol);
    if (past == b.bindings.end()) continue;
    if (b.program == PlanProgram::kDecode) {
      if (past->second % s->block_size_ != 0)
        return NotADecoder("a decode capacity is not whole cache blocks");
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

  // The pools: host address space for every block, committed page by page as blocks are
  // written; or device memory, all of it at once and zeroed (unwritten slots are read as
  // zeros behind a finite additive mask, as the host pages are).
  s->memory_ = s->executor_->memory();
  s->device_ = s->executor_->device();
  for (Cache& c : s->caches_) {
    int64_t elems = 0;
    if (MulOverflows(s->blocks_ * c.heads * s->block_size_, c.head, &elems) ||
        MulOverflows(elems, int64_t{sizeof(float)}, &elems))
      return absl::ResourceExhaustedError("GenerationSession: the cache pool size overflows");
    s->pool_bytes_ = static_cast<size_t>(elems);
    if (s->memory_ == MemoryKind::kCuda) {
      absl::StatusOr<std::shared_ptr<void>> d = AllocateCudaBuffer(s->device_, s->pool_bytes_);
      if (!d.ok())
        return absl::Status(
            d.status().code(),
            absl::StrFormat("GenerationSession: a cache pool of %d blocks (%d bytes) on CUDA "
                            "device %d: %s (compile with a smaller --kv-cache-blocks)",
                            s->blocks_, s->pool_bytes_, s->device_, d.status().message()));
      KILN_RETURN_IF_ERROR(runtime::CudaZero(s->device_, d->get(), s->pool_bytes_));
      c.device_pool = *std::move(d);
      c.pool = static_cast<float*>(c.device_pool.get());
      continue;
    }
    void* m = mmap(nullptr, s->pool_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      return absl::ResourceExhaustedError(absl::StrFormat(
          "GenerationSession: cannot reserve %d bytes for a cache pool of %d blocks (compile "
          "with a smaller --kv-cache-blocks)",
          s->pool_bytes_, s->blocks_));
    c.pool = static_cast<float*>(m);
  }
  s->refs_.assign(static_cast<size_t>(s->blocks_), 0);
  for (int64_t b = 1; b < s->blocks_; ++b) s->free_.insert(b);
  return s;
}

GenerationSession::~GenerationSession() {
  for (Cache& c : caches_)
    if (c.pool && !c.device_pool) munmap(c.pool, pool_bytes_);
}

absl::StatusOr<int64_t> GenerationSession::length(int b) const {
  if (b < 0 || b >= batch())
    return absl::InvalidArgumentError(
        absl::StrFormat("sequence %d is out of range (the session holds %d)", b, batch()));
  return lengths_[b];
}

int64_t GenerationSession::cache_bytes() const {
  int64_t per_block = 0;
  for (const Cache& c : caches_)
    per_block += c.heads * block_size_ * c.head * static_cast<int64_t>(sizeof(float));
  return blocks_in_use() * per_block;
}

absl::Status GenerationSession::CheckIds(std::span<const int64_t> ids, const char* what) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: token id %d (at %d) is outside the vocabulary [0, %d)", what, ids[i], i, vocab_));
  return absl::OkStatus();
}

absl::Status GenerationSession::CheckFree(int64_t needed, const char* what) const {
  if (needed <= static_cast<int64_t>(free_.size())) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s needs %d more cache blocks of %d slots; %d of the pool's %d are free (compile with a "
      "larger --kv-cache-blocks, or run fewer or shorter sequences)",
      what, needed, block_size_, free_.size(), cache_blocks()));
}

int64_t GenerationSession::TakeBlock() {
  const int64_t b = *free_.begin();
  free_.erase(free_.begin());
  refs_[b] = 1;
  return b;
}

void GenerationSession::Release(std::vector<int64_t>& table) {
  for (int64_t b : table)
    if (--refs_[b] == 0) free_.insert(b);
  table.clear();
}

float* GenerationSession::Row(const Cache& c, int64_t block, int64_t h, int64_t slot) const {
  return c.pool + ((block * c.heads + h) * block_size_ + slot % block_size_) * c.head;
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
  if (positions_ >= 0) in[positions_] = {DType::kI64, {nb, s}, pos.data()};
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
  for (const Cache& c : caches_)
    if ((*out_dims)[c.output] != std::vector<int64_t>{nb, c.heads, s, c.head})
      return KILN_INTERNAL("%s: present output %d is %s, not [%d,%d,%d,%d]", what, c.output,
                           absl::StrJoin((*out_dims)[c.output], "x"), nb, c.heads, s, c.head);
  // On a device the presents stay there (one buffer, 256-byte aligned slices): they only
  // move into the pools.
  std::vector<int64_t> device_at(out_dims->size(), -1);
  int64_t device_bytes = 0;
  if (memory_ == MemoryKind::kCuda)
    for (const Cache& c : caches_) {
      device_at[c.output] = device_bytes;
      device_bytes +=
          (nb * c.heads * s * c.head * static_cast<int64_t>(sizeof(float)) + 255) / 256 * 256;
    }
  if (device_bytes > 0) {
    KILN_ASSIGN_OR_RETURN(run.device_outputs,
                          AllocateCudaBuffer(device_, static_cast<size_t>(device_bytes)));
  }
  std::vector<MutableTensorView> views;
  for (size_t o = 0; o < out_dims->size(); ++o) {
    if (device_at[o] >= 0) {
      std::byte* p = static_cast<std::byte*>(run.device_outputs.get()) + device_at[o];
      views.push_back({plan.outputs[o].dtype, (*out_dims)[o], p, MemoryKind::kCuda});
      run.outputs.emplace_back();
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(plan.outputs[o].dtype, (*out_dims)[o]));
    views.push_back({t.dtype(), t.dims(), t.raw()});
    run.outputs.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(executor_->Run(in, views));
  for (const Cache& c : caches_)
    run.present.push_back(static_cast<const float*>(views[c.output].data));
  return run;
}

void GenerationSession::TakePrefillRow(const PrefillRun& run, int64_t src, int64_t dst, int64_t len,
                                       float* logits_row,
                                       std::vector<runtime::CudaPagedRows>* writes) {
  const int64_t s = run.seq;
  std::vector<int64_t>& table = tables_[dst];
  for (int64_t j = 0; j < BlocksFor(len); ++j) table.push_back(TakeBlock());
  if (memory_ == MemoryKind::kCuda) {
    // All s rows of the bucket go in (one kernel per pool, later): those past `len` land in
    // the sequence's last block past its length or in the scratch block 0, never read
    // unmasked.
    std::vector<int64_t> through(table);
    through.resize(static_cast<size_t>(BlocksFor(s)), 0);
    for (size_t k = 0; k < caches_.size(); ++k) {
      const Cache& c = caches_[k];
      writes->push_back({c.pool, run.present[k] + src * c.heads * s * c.head, c.heads, s,
                         c.head * static_cast<int64_t>(sizeof(float)), block_size_, blocks_,
                         through});
    }
  } else {
    for (size_t k = 0; k < caches_.size(); ++k) {
      const Cache& c = caches_[k];
      const float* present = run.present[k];
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t j = 0; j < len; j += block_size_)
          std::memcpy(Row(c, table[j / block_size_], h, j),
                      present + ((src * c.heads + h) * s + j) * c.head,
                      static_cast<size_t>(std::min(block_size_, len - j) * c.head) * sizeof(float));
    }
  }
  // [nb, 1, vocab] (the plan's default: the prefill scored each sequence's last token
  // only) or [nb, s, vocab] (--prefill-logits all).
  const Tensor& logits = run.outputs[logits_];
  const int64_t row = logits.dims()[1] == 1 ? src : src * s + len - 1;
  std::memcpy(logits_row, logits.data<float>() + row * vocab_, vocab_ * sizeof(float));
  lengths_[dst] = len;
}

absl::StatusOr<Tensor> GenerationSession::Prefill(std::span<const std::vector<int64_t>> prompts) {
  KILN_ASSIGN_OR_RETURN(const PrefillRun run, RunPrefill(prompts, "Prefill"));
  const int64_t nb = static_cast<int64_t>(prompts.size());
  int64_t needed = 0;
  for (const std::vector<int64_t>& p : prompts) needed += BlocksFor(static_cast<int64_t>(p.size()));
  if (needed > cache_blocks())
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Prefill: %d prompts need %d cache blocks of %d slots; the pool has %d (compile with a "
        "larger --kv-cache-blocks, or prefill fewer or shorter prompts)",
        nb, needed, block_size_, cache_blocks()));
  // Every block is free again: hand the pools' pages back, so memory follows the new batch.
  for (std::vector<int64_t>& table : tables_) Release(table);
  if (memory_ == MemoryKind::kHost)
    for (Cache& c : caches_) madvise(c.pool, pool_bytes_, MADV_DONTNEED);
  tables_.assign(nb, {});
  lengths_.assign(nb, 0);
  capacity_ = *std::upper_bound(capacities_.begin(), capacities_.end(), run.longest);
  KILN_ASSIGN_OR_RETURN(Tensor result, Tensor::Create(DType::kF32, {nb, vocab_}));
  std::vector<runtime::CudaPagedRows> writes;  // device pools: every row's, one call
  for (int64_t b = 0; b < nb; ++b)
    TakePrefillRow(run, b, b, static_cast<int64_t>(prompts[b].size()),
                   result.data<float>() + b * vocab_, &writes);
  if (absl::Status st = runtime::CudaWritePagedRows(device_, writes); !st.ok()) {
    // A device error: the new batch is dropped (the old one was already).
    for (std::vector<int64_t>& table : tables_) Release(table);
    lengths_.clear();
    return absl::Status(st.code(), absl::StrCat("Prefill: ", st.message()));
  }
  return result;
}

absl::StatusOr<Tensor> GenerationSession::Restart(int b, std::span<const int64_t> prompt) {
  if (lengths_.empty())
    return absl::FailedPreconditionError("Restart before Prefill: the session holds no sequences");
  KILN_RETURN_IF_ERROR(length(b).status());
  const std::vector<std::vector<int64_t>> one = {
      std::vector<int64_t>(prompt.begin(), prompt.end())};
  KILN_ASSIGN_OR_RETURN(const PrefillRun run, RunPrefill(one, "Restart"));
  // Blocks only sequence b holds come back when it restarts.
  const int64_t reclaimed = std::count_if(tables_[b].begin(), tables_[b].end(),
                                          [&](int64_t blk) { return refs_[blk] == 1; });
  KILN_RETURN_IF_ERROR(CheckFree(BlocksFor(run.longest) - reclaimed, "Restart"));
  Release(tables_[b]);
  if (run.longest >= capacity_)
    capacity_ = *std::upper_bound(capacities_.begin(), capacities_.end(), run.longest);
  KILN_ASSIGN_OR_RETURN(Tensor result, Tensor::Create(DType::kF32, {1, vocab_}));
  std::vector<runtime::CudaPagedRows> writes;
  TakePrefillRow(run, 0, b, run.longest, result.data<float>(), &writes);
  if (absl::Status st = runtime::CudaWritePagedRows(device_, writes); !st.ok()) {
    Release(tables_[b]);  // a device error: sequence b is left empty
    lengths_[b] = 0;
    return absl::Status(st.code(), absl::StrCat("Restart: ", st.message()));
  }
  return result;
}

absl::Status GenerationSession::Fork(int src, int dst) {
  KILN_RETURN_IF_ERROR(length(src).status());
  KILN_RETURN_IF_ERROR(length(dst).status());
  if (src == dst) return absl::OkStatus();
  Release(tables_[dst]);
  tables_[dst] = tables_[src];
  for (int64_t blk : tables_[dst]) ++refs_[blk];
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
  int64_t capacity = capacity_;
  if (longest >= capacity) {
    auto next = std::upper_bound(capacities_.begin(), capacities_.end(), longest);
    if (next == capacities_.end()) {
      const int b =
          static_cast<int>(std::max_element(lengths_.begin(), lengths_.end()) - lengths_.begin());
      return absl::ResourceExhaustedError(absl::StrFormat(
          "Decode: sequence %d holds %d tokens, the plan's maximum context (the largest "
          "--decode-context is %d)",
          b, longest, max_context()));
    }
    capacity = *next;  // a wider mask and block table: nothing moves
  }
  // Each sequence writes slot lengths_[b]: a new block when it starts one, a copy of the
  // block when a fork still shares it.
  // A block that r tables share and w of them write now is copied w times if w < r, else
  // w - 1 (the last writer keeps it).
  int64_t needed = 0;
  std::map<int64_t, int64_t> writers;
  for (int64_t b = 0; b < nb; ++b) {
    const size_t j = static_cast<size_t>(lengths_[b] / block_size_);
    if (j == tables_[b].size())
      ++needed;
    else if (refs_[tables_[b][j]] > 1)
      ++writers[tables_[b][j]];
  }
  for (const auto& [block, w] : writers) needed += w < refs_[block] ? w : w - 1;
  KILN_RETURN_IF_ERROR(CheckFree(needed, "Decode"));
  // Device pools: the copies on write go together after the tables change; if they fail,
  // the changes are undone (each sequence keeps its blocks and tokens).
  std::vector<runtime::CudaCopy> copies;
  struct Change {
    int64_t b, shared;  // shared: the block a copy replaced, or -1 for an appended block
  };
  std::vector<Change> changes;
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<int64_t>& table = tables_[b];
    const size_t j = static_cast<size_t>(lengths_[b] / block_size_);
    if (j == table.size()) {
      table.push_back(TakeBlock());
      changes.push_back({b, -1});
    } else if (refs_[table[j]] > 1) {
      const int64_t shared = table[j];
      table[j] = TakeBlock();
      --refs_[shared];
      changes.push_back({b, shared});
      for (const Cache& c : caches_) {
        const size_t n = static_cast<size_t>(c.heads * block_size_ * c.head) * sizeof(float);
        if (memory_ == MemoryKind::kCuda)
          copies.push_back({Row(c, table[j], 0, 0), Row(c, shared, 0, 0), n});
        else
          std::memcpy(Row(c, table[j], 0, 0), Row(c, shared, 0, 0), n);
      }
    }
  }
  if (!copies.empty())
    if (absl::Status st = runtime::CudaCopies(device_, copies); !st.ok()) {
      for (const Change& ch : changes) {
        std::vector<int64_t>& table = tables_[ch.b];
        const size_t j = static_cast<size_t>(lengths_[ch.b] / block_size_);
        refs_[table[j]] = 0;
        free_.insert(table[j]);
        if (ch.shared < 0) {
          table.pop_back();
        } else {
          table[j] = ch.shared;
          ++refs_[ch.shared];
        }
      }
      return absl::Status(st.code(),
                          absl::StrCat("Decode: copying shared cache blocks: ", st.message()));
    }
  capacity_ = capacity;
  const int64_t width = capacity / block_size_;
  std::vector<int64_t> ids(next_ids.begin(), next_ids.end()), pos(lengths_);
  std::vector<int64_t> mask(static_cast<size_t>(nb * capacity), 0);
  std::vector<int64_t> table(static_cast<size_t>(nb * width), 0);  // free entries: scratch
  for (int64_t b = 0; b < nb; ++b) {
    std::fill_n(mask.begin() + b * capacity, lengths_[b] + 1, 1);
    std::copy(tables_[b].begin(), tables_[b].end(), table.begin() + b * width);
  }
  KILN_ASSIGN_OR_RETURN(Tensor logits, Tensor::Create(DType::kF32, {nb, 1, vocab_}));
  const PlanIo io = IoOf(plan, PlanProgram::kDecode);
  std::vector<TensorView> in(io.inputs.size());
  std::vector<MutableTensorView> out(io.outputs.size());
  in[ids_] = {DType::kI64, {nb, 1}, ids.data()};
  in[mask_] = {DType::kI64, {nb, capacity}, mask.data()};
  if (positions_ >= 0) in[positions_] = {DType::kI64, {nb, 1}, pos.data()};
  in[table_] = {DType::kI64, {nb, width}, table.data()};
  out[logits_] = {DType::kF32, {nb, 1, vocab_}, logits.raw()};
  for (Cache& c : caches_) {
    const std::vector<int64_t> dims = {blocks_, c.heads, block_size_, c.head};
    in[c.input] = {DType::kF32, dims, c.pool, memory_};
    out[c.output] = {DType::kF32, dims, c.pool, memory_};
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].dtype == DType::kUndefined)
      return absl::FailedPreconditionError(
          absl::StrFormat("Decode: the plan's input '%s' is not one a generation session feeds",
                          io.inputs[i].name));
  for (size_t o = 0; o < out.size(); ++o)
    if (out[o].dtype == DType::kUndefined)
      return absl::FailedPreconditionError(
          absl::StrFormat("Decode: the plan's output '%s' is not one a generation session takes",
                          io.outputs[o].name));
  RunOptions options;
  options.program = PlanProgram::kDecode;
  if (absl::Status st = executor_->Run(in, out, nullptr, options); !st.ok())
    return absl::Status(st.code(), absl::StrCat("Decode: ", st.message()));
  for (int64_t& len : lengths_) ++len;
  return Tensor(DType::kF32, {nb, vocab_}, logits.storage());
}

}  // namespace kiln
