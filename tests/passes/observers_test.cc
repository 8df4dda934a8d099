// The static int8 activation observers (passes/observers.h) on histograms of known values:
// minmax is the exact maximum; percentile the upper edge of the bin where P % of the
// values lie below (one outlier in 10 000 does not widen the 99.99 % range); entropy keeps
// the bulk of a Gaussian and drops far outliers; errors for unknown observers and
// percentiles outside (0, 100]; an all-zero histogram gives 0.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "passes/observers.h"

namespace kiln {
namespace {

float Range(const std::vector<float>& v, const std::string& observer, double p = 99.99) {
  float top = 0;
  for (float x : v) top = std::max(top, std::fabs(x));
  AbsHistogram h(top);
  h.Add(v.data(), static_cast<int64_t>(v.size()), nullptr, 0);
  auto r = ObservedRange(h, observer, p);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.value_or(-1);
}

TEST(Observers, MinMaxIsTheMaximumOfTheMagnitudes) {
  EXPECT_EQ(Range({0.5f, -4.0f, 2.0f, 1.0f}, "minmax"), 4.0f);
  // x_mul scales each channel before the magnitude is taken.
  const std::vector<float> x = {1, 1, 1, -3};  // two rows of k = 2
  const std::vector<float> mul = {2, 0.5f};
  AbsHistogram h(2.0f);
  h.Add(x.data(), 4, mul.data(), 2);
  EXPECT_EQ(h.counts()[AbsHistogram::kBins - 1], 2);  // |1·2| twice, at the top bin
  EXPECT_EQ(*ObservedRange(h, "minmax", 0), 2.0f);
}

TEST(Observers, PercentileIgnoresARareOutlier) {
  std::vector<float> v(9999, 1.0f);
  v.push_back(100.0f);
  const float width = 100.0f / AbsHistogram::kBins;
  // 1.0 lies in bin 20 (1 / width = 20.48): the range is that bin's upper edge.
  EXPECT_FLOAT_EQ(Range(v, "percentile", 99.99), 21 * width);
  EXPECT_EQ(Range(v, "percentile", 100), 100.0f);
  EXPECT_EQ(Range(v, "minmax"), 100.0f);
}

TEST(Observers, EntropyKeepsTheBulkAndDropsFarOutliers) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v;
  for (int i = 0; i < 100000; ++i) v.push_back(normal(gen));
  for (int i = 0; i < 5; ++i) v.push_back(60.0f);
  const float r = Range(v, "entropy");
  EXPECT_GT(r, 2.0f);   // not clipping the Gaussian's body (99.5 % lie within 2.8)
  EXPECT_LT(r, 20.0f);  // not stretched to the outliers
}

TEST(Observers, ErrorsAndEmptyHistograms) {
  AbsHistogram h(1.0f);
  const float one = 1.0f;
  h.Add(&one, 1, nullptr, 0);
  EXPECT_FALSE(ObservedRange(h, "kl", 0).ok());
  EXPECT_FALSE(ObservedRange(h, "percentile", 0).ok());
  EXPECT_FALSE(ObservedRange(h, "percentile", 100.5).ok());
  AbsHistogram zeros(0.0f);
  const float z[] = {0, 0, 0};
  zeros.Add(z, 3, nullptr, 0);
  for (const char* o : {"minmax", "percentile", "entropy"})
    EXPECT_EQ(*ObservedRange(zeros, o, 50), 0);
  // inf and NaN are not counted (the kernels give such rows NaN outputs anyway).
  AbsHistogram h2(1.0f);
  const float bad[] = {std::numeric_limits<float>::infinity(), std::nanf(""), 0.5f};
  h2.Add(bad, 3, nullptr, 0);
  double total = 0;
  for (double c : h2.counts()) total += c;
  EXPECT_EQ(total, 1);
}

}  // namespace
}  // namespace kiln
