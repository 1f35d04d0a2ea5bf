// Unit tests of common/stats: the summary statistics every measurement reports, checked against values
// computed by hand (and by NumPy's defaults: percentile with linear interpolation, std with ddof=1).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/errors.hpp"
#include "common/stats.hpp"

namespace itertime {
namespace {

const std::vector<double> kOneToTen = {7, 3, 10, 1, 5, 9, 2, 8, 6, 4};  // 1..10, shuffled

TEST(Stats, MinMaxMeanMedian) {
  EXPECT_DOUBLE_EQ(stats::min(kOneToTen), 1.0);
  EXPECT_DOUBLE_EQ(stats::max(kOneToTen), 10.0);
  EXPECT_DOUBLE_EQ(stats::mean(kOneToTen), 5.5);
  EXPECT_DOUBLE_EQ(stats::median(kOneToTen), 5.5);
  EXPECT_DOUBLE_EQ(stats::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(stats::median({4.0}), 4.0);
  EXPECT_DOUBLE_EQ(stats::mean({-2.0, 2.0, 3.0}), 1.0);
  EXPECT_DOUBLE_EQ(stats::min({-2.0, 2.0, 3.0}), -2.0);
}

TEST(Stats, DoesNotModifyItsInput) {
  const std::vector<double> original = kOneToTen;
  std::vector<double> samples = kOneToTen;
  stats::percentile(samples, 90);
  stats::median(samples);
  stats::summarize(samples);
  EXPECT_EQ(samples, original);
}

TEST(Stats, PercentileLinearInterpolationLikeNumpy) {
  // numpy.percentile(range(1, 11), q): position q/100 * 9 between the sorted values.
  EXPECT_NEAR(stats::percentile(kOneToTen, 90), 9.1, 1e-12);
  EXPECT_NEAR(stats::percentile(kOneToTen, 99), 9.91, 1e-12);
  EXPECT_NEAR(stats::percentile(kOneToTen, 25), 3.25, 1e-12);
  EXPECT_NEAR(stats::percentile(kOneToTen, 75), 7.75, 1e-12);
  EXPECT_NEAR(stats::percentile(kOneToTen, 10), 1.9, 1e-12);
  EXPECT_DOUBLE_EQ(stats::percentile(kOneToTen, 0), 1.0);
  EXPECT_DOUBLE_EQ(stats::percentile(kOneToTen, 100), 10.0);
  EXPECT_DOUBLE_EQ(stats::percentile(kOneToTen, 50), stats::median(kOneToTen));
  // Uneven gaps: numpy.percentile([1, 2, 10], 75) == 6.0
  EXPECT_NEAR(stats::percentile({10.0, 1.0, 2.0}, 75), 6.0, 1e-12);
  EXPECT_DOUBLE_EQ(stats::percentile({42.0}, 90), 42.0);
}

TEST(Stats, PercentileOutsideRangeIsABug) {
  EXPECT_THROW(stats::percentile(kOneToTen, -1), InternalError);
  EXPECT_THROW(stats::percentile(kOneToTen, 100.5), InternalError);
}

TEST(Stats, SampleStandardDeviation) {
  // numpy.std(range(1, 11), ddof=1) = sqrt(82.5 / 9)
  EXPECT_NEAR(stats::stddev(kOneToTen), std::sqrt(82.5 / 9.0), 1e-12);
  EXPECT_NEAR(stats::stddev(kOneToTen), 3.0276503540974917, 1e-12);
  // {2, 4, 4, 4, 5, 5, 7, 9}: sum of squares about the mean 5 is 32; n-1 = 7.
  EXPECT_NEAR(stats::stddev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_DOUBLE_EQ(stats::stddev({5.0}), 0.0);
  EXPECT_DOUBLE_EQ(stats::stddev({3.0, 3.0, 3.0}), 0.0);
}

TEST(Stats, CoefficientOfVariation) {
  EXPECT_NEAR(stats::cv(kOneToTen), std::sqrt(82.5 / 9.0) / 5.5, 1e-12);
  EXPECT_NEAR(stats::cv({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7.0) / 5.0, 1e-12);
  EXPECT_DOUBLE_EQ(stats::cv({7.0}), 0.0);
  EXPECT_DOUBLE_EQ(stats::cv({-1.0, 1.0}), 0.0) << "zero mean gives 0, not a division by zero";
  EXPECT_GT(stats::cv({-1.0, -3.0}), 0.0) << "cv is relative to |mean|";
}

TEST(Stats, AbsolutePercentageErrors) {
  EXPECT_DOUBLE_EQ(stats::ape_pct(110.0, 100.0), 10.0);
  EXPECT_DOUBLE_EQ(stats::ape_pct(90.0, 100.0), 10.0);
  EXPECT_DOUBLE_EQ(stats::ape_pct(100.0, 100.0), 0.0);
  EXPECT_DOUBLE_EQ(stats::ape_pct(3.0, 2.0), 50.0);
  EXPECT_DOUBLE_EQ(stats::ape_pct(0.0, 4.0), 100.0);
  EXPECT_THROW(stats::ape_pct(1.0, 0.0), InternalError);
}

TEST(Stats, MeanAbsolutePercentageError) {
  // |110-100|/100 = 10%, |150-200|/200 = 25%, |40-40|/40 = 0% -> mean 35/3
  EXPECT_NEAR(stats::mape_pct({110.0, 150.0, 40.0}, {100.0, 200.0, 40.0}), 35.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(stats::mape_pct({1.0}, {2.0}), 50.0);
  EXPECT_THROW(stats::mape_pct({1.0, 2.0}, {1.0}), InternalError);
  EXPECT_THROW(stats::mape_pct({}, {}), InternalError);
}

TEST(Stats, Summary) {
  const stats::Summary s = stats::summarize(kOneToTen);
  EXPECT_EQ(s.count, 10);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 10.0);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_NEAR(s.p90, 9.1, 1e-12);
  EXPECT_NEAR(s.cv, std::sqrt(82.5 / 9.0) / 5.5, 1e-12);
}

TEST(Stats, EmptyInputIsAnInternalError) {
  const std::vector<double> empty;
  EXPECT_THROW(stats::min(empty), InternalError);
  EXPECT_THROW(stats::max(empty), InternalError);
  EXPECT_THROW(stats::mean(empty), InternalError);
  EXPECT_THROW(stats::median(empty), InternalError);
  EXPECT_THROW(stats::percentile(empty, 90), InternalError);
  EXPECT_THROW(stats::stddev(empty), InternalError);
  EXPECT_THROW(stats::cv(empty), InternalError);
  EXPECT_THROW(stats::summarize(empty), InternalError);
  try {
    stats::mean(empty);
  } catch (const InternalError& error) {
    EXPECT_NE(std::string(error.what()).find("stats.cpp"), std::string::npos) << "should carry the file: " << error.what();
  }
}

}  // namespace
}  // namespace itertime
