// Observers for static int8 activations (gemm-precision with
// PassContext::static_activations): the range |x| ≤ a that a Linear's input is quantized
// with (scale a / 127, symmetric s8, values beyond clamped), chosen from the values the
// calibration runs saw. A histogram of |x| over [0, max) in 2048 bins, max known
// beforehand (the first calibration run's exact maximum), so one pass adds every value.
//   - minmax: a = max, nothing clamps, the coarsest steps;
//   - percentile P (default 99.99): the upper edge of the bin where the count of |x| below
//     reaches P % of all values (an outlier of 1 in 10 000 clamps);
//   - entropy: TensorRT's KL-divergence calibration — for each candidate threshold bin
//     i ≥ 128, the clipped distribution P (bins past i folded into bin i - 1) against Q, P
//     merged into 128 levels and spread back over P's non-empty bins; a = i · width (the
//     last kept bin's upper edge) at the smallest KL(P ‖ Q).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

class AbsHistogram {
 public:
  static constexpr int kBins = 2048;
  // Bins over [0, max]; max <= 0: every value lands in bin 0 (an all-zero input).
  explicit AbsHistogram(float max);
  // |x[i] · mul[i % k]| for i < n (mul may be null: ones, then k is ignored).
  void Add(const float* x, int64_t n, const float* mul, int64_t k);
  float max() const { return max_; }
  float width() const { return width_; }
  const std::vector<double>& counts() const { return counts_; }

 private:
  float max_, width_;
  std::vector<double> counts_;
};

// The range a static activation is quantized with: observer "minmax", "percentile" (with
// `percentile` in (0, 100]) or "entropy". 0 when the histogram is empty or all zeros.
absl::StatusOr<float> ObservedRange(const AbsHistogram& h, const std::string& observer,
                                    double percentile);

}  // namespace kiln
