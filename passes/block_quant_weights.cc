// block-quant-weights: MatMul(x, DequantizeLinear(W, scale, zero_point?)) with W a constant
// 4-bit integer matrix [K, N] -> kiln.BlockQuantLinear(x, codes [N, K], scales [N, KB],
// zero points [N, KB]){block_size} (docs/fused-ops.md), so that the weights stay 4-bit
// instead of constant folding widening them to f32. This is the QDQ form of onnxruntime's
// int4 weight-only quantizer (MatMulNBitsQuantizer with quant_format=QDQ) and of other
// int4 exporters; the MatMulNBits form becomes BlockQuantLinear at import.
// Forms: blocked along K (axis 0, block_size a power of two >= 16, scale [ceil(K/bs), N]),
// per output channel (axis 1, scale [N]) and per tensor (a scalar scale), each read as
// one block per channel or tensor (block_size the power of two >= K, KB = 1). Signed
// codes (int4) become uint4 with 8 added to codes and zero points — exact: (q + 8) − (z +
// 8) = q − z; an absent zero point is 0, as DequantizeLinear's.
// Exact: BlockQuantLinear computes each weight as (code − zero) · scale in f32, as
// DequantizeLinear does, then the same product (the sum's order aside).
// Runs before the first constant folding (which would fold the DequantizeLinear), on typed
// values (x must be f32).
// Limits: W as MatMul's second input directly (a Transpose between them, W [N, K] blocked
// on axis 1, stays for folding), scale f32, 4-bit codes only (int2/uint2/int8 fold).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::IsOp;

struct Int4Weight {
  Tensor codes, scales, zero_points;  // [N, K] u4, [N, KB] f32, [N, KB] u4
  int64_t block_size = 0;
};

// The smallest power of two >= max(v, 16).
int64_t Pow2AtLeast(int64_t v) {
  int64_t p = 16;
  while (p < v) p *= 2;
  return p;
}

// W [K, N] of DequantizeLinear `dq` as BlockQuantLinear's operands, or nullopt.
std::optional<Int4Weight> AsBlockQuant(const Node& dq) {
  if (dq.num_inputs() < 2 || !dq.input(0) || !dq.input(1)) return std::nullopt;
  const Tensor* w = ConstantOf(dq.input(0));
  const Tensor* s = ConstantOf(dq.input(1));
  const Tensor* z = dq.num_inputs() > 2 && dq.input(2) ? ConstantOf(dq.input(2)) : nullptr;
  if (w == nullptr || s == nullptr || (dq.num_inputs() > 2 && dq.input(2) && z == nullptr))
    return std::nullopt;
  const bool is_signed = w->dtype() == DType::kI4;
  if ((w->dtype() != DType::kU4 && !is_signed) || w->rank() != 2 || s->dtype() != DType::kF32 ||
      (z != nullptr && z->dtype() != w->dtype()))
    return std::nullopt;
  const int64_t k = w->dims()[0], n = w->dims()[1];
  int64_t axis = dq.attr_int_or("axis", 1);
  if (axis < 0) axis += 2;
  const int64_t block = dq.attr_int_or("block_size", 0);
  // Where scale (and zero point) element (j, b) of channel j, block b sits in `s`.
  int64_t bs = 0, kb = 1;
  std::function<int64_t(int64_t, int64_t)> at;
  if (s->rank() == 0 || s->NumElements() == 1) {  // per tensor
    if (block != 0) return std::nullopt;
    bs = Pow2AtLeast(k);
    at = [](int64_t, int64_t) { return int64_t{0}; };
  } else if (block == 0 && axis == 1 && s->dims() == std::vector<int64_t>{n}) {  // per channel
    bs = Pow2AtLeast(k);
    at = [](int64_t j, int64_t) { return j; };
  } else if (block >= 16 && (block & (block - 1)) == 0 && axis == 0 &&
             s->dims() == std::vector<int64_t>{(k + block - 1) / block, n}) {  // blocked on K
    bs = block;
    kb = (k + block - 1) / block;
    at = [n](int64_t j, int64_t b) { return b * n + j; };
  } else {
    return std::nullopt;
  }
  if (z != nullptr && z->dims() != s->dims()) return std::nullopt;
  const uint8_t shift = is_signed ? 8 : 0;  // int4 held sign-extended; +8 wraps to 0..15
  Int4Weight r{Tensor(DType::kU4, {n, k}), Tensor(DType::kF32, {n, kb}),
               Tensor(DType::kU4, {n, kb}), bs};
  const uint8_t* wp = w->data<uint8_t>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j)
      r.codes.data<uint8_t>()[j * k + i] = static_cast<uint8_t>((wp[i * n + j] + shift) & 15);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t b = 0; b < kb; ++b) {
      r.scales.data<float>()[j * kb + b] = s->data<float>()[at(j, b)];
      const uint8_t zero = z != nullptr ? z->data<uint8_t>()[at(j, b)] : 0;
      r.zero_points.data<uint8_t>()[j * kb + b] = static_cast<uint8_t>((zero + shift) & 15);
    }
  return r;
}

class BlockQuantWeightsPass final : public Pass {
 public:
  std::string_view name() const override { return "block-quant-weights"; }
  std::string_view description() const override {
    return "MatMul(x, DequantizeLinear(int4 constant)) -> kiln.BlockQuantLinear (the weights "
           "stay 4-bit)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    std::vector<Node*> matmuls;
    for (const auto& p : g.nodes())
      if (IsOp(p.get(), "MatMul") && p->num_inputs() == 2 && p->input(0) && p->input(1) &&
          IsOp(p->input(1).node, "DequantizeLinear"))
        matmuls.push_back(p.get());
    bool changed = false;
    for (Node* mm : matmuls) {
      const Value x = mm->input(0);
      if (x.type().dtype != DType::kF32 || ConstantOf(x) != nullptr) continue;
      Node* dq = mm->input(1).node;
      std::optional<Int4Weight> w = AsBlockQuant(*dq);
      if (!w) continue;
      const std::string base =
          dq->output_info(0).name.empty() ? absl::StrCat("dq", dq->id()) : dq->output_info(0).name;
      const Value codes =
          rewrite::InsertConstant(g, mm, base + "/codes", std::move(w->codes))->output(0);
      const Value scales =
          rewrite::InsertConstant(g, mm, base + "/scales", std::move(w->scales))->output(0);
      const Value zeros =
          rewrite::InsertConstant(g, mm, base + "/zero_points", std::move(w->zero_points))
              ->output(0);
      Node* lin = g.InsertNodeBefore(mm, "BlockQuantLinear", {x, codes, scales, zeros}, 1, "kiln");
      lin->set_attr("block_size", w->block_size);
      lin->set_provenance(mm->provenance());
      rewrite::UnionProvenance(lin, dq);
      lin->set_output_type(0, mm->output_info(0).type);
      lin->set_output_name(0, mm->output_info(0).name);
      g.ReplaceAllUsesWith(mm->output(0), lin->output(0));
      KILN_RETURN_IF_ERROR(g.RemoveNode(mm));
      // Gone unless something else reads it; its constants are dce's (before any folding
      // would widen them).
      g.RemoveNode(dq).IgnoreError();
      Count("MatMul of int4 weights");
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateBlockQuantWeightsPass() {
  return std::make_unique<BlockQuantWeightsPass>();
}

}  // namespace kiln
