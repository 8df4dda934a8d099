// Reference kernels of the signal ops: the windows HannWindow, HammingWindow and
// BlackmanWindow (opset 17). w[n] for n in [0, size), with N = size when `periodic`
// (default 1) and size - 1 otherwise: Hann sin²(πn/N), Hamming α - β·cos(2πn/N) with
// α = 25/46, β = 21/46, Blackman 0.42 - 0.5·cos(2πn/N) + 0.08·cos(4πn/N); in double, rounded
// once to `output_datatype` (default FLOAT). Limits: size at most 2^28.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

enum class Window { kHann, kHamming, kBlackman };

template <Window W>
Result WindowKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* size_t_, Arg(in, 0, node.op()));
  if ((size_t_->dtype() != DType::kI64 && size_t_->dtype() != DType::kI32) ||
      size_t_->NumElements() != 1)
    return absl::InvalidArgumentError("size must be one int32 or int64 value");
  const int64_t size = size_t_->GetAsInt64(0);
  if (size < 0 || size > (int64_t{1} << 28))
    return absl::InvalidArgumentError(absl::StrCat("window size ", size, " is out of range"));
  const int64_t code = node.attr_int_or("output_datatype", 1);
  const std::optional<DType> dt =
      code > 0 && code <= INT32_MAX ? DTypeFromOnnx(static_cast<int32_t>(code)) : std::nullopt;
  if (!dt || !(IsFloat(*dt) || IsInteger(*dt)))
    return absl::UnimplementedError(absl::StrCat("output_datatype ", code, " is not supported"));
  const double n_den = static_cast<double>(node.attr_int_or("periodic", 1) != 0 ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t n = 0; n < size; ++n) {
    const double x = static_cast<double>(n) * M_PI / n_den;  // πn/N
    switch (W) {
      case Window::kHann:
        w[n] = std::sin(x) * std::sin(x);
        break;
      case Window::kHamming:
        w[n] = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(2 * x);
        break;
      case Window::kBlackman:
        w[n] = 0.42 - 0.5 * std::cos(2 * x) + 0.08 * std::cos(4 * x);
        break;
    }
  }
  return std::vector<Tensor>{FromDoubles(*dt, {size}, w)};
}

}  // namespace

void RegisterSignalKernels(KernelTable& t) {
  t[KernelKey("", "HannWindow")] = &WindowKernel<Window::kHann>;
  t[KernelKey("", "HammingWindow")] = &WindowKernel<Window::kHamming>;
  t[KernelKey("", "BlackmanWindow")] = &WindowKernel<Window::kBlackman>;
}

}  // namespace kiln::reference
