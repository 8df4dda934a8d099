// Reference kernels of ONNX's loss ops and EyeLike:
//   NegativeLogLikelihoodLoss(input [N, C, d...], target [N, d...], weight [C]?)
//     loss[n, d...] = -input[n, target, d...] · weight[target] (0 where target ==
//     ignore_index); reduction "none" (the per-element losses), "sum", or "mean" (the sum
//     over the summed weights of the counted elements; the count when there is no weight).
//   SoftmaxCrossEntropyLoss(scores [N, C, d...], labels [N, d...], weights [C]?)
//     log_prob = LogSoftmax(scores, axis 1); output = NegativeLogLikelihoodLoss(log_prob,
//     labels, weights) as above; log_prob is the optional second output.
//   EyeLike(input 2-D): ones on diagonal k (columns = rows + k), of `dtype` or input's.
// Float data accumulated in double, as math.cc; labels int32/int64, range-checked (an
// ignored label may lie outside [0, C)).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

// -input[n, target, d] · w over [N, d...], reduced.
absl::StatusOr<Tensor> Nll(const Node& node, DType dtype, const std::vector<int64_t>& dims,
                           const std::vector<double>& x, const Tensor& target,
                           const Tensor* weight) {
  const std::string* red_attr = node.attr_string("reduction");
  const std::string red = red_attr ? *red_attr : "mean";
  if (red != "none" && red != "sum" && red != "mean")
    return Bad(absl::StrCat("reduction must be none, sum or mean, got '", red, "'"));
  if (target.dtype() != DType::kI64 && target.dtype() != DType::kI32)
    return UnsupportedDType(node.op(), target.dtype());
  if (dims.size() < 2) return Bad("the input must be [N, C, ...] (rank >= 2)");
  const int64_t n = dims[0], c = dims[1];
  int64_t inner = 1;
  for (size_t i = 2; i < dims.size(); ++i) inner *= dims[i];
  std::vector<int64_t> tdims = {n};
  tdims.insert(tdims.end(), dims.begin() + 2, dims.end());
  if (target.dims() != tdims)
    return Bad(absl::StrCat("target must be ", DimsStr(tdims), ", got ", DimsStr(target.dims())));
  if (weight && (weight->rank() != 1 || weight->dims()[0] != c))
    return Bad(absl::StrCat("weight must be [", c, "]"));
  const std::vector<double> w = weight ? ToDoubles(*weight) : std::vector<double>();
  const std::optional<int64_t> ignore =
      node.has_attr("ignore_index") ? node.attr_int("ignore_index") : std::nullopt;
  std::vector<double> loss(static_cast<size_t>(n * inner), 0.0);
  double sum = 0, weights = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < inner; ++d) {
      const int64_t t = target.GetAsInt64(i * inner + d);
      if (ignore && t == *ignore) continue;
      if (t < 0 || t >= c) return Bad(absl::StrCat("target ", t, " is outside [0, ", c, ")"));
      const double wt = weight ? w[t] : 1.0;
      const double l = -x[(i * c + t) * inner + d] * wt;
      loss[i * inner + d] = l;
      sum += l;
      weights += wt;
    }
  if (red == "none") return FromDoubles(dtype, tdims, loss);
  return FromDoubles(dtype, {}, {red == "sum" ? sum : sum / weights});
}

Result NllKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* target, Arg(in, 1, node.op()));
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  KILN_ASSIGN_OR_RETURN(Tensor out,
                        Nll(node, x->dtype(), x->dims(), ToDoubles(*x), *target, OptArg(in, 2)));
  return std::vector<Tensor>{std::move(out)};
}

Result SoftmaxCrossEntropyKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* labels, Arg(in, 1, node.op()));
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  if (x->rank() < 2) return Bad("scores must be [N, C, ...] (rank >= 2)");
  const auto& d = x->dims();
  const int64_t n = d[0], c = d[1], inner = x->NumElements() / std::max<int64_t>(n * c, 1);
  std::vector<double> lp = ToDoubles(*x);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t q = 0; q < inner; ++q) {
      double* base = lp.data() + i * c * inner + q;
      double mx = -INFINITY;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, base[j * inner]);
      double s = 0;
      for (int64_t j = 0; j < c; ++j) s += std::exp(base[j * inner] - mx);
      const double log_sum = mx + std::log(s);
      for (int64_t j = 0; j < c; ++j) base[j * inner] -= log_sum;
    }
  KILN_ASSIGN_OR_RETURN(Tensor loss, Nll(node, x->dtype(), d, lp, *labels, OptArg(in, 2)));
  std::vector<Tensor> outs;
  outs.push_back(std::move(loss));
  if (node.num_outputs() > 1) outs.push_back(FromDoubles(x->dtype(), d, lp));
  return outs;
}

Result EyeLikeKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (x->rank() != 2) return Bad(absl::StrCat("input must be 2-D, got ", DimsStr(x->dims())));
  DType dt = x->dtype();
  if (node.has_attr("dtype")) {
    const std::optional<DType> d =
        DTypeFromOnnx(static_cast<int32_t>(node.attr_int_or("dtype", 0)));
    if (!d || *d == DType::kString) return Bad("attribute 'dtype' is not a supported type");
    dt = *d;
  }
  const int64_t rows = x->dims()[0], cols = x->dims()[1], k = node.attr_int_or("k", 0);
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(dt, x->dims()));
  for (int64_t r = 0; r < rows; ++r)
    if (r + k >= 0 && r + k < cols) y.SetFromDouble(r * cols + r + k, 1.0);
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace

void RegisterLossKernels(KernelTable& table) {
  table[KernelKey("", "NegativeLogLikelihoodLoss")] = &NllKernel;
  table[KernelKey("", "SoftmaxCrossEntropyLoss")] = &SoftmaxCrossEntropyKernel;
  table[KernelKey("", "EyeLike")] = &EyeLikeKernel;
}

}  // namespace kiln::reference
