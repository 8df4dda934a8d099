// PlanSession: signature and symbol binding, per-bucket I/O, bucket choice and staging
// layout (plan_session.h).
#include "runtime/plan_session.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"

namespace kiln::runtime {
namespace {

using SmallInts = absl::InlinedVector<int64_t, 8>;

std::string SigStr(const PlanTensorSig& s) {
  std::vector<std::string> d;
  for (const Dim& x : s.dims) d.push_back(x.ToString());
  return absl::StrCat(std::string(DTypeName(s.dtype)), "[", absl::StrJoin(d, ","), "]");
}

absl::Status InputCountError(const std::vector<PlanTensorSig>& inputs, size_t got) {
  std::vector<std::string> names;
  for (const auto& s : inputs) names.push_back(s.name);
  return absl::InvalidArgumentError(absl::StrFormat(
      "expected %d inputs (%s), got %d", inputs.size(), absl::StrJoin(names, ", "), got));
}

std::string_view MemoryName(MemoryKind m) { return m == MemoryKind::kCuda ? "cuda" : "host"; }

bool Allowed(std::span<const MemoryKind> memory, MemoryKind m) {
  return std::find(memory.begin(), memory.end(), m) != memory.end();
}

absl::Status MemoryError(const std::string& what, MemoryKind m,
                         std::span<const MemoryKind> memory) {
  std::vector<std::string> names;
  for (MemoryKind k : memory) names.emplace_back(MemoryName(k));
  return absl::InvalidArgumentError(
      absl::StrFormat("%s is in %s memory; this executor takes %s memory", what,
                      std::string(MemoryName(m)), absl::StrJoin(names, " or ")));
}

}  // namespace

std::string DimsStr(std::span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d.begin(), d.end(), ","), "]");
}

bool AlignUp(int64_t v, int64_t align, int64_t* out) {
  if (AddOverflows(v, align - 1, out)) return false;
  *out &= ~(align - 1);
  return true;
}

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

absl::StatusOr<PlanSession> PlanSession::Create(const Plan& plan, const SessionOptions& options) {
  if (plan.buckets.empty()) return absl::InvalidArgumentError("the plan has no buckets");
  PlanSession s(plan);
  s.sigs_.resize(1 + plan.signatures.size());
  KILN_RETURN_IF_ERROR(
      s.ReadSignature({plan.inputs, plan.outputs, plan.paddable_symbols}, s.sigs_[0]));
  for (size_t i = 0; i < plan.signatures.size(); ++i) {
    const PlanSignature& ps = plan.signatures[i];
    KILN_RETURN_IF_ERROR(
        s.ReadSignature({ps.inputs, ps.outputs, ps.paddable_symbols}, s.sigs_[1 + i]));
  }
  s.buckets_.resize(plan.buckets.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b)
    KILN_RETURN_IF_ERROR(s.ReadBucketIo(static_cast<int>(b), s.buckets_[b]));
  KILN_RETURN_IF_ERROR(s.LayoutStaging(options));
  return s;
}

const PlanSession::Signature& PlanSession::SigOf(PlanProgram program) const {
  for (size_t i = 0; i < plan_->signatures.size(); ++i)
    if (plan_->signatures[i].program == program) return sigs_[1 + i];
  return sigs_[0];
}

absl::Status PlanSession::ReadSignature(const PlanIo& io, Signature& sig) {
  sig.inputs = &io.inputs;
  sig.outputs = &io.outputs;
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    sig.input_dim_symbol.emplace_back();
    for (size_t d = 0; d < io.inputs[i].dims.size(); ++d) {
      const Dim& dim = io.inputs[i].dims[d];
      int s = -1;
      if (dim.is_symbol()) {
        auto it = std::find(sig.symbols.begin(), sig.symbols.end(), dim.symbol());
        s = static_cast<int>(it - sig.symbols.begin());
        if (it == sig.symbols.end()) {
          sig.symbols.push_back(dim.symbol());
          sig.first_use.push_back({static_cast<int>(i), static_cast<int>(d)});
          sig.paddable.push_back(
              std::count(io.paddable_symbols.begin(), io.paddable_symbols.end(), dim.symbol()) > 0);
        }
      }
      sig.input_dim_symbol.back().push_back(s);
    }
  }
  for (const PlanTensorSig& out : io.outputs) {
    sig.output_dim_symbol.emplace_back();
    for (const Dim& dim : out.dims) {
      auto it = std::find(sig.symbols.begin(), sig.symbols.end(), dim.symbol());
      sig.output_dim_symbol.back().push_back(dim.is_symbol() && it != sig.symbols.end()
                                                 ? static_cast<int>(it - sig.symbols.begin())
                                                 : -1);
    }
  }
  sig.may_pad = std::count(sig.paddable.begin(), sig.paddable.end(), true) > 0;
  may_pad_ |= sig.may_pad;
  return absl::OkStatus();
}

