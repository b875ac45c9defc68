// The statistics of `kgate bench`: Student t intervals on log times, paired
// log-ratios between arms, the online stop rule and the balanced arm order.
//
// Times are positive and right-skewed; on the log scale the noise of a
// repeated kernel timing is close to symmetric, so an arm's centre is the
// geometric mean of its samples (the median of a log-symmetric
// distribution) with a Student t interval on the mean log time, and a ratio
// between two arms is the exponential of the mean per-round log-ratio with a
// Student t interval on it (rounds pair the arms, so drifts common to a
// round cancel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kgate::stats {

// Student t distribution with df degrees of freedom (df > 0).
double t_cdf(double t, double df);
// The p-quantile (0 < p < 1).
double t_quantile(double p, double df);

struct Interval {
  double center = 0, lo = 0, hi = 0;  // in the samples' units (exp of the log-scale interval)
  int n = 0;
  // Half the interval's width relative to its centre.
  double rel_half_width() const { return center > 0 ? (hi - lo) / (2 * center) : 0; }
};

// Confidence interval (level `conf`) on the median time of positive samples:
// t interval on the mean of log(x), exponentiated. n < 2 gives an infinite
// interval around the one sample.
Interval time_interval(const std::vector<double>& x, double conf = 0.95);

// Confidence interval on the ratio a/b from paired samples (round i of a
// with round i of b): t interval on the mean of log(a_i / b_i).
Interval ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double conf = 0.95);

double median(std::vector<double> x);

// The online stop rule: sample rounds until every arm's interval has a
// relative half-width under `target` (after `min_rounds`), or the budget is
// spent, or `max_rounds` is reached.
struct StopRule {
  double target = 0.02;
  double budget_s = 10;
  int min_rounds = 5;
  int max_rounds = 100000;
};
enum class Stop { running, precision, budget, max_rounds };
std::string name(Stop s);
Stop should_stop(const std::vector<std::vector<double>>& arms, double elapsed_s, const StopRule& rule);

// The order of the arms in round r: rotated by r and reversed every other
// cycle, so each arm takes each position equally often and follows each
// other arm as often as it precedes it.
std::vector<int> balanced_order(int arms, int round);

}  // namespace kgate::stats
