// CpuExecutor: Create-time preparation of every bucket, bucket selection (exact, else the
// padded bucket with the fewest padded elements) and the run loop. See cpu_executor.h.
#include "runtime/cpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <tuple>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/attention.h"
#include "kiln/support/status.h"
#include "plan/plan_metadata.h"

namespace kiln::runtime {
namespace {

using SmallInts = absl::InlinedVector<int64_t, 8>;

std::string DimsStr(std::span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d.begin(), d.end(), ","), "]");
}

std::string SigStr(const PlanTensorSig& s) {
  std::vector<std::string> d;
  for (const Dim& x : s.dims) d.push_back(x.ToString());
  return absl::StrCat(std::string(DTypeName(s.dtype)), "[", absl::StrJoin(d, ","), "]");
}

// Rounds up to a multiple of 64; false on overflow.
bool Align64(int64_t v, int64_t* out) {
  if (AddOverflows(v, 63, out)) return false;
  *out &= ~int64_t{63};
  return true;
}

// Copies the leading block of dims `small` between a dense tensor of dims `small` and one
// of dims `big` (same rank, small[d] <= big[d]); to_big: small -> big, else big -> small.
void CopyBlock(const std::byte* src, std::byte* dst, std::span<const int64_t> small,
               std::span<const int64_t> big, size_t elem, bool to_big) {
  const size_t rank = small.size();
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  int64_t rows = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (small[d] == 0) return;
    if (d + 1 < rank) rows *= small[d];
  }
  const size_t row_bytes = static_cast<size_t>(small[rank - 1]) * elem;
  SmallInts big_stride(rank), idx(rank, 0);
  big_stride[rank - 1] = 1;
  for (size_t d = rank - 1; d-- > 0;) big_stride[d] = big_stride[d + 1] * big[d + 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off_big = 0;
    for (size_t d = 0; d + 1 < rank; ++d) off_big += idx[d] * big_stride[d];
    const size_t b = static_cast<size_t>(off_big) * elem, s = static_cast<size_t>(r) * row_bytes;
    if (to_big)
      std::memcpy(dst + b, src + s, row_bytes);
    else
      std::memcpy(dst + s, src + b, row_bytes);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < small[d]) break;
      idx[d] = 0;
    }
  }
}

alignas(64) std::byte kEmptyData[64];

absl::Status InputCountError(const Plan& plan, size_t got) {
  std::vector<std::string> names;
  for (const auto& s : plan.inputs) names.push_back(s.name);
  return absl::InvalidArgumentError(absl::StrFormat(
      "expected %d inputs (%s), got %d", plan.inputs.size(), absl::StrJoin(names, ", "), got));
}

// Returns the arena block to its pool when the run ends, however it ends.
class Lease {
 public:
  Lease(ArenaPool& pool, ArenaPool::Block block) : pool_(pool), block_(std::move(block)) {}
  ~Lease() { pool_.Release(std::move(block_)); }
  std::byte* data() const { return block_.get(); }

 private:
  ArenaPool& pool_;
  ArenaPool::Block block_;
};

}  // namespace

void ArenaPool::FreeBlock::operator()(std::byte* p) const { std::free(p); }

absl::StatusOr<ArenaPool::Block> ArenaPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      Block b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
  }
  int64_t size;
  if (!Align64(std::max<int64_t>(bytes_, 64), &size))
    return absl::ResourceExhaustedError("activation arena size overflows");
  void* p = std::aligned_alloc(64, static_cast<size_t>(size));
  if (p == nullptr)
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot allocate a %d-byte activation arena", size));
  return Block(static_cast<std::byte*>(p));
}

void ArenaPool::Release(Block block) {
  if (!block) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(block));
}

absl::StatusOr<std::unique_ptr<Executor>> CpuExecutor::Create(std::shared_ptr<const Plan> plan,
                                                              const ExecutorOptions& options) {
  std::unique_ptr<CpuExecutor> e(new CpuExecutor(std::move(plan)));
  KILN_RETURN_IF_ERROR(e->Prepare(options));
  return std::unique_ptr<Executor>(std::move(e));
}