absl::Status PlanSession::ReadBucketIo(int b, BucketIo& io) const {
  const Plan& plan = *plan_;
  const PlanBucket& bucket = plan.buckets[b];
  const Signature& sig = SigOf(bucket.program);
  const std::vector<PlanTensorSig>& inputs = *sig.inputs;
  const std::vector<PlanTensorSig>& outputs = *sig.outputs;
  auto bound = [&](const std::string& sym, int64_t* v) {
    auto it = bucket.bindings.find(sym);
    if (it == bucket.bindings.end()) return false;
    *v = it->second;
    return true;
  };
  for (const std::string& sym : sig.symbols) {
    int64_t v;
    if (!bound(sym, &v))
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d does not bind symbol '%s' of the graph inputs", b, sym));
    io.symbol_values.push_back(v);
  }
  auto bytes_of = [&](const std::vector<int64_t>& dims, DType dt, const std::string& what,
                      int64_t* out) -> absl::Status {
    absl::StatusOr<int64_t> n = CheckedNumElements(dims);
    if (!n.ok() || MulOverflows(*n, static_cast<int64_t>(DTypeSize(dt)), out))
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d: %s %s is too large", b, what, DimsStr(dims)));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < inputs[i].dims.size(); ++d) {
      const int s = sig.input_dim_symbol[i][d];
      dims.push_back(s < 0 ? inputs[i].dims[d].value() : io.symbol_values[s]);
    }
    int64_t bytes = 0;
    KILN_RETURN_IF_ERROR(bytes_of(dims, inputs[i].dtype, "input '" + inputs[i].name + "'", &bytes));
    io.input_dims.push_back(std::move(dims));
    io.input_bytes.push_back(bytes);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const PlanTensorSig& out = outputs[o];
    std::vector<int64_t> dims(out.dims.size(), -1);
    bool all = true;
    for (size_t d = 0; d < out.dims.size(); ++d) {
      if (out.dims[d].is_known())
        dims[d] = out.dims[d].value();
      else if (!bound(out.dims[d].symbol(), &dims[d]))
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
                            out.name, SigStr(out)));
    }
    int64_t bytes = 0;
    KILN_RETURN_IF_ERROR(bytes_of(dims, out.dtype, "output '" + out.name + "'", &bytes));
    io.output_dims.push_back(std::move(dims));
    io.output_bytes.push_back(bytes);
  }
  io.arena_bytes = bucket.arena_bytes;
  return absl::OkStatus();
}

absl::Status PlanSession::LayoutStaging(const SessionOptions& options) {
  stage_always_ = options.stage_always;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketIo& io = buckets_[b];
    const bool stage = options.stage_always || SigOf(plan_->buckets[b].program).may_pad;
    int64_t off;
    bool ok = AlignUp(io.arena_bytes, options.align, &off);
    if (stage) {
      std::vector<bool> direct_in(io.input_bytes.size()), direct_out(io.output_bytes.size());
      if (options.stage_always)
        for (const PlanInPlace& ip : plan_->buckets[b].in_place)
          if (ip.input >= 0 && ip.output >= 0 && static_cast<size_t>(ip.input) < direct_in.size() &&
              static_cast<size_t>(ip.output) < direct_out.size()) {
            io.direct.push_back(ip);
            direct_in[ip.input] = direct_out[ip.output] = true;
          }
      for (size_t i = 0; i < io.input_bytes.size(); ++i) {
        io.staging_in.push_back(direct_in[i] ? BucketIo::kDirect : off);
        int64_t a;
        if (!direct_in[i])
          ok = ok && AlignUp(io.input_bytes[i], options.align, &a) && !AddOverflows(off, a, &off);
      }
      for (size_t o = 0; o < io.output_bytes.size(); ++o) {
        io.staging_out.push_back(direct_out[o] ? BucketIo::kDirect : off);
        int64_t a;
        if (!direct_out[o])
          ok = ok && AlignUp(io.output_bytes[o], options.align, &a) && !AddOverflows(off, a, &off);
      }
    }
    if (!ok)
      return absl::InvalidArgumentError(
          absl::StrFormat("bucket %d: arena and staging sizes overflow", b));
    io.total_bytes = off;
    max_total_bytes_ = std::max(max_total_bytes_, off);
  }
  return absl::OkStatus();
}

