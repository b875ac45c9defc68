#include "tools/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace kgate::stats {

namespace {

// Continued fraction of the regularised incomplete beta function (modified
// Lentz), valid for x < (a + 1) / (a + b + 2).
double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::abs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < 1e-15) break;
  }
  return h;
}

// Regularised incomplete beta I_x(a, b).
double inc_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_cf(a, b, x) / a;
  return 1 - front * beta_cf(b, a, 1 - x) / b;
}

struct MeanSd {
  double mean = 0, sd = 0;
};
MeanSd mean_sd(const std::vector<double>& v) {
  MeanSd m;
  if (v.empty()) return m;
  m.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  if (v.size() < 2) return m;
  double ss = 0;
  for (double x : v) ss += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  return m;
}

Interval log_interval(const std::vector<double>& logs, double conf) {
  Interval r;
  r.n = static_cast<int>(logs.size());
  if (logs.empty()) return r;
  const MeanSd m = mean_sd(logs);
  r.center = std::exp(m.mean);
  if (logs.size() < 2) {
    r.lo = 0;
    r.hi = std::numeric_limits<double>::infinity();
    return r;
  }
  const double half = t_quantile(0.5 + conf / 2, static_cast<double>(logs.size() - 1)) * m.sd /
                      std::sqrt(static_cast<double>(logs.size()));
  r.lo = std::exp(m.mean - half);
  r.hi = std::exp(m.mean + half);
  return r;
}

}  // namespace

double t_cdf(double t, double df) {
  if (!(df > 0)) throw std::invalid_argument("t_cdf: degrees of freedom must be positive");
  const double tail = 0.5 * inc_beta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail : tail;
}

double t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("t_quantile: p must be in (0, 1)");
  if (p < 0.5) return -t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (t_cdf(hi, df) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Interval time_interval(const std::vector<double>& x, double conf) {
  std::vector<double> logs;
  for (double v : x) {
    if (!(v > 0)) throw std::invalid_argument("time_interval: times must be positive");
    logs.push_back(std::log(v));
  }
  return log_interval(logs, conf);
}

Interval ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double conf) {
  if (a.size() != b.size()) throw std::invalid_argument("ratio_interval: unpaired samples");
  std::vector<double> logs;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] > 0 && b[i] > 0)) throw std::invalid_argument("ratio_interval: times must be positive");
    logs.push_back(std::log(a[i] / b[i]));
  }
  return log_interval(logs, conf);
}

double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

std::string name(Stop s) {
  switch (s) {
    case Stop::precision: return "precision";
    case Stop::budget: return "budget";
    case Stop::max_rounds: return "max-rounds";
    default: return "running";
  }
}

Stop should_stop(const std::vector<std::vector<double>>& arms, double elapsed_s, const StopRule& rule) {
  std::size_t rounds = arms.empty() ? 0 : arms.front().size();
  for (const auto& a : arms) rounds = std::min(rounds, a.size());
  if (static_cast<int>(rounds) >= rule.min_rounds) {
    bool precise = true;
    for (const auto& a : arms) precise &= time_interval(a).rel_half_width() < rule.target;
    if (precise) return Stop::precision;
  }
  if (static_cast<int>(rounds) >= rule.max_rounds) return Stop::max_rounds;
  if (elapsed_s >= rule.budget_s) return Stop::budget;
  return Stop::running;
}

std::vector<int> balanced_order(int arms, int round) {
  std::vector<int> o(static_cast<std::size_t>(arms));
  for (int i = 0; i < arms; ++i) o[static_cast<std::size_t>(i)] = (i + round) % arms;
  if ((round / std::max(arms, 1)) % 2 == 1) std::reverse(o.begin(), o.end());
  return o;
}

}  // namespace kgate::stats