absl::Status CpuExecutor::PrepareBucketIo(int b, PreparedBucket& pb) const {
  const Plan& plan = *plan_;
  const PlanBucket& bucket = plan.buckets[b];
  auto bound = [&](const std::string& sym, int64_t* v) {
    auto it = bucket.bindings.find(sym);
    if (it == bucket.bindings.end()) return false;
    *v = it->second;
    return true;
  };
  for (const std::string& sym : symbols_) {
    int64_t v;
    if (!bound(sym, &v))
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d does not bind symbol '%s' of the graph inputs", b, sym));
    pb.symbol_values.push_back(v);
  }
  auto bytes_of = [&](const std::vector<int64_t>& dims, DType dt, const std::string& what,
                      int64_t* out) -> absl::Status {
    absl::StatusOr<int64_t> n = CheckedNumElements(dims);
    if (!n.ok() || MulOverflows(*n, static_cast<int64_t>(DTypeSize(dt)), out))
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d: %s %s is too large", b, what, DimsStr(dims)));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < plan.inputs[i].dims.size(); ++d) {
      const int s = input_dim_symbol_[i][d];
      dims.push_back(s < 0 ? plan.inputs[i].dims[d].value() : pb.symbol_values[s]);
    }
    int64_t bytes = 0;
    KILN_RETURN_IF_ERROR(
        bytes_of(dims, plan.inputs[i].dtype, "input '" + plan.inputs[i].name + "'", &bytes));
    pb.input_dims.push_back(std::move(dims));
    pb.input_bytes.push_back(bytes);
  }
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    const PlanTensorSig& sig = plan.outputs[o];
    std::vector<int64_t> dims(sig.dims.size(), -1);
    bool all = true;
    for (size_t d = 0; d < sig.dims.size(); ++d) {
      if (sig.dims[d].is_known())
        dims[d] = sig.dims[d].value();
      else if (!bound(sig.dims[d].symbol(), &dims[d]))
        all = false;
    }
    if (!all) {
      // A dim the bindings do not give (an expression over symbols): take it from the
      // output's buffer in this bucket, which agrees with every dim that is known.
      bool found = false;
      for (const PlanBuffer& buf : bucket.buffers) {
        if (buf.kind != PlanBufferKind::kOutput || buf.binding != static_cast<int32_t>(o) ||
            buf.dims.size() != dims.size())
          continue;
        bool agree = true;
        for (size_t d = 0; d < dims.size(); ++d) agree &= dims[d] < 0 || dims[d] == buf.dims[d];
        if (agree) {
          dims = buf.dims;
          found = true;
          break;
        }
      }
      if (!found)
        return absl::InvalidArgumentError(
            absl::StrFormat("bucket %d: the dims of output '%s' %s are not bound by the bucket", b,
                            sig.name, SigStr(sig)));
    }
    int64_t bytes = 0;
    KILN_RETURN_IF_ERROR(bytes_of(dims, sig.dtype, "output '" + sig.name + "'", &bytes));
    pb.output_dims.push_back(std::move(dims));
    pb.output_bytes.push_back(bytes);
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::Prepare(const ExecutorOptions& options) {
  const Plan& plan = *plan_;
  if (options.num_threads < 0 || options.num_threads > cpu::kMaxThreads)
    return absl::InvalidArgumentError(absl::StrFormat(
        "ExecutorOptions::num_threads is %d; use 1..%d, or 0 for one per core",
        options.num_threads, cpu::kMaxThreads));
  ctx_.num_threads = options.num_threads > 0 ? options.num_threads : cpu::DefaultNumThreads();
  KILN_RETURN_IF_ERROR(plan_internal::ValidatePlan(plan, plan.weights.size()));
  if (plan.buckets.empty()) return absl::InvalidArgumentError("the plan has no buckets");

  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    input_dim_symbol_.emplace_back();
    for (size_t d = 0; d < plan.inputs[i].dims.size(); ++d) {
      const Dim& dim = plan.inputs[i].dims[d];
      int s = -1;
      if (dim.is_symbol()) {
        auto it = std::find(symbols_.begin(), symbols_.end(), dim.symbol());
        s = static_cast<int>(it - symbols_.begin());
        if (it == symbols_.end()) {
          symbols_.push_back(dim.symbol());
          first_use_.push_back({static_cast<int>(i), static_cast<int>(d)});
          paddable_.push_back(std::count(plan.paddable_symbols.begin(), plan.paddable_symbols.end(),
                                         dim.symbol()) > 0);
        }
      }
      input_dim_symbol_.back().push_back(s);
    }
  }
  for (const PlanTensorSig& sig : plan.outputs) {
    output_dim_symbol_.emplace_back();
    for (const Dim& dim : sig.dims) {
      auto it = std::find(symbols_.begin(), symbols_.end(), dim.symbol());
      output_dim_symbol_.back().push_back(
          dim.is_symbol() && it != symbols_.end() ? static_cast<int>(it - symbols_.begin()) : -1);
    }
  }
  const bool may_pad = std::count(paddable_.begin(), paddable_.end(), true) > 0;

  FindReleasableWeightPages();
  buckets_.resize(plan.buckets.size());
  int64_t pool_bytes = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    PreparedBucket& pb = buckets_[b];
    const PlanBucket& bucket = plan.buckets[b];
    KILN_RETURN_IF_ERROR(PrepareBucketIo(static_cast<int>(b), pb));
    pb.arena_bytes = bucket.arena_bytes;
    for (size_t s = 0; s < bucket.steps.size(); ++s) {
      KILN_ASSIGN_OR_RETURN(
          PreparedStep step,
          PrepareStep(plan, static_cast<int>(b), static_cast<int>(s), pb, ctx_, linears_));
      if (step.kernel == KernelId::kLinear) {  // packed now: drop its plain pages
        const PlanBuffer& w = bucket.buffers[bucket.steps[s].inputs[1]];
        ReleaseWeightPages(w.offset, w.bytes);
      }
      pb.steps.push_back(std::move(step));
    }
    // Every graph output with bytes must be written by some step.
    std::vector<bool> written(plan.outputs.size(), false);
    for (const PlanStep& step : bucket.steps)
      for (int32_t idx : step.outputs)
        if (bucket.buffers[idx].kind == PlanBufferKind::kOutput)
          written[bucket.buffers[idx].binding] = true;
    for (size_t o = 0; o < plan.outputs.size(); ++o)
      if (!written[o] && pb.output_bytes[o] > 0)
        return absl::InvalidArgumentError(absl::StrFormat(
            "bucket %d: no step writes graph output '%s'", b, plan.outputs[o].name));
    // Arena, then (when padding is possible) one staging copy per graph input and output.
    int64_t off;
    bool ok = Align64(pb.arena_bytes, &off);
    if (may_pad) {
      for (int64_t bytes : pb.input_bytes) {
        pb.staging_in.push_back(off);
        int64_t a;
        ok = ok && Align64(bytes, &a) && !AddOverflows(off, a, &off);
      }
      for (int64_t bytes : pb.output_bytes) {
        pb.staging_out.push_back(off);
        int64_t a;
        ok = ok && Align64(bytes, &a) && !AddOverflows(off, a, &off);
      }
    }
    if (!ok)
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d: arena and staging sizes overflow", b));
    pb.total_bytes = off;
    pool_bytes = std::max(pool_bytes, off);
  }
  pool_.set_bytes(pool_bytes);
  WarmUpAttention();
  // Pages a later bucket's new layout faulted back in.
  ReleaseWeightPages(0, static_cast<int64_t>(plan.weights.size()));
  return absl::OkStatus();
}