absl::Status PlanSession::BindInput(const Signature& sig, int i, std::span<const int64_t> dims,
                                    int64_t* values) const {
  const PlanTensorSig& in = (*sig.inputs)[i];
  if (dims.size() != in.dims.size())
    return absl::InvalidArgumentError(
        absl::StrFormat("input '%s' has rank %d %s; the plan expects rank %d %s", in.name,
                        dims.size(), DimsStr(dims), in.dims.size(), SigStr(in)));
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t v = dims[d];
    if (v < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s' dim %d is negative (%d)", in.name, d, v));
    const int s = sig.input_dim_symbol[i][d];
    if (s < 0) {
      if (v != in.dims[d].value())
        return absl::InvalidArgumentError(
            absl::StrFormat("input '%s' dim %d is %d; the plan requires %d (%s)", in.name, d, v,
                            in.dims[d].value(), SigStr(in)));
    } else if (values[s] < 0) {
      values[s] = v;
    } else if (values[s] != v) {
      const SymbolUse& u = sig.first_use[s];
      return absl::InvalidArgumentError(absl::StrFormat(
          "input '%s' dim %d (%s) is %d but input '%s' dim %d sets %s = %d", in.name, d,
          sig.symbols[s], v, (*sig.inputs)[u.input].name, u.dim, sig.symbols[s], values[s]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RunBinding> PlanSession::Select(const Signature& sig, const int64_t* values,
                                               const int64_t* elems, PlanProgram program) const {
  const size_t ns = sig.symbols.size();
  const std::vector<PlanBucket>& pb = plan_->buckets;
  RunBinding r;
  r.values.assign(values, values + ns);
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (pb[b].program == program &&
        std::equal(values, values + ns, buckets_[b].symbol_values.begin())) {
      r.bucket = static_cast<int>(b);
      return r;
    }
  int best = -1;
  int64_t best_cost = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketIo& io = buckets_[b];
    bool fits = pb[b].program == program;
    for (size_t s = 0; s < ns && fits; ++s)
      fits = sig.paddable[s] ? values[s] <= io.symbol_values[s] : values[s] == io.symbol_values[s];
    if (!fits) continue;
    int64_t cost = 0;
    for (size_t i = 0; i < io.input_bytes.size(); ++i)
      cost +=
          io.input_bytes[i] / std::max<int64_t>(1, DTypeSize((*sig.inputs)[i].dtype)) - elems[i];
    if (best < 0 || cost < best_cost) {
      best = static_cast<int>(b);
      best_cost = cost;
    }
  }
  if (best < 0) return NoBucketError(sig, values, program);
  r.bucket = best;
  r.padded = true;
  return r;
}

absl::Status PlanSession::NoBucketError(const Signature& sig, const int64_t* values,
                                        PlanProgram program) const {
  std::vector<const BucketIo*> candidates;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (plan_->buckets[b].program == program) candidates.push_back(&buckets_[b]);
  if (candidates.empty())
    return absl::InvalidArgumentError(
        absl::StrFormat("the plan has no %s program (%s)", std::string(PlanProgramName(program)),
                        program == PlanProgram::kPacked
                            ? "compile an encoder with --profile tokens=... to get one"
                            : "compile a KV-cache decoder with --decode-context to get one"));
  const std::string in_program =
      program == PlanProgram::kModel
          ? ""
          : absl::StrCat(" (", std::string(PlanProgramName(program)), " program)");
  for (size_t s = 0; s < sig.symbols.size(); ++s) {
    std::set<int64_t> allowed;
    for (const BucketIo* io : candidates) allowed.insert(io->symbol_values[s]);
    const SymbolUse& u = sig.first_use[s];
    const std::string where =
        absl::StrFormat("input '%s' dim %d (%s) is %d%s", (*sig.inputs)[u.input].name, u.dim,
                        sig.symbols[s], values[s], in_program);
    if (sig.paddable[s] && values[s] > *allowed.rbegin())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s; the plan allows %s <= %d (buckets %s; smaller values are padded)",
                          where, sig.symbols[s], *allowed.rbegin(), absl::StrJoin(allowed, ", ")));
    if (!sig.paddable[s] && allowed.count(values[s]) == 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s; the plan allows %s in {%s}", where, sig.symbols[s], absl::StrJoin(allowed, ", ")));
  }
  auto render = [&](const int64_t* v) {
    std::vector<std::string> parts;
    for (size_t s = 0; s < sig.symbols.size(); ++s)
      parts.push_back(absl::StrCat(sig.symbols[s], "=", v[s]));
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  };
  std::vector<std::string> buckets;
  for (const BucketIo* io : candidates) buckets.push_back(render(io->symbol_values.data()));
  return absl::InvalidArgumentError(absl::StrFormat("no bucket%s fits the inputs %s; buckets: %s",
                                                    in_program, render(values),
                                                    absl::StrJoin(buckets, " ")));
}

int64_t PlanSession::OutputDim(const RunBinding& r, int o, int d) const {
  const Signature& sig = SigOf(plan_->buckets[r.bucket].program);
  const int s = sig.output_dim_symbol[o][d];
  if (r.padded && s >= 0 && sig.paddable[s]) return r.values[s];
  return buckets_[r.bucket].output_dims[o][d];
}

absl::StatusOr<std::vector<std::vector<int64_t>>> PlanSession::OutputDims(
    std::span<const std::vector<int64_t>> input_dims, PlanProgram program) const {
  const Signature& sig = SigOf(program);
  const std::vector<PlanTensorSig>& inputs = *sig.inputs;
  if (input_dims.size() != inputs.size()) return InputCountError(inputs, input_dims.size());
  SmallInts values(sig.symbols.size(), -1), elems(inputs.size());
  for (size_t i = 0; i < input_dims.size(); ++i) {
    KILN_RETURN_IF_ERROR(BindInput(sig, static_cast<int>(i), input_dims[i], values.data()));
    absl::StatusOr<int64_t> n = CheckedNumElements(input_dims[i]);
    if (!n.ok())
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s': %s", inputs[i].name, n.status().message()));
    elems[i] = *n;
  }
  KILN_ASSIGN_OR_RETURN(const RunBinding r, Select(sig, values.data(), elems.data(), program));
  std::vector<std::vector<int64_t>> out(sig.outputs->size());
  for (size_t o = 0; o < out.size(); ++o)
    for (size_t d = 0; d < buckets_[r.bucket].output_dims[o].size(); ++d)
      out[o].push_back(OutputDim(r, static_cast<int>(o), static_cast<int>(d)));
  return out;
}

absl::StatusOr<RunBinding> PlanSession::Bind(std::span<const TensorView> inputs,
                                             std::span<const MutableTensorView> outputs,
                                             std::span<const MemoryKind> memory,
                                             PlanProgram program) const {
  const Signature& sig = SigOf(program);
  const size_t nin = sig.inputs->size(), nout = sig.outputs->size();
  if (inputs.size() != nin) return InputCountError(*sig.inputs, inputs.size());
  SmallInts values(sig.symbols.size(), -1), elems(nin);
  for (size_t i = 0; i < nin; ++i) {
    const PlanTensorSig& in = (*sig.inputs)[i];
    if (inputs[i].dtype != in.dtype)
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s' has dtype %s; the plan expects %s", in.name,
                          std::string(DTypeName(inputs[i].dtype)), SigStr(in)));
    KILN_RETURN_IF_ERROR(BindInput(sig, static_cast<int>(i), inputs[i].dims, values.data()));
    absl::StatusOr<int64_t> n = CheckedNumElements(inputs[i].dims);
    if (!n.ok())
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s': %s", in.name, n.status().message()));
    elems[i] = *n;
    if (*n > 0 && inputs[i].data == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("input '%s' has no data", in.name));
    if (!Allowed(memory, inputs[i].memory))
      return MemoryError(absl::StrCat("input '", in.name, "'"), inputs[i].memory, memory);
  }
  KILN_ASSIGN_OR_RETURN(RunBinding r, Select(sig, values.data(), elems.data(), program));
  const BucketIo& io = buckets_[r.bucket];
  if (outputs.size() != nout)
    return absl::InvalidArgumentError(
        absl::StrFormat("expected %d outputs, got %d", nout, outputs.size()));
  for (size_t o = 0; o < nout; ++o) {
    const PlanTensorSig& out = (*sig.outputs)[o];
    const MutableTensorView& v = outputs[o];
    if (v.dtype != out.dtype)
      return absl::InvalidArgumentError(
          absl::StrFormat("output '%s' has dtype %s; the plan writes %s", out.name,
                          std::string(DTypeName(v.dtype)), std::string(DTypeName(out.dtype))));
    bool same = v.dims.size() == io.output_dims[o].size();
    int64_t n = 1;
    for (size_t d = 0; same && d < v.dims.size(); ++d) {
      same = v.dims[d] == OutputDim(r, static_cast<int>(o), static_cast<int>(d));
      n *= v.dims[d];
    }
    if (!same) {
      std::vector<int64_t> want;
      for (size_t d = 0; d < io.output_dims[o].size(); ++d)
        want.push_back(OutputDim(r, static_cast<int>(o), static_cast<int>(d)));
      return absl::InvalidArgumentError(
          absl::StrFormat("output '%s' has dims %s; these inputs produce %s", out.name,
                          DimsStr(v.dims), DimsStr(want)));
    }
    if (n > 0 && v.data == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("output '%s' has no data", out.name));
    if (!Allowed(memory, v.memory))
      return MemoryError(absl::StrCat("output '", out.name, "'"), v.memory, memory);
  }
  for (const PlanInPlace& ip : io.direct) {
    const TensorView& in = inputs[ip.input];
    const MutableTensorView& out = outputs[ip.output];
    const std::string what =
        absl::StrFormat("input '%s' and output '%s' (one cache updated in place)",
                        (*sig.inputs)[ip.input].name, (*sig.outputs)[ip.output].name);
    if (in.data != out.data || in.memory != out.memory || in.memory == MemoryKind::kHost)
      return absl::InvalidArgumentError(
          absl::StrCat(what,
                       " must be one device-memory buffer passed as both on this executor "
                       "(kiln::GenerationSession does this)"));
    if (!std::equal(in.dims.begin(), in.dims.end(), io.input_dims[ip.input].begin(),
                    io.input_dims[ip.input].end()))
      return absl::InvalidArgumentError(absl::StrFormat("%s: dims %s, the bucket's are %s", what,
                                                        DimsStr(in.dims),
                                                        DimsStr(io.input_dims[ip.input])));
  }
  // Padded runs stage the I/O whose dims differ from the bucket's; stage_always sessions
  // stage everything but the direct pairs.
  r.stage_in.resize(nin);
  r.stage_out.resize(nout);
  for (size_t i = 0; i < nin; ++i)
    r.stage_in[i] = stage_always_ ||
                    (r.padded && !std::equal(inputs[i].dims.begin(), inputs[i].dims.end(),
                                             io.input_dims[i].begin(), io.input_dims[i].end()));
  for (size_t o = 0; o < nout; ++o)
    r.stage_out[o] = stage_always_ ||
                     (r.padded && !std::equal(outputs[o].dims.begin(), outputs[o].dims.end(),
                                              io.output_dims[o].begin(), io.output_dims[o].end()));
  for (const PlanInPlace& ip : io.direct) r.stage_in[ip.input] = r.stage_out[ip.output] = false;
  return r;
}

}  // namespace kiln::runtime
