// numeric-safety: for an fp16 compile (ComputePrecision: a cuda int8 plan's fp16 rest too),
// runs the graph as it stands — f32, after the fusions (and a cuda int8 plan's
// gemm-precision) — on the reference executor over the calibration inputs
// (PassContext::calibration_inputs), records each float value's largest magnitude, and keeps in
// fp32 every compute op that would read or write a value beyond fp16's safe limit
// (PrecisionReport::ForceF32, which lower-precision obeys), the measured range as the reason (`kiln
// plan-info` prints it). Why: fp16 tops out at 65504. Real Transformers carry a few huge
// activations in their residual stream (outlier features, "massive activations"); in fp16 the
// residual add overflows to inf, or the cast down saturates, and the LayerNorm after it returns
// garbage or zeros. bf16 has f32's exponent range and a cpu int8 plan's activations stay f32 (its
// GEMMs scale each row): the pass does nothing for them.
// Limit: 65504 / 4 = 16376, headroom for inputs larger than the calibration's.
// Limits: the ranges are those of the calibration inputs (synthetic ones unless --calib);
// values computed inside a kernel are not observed, only the ops' inputs and outputs; the
// reference executor computes in double, so a compile of a large model spends seconds here
// (kiln compile --disable-pass numeric-safety skips it).
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kiln/ir/ops.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"
#include "passes/passes.h"

namespace kiln {
namespace {

constexpr double kFp16SafeLimit = 65504.0 / 4;

class NumericSafetyPass final : public Pass {
 public:
  std::string_view name() const override { return "numeric-safety"; }
  std::string_view description() const override {
    return "fp16 plans: ops whose values exceed fp16's range on the calibration inputs stay "
           "fp32 (docs/precision.md)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override;
};

absl::StatusOr<bool> NumericSafetyPass::RunImpl(Graph& g, const PassContext& ctx) {
  if (ComputePrecision(ctx) != Precision::kFp16 || ctx.calibration_inputs == nullptr ||
      ctx.calibration_inputs->empty() || ctx.precision_report == nullptr)
    return false;
  // Largest |value| per (node id, output), over every input set.
  std::map<std::pair<int, int>, double> range;
  for (const auto& feeds : *ctx.calibration_inputs) {
    auto run = RunReference(g, feeds, [&](const Node& n, int o, const Tensor& t) {
      if (!IsFloat(t.dtype())) return;
      double m = 0;
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        const double v = std::fabs(t.GetAsDouble(i));
        if (std::isnan(v)) continue;
        m = std::max(m, v);
      }
      double& r = range[{n.id(), o}];
      r = std::max(r, m);
    });
    if (!run.ok())
      return absl::Status(
          run.status().code(),
          absl::StrCat("numeric-safety: running the calibration inputs: ", run.status().message()));
  }
  auto over = [&](Value v) -> double {
    if (!v) return 0;
    auto it = range.find({v.node->id(), v.index});
    return it == range.end() ? 0.0 : it->second;
  };
  int64_t values_over = 0;
  for (const auto& [key, r] : range) values_over += r > kFp16SafeLimit;
  Count("values over the fp16 limit", values_over);
  for (const auto& p : g.nodes()) {
    Node* n = p.get();
    if (n->is_input() || n->is_constant()) continue;
    const OpInfo* info = FindOp(n->domain(), n->op());
    if (info == nullptr || info->precision == PrecisionPolicy::kKeepF32) continue;
    // The largest value the op reads (constants aside: lower-precision checks those) or
    // writes.
    double worst = 0;
    std::string where;
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value v = n->input(i);
      // Inputs the op keeps f32 at any precision (attention's additive mask, whose -3.4e38
      // stands for minus infinity) are never cast down.
      if (i < 32 && ((info->f32_inputs >> i) & 1u)) continue;
      if (!v || v.node->is_constant() || over(v) <= worst) continue;
      worst = over(v);
      where = absl::StrCat("input ", i);
    }
    for (int o = 0; o < n->num_outputs(); ++o)
      if (over(n->output(o)) > worst) {
        worst = over(n->output(o));
        where = absl::StrCat("output ", o);
      }
    if (worst <= kFp16SafeLimit) continue;
    ctx.precision_report->ForceF32(
        *n, absl::StrFormat("numeric-safety: its %s reaches |x| = %.4g on the calibration "
                            "inputs, beyond fp16's safe %.0f (65504 / 4)",
                            where, worst, kFp16SafeLimit));
    Count("ops kept fp32");
  }
  return false;  // the graph is unchanged: lower-precision reads the verdicts
}

}  // namespace

std::unique_ptr<Pass> CreateNumericSafetyPass() { return std::make_unique<NumericSafetyPass>(); }

}  // namespace kiln