// Linear weights live twice after Create: in the plan (the file mapping) and packed in
// oneDNN's layout. Steps only read the packed copy (the plain one is read again only if a
// new M needs another layout), so the resident pages of weights that nothing else reads are
// returned to the kernel as soon as each is packed: MADV_DONTNEED on a private read-only
// file mapping drops them and a later read faults them back in from the file. Without
// this, BERT-base's peak RSS holds its Linear weights twice. Owned (non-file) weights are
// never touched: there DONTNEED would zero them.
void CpuExecutor::FindReleasableWeightPages() {
  const Plan& plan = *plan_;
  const long page = ::sysconf(_SC_PAGESIZE);
  const uintptr_t base = reinterpret_cast<uintptr_t>(plan.weights.data());
  if (!plan.weights.file_mapped() || page <= 0 || base % page != 0) return;
  page_bytes_ = page;
  // 0 unused, 1 Linear weight only, 2 read by another step (2 wins in either order).
  releasable_.assign((plan.weights.size() + page - 1) / page, 0);
  for (const PlanBucket& bucket : plan.buckets) {
    for (const PlanStep& step : bucket.steps) {
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (step.inputs[i] < 0 || step.inputs[i] >= static_cast<int>(bucket.buffers.size()))
          continue;
        const PlanBuffer& buf = bucket.buffers[step.inputs[i]];
        if (buf.kind != PlanBufferKind::kWeight || buf.bytes <= 0) continue;
        if (step.kernel == "linear" && i == 1) {
          // Only pages wholly inside the weight: the edges may hold a neighbour.
          for (int64_t p = (buf.offset + page - 1) / page; p < (buf.offset + buf.bytes) / page; ++p)
            if (releasable_[p] == 0) releasable_[p] = 1;
        } else {
          for (int64_t p = buf.offset / page; p <= (buf.offset + buf.bytes - 1) / page; ++p)
            releasable_[p] = 2;
        }
      }
    }
  }
}

