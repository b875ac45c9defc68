// The bench statistics against known values and by simulation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tools/stats.hpp"

namespace kgate::stats {
namespace {

TEST(Stats, StudentTQuantilesMatchTables) {
  // Two-sided 95% and one-sided 95% critical values (standard tables).
  EXPECT_NEAR(t_quantile(0.975, 1), 12.7062, 1e-4);
  EXPECT_NEAR(t_quantile(0.975, 2), 4.3027, 1e-4);
  EXPECT_NEAR(t_quantile(0.975, 5), 2.5706, 1e-4);
  EXPECT_NEAR(t_quantile(0.975, 10), 2.2281, 1e-4);
  EXPECT_NEAR(t_quantile(0.975, 30), 2.0423, 1e-4);
  EXPECT_NEAR(t_quantile(0.975, 1000), 1.9623, 1e-4);
  EXPECT_NEAR(t_quantile(0.95, 3), 2.3534, 1e-4);
  EXPECT_NEAR(t_quantile(0.025, 4), -2.7764, 1e-4);
  EXPECT_DOUBLE_EQ(t_cdf(0, 7), 0.5);
  EXPECT_NEAR(t_cdf(2.2281, 10), 0.975, 1e-5);
}

TEST(Stats, TimeIntervalOnKnownSamples) {
  // log x = {0, 1, 2}: mean 1, sd 1, n 3, half-width t(0.975, 2) / sqrt(3).
  const Interval r = time_interval({1.0, std::exp(1.0), std::exp(2.0)});
  const double half = 4.302653 / std::sqrt(3.0);
  EXPECT_EQ(r.n, 3);
  EXPECT_NEAR(r.center, std::exp(1.0), 1e-12);
  EXPECT_NEAR(std::log(r.lo), 1 - half, 1e-5);
  EXPECT_NEAR(std::log(r.hi), 1 + half, 1e-5);
  EXPECT_TRUE(std::isinf(time_interval({2.0}).hi));
  EXPECT_THROW(time_interval({1.0, -1.0}), std::invalid_argument);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(Stats, RatioIntervalIsPaired) {
  // A drift common to each round cancels: a = 1.5 b exactly in every round.
  std::vector<double> a, b;
  for (int i = 0; i < 10; ++i) {
    b.push_back(1.0 + i);
    a.push_back(1.5 * (1.0 + i));
  }
  const Interval r = ratio_interval(a, b);
  EXPECT_NEAR(r.center, 1.5, 1e-12);
  EXPECT_NEAR(r.lo, 1.5, 1e-9);
  EXPECT_NEAR(r.hi, 1.5, 1e-9);
  EXPECT_THROW(ratio_interval({1.0}, {1.0, 2.0}), std::invalid_argument);
}

// Coverage by simulation: log-normal times of known median; the 95%
// intervals must contain it in 95% of the experiments (4000 experiments:
// the binomial standard error is 0.34%, so [93.5%, 96.5%] is 4.4 sigma).
TEST(Stats, IntervalCoverageBySimulation) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> noise(0.0, 0.1);
  const double true_median = 2.0, true_ratio = 0.8;
  int covered = 0, ratio_covered = 0;
  const int experiments = 4000;
  for (int e = 0; e < experiments; ++e) {
    std::vector<double> a, b;
    for (int i = 0; i < 10; ++i) {
      const double drift = std::exp(0.3 * noise(rng));  // common to the round
      b.push_back(true_median * drift * std::exp(noise(rng)));
      a.push_back(true_ratio * true_median * drift * std::exp(noise(rng)));
    }
    const Interval t = time_interval(b);
    covered += t.lo <= true_median && true_median <= t.hi;
    const Interval r = ratio_interval(a, b);
    ratio_covered += r.lo <= true_ratio && true_ratio <= r.hi;
  }
  EXPECT_GE(covered, 0.935 * experiments);
  EXPECT_LE(covered, 0.965 * experiments);
  EXPECT_GE(ratio_covered, 0.935 * experiments);
  EXPECT_LE(ratio_covered, 0.965 * experiments);
}

TEST(Stats, OnlineStopRule) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(0.0, 1.0);
  StopRule rule;
  rule.target = 0.02;
  rule.min_rounds = 5;
  rule.budget_s = 1.0;
  rule.max_rounds = 1000;
  // Quiet arms (1% noise): precision before the budget; never before min_rounds.
  std::vector<std::vector<double>> quiet(2);
  Stop s = Stop::running;
  int rounds = 0;
  for (; s == Stop::running; ++rounds) {
    for (auto& a : quiet) a.push_back(std::exp(0.01 * n(rng)));
    s = should_stop(quiet, 0.0, rule);
    if (rounds + 1 < rule.min_rounds) {
      EXPECT_EQ(s, Stop::running);
    }
  }
  EXPECT_EQ(s, Stop::precision);
  EXPECT_LT(rounds, 20);
  // Noisy arms (50%): the interval cannot reach 2% in 10 rounds; the budget stops it.
  std::vector<std::vector<double>> noisy(2);
  for (int i = 0; i < 10; ++i)
    for (auto& a : noisy) a.push_back(std::exp(0.5 * n(rng)));
  EXPECT_EQ(should_stop(noisy, 0.5, rule), Stop::running);
  EXPECT_EQ(should_stop(noisy, 1.0, rule), Stop::budget);
  rule.max_rounds = 10;
  EXPECT_EQ(should_stop(noisy, 0.5, rule), Stop::max_rounds);
}

TEST(Stats, BalancedOrder) {
  const int k = 3;
  int position[3][3] = {}, before[3][3] = {};
  for (int r = 0; r < 2 * k; ++r) {
    const auto o = balanced_order(k, r);
    for (int p = 0; p < k; ++p) {
      ++position[o[p]][p];
      for (int q = p + 1; q < k; ++q) ++before[o[p]][o[q]];
    }
  }
  for (int a = 0; a < k; ++a)
    for (int p = 0; p < k; ++p) EXPECT_EQ(position[a][p], 2) << "arm " << a << " position " << p;
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b)
      if (a != b) {
        EXPECT_EQ(before[a][b], k) << a << " before " << b;
      }
}

}  // namespace
}  // namespace kgate::stats
