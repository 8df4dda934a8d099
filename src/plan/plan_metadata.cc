// Plan <-> protobuf metadata and Plan validation. Protobuf is only used here: the
// public Plan is plain C++ so executors never see generated code.
#include "plan/plan_metadata.h"

#include <limits>

#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "kiln/support/status.h"
#include "plan/plan.pb.h"

namespace kiln::plan_internal {
namespace {

namespace pb = ::kiln::plan::proto;

absl::Status Invalid(const std::string& msg) {
  return absl::InvalidArgumentError("plan metadata: " + msg);
}

absl::Status CheckDType(DType d, const std::string& where) {
  if (d == DType::kUndefined || d == DType::kString || DTypeSize(d) == 0) {
    return Invalid(
        absl::StrFormat("%s has unsupported dtype %s", where, std::string(DTypeName(d))));
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> DecodeDType(int32_t code, const std::string& where) {
  std::optional<DType> d = DTypeFromOnnx(code);
  if (!d || *d == DType::kUndefined || *d == DType::kString) {
    return Invalid(absl::StrFormat("%s has unknown dtype code %d", where, code));
  }
  return *d;
}

absl::Status ValidateSig(const PlanTensorSig& s, const std::string& where) {
  if (s.name.empty()) return Invalid(where + " has an empty name");
  KILN_RETURN_IF_ERROR(CheckDType(s.dtype, absl::StrFormat("%s '%s'", where, s.name)));
  for (size_t i = 0; i < s.dims.size(); ++i) {
    const Dim& d = s.dims[i];
    if (!d.is_symbol() && d.value() < 0) {
      return Invalid(
          absl::StrFormat("%s '%s' dim %d is negative (%d)", where, s.name, i, d.value()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePlan(const Plan& plan, uint64_t weights_bytes) {
  if (plan.target == PlanTarget::kCpu) {
    if (!plan.cuda_sms.empty()) return Invalid("a cpu plan lists CUDA SM architectures");
  } else if (plan.target == PlanTarget::kCuda) {
    if (plan.cuda_sms.empty()) return Invalid("a cuda plan lists no SM architectures");
    for (int32_t sm : plan.cuda_sms) {
      if (sm <= 0) return Invalid(absl::StrFormat("CUDA SM architecture %d is invalid", sm));
    }
  } else {
    return Invalid(absl::StrFormat("unknown target %d", static_cast<uint32_t>(plan.target)));
  }
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(ValidateSig(plan.inputs[i], absl::StrFormat("input %d", i)));
  }
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(ValidateSig(plan.outputs[i], absl::StrFormat("output %d", i)));
  }
  for (size_t i = 0; i < plan.signatures.size(); ++i) {
    const PlanSignature& sig = plan.signatures[i];
    if (sig.program != PlanProgram::kPacked && sig.program != PlanProgram::kDecode) {
      return Invalid(absl::StrFormat("signature %d is for program %d, which has no I/O of its own",
                                     i, static_cast<uint32_t>(sig.program)));
    }
    if (i > 0 && !(plan.signatures[i - 1].program < sig.program)) {
      return Invalid("the program signatures are not sorted by program and unique");
    }
    for (size_t j = 0; j < sig.inputs.size(); ++j) {
      KILN_RETURN_IF_ERROR(ValidateSig(
          sig.inputs[j], absl::StrFormat("%s input %d", PlanProgramName(sig.program), j)));
    }
    for (size_t j = 0; j < sig.outputs.size(); ++j) {
      KILN_RETURN_IF_ERROR(ValidateSig(
          sig.outputs[j], absl::StrFormat("%s output %d", PlanProgramName(sig.program), j)));
    }
  }
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    const PlanIo io = IoOf(plan, bucket.program);
    for (const auto& [sym, value] : bucket.bindings) {
      if (sym.empty()) return Invalid(absl::StrFormat("bucket %d binds an empty symbol", b));
      if (value < 0) {
        return Invalid(absl::StrFormat("bucket %d binds %s to negative %d", b, sym, value));
      }
    }
    if (bucket.program != PlanProgram::kModel && bucket.program != PlanProgram::kDecode &&
        bucket.program != PlanProgram::kPacked) {
      return Invalid(absl::StrFormat("bucket %d has unknown program %d", b,
                                     static_cast<uint32_t>(bucket.program)));
    }
    for (size_t i = 0; i < bucket.in_place.size(); ++i) {
      const PlanInPlace& ip = bucket.in_place[i];
      if (ip.input < 0 || ip.input >= static_cast<int32_t>(io.inputs.size()) || ip.output < 0 ||
          ip.output >= static_cast<int32_t>(io.outputs.size())) {
        return Invalid(
            absl::StrFormat("bucket %d in-place pair %d (input %d, output %d) is out of "
                            "range",
                            b, i, ip.input, ip.output));
      }
      if (i > 0 && !(bucket.in_place[i - 1].output < ip.output)) {
        return Invalid(absl::StrFormat("bucket %d in-place pairs are not sorted by output", b));
      }
      for (size_t j = 0; j < i; ++j) {
        if (bucket.in_place[j].input == ip.input) {
          return Invalid(absl::StrFormat("bucket %d pairs input %d in place twice", b, ip.input));
        }
      }
      if (io.inputs[ip.input].dtype != io.outputs[ip.output].dtype) {
        return Invalid(absl::StrFormat("bucket %d pairs input %d and output %d of different dtypes",
                                       b, ip.input, ip.output));
      }
    }
    if (bucket.arena_bytes < 0 || bucket.no_reuse_bytes < 0 || bucket.peak_live_bytes < 0) {
      return Invalid(
          absl::StrFormat("bucket %d has a negative arena size %d, no-reuse size %d or peak %d", b,
                          bucket.arena_bytes, bucket.no_reuse_bytes, bucket.peak_live_bytes));
    }
    for (size_t i = 0; i < bucket.buffers.size(); ++i) {
      const PlanBuffer& buf = bucket.buffers[i];
      const std::string where = absl::StrFormat("bucket %d buffer %d", b, i);
      KILN_RETURN_IF_ERROR(CheckDType(buf.dtype, where));
      int64_t elems = 1;
      for (int64_t d : buf.dims) {
        if (d < 0) return Invalid(absl::StrFormat("%s has negative dim %d", where, d));
        if (MulOverflows(elems, d, &elems)) return Invalid(where + " element count overflows");
      }
      int64_t need;
      if (MulOverflows(elems, static_cast<int64_t>(DTypeSize(buf.dtype)), &need)) {
        return Invalid(where + " byte size overflows");
      }
      if (buf.offset < 0 || buf.bytes < 0) {
        return Invalid(
            absl::StrFormat("%s has negative offset %d or size %d", where, buf.offset, buf.bytes));
      }
      if (buf.bytes < need) {
        return Invalid(absl::StrFormat("%s is %d bytes but its %s tensor needs %d", where,
                                       buf.bytes, std::string(DTypeName(buf.dtype)), need));
      }
      int64_t end;
      if (AddOverflows(buf.offset, buf.bytes, &end)) {
        return Invalid(where + " offset + size overflows");
      }
      switch (buf.kind) {
        case PlanBufferKind::kArena:
          if (end > bucket.arena_bytes) {
            return Invalid(absl::StrFormat("%s [%d, %d) is beyond the %d-byte arena", where,
                                           buf.offset, end, bucket.arena_bytes));
          }
          break;
        case PlanBufferKind::kWeight:
          if (static_cast<uint64_t>(end) > weights_bytes) {
            return Invalid(absl::StrFormat("%s [%d, %d) is beyond the %d-byte weights section",
                                           where, buf.offset, end, weights_bytes));
          }
          break;
        case PlanBufferKind::kInput:
        case PlanBufferKind::kOutput: {
          const size_t n =
              buf.kind == PlanBufferKind::kInput ? io.inputs.size() : io.outputs.size();
          if (buf.binding < 0 || static_cast<size_t>(buf.binding) >= n) {
            return Invalid(absl::StrFormat("%s binds %s %d but the graph has %d", where,
                                           std::string(PlanBufferKindName(buf.kind)), buf.binding,
                                           n));
          }
          if (buf.offset != 0) {
            return Invalid(
                absl::StrFormat("%s is an I/O binding with non-zero offset %d", where, buf.offset));
          }
          break;
        }
        default:
          return Invalid(
              absl::StrFormat("%s has unknown kind %d", where, static_cast<uint32_t>(buf.kind)));
      }
      if (buf.kind != PlanBufferKind::kInput && buf.kind != PlanBufferKind::kOutput &&
          buf.binding != 0) {
        return Invalid(
            absl::StrFormat("%s is not an I/O binding but has binding %d", where, buf.binding));
      }
    }
    for (size_t s = 0; s < bucket.steps.size(); ++s) {
      const PlanStep& step = bucket.steps[s];
      const std::string where = absl::StrFormat("bucket %d step %d", b, s);
      if (step.kernel.empty()) return Invalid(where + " has an empty kernel id");
      for (const auto* list : {&step.inputs, &step.outputs}) {
        for (int32_t idx : *list) {
          if (idx == -1 && list == &step.inputs) continue;  // omitted optional input
          if (idx < 0 || static_cast<size_t>(idx) >= bucket.buffers.size()) {
            return Invalid(absl::StrFormat("%s (%s) refers to buffer %d; the bucket has %d", where,
                                           step.kernel, idx, bucket.buffers.size()));
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeMetadata(const Plan& plan, uint64_t weights_bytes) {
  pb::PlanMetadata m;
  m.set_target(static_cast<uint32_t>(plan.target));
  for (int32_t sm : plan.cuda_sms) m.add_cuda_sms(sm);
  m.mutable_manifest()->set_kiln_version(plan.manifest.kiln_version);
  m.mutable_manifest()->set_cuda_toolkit_version(plan.manifest.cuda_toolkit_version);
  m.mutable_manifest()->set_cublas_version(plan.manifest.cublas_version);
  m.set_model_sha256(std::string(plan.model_sha256.begin(), plan.model_sha256.end()));
  m.set_compile_options(plan.compile_options);
  auto encode_sig = [](const PlanTensorSig& s, pb::TensorSig* out) {
    out->set_name(s.name);
    out->set_dtype(DTypeToOnnx(s.dtype));
    for (const Dim& d : s.dims) {
      pb::Dim* pd = out->add_dims();
      if (d.is_symbol()) {
        pd->set_symbol(d.symbol());
      } else {
        pd->set_value(d.value());
      }
    }
  };
  for (const auto& s : plan.inputs) encode_sig(s, m.add_inputs());
  for (const auto& s : plan.outputs) encode_sig(s, m.add_outputs());
  for (const PlanBucket& bucket : plan.buckets) {
    pb::Bucket* pbk = m.add_buckets();
    for (const auto& [sym, value] : bucket.bindings) {  // std::map: sorted by symbol
      pb::Binding* bd = pbk->add_bindings();
      bd->set_symbol(sym);
      bd->set_value(value);
    }
    pbk->set_arena_bytes(bucket.arena_bytes);
    pbk->set_no_reuse_bytes(bucket.no_reuse_bytes);
    pbk->set_peak_live_bytes(bucket.peak_live_bytes);
    pbk->set_program(static_cast<uint32_t>(bucket.program));
    for (const PlanInPlace& ip : bucket.in_place) {
      pb::InPlace* p = pbk->add_in_place();
      p->set_input(ip.input);
      p->set_output(ip.output);
    }
    for (const PlanBuffer& buf : bucket.buffers) {
      pb::Buffer* pbuf = pbk->add_buffers();
      pbuf->set_kind(static_cast<uint32_t>(buf.kind));
      pbuf->set_offset(buf.offset);
      pbuf->set_bytes(buf.bytes);
      pbuf->set_dtype(DTypeToOnnx(buf.dtype));
      for (int64_t d : buf.dims) pbuf->add_dims(d);
      pbuf->set_binding(buf.binding);
    }
    for (const PlanStep& step : bucket.steps) {
      pb::Step* ps = pbk->add_steps();
      ps->set_kernel(step.kernel);
      for (int32_t i : step.inputs) ps->add_inputs(i);
      for (int32_t o : step.outputs) ps->add_outputs(o);
      for (const PlanParam& p : step.params) {
        pb::Param* pp = ps->add_params();
        pp->set_name(p.name);
        if (const auto* i = std::get_if<int64_t>(&p.value)) {
          pp->set_i(*i);
        } else if (const auto* f = std::get_if<double>(&p.value)) {
          pp->set_f(*f);
        } else if (const auto* str = std::get_if<std::string>(&p.value)) {
          pp->set_s(*str);
        } else {
          pp->mutable_ints();  // present even when empty
          for (int64_t v : std::get<std::vector<int64_t>>(p.value)) {
            pp->mutable_ints()->add_values(v);
          }
        }
      }
      for (const std::string& prov : step.provenance) ps->add_provenance(prov);
    }
  }
  m.set_weights_bytes(weights_bytes);
  for (const std::string& sym : plan.paddable_symbols) m.add_paddable_symbols(sym);
  for (const PlanSignature& sig : plan.signatures) {
    pb::Signature* ps = m.add_signatures();
    ps->set_program(static_cast<uint32_t>(sig.program));
    for (const auto& s : sig.inputs) encode_sig(s, ps->add_inputs());
    for (const auto& s : sig.outputs) encode_sig(s, ps->add_outputs());
    for (const std::string& sym : sig.paddable_symbols) ps->add_paddable_symbols(sym);
  }
  for (const PlanPrecisionNote& note : plan.precision_notes) {
    pb::PrecisionNote* pn = m.add_precision_notes();
    pn->set_op(note.op);
    pn->set_precision(note.precision);
    pn->set_reason(note.reason);
    for (const std::string& n : note.nodes) pn->add_nodes(n);
    if (note.x_absmax != 0) pn->set_x_absmax(note.x_absmax);
  }

  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!m.SerializeToCodedStream(&coded)) {
      return KILN_INTERNAL("plan metadata failed to serialize (%d bytes)", m.ByteSizeLong());
    }
  }
  return out;
}

absl::StatusOr<uint64_t> DecodeMetadata(std::string_view bytes, Plan* plan) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Invalid(
        absl::StrFormat("section is %d bytes, more than protobuf can parse", bytes.size()));
  }
  pb::PlanMetadata m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Invalid("the protobuf message does not parse");
  }
  if (m.target() != static_cast<uint32_t>(PlanTarget::kCpu) &&
      m.target() != static_cast<uint32_t>(PlanTarget::kCuda)) {
    return Invalid(absl::StrFormat("unknown target %d", m.target()));
  }
  plan->target = static_cast<PlanTarget>(m.target());
  plan->cuda_sms.assign(m.cuda_sms().begin(), m.cuda_sms().end());
  plan->manifest.kiln_version = m.manifest().kiln_version();
  plan->manifest.cuda_toolkit_version = m.manifest().cuda_toolkit_version();
  plan->manifest.cublas_version = m.manifest().cublas_version();
  if (m.model_sha256().size() != plan->model_sha256.size()) {
    return Invalid(
        absl::StrFormat("model hash is %d bytes; SHA-256 has 32", m.model_sha256().size()));
  }
  std::copy(m.model_sha256().begin(), m.model_sha256().end(), plan->model_sha256.begin());
  plan->compile_options = m.compile_options();
  auto decode_sig = [](const pb::TensorSig& in, const std::string& where,
                       PlanTensorSig* out) -> absl::Status {
    out->name = in.name();
    KILN_ASSIGN_OR_RETURN(out->dtype, DecodeDType(in.dtype(), where + " '" + in.name() + "'"));
    for (int i = 0; i < in.dims_size(); ++i) {
      const pb::Dim& d = in.dims(i);
      switch (d.kind_case()) {
        case pb::Dim::kValue:
          out->dims.push_back(Dim::Known(d.value()));
          break;
        case pb::Dim::kSymbol:
          if (d.symbol().empty()) {
            return Invalid(
                absl::StrFormat("%s '%s' dim %d has an empty symbol", where, in.name(), i));
          }
          out->dims.push_back(Dim::Symbol(d.symbol()));
          break;
        default:
          return Invalid(absl::StrFormat("%s '%s' dim %d has neither a value nor a symbol", where,
                                         in.name(), i));
      }
    }
    return absl::OkStatus();
  };
  plan->inputs.resize(m.inputs_size());
  for (int i = 0; i < m.inputs_size(); ++i) {
    KILN_RETURN_IF_ERROR(decode_sig(m.inputs(i), absl::StrFormat("input %d", i), &plan->inputs[i]));
  }
  plan->outputs.resize(m.outputs_size());
  for (int i = 0; i < m.outputs_size(); ++i) {
    KILN_RETURN_IF_ERROR(
        decode_sig(m.outputs(i), absl::StrFormat("output %d", i), &plan->outputs[i]));
  }
  plan->buckets.resize(m.buckets_size());
  for (int b = 0; b < m.buckets_size(); ++b) {
    const pb::Bucket& in = m.buckets(b);
    PlanBucket& out = plan->buckets[b];
    for (int i = 0; i < in.bindings_size(); ++i) {
      const std::string& sym = in.bindings(i).symbol();
      if (i > 0 && !(in.bindings(i - 1).symbol() < sym)) {
        return Invalid(
            absl::StrFormat("bucket %d bindings are not sorted and unique ('%s' after '%s')", b,
                            sym, in.bindings(i - 1).symbol()));
      }
      out.bindings[sym] = in.bindings(i).value();
    }
    out.arena_bytes = in.arena_bytes();
    out.no_reuse_bytes = in.no_reuse_bytes();
    out.peak_live_bytes = in.peak_live_bytes();
    out.program = static_cast<PlanProgram>(in.program());  // ValidatePlan checks the value
    for (const pb::InPlace& ip : in.in_place()) out.in_place.push_back({ip.input(), ip.output()});
    out.buffers.resize(in.buffers_size());
    for (int i = 0; i < in.buffers_size(); ++i) {
      const pb::Buffer& pbuf = in.buffers(i);
      PlanBuffer& buf = out.buffers[i];
      const std::string where = absl::StrFormat("bucket %d buffer %d", b, i);
      if (pbuf.kind() < 1 || pbuf.kind() > 4) {
        return Invalid(absl::StrFormat("%s has unknown kind %d", where, pbuf.kind()));
      }
      buf.kind = static_cast<PlanBufferKind>(pbuf.kind());
      buf.offset = pbuf.offset();
      buf.bytes = pbuf.bytes();
      KILN_ASSIGN_OR_RETURN(buf.dtype, DecodeDType(pbuf.dtype(), where));
      buf.dims.assign(pbuf.dims().begin(), pbuf.dims().end());
      buf.binding = pbuf.binding();
    }
    out.steps.resize(in.steps_size());
    for (int s = 0; s < in.steps_size(); ++s) {
      const pb::Step& ps = in.steps(s);
      PlanStep& step = out.steps[s];
      step.kernel = ps.kernel();
      step.inputs.assign(ps.inputs().begin(), ps.inputs().end());
      step.outputs.assign(ps.outputs().begin(), ps.outputs().end());
      for (const pb::Param& pp : ps.params()) {
        PlanParam p;
        p.name = pp.name();
        switch (pp.value_case()) {
          case pb::Param::kI:
            p.value = pp.i();
            break;
          case pb::Param::kF:
            p.value = pp.f();
            break;
          case pb::Param::kInts:
            p.value = std::vector<int64_t>(pp.ints().values().begin(), pp.ints().values().end());
            break;
          case pb::Param::kS:
            p.value = pp.s();
            break;
          default:
            return Invalid(
                absl::StrFormat("bucket %d step %d parameter '%s' has no value", b, s, pp.name()));
        }
        step.params.push_back(std::move(p));
      }
      step.provenance.assign(ps.provenance().begin(), ps.provenance().end());
    }
  }
  plan->paddable_symbols.assign(m.paddable_symbols().begin(), m.paddable_symbols().end());
  plan->signatures.resize(m.signatures_size());
  for (int i = 0; i < m.signatures_size(); ++i) {
    const pb::Signature& in = m.signatures(i);
    PlanSignature& out = plan->signatures[i];
    out.program = static_cast<PlanProgram>(in.program());  // ValidatePlan checks the value
    out.inputs.resize(in.inputs_size());
    for (int j = 0; j < in.inputs_size(); ++j) {
      KILN_RETURN_IF_ERROR(
          decode_sig(in.inputs(j), absl::StrFormat("signature %d input %d", i, j), &out.inputs[j]));
    }
    out.outputs.resize(in.outputs_size());
    for (int j = 0; j < in.outputs_size(); ++j) {
      KILN_RETURN_IF_ERROR(decode_sig(
          in.outputs(j), absl::StrFormat("signature %d output %d", i, j), &out.outputs[j]));
    }
    out.paddable_symbols.assign(in.paddable_symbols().begin(), in.paddable_symbols().end());
  }
  for (const pb::PrecisionNote& pn : m.precision_notes())
    plan->precision_notes.push_back({pn.op(),
                                     pn.precision(),
                                     pn.reason(),
                                     {pn.nodes().begin(), pn.nodes().end()},
                                     pn.x_absmax()});
  return m.weights_bytes();
}

}  // namespace kiln::plan_internal
