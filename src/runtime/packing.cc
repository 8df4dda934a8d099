// PackedRoute (packing.h).
#include "runtime/packing.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"

namespace kiln::runtime {
namespace {

constexpr char kTokens[] = "tokens";
constexpr char kLengths[] = "sequence_lengths";

// Row b's number of leading ones, or -1 when its mask is not a prefix of ones (values
// other than 0 and 1, or a 1 after a 0).
int64_t PrefixLength(const TensorView& mask, int64_t b, int64_t s) {
  int64_t len = 0;
  bool zero_seen = false;
  for (int64_t j = 0; j < s; ++j) {
    const int64_t at = b * s + j;
    int64_t v;
    switch (mask.dtype) {
      case DType::kI64:
        v = static_cast<const int64_t*>(mask.data)[at];
        break;
      case DType::kI32:
        v = static_cast<const int32_t*>(mask.data)[at];
        break;
      default:
        return -1;
    }
    if (v != 0 && v != 1) return -1;
    if (v == 1 && zero_seen) return -1;
    zero_seen |= v == 0;
    len += v;
  }
  return len;
}

}  // namespace

absl::Status CheckPackedInputs(const Plan& plan, std::span<const TensorView> inputs) {
  const PlanIo io = IoOf(plan, PlanProgram::kPacked);
  int lengths = -1, tokens = -1;
  for (size_t i = 0; i < io.inputs.size() && i < inputs.size(); ++i) {
    if (io.inputs[i].name == kLengths)
      lengths = static_cast<int>(i);
    else if (tokens < 0 && inputs[i].dims.size() == 1)
      tokens = static_cast<int>(i);
  }
  if (lengths < 0 || inputs[lengths].dtype != DType::kI64 || inputs[lengths].dims.size() != 1)
    return absl::OkStatus();  // the session's signature check reports it
  const auto* len = static_cast<const int64_t*>(inputs[lengths].data);
  int64_t sum = 0;
  for (int64_t b = 0; b < inputs[lengths].dims[0]; ++b) {
    if (len[b] < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("sequence_lengths[", b, "] is ", len[b], " (a length must be >= 0)"));
    sum += len[b];
  }
  if (tokens >= 0 && sum != inputs[tokens].dims[0])
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence_lengths add up to ", sum, " tokens but input '", io.inputs[tokens].name,
        "' holds ", inputs[tokens].dims[0], " (each token belongs to exactly one sequence)"));
  return absl::OkStatus();
}

int PackedLengthsInput(const Plan& plan) {
  if (!HasProgram(plan, PlanProgram::kPacked)) return -1;
  const PlanIo io = IoOf(plan, PlanProgram::kPacked);
  for (size_t i = 0; i < io.inputs.size(); ++i)
    if (io.inputs[i].name == kLengths) return static_cast<int>(i);
  return -1;
}

std::optional<PackedRoute> PackedRoute::Of(const Plan& plan) {
  if (!HasProgram(plan, PlanProgram::kPacked)) return std::nullopt;
  const PlanIo io = IoOf(plan, PlanProgram::kPacked);
  if (io.inputs.size() != plan.inputs.size() || io.outputs.size() != plan.outputs.size())
    return std::nullopt;
  PackedRoute r;
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    const PlanTensorSig& m = plan.inputs[i];
    const PlanTensorSig& p = io.inputs[i];
    if (m.dims.size() != 2) return std::nullopt;
    if (p.name == kLengths && p.dtype == DType::kI64 && r.mask_ < 0) {
      r.mask_ = static_cast<int>(i);
    } else if (p.name != m.name || p.dtype != m.dtype || p.dims.size() != 1) {
      return std::nullopt;
    }
  }
  if (r.mask_ < 0) return std::nullopt;
  for (const PlanTensorSig& o : io.outputs) {
    const std::string lead = !o.dims.empty() && o.dims[0].is_symbol() ? o.dims[0].symbol() : "";
    if (lead != kTokens && lead != "sequences") return std::nullopt;
    r.per_token_.push_back(lead == kTokens);
  }
  for (const PlanBucket& b : plan.buckets) {
    if (b.program != PlanProgram::kPacked) continue;
    auto t = b.bindings.find(kTokens), n = b.bindings.find("sequences");
    if (t == b.bindings.end() || n == b.bindings.end()) return std::nullopt;
    r.buckets_.push_back({t->second, n->second});
    r.max_tokens_ = std::max(r.max_tokens_, t->second);
    r.max_sequences_ = std::max(r.max_sequences_, n->second);
  }
  return r;
}

int64_t PackedRoute::BucketTokens(int64_t tokens, int64_t sequences) const {
  int64_t best = -1;
  for (const auto& [t, n] : buckets_)
    if (t >= tokens && n >= sequences && (best < 0 || t < best)) best = t;
  return best;
}

std::vector<std::pair<int64_t, int64_t>> PackedRoute::Chunks(
    const std::vector<int64_t>& lengths) const {
  // What a call costs beyond its bucket's tokens, in tokens: its steps' fixed costs (a
  // few parallel regions and kernel calls each), small beside a token's share of the GEMMs.
  constexpr int64_t kCallTokens = 16;
  const int64_t nb = static_cast<int64_t>(lengths.size());
  // cost[i]: least cost of rows [0, i); from[i]: where its last call starts.
  std::vector<int64_t> cost(nb + 1, -1), from(nb + 1, -1);
  cost[0] = 0;
  for (int64_t i = 1; i <= nb; ++i) {
    int64_t tokens = 0;
    for (int64_t j = i - 1; j >= 0 && i - j <= max_sequences_; --j) {
      tokens += lengths[j];
      if (tokens > max_tokens_) break;
      const int64_t bucket = BucketTokens(tokens, i - j);
      if (bucket < 0 || cost[j] < 0) continue;
      const int64_t c = cost[j] + bucket + kCallTokens;
      if (cost[i] < 0 || c < cost[i]) cost[i] = c, from[i] = j;
    }
  }
  if (cost[nb] < 0) return {};
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t i = nb; i > 0; i = from[i]) chunks.push_back({from[i], i});
  std::reverse(chunks.begin(), chunks.end());
  return chunks;
}

