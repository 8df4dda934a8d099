// Observers for static int8 activations (observers.h).
#include "passes/observers.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// As MXNet's and onnxruntime's calibrators: every empty bin gets eps, taken evenly from the
// non-empty ones, so KL stays finite where one side has an empty bin the other has not.
// False when every bin is empty.
bool Smooth(std::vector<double>& h, double eps = 1e-4) {
  size_t zeros = 0;
  for (double v : h) zeros += v == 0;
  if (zeros == h.size()) return false;
  const double take = eps * static_cast<double>(zeros) / static_cast<double>(h.size() - zeros);
  for (double& v : h) v = v == 0 ? eps : v - take;
  return true;
}

// KL(P ‖ Q) of two unnormalized, smoothed distributions over the same bins.
double KlDivergence(std::vector<double> p, std::vector<double> q) {
  if (!Smooth(p) || !Smooth(q)) return std::numeric_limits<double>::infinity();
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) sp += p[i], sq += q[i];
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0 && q[i] > 0) kl += p[i] / sp * std::log((p[i] / sp) / (q[i] / sq));
  return kl;
}

float EntropyRange(const AbsHistogram& h) {
  constexpr int kLevels = 128;  // s8's magnitudes
  const std::vector<double>& c = h.counts();
  const int bins = static_cast<int>(c.size());
  double best = std::numeric_limits<double>::infinity();
  int best_i = bins;
  std::vector<double> p, q;
  for (int i = kLevels; i <= bins; ++i) {
    p.assign(c.begin(), c.begin() + i);
    for (int j = i; j < bins; ++j) p[i - 1] += c[j];  // the clipped outliers
    // Q: the first i bins (unclipped) merged into kLevels levels, each level's count spread
    // evenly over the level's bins where P is non-empty (P's last bin holds the outliers).
    q.assign(i, 0.0);
    for (int l = 0; l < kLevels; ++l) {
      const int lo = static_cast<int>(static_cast<int64_t>(l) * i / kLevels);
      const int hi = static_cast<int>(static_cast<int64_t>(l + 1) * i / kLevels);
      double sum = 0;
      int nonzero = 0;
      for (int j = lo; j < hi; ++j) {
        sum += c[j];
        nonzero += p[j] > 0;
      }
      for (int j = lo; j < hi && nonzero > 0; ++j)
        if (p[j] > 0) q[j] = sum / nonzero;
    }
    const double kl = KlDivergence(p, q);
    if (kl < best) best = kl, best_i = i;
  }
  return static_cast<float>(best_i * static_cast<double>(h.width()));
}

}  // namespace

AbsHistogram::AbsHistogram(float max)
    : max_(max > 0 && std::isfinite(max) ? max : 0.0f),
      width_(max_ > 0 ? max_ / kBins : 0.0f),
      counts_(kBins, 0.0) {}

void AbsHistogram::Add(const float* x, int64_t n, const float* mul, int64_t k) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::fabs(mul ? x[i] * mul[i % k] : x[i]);
    if (!std::isfinite(v)) continue;
    int b = width_ > 0 ? static_cast<int>(std::min<double>(v / width_, kBins - 1)) : 0;
    counts_[std::max(b, 0)] += 1;
  }
}

absl::StatusOr<float> ObservedRange(const AbsHistogram& h, const std::string& observer,
                                    double percentile) {
  double total = 0;
  for (double v : h.counts()) total += v;
  if (total <= 0 || h.max() <= 0) return 0.0f;
  if (observer == "minmax") return h.max();
  if (observer == "percentile") {
    if (!(percentile > 0 && percentile <= 100))
      return absl::InvalidArgumentError(
          absl::StrCat("percentile must be in (0, 100], got ", percentile));
    const double want = total * percentile / 100.0;
    double seen = 0;
    for (int b = 0; b < AbsHistogram::kBins; ++b) {
      seen += h.counts()[b];
      if (seen >= want) return std::min(h.max(), static_cast<float>((b + 1) * double{h.width()}));
    }
    return h.max();
  }
  if (observer == "entropy") return std::min(h.max(), EntropyRange(h));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown activation observer '", observer, "' (minmax, percentile, entropy)"));
}

}  // namespace kiln