void CpuExecutor::ReleaseWeightPages(int64_t offset, int64_t bytes) const {
  if (releasable_.empty() || bytes <= 0) return;
  const uintptr_t base = reinterpret_cast<uintptr_t>(plan_->weights.data());
  const size_t end = std::min<size_t>(releasable_.size(), (offset + bytes) / page_bytes_ + 1);
  for (size_t p = offset / page_bytes_; p < end;) {
    if (releasable_[p] != 1) { ++p; continue; }
    size_t q = p;
    while (q < end && releasable_[q] == 1) ++q;
    // Advisory: a failure only means the pages stay resident.
    ::madvise(reinterpret_cast<void*>(base + p * page_bytes_), (q - p) * page_bytes_,
              MADV_DONTNEED);
    p = q;
  }
}

void CpuExecutor::WarmUpAttention() const {
  // MultiHeadAttention creates (and caches process-wide) oneDNN primitives for its shape on
  // first use, ~20 ms for S = 128: pay that here, once per shape, not in the first Run.
  // Zero qkv without a mask; results are discarded. Shapes over 64 MiB of qkv are skipped.
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> done;
  cpu::ScopedOmpThreads omp_threads(ctx_.threads());
  for (const PreparedBucket& pb : buckets_) {
    for (const PreparedStep& st : pb.steps) {
      if (st.kernel != KernelId::kAttention) continue;
      if (!done.insert({st.batch, st.seq, st.heads, st.head_size}).second) continue;
      const int64_t y_elems = st.batch * st.seq * st.heads * st.head_size;
      if (y_elems == 0 || y_elems > (int64_t{16} << 20) / 3) continue;
      std::vector<float> qkv(static_cast<size_t>(3 * y_elems)), y(static_cast<size_t>(y_elems));
      cpu::MultiHeadAttentionArgs a;
      a.qkv = qkv.data();
      a.batch = st.batch;
      a.seq = st.seq;
      a.num_heads = st.heads;
      a.head_size = st.head_size;
      a.scale = st.scale;
      a.causal = st.causal;
      a.y = y.data();
      (void)cpu::MultiHeadAttention(ctx_, a);  // a failure here shows again in Run
    }
  }
}