absl::StatusOr<bool> PackedRoute::RunModel(const Executor& exec, const PlanSession& session,
                                           std::span<const MemoryKind> memory,
                                           std::span<const TensorView> inputs,
                                           std::span<const MutableTensorView> outputs,
                                           RunStats* stats, const RunOptions& options) const {
  KILN_RETURN_IF_ERROR(session.Bind(inputs, outputs, memory, PlanProgram::kModel).status());
  RunOptions packed = options;
  packed.program = PlanProgram::kPacked;
  auto run = [&](std::span<const TensorView> in, std::span<const MutableTensorView> out,
                 RunStats* st) { return exec.Run(in, out, st, packed); };
  auto dims = [&](std::span<const std::vector<int64_t>> d) {
    return session.OutputDims(d, PlanProgram::kPacked);
  };
  return Run(inputs, outputs, run, dims, stats);
}

absl::StatusOr<bool> PackedRoute::Run(std::span<const TensorView> inputs,
                                      std::span<const MutableTensorView> outputs,
                                      const RunPacked& run, const PackedDims& dims,
                                      RunStats* stats) const {
  for (const TensorView& v : inputs)
    if (v.memory != MemoryKind::kHost) return false;
  for (const MutableTensorView& v : outputs)
    if (v.memory != MemoryKind::kHost) return false;
  const TensorView& mask = inputs[mask_];
  const int64_t nb = mask.dims[0], s = mask.dims[1];
  if (nb == 0 || s == 0) return false;
  std::vector<int64_t> lengths(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    lengths[b] = PrefixLength(mask, b, s);
    if (lengths[b] <= 0 || lengths[b] > max_tokens_) return false;
  }
  const std::vector<std::pair<int64_t, int64_t>> chunks = Chunks(lengths);
  if (chunks.empty()) return false;
  std::vector<std::vector<std::byte>> in_bytes(inputs.size()), out_bytes(outputs.size());
  for (const auto& [first, end] : chunks) {
    int64_t t = 0;
    for (int64_t b = first; b < end; ++b) t += lengths[b];
    const int64_t n = end - first;
    std::vector<TensorView> pin(inputs.size());
    std::vector<std::vector<int64_t>> pin_dims(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<std::byte>& buf = in_bytes[i];
      if (static_cast<int>(i) == mask_) {
        buf.resize(static_cast<size_t>(n) * sizeof(int64_t));
        std::memcpy(buf.data(), lengths.data() + first, buf.size());
        pin[i] = {DType::kI64, {n}, buf.data(), MemoryKind::kHost};
      } else {
        const size_t elem = DTypeSize(inputs[i].dtype);
        buf.resize(static_cast<size_t>(t) * elem);
        const auto* src = static_cast<const std::byte*>(inputs[i].data);
        size_t at = 0;
        for (int64_t b = first; b < end; ++b) {
          std::memcpy(buf.data() + at, src + static_cast<size_t>(b * s) * elem,
                      static_cast<size_t>(lengths[b]) * elem);
          at += static_cast<size_t>(lengths[b]) * elem;
        }
        pin[i] = {inputs[i].dtype, {t}, buf.data(), MemoryKind::kHost};
      }
      pin_dims[i] = pin[i].dims;
    }
    absl::StatusOr<std::vector<std::vector<int64_t>>> od = dims(pin_dims);
    if (!od.ok()) return od.status();
    std::vector<MutableTensorView> pout(outputs.size());
    for (size_t o = 0; o < outputs.size(); ++o) {
      int64_t elems = 1;
      for (int64_t d : (*od)[o]) elems *= d;
      out_bytes[o].resize(static_cast<size_t>(elems) * DTypeSize(outputs[o].dtype));
      pout[o] = {outputs[o].dtype, (*od)[o], out_bytes[o].data(), MemoryKind::kHost};
    }
    KILN_RETURN_IF_ERROR(run(pin, pout, stats));
    for (size_t o = 0; o < outputs.size(); ++o) {
      const MutableTensorView& out = outputs[o];
      if (out.data == nullptr) continue;
      const size_t elem = DTypeSize(out.dtype);
      // Elements per token (per-token outputs, [B, S, rest]) or per sequence ([B, rest]).
      size_t row = elem;
      for (size_t d = per_token_[o] ? 2 : 1; d < out.dims.size(); ++d)
        row *= static_cast<size_t>(out.dims[d]);
      auto* dst = static_cast<std::byte*>(out.data);
      const std::byte* src = out_bytes[o].data();
      if (per_token_[o]) {
        const size_t ld = static_cast<size_t>(out.dims[1]) * row;
        for (int64_t b = first; b < end; ++b) {  // the real positions, then zeros
          const size_t real = static_cast<size_t>(lengths[b]) * row;
          std::memcpy(dst + static_cast<size_t>(b) * ld, src, real);
          std::memset(dst + static_cast<size_t>(b) * ld + real, 0, ld - real);
          src += real;
        }
      } else {
        std::memcpy(dst + static_cast<size_t>(first) * row, src, static_cast<size_t>(n) * row);
      }
    }
  }
  if (stats) stats->packed = true;
  return true;
}

}  // namespace kiln::runtime
