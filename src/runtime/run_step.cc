// Runs one PreparedStep: resolves its operands as base + offset and calls the CPU kernel.
// Everything was checked at Create (prepare_steps.cc), so this is a switch and a call;
// the only run-time failures are data-dependent (ids out of range) or a ref node's
// result not matching its buffer.
// Limits: ref steps copy their inputs into Tensors and their results back (slow path).
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/embed_layer_norm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"
#include "kiln/reference/executor.h"
#include "runtime/prepared_plan.h"

namespace kiln::runtime {
namespace {

absl::Status RunRef(const PreparedStep& p, std::byte* const* bases) {
  const RefNode& r = *p.ref;
  std::vector<Tensor> held;
  held.reserve(p.in.size());
  std::vector<const Tensor*> args(p.in.size(), nullptr);
  size_t k = 0;
  for (size_t i = 0; i < p.in.size(); ++i) {
    if (p.in[i].slot == kNullSlot) continue;
    held.emplace_back(r.in_dtype[k], r.in_dims[k]);
    ++k;
    Tensor& t = held.back();
    if (t.NumBytes() > 0) std::memcpy(t.raw(), bases[p.in[i].slot] + p.in[i].offset, t.NumBytes());
    args[i] = &t;
  }
  auto results = EvaluateNode(*r.node, args);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < p.out.size(); ++i) {
    const int idx = r.output_result[i];
    if (idx >= static_cast<int>(results->size()))
      return absl::InternalError(absl::StrCat(r.node->Describe(), " returned ", results->size(),
                                              " results; output ", i, " needs result ", idx));
    const Tensor& t = (*results)[idx];
    if (t.dtype() != r.out_dtype[i] || t.dims() != r.out_dims[i])
      return absl::InvalidArgumentError(absl::StrCat(
          r.node->Describe(), " result ", idx, " is ", std::string(DTypeName(t.dtype())), "[",
          absl::StrJoin(t.dims(), ","), "] but its buffer is ",
          std::string(DTypeName(r.out_dtype[i])), "[", absl::StrJoin(r.out_dims[i], ","), "]"));
    if (t.NumBytes() > 0)
      std::memcpy(bases[p.out[i].slot] + p.out[i].offset, t.raw(), t.NumBytes());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunStep(const PreparedStep& p, const cpu::CpuContext& ctx, std::byte* const* bases) {
  auto in = [&](size_t i) -> const void* {
    return i < p.in.size() && p.in[i].slot != kNullSlot ? bases[p.in[i].slot] + p.in[i].offset
                                                        : nullptr;
  };
  auto inf = [&](size_t i) { return static_cast<const float*>(in(i)); };
  auto out = [&](size_t i) -> void* { return bases[p.out[i].slot] + p.out[i].offset; };
  auto outf = [&](size_t i) { return static_cast<float*>(out(i)); };
  switch (p.kernel) {
    case KernelId::kCopy:
      if (p.copy_bytes > 0 && in(0) != out(0)) std::memmove(out(0), in(0), p.copy_bytes);
      return absl::OkStatus();
    case KernelId::kRef:
      return RunRef(p, bases);
    case KernelId::kLinear:
      return p.linear->Run(ctx, inf(0), p.m, outf(0));
    case KernelId::kLayerNorm:
      return cpu::LayerNorm(ctx, inf(0), inf(1), inf(2), p.rows, p.n, p.eps, outf(0));
    case KernelId::kSkipLayerNorm: {
      cpu::SkipLayerNormArgs a;
      a.x = inf(0);
      a.skip = inf(1);
      a.skip_rows = p.skip_rows;
      a.gamma = inf(2);
      a.beta = inf(3);
      a.bias = inf(4);
      a.rows = p.rows;
      a.h = p.n;
      a.eps = p.eps;
      a.y = outf(0);
      a.sum = p.has_sum ? outf(1) : nullptr;
      return cpu::SkipLayerNorm(ctx, a);
    }
    case KernelId::kAttention: {
      // Per thread, so the mask dims vector keeps its capacity: no allocation per run.
      thread_local cpu::MultiHeadAttentionArgs a;
      a.qkv = inf(0);
      a.batch = p.batch;
      a.seq = p.seq;
      a.num_heads = p.heads;
      a.head_size = p.head_size;
      a.scale = p.scale;
      a.causal = p.causal;
      a.mask.additive = nullptr;
      a.mask.boolean = nullptr;
      a.mask.dims.assign(p.mask_dims.begin(), p.mask_dims.end());
      if (const void* m = in(1)) {
        if (p.mask_bool)
          a.mask.boolean = static_cast<const uint8_t*>(m);
        else
          a.mask.additive = static_cast<const float*>(m);
      }
      a.y = outf(0);
      return cpu::MultiHeadAttention(ctx, a);
    }
    case KernelId::kEmbedLayerNorm: {
      cpu::EmbedLayerNormArgs a;
      if (p.ids_i32) {
        a.input_ids32 = static_cast<const int32_t*>(in(0));
        a.segment_ids32 = static_cast<const int32_t*>(in(1));
        a.position_ids32 = static_cast<const int32_t*>(in(2));
      } else {
        a.input_ids = static_cast<const int64_t*>(in(0));
        a.segment_ids = static_cast<const int64_t*>(in(1));
        a.position_ids = static_cast<const int64_t*>(in(2));
      }
      a.position_rows = p.position_rows;
      a.batch = p.batch;
      a.seq = p.seq;
      a.hidden = p.hidden;
      a.word = inf(3);
      a.word_rows = p.word_rows;
      a.pos = inf(4);
      a.pos_rows = p.pos_rows;
      a.segment = inf(5);
      a.segment_rows = p.segment_rows;
      a.gamma = inf(6);
      a.beta = inf(7);
      a.eps = p.eps;
      a.y = outf(0);
      return cpu::EmbedLayerNorm(ctx, a);
    }
    case KernelId::kPool: {
      cpu::PoolArgs a;
      a.hidden = inf(0);
      if (p.mask_i64)
        a.mask_i64 = static_cast<const int64_t*>(in(1));
      else
        a.mask = inf(1);
      a.batch = p.batch;
      a.seq = p.seq;
      a.hidden_size = p.hidden;
      a.mode = p.cls ? cpu::PoolMode::kCls : cpu::PoolMode::kMean;
      a.normalize = p.normalize;
      a.y = outf(0);
      return cpu::Pool(ctx, a);
    }
    case KernelId::kGelu:
      return cpu::Gelu(ctx, inf(0), p.n, p.tanh, outf(0));
    case KernelId::kSoftmax:
      return cpu::Softmax(ctx, inf(0), p.rows, p.n, outf(0));
  }
  return absl::InternalError("unhandled kernel id");
}

}  // namespace kiln::runtime