absl::Status CpuExecutor::BindInput(int i, std::span<const int64_t> dims, int64_t* values) const {
  const PlanTensorSig& sig = plan_->inputs[i];
  if (dims.size() != sig.dims.size())
    return absl::InvalidArgumentError(
        absl::StrFormat("input '%s' has rank %d %s; the plan expects rank %d %s", sig.name,
                        dims.size(), DimsStr(dims), sig.dims.size(), SigStr(sig)));
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t v = dims[d];
    if (v < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s' dim %d is negative (%d)", sig.name, d, v));
    const int s = input_dim_symbol_[i][d];
    if (s < 0) {
      if (v != sig.dims[d].value())
        return absl::InvalidArgumentError(
            absl::StrFormat("input '%s' dim %d is %d; the plan requires %d (%s)", sig.name, d, v,
                            sig.dims[d].value(), SigStr(sig)));
    } else if (values[s] < 0) {
      values[s] = v;
    } else if (values[s] != v) {
      const SymbolUse& u = first_use_[s];
      return absl::InvalidArgumentError(absl::StrFormat(
          "input '%s' dim %d (%s) is %d but input '%s' dim %d sets %s = %d", sig.name, d,
          symbols_[s], v, plan_->inputs[u.input].name, u.dim, symbols_[s], values[s]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuExecutor::Selection> CpuExecutor::Select(const int64_t* values,
                                                           const int64_t* elems) const {
  const size_t ns = symbols_.size();
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (std::equal(values, values + ns, buckets_[b].symbol_values.begin()))
      return Selection{static_cast<int>(b), false};
  int best = -1;
  int64_t best_cost = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const PreparedBucket& pb = buckets_[b];
    bool fits = true;
    for (size_t s = 0; s < ns && fits; ++s)
      fits = paddable_[s] ? values[s] <= pb.symbol_values[s] : values[s] == pb.symbol_values[s];
    if (!fits) continue;
    int64_t cost = 0;
    for (size_t i = 0; i < pb.input_bytes.size(); ++i)
      cost +=
          pb.input_bytes[i] / std::max<int64_t>(1, DTypeSize(plan_->inputs[i].dtype)) - elems[i];
    if (best < 0 || cost < best_cost) {
      best = static_cast<int>(b);
      best_cost = cost;
    }
  }
  if (best < 0) return NoBucketError(values);
  return Selection{best, true};
}

absl::Status CpuExecutor::NoBucketError(const int64_t* values) const {
  for (size_t s = 0; s < symbols_.size(); ++s) {
    std::set<int64_t> allowed;
    for (const PreparedBucket& pb : buckets_) allowed.insert(pb.symbol_values[s]);
    const SymbolUse& u = first_use_[s];
    const std::string where = absl::StrFormat(
        "input '%s' dim %d (%s) is %d", plan_->inputs[u.input].name, u.dim, symbols_[s], values[s]);
    if (paddable_[s] && values[s] > *allowed.rbegin())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s; the plan allows %s <= %d (buckets %s; smaller values are padded)",
                          where, symbols_[s], *allowed.rbegin(), absl::StrJoin(allowed, ", ")));
    if (!paddable_[s] && allowed.count(values[s]) == 0)
      return absl::InvalidArgumentError(absl::StrFormat("%s; the plan allows %s in {%s}", where,
                                                        symbols_[s], absl::StrJoin(allowed, ", ")));
  }
  auto render = [&](const int64_t* v) {
    std::vector<std::string> parts;
    for (size_t s = 0; s < symbols_.size(); ++s)
      parts.push_back(absl::StrCat(symbols_[s], "=", v[s]));
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  };
  std::vector<std::string> buckets;
  for (const PreparedBucket& pb : buckets_) buckets.push_back(render(pb.symbol_values.data()));
  return absl::InvalidArgumentError(absl::StrFormat("no bucket fits the inputs %s; buckets: %s",
                                                    render(values), absl::StrJoin(buckets, " ")));
}

int64_t CpuExecutor::OutputDim(const Selection& sel, const int64_t* values, int o, int d) const {
  const int s = output_dim_symbol_[o][d];
  if (sel.padded && s >= 0 && paddable_[s]) return values[s];
  return buckets_[sel.bucket].output_dims[o][d];
}

absl::StatusOr<std::vector<std::vector<int64_t>>> CpuExecutor::OutputDims(
    std::span<const std::vector<int64_t>> input_dims) const {
  const Plan& plan = *plan_;
  if (input_dims.size() != plan.inputs.size()) return InputCountError(plan, input_dims.size());
  SmallInts values(symbols_.size(), -1), elems(plan.inputs.size());
  for (size_t i = 0; i < input_dims.size(); ++i) {
    KILN_RETURN_IF_ERROR(BindInput(static_cast<int>(i), input_dims[i], values.data()));
    absl::StatusOr<int64_t> n = CheckedNumElements(input_dims[i]);
    if (!n.ok())
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s': %s", plan.inputs[i].name, n.status().message()));
    elems[i] = *n;
  }
  KILN_ASSIGN_OR_RETURN(Selection sel, Select(values.data(), elems.data()));
  std::vector<std::vector<int64_t>> out(plan.outputs.size());
  for (size_t o = 0; o < out.size(); ++o)
    for (size_t d = 0; d < buckets_[sel.bucket].output_dims[o].size(); ++d)
      out[o].push_back(OutputDim(sel, values.data(), static_cast<int>(o), static_cast<int>(d)));
  return out;
}

absl::Status CpuExecutor::Run(std::span<const TensorView> inputs,
                              std::span<const MutableTensorView> outputs, RunStats* stats) const {
  const auto t0 = std::chrono::steady_clock::now();
  const Plan& plan = *plan_;
  const size_t nin = plan.inputs.size(), nout = plan.outputs.size();
  if (inputs.size() != nin) return InputCountError(plan, inputs.size());
  SmallInts values(symbols_.size(), -1), elems(nin);
  for (size_t i = 0; i < nin; ++i) {
    const PlanTensorSig& sig = plan.inputs[i];
    if (inputs[i].dtype != sig.dtype)
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s' has dtype %s; the plan expects %s", sig.name,
                          std::string(DTypeName(inputs[i].dtype)), SigStr(sig)));
    KILN_RETURN_IF_ERROR(BindInput(static_cast<int>(i), inputs[i].dims, values.data()));
    absl::StatusOr<int64_t> n = CheckedNumElements(inputs[i].dims);
    if (!n.ok())
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s': %s", sig.name, n.status().message()));
    elems[i] = *n;
    if (*n > 0 && inputs[i].data == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("input '%s' has no data", sig.name));
  }
  KILN_ASSIGN_OR_RETURN(const Selection sel, Select(values.data(), elems.data()));
  const PreparedBucket& pb = buckets_[sel.bucket];
  if (outputs.size() != nout)
    return absl::InvalidArgumentError(
        absl::StrFormat("expected %d outputs, got %d", nout, outputs.size()));
  for (size_t o = 0; o < nout; ++o) {
    const PlanTensorSig& sig = plan.outputs[o];
    const MutableTensorView& v = outputs[o];
    if (v.dtype != sig.dtype)
      return absl::InvalidArgumentError(
          absl::StrFormat("output '%s' has dtype %s; the plan writes %s", sig.name,
                          std::string(DTypeName(v.dtype)), std::string(DTypeName(sig.dtype))));
    bool same = v.dims.size() == pb.output_dims[o].size();
    int64_t n = 1;
    for (size_t d = 0; same && d < v.dims.size(); ++d) {
      same = v.dims[d] == OutputDim(sel, values.data(), static_cast<int>(o), static_cast<int>(d));
      n *= v.dims[d];
    }
    if (!same) {
      std::vector<int64_t> want;
      for (size_t d = 0; d < pb.output_dims[o].size(); ++d)
        want.push_back(OutputDim(sel, values.data(), static_cast<int>(o), static_cast<int>(d)));
      return absl::InvalidArgumentError(
          absl::StrFormat("output '%s' has dims %s; these inputs produce %s", sig.name,
                          DimsStr(v.dims), DimsStr(want)));
    }
    if (n > 0 && v.data == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("output '%s' has no data", sig.name));
  }

  KILN_ASSIGN_OR_RETURN(ArenaPool::Block block, pool_.Acquire());
  Lease lease(pool_, std::move(block));
  std::byte* const arena = lease.data();
  absl::InlinedVector<std::byte*, 16> bases(3 + nin + nout, nullptr);
  bases[kArenaSlot] = arena;
  bases[kWeightSlot] =
      const_cast<std::byte*>(reinterpret_cast<const std::byte*>(plan.weights.data()));
  if (bases[kWeightSlot] == nullptr) bases[kWeightSlot] = kEmptyData;
  auto caller_in = [&](size_t i) {
    return inputs[i].data ? const_cast<std::byte*>(static_cast<const std::byte*>(inputs[i].data))
                          : kEmptyData;
  };
  auto caller_out = [&](size_t o) {
    return outputs[o].data ? static_cast<std::byte*>(outputs[o].data) : kEmptyData;
  };
  // Padded runs stage the inputs and outputs whose dims differ from the bucket's.
  absl::InlinedVector<bool, 8> staged_out(nout, false);
  for (size_t i = 0; i < nin; ++i) {
    const uint32_t slot = BaseSlotOfInput(static_cast<int>(i));
    if (!sel.padded || std::equal(inputs[i].dims.begin(), inputs[i].dims.end(),
                                  pb.input_dims[i].begin(), pb.input_dims[i].end())) {
      bases[slot] = caller_in(i);
      continue;
    }
    std::byte* staging = arena + pb.staging_in[i];
    std::memset(staging, 0, static_cast<size_t>(pb.input_bytes[i]));
    CopyBlock(caller_in(i), staging, inputs[i].dims, pb.input_dims[i],
              DTypeSize(plan.inputs[i].dtype), /*to_big=*/true);
    bases[slot] = staging;
  }
  for (size_t o = 0; o < nout; ++o) {
    const uint32_t slot = BaseSlotOfOutput(static_cast<int>(nin), static_cast<int>(o));
    staged_out[o] = sel.padded && !std::equal(outputs[o].dims.begin(), outputs[o].dims.end(),
                                              pb.output_dims[o].begin(), pb.output_dims[o].end());
    bases[slot] = staged_out[o] ? arena + pb.staging_out[o] : caller_out(o);
  }

  const bool trace = stats != nullptr && stats->collect_trace;
  if (trace) {
    stats->trace.clear();
    stats->trace.reserve(pb.steps.size());
  }
  {
    cpu::ScopedOmpThreads omp_threads(ctx_.threads());
    for (size_t s = 0; s < pb.steps.size(); ++s) {
      const PreparedStep& step = pb.steps[s];
      const auto start = trace ? std::chrono::steady_clock::now() : t0;
      absl::Status st = RunStep(step, ctx_, bases.data());
      if (!st.ok())
        return absl::Status(
            st.code(), absl::StrCat(StepWhere(sel.bucket, static_cast<int>(s), *step.source), ": ",
                                    st.message()));
      if (trace) {
        const auto end = std::chrono::steady_clock::now();
        TraceEvent ev;
        ev.kernel = step.source->kernel;
        ev.provenance = step.source->provenance;
        ev.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start - t0).count();
        ev.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
        stats->trace.push_back(std::move(ev));
      }
    }
  }
  for (size_t o = 0; o < nout; ++o) {
    if (!staged_out[o]) continue;
    CopyBlock(arena + pb.staging_out[o], caller_out(o), outputs[o].dims, pb.output_dims[o],
              DTypeSize(plan.outputs[o].dtype), /*to_big=*/false);
  }
  if (stats != nullptr) {
    stats->bucket = sel.bucket;
    stats->padded = sel.padded;
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
