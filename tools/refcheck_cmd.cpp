#include "tools/refcheck_cmd.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "kernels/api.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/device/devref.hpp"
#include "reference/error.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/options.hpp"
#include "tools/summary.hpp"

namespace kgate {

namespace {

// One comparison of a device tensor with a host one.
struct Compare {
  std::string what;          // e.g. "y vs dot2 (bitwise)"
  bool ok = true;
  std::int64_t bad = 0;      // elements that broke it
  double worst_ulps = 0;     // largest |device - host| in ulps of the scale
  bool ulps_limited = false; // held to kRefcheckUlps (the summary's worst is over these)
  std::string first;         // the first element that broke it
};

// The spacing of fp64 numbers at |s| (ulp), for a nonzero finite scale.
double ulp_at(double s) {
  s = std::fabs(s);
  if (!(s > 0) || !std::isfinite(s)) return 0;
  return std::ldexp(1.0, std::ilogb(s) - 52);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

// Bitwise equality (NaN equal to NaN).
Compare bitwise(const std::string& what, const Tensor& dev, const Tensor& host) {
  Compare c;
  c.what = what;
  for (std::int64_t i = 0; i < host.numel(); ++i)
    if (!same_bits(dev.get(i), host.get(i))) {
      if (c.bad++ == 0) {
        std::ostringstream o;
        o << std::setprecision(17) << "element " << i << ": device " << dev.get(i) << ", host " << host.get(i);
        c.first = o.str();
      }
      c.ok = false;
    }
  return c;
}

// |dev - host| <= kRefcheckUlps ulps of scale (an element whose scale is 0
// or not finite must be bitwise equal). `scale` null: |host|.
Compare within_ulps(const std::string& what, const Tensor& dev, const Tensor& host, const Tensor* scale) {
  Compare c;
  c.what = what;
  c.ulps_limited = true;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const double d = dev.get(i), h = host.get(i);
    if (same_bits(d, h) || d == h) continue;
    const double u = ulp_at(scale ? scale->get(i) : h);
    const double ulps = u > 0 && std::isfinite(d - h) ? std::fabs(d - h) / u : INFINITY;
    c.worst_ulps = std::max(c.worst_ulps, ulps);
    if (ulps > kRefcheckUlps) {
      if (c.bad++ == 0) {
        std::ostringstream o;
        o << std::setprecision(17) << "element " << i << ": device " << d << ", host " << h << " (" << ulps
          << " ulps of " << (scale ? scale->get(i) : h) << ")";
        c.first = o.str();
      }
      c.ok = false;
    }
  }
  return c;
}

// |dev - host| <= rel |host| elementwise (a zero or non-finite host element
// must be bitwise equal).
Compare within_rel(const std::string& what, const Tensor& dev, const Tensor& host, double rel) {
  Compare c;
  c.what = what;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const double d = dev.get(i), h = host.get(i);
    if (same_bits(d, h) || d == h) continue;
    const double u = ulp_at(h);
    if (u > 0) c.worst_ulps = std::max(c.worst_ulps, std::fabs(d - h) / u);
    if (!(std::fabs(d - h) <= rel * std::fabs(h))) {
      if (c.bad++ == 0) {
        std::ostringstream o;
        o << std::setprecision(17) << "element " << i << ": device " << d << ", host " << h << " (relative limit "
          << rel << ")";
        c.first = o.str();
      }
      c.ok = false;
    }
  }
  return c;
}

struct Checked {
  std::string descriptor, fill;
  std::vector<Compare> compares;
  double device_s = 0, host_s = 0;
  bool ok() const {
    for (const auto& c : compares)
      if (!c.ok) return false;
    return true;
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Checked check_one(const Problem& p, const Fill& f, ref::device::Defect defect) {
  Checked r;
  r.descriptor = to_descriptor(p);
  r.fill = fill_string(f) + " seed " + std::to_string(f.seed);
  const auto in = ref::make_inputs(p, f);
  const ref::Inputs rin = ref::refs(in);
  auto t0 = std::chrono::steady_clock::now();
  const ref::device::Result dev = ref::device::run(p, rin, defect);
  r.device_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  if (std::holds_alternative<ConvProblem>(p)) {
    const auto& c = std::get<ConvProblem>(p);
    const ref::Outputs dot2 = ref::conv(c, rin, ref::Impl::dot2);
    const ref::Outputs dot2_abs = ref::conv_abs(c, rin, ref::Impl::dot2);
    const ref::Outputs fast = ref::conv(c, rin, ref::Impl::fast);
    const ref::Outputs fast_abs = ref::conv_abs(c, rin);
    r.host_s = seconds_since(t0);
    const bool exact_fill = f.kind == FillKind::lattice;
    for (const auto& s : outputs(p)) {
      const std::string n(name(s.role));
      r.compares.push_back(bitwise(n + " = host dot2", dev.want.at(s.role), dot2.at(s.role)));
      r.compares.push_back(bitwise(n + " companion = host dot2's", dev.abs.at(s.role), dot2_abs.at(s.role)));
      if (exact_fill) r.compares.push_back(bitwise(n + " = host fast (exact fill)", dev.want.at(s.role), fast.at(s.role)));
      else
        r.compares.push_back(within_ulps(n + " ~ host fast, ulps of the companion", dev.want.at(s.role),
                                         fast.at(s.role), &fast_abs.at(s.role)));
    }
    return r;
  }
  const auto& g = std::get<GroupNormProblem>(p);
  const ref::Outputs fast = ref::groupnorm(g, rin, ref::Impl::fast);
  const ref::GroupNormCompanion comp = ref::groupnorm_companion(g, rin);
  r.host_s = seconds_since(t0);
  for (const auto& s : outputs(p)) {
    const std::string n(name(s.role));
    r.compares.push_back(within_ulps(n + " ~ host fast, ulps of the companion", dev.want.at(s.role), fast.at(s.role),
                                     &comp.abs.at(s.role)));
    // The host companion sums magnitudes in plain fp64, in order (relative
    // error up to gamma_n, n <= N*M terms); the device's are Dot2 sums.
    const double n_terms = static_cast<double>(g.n) * static_cast<double>(g.group_size()) + 2;
    r.compares.push_back(within_rel(n + " companion ~ host's (relative gamma_n of its plain sums)",
                                    dev.companion.abs.at(s.role), comp.abs.at(s.role),
                                    2 * n_terms * std::ldexp(1.0, -53)));
  }
  const auto& dc = dev.companion;
  r.compares.push_back(within_ulps("mean ~ host's, ulps of mean |x|", dc.mean, comp.mean, &comp.mean_abs));
  r.compares.push_back(within_ulps("var ~ host's", dc.var, comp.var, nullptr));
  r.compares.push_back(within_ulps("rstd ~ host's", dc.rstd, comp.rstd, nullptr));
  r.compares.push_back(within_ulps("mean |x| ~ host's", dc.mean_abs, comp.mean_abs, nullptr));
  r.compares.push_back(within_ulps("kappa ~ host's", dc.kappa, comp.kappa, nullptr));
  // xhat = (x - mean) rstd: its scale is (|x| + mean |x|) rstd, the size of
  // the terms it is computed from.
  Tensor xs = ref::f64_like(comp.xhat.dims());
  {
    const Tensor& x = in.at(Role::x);
    const std::int64_t S = g.spatial[0] * g.spatial[1] * g.spatial[2];
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const std::int64_t ng = (i / (S * g.c)) * g.groups + (i % g.c) / (g.c / g.groups);
      xs.set(i, (std::fabs(x.get(i)) + comp.mean_abs.get(ng)) * comp.rstd.get(ng));
    }
  }
  r.compares.push_back(within_ulps("xhat ~ host's, ulps of (|x| + mean |x|) rstd", dc.xhat, comp.xhat, &xs));
  return r;
}

}  // namespace

CLI::App* add_refcheck_command(CLI::App& app, RefcheckCli& cli) {
  auto* c = app.add_subcommand("refcheck",
                               "Gate the device reference (this binary's backend) against the host references");
  c->add_option("descriptor", cli.descriptors, "problems (default: the bitwise and reduced corpus problems)");
  add_corpora_options(*c, cli.selection, cli.bitwise);
  options::add_seed(*c, cli.seed, "seed of the fills");
  c->add_option("--defect", cli.defect, "plant a defect in the device reference (negative control): "
                                        "none, bump_last (conv), skip_chunk (GroupNorm)")
      ->check(CLI::IsMember({"none", "bump_last", "skip_chunk"}))
      ->capture_default_str();
  c->add_option("--jobs,-j", cli.jobs, "problems checked in parallel")
      ->check(options::integer_in(1, 256))
      ->capture_default_str();
  options::add_report(*c, "--report", cli.report, "JSON report ('-': standard output)");
  c->footer(exit_codes_help);
  return c;
}

int run_refcheck_command(const RefcheckCli& cli) {
  if (!cli.report.empty() && cli.report != "-") files::output_file(cli.report, "--report");
  ProblemList selected;
  for (const auto& d : cli.descriptors) selected.add(parse_descriptor(d));
  if (cli.descriptors.empty()) selected.add_corpora(cli.selection, cli.bitwise);
  const std::vector<Problem>& problems = selected.problems();
  if (problems.empty()) throw InputError("descriptor", "no problem selected");
  const auto defect = cli.defect == "bump_last" ? ref::device::Defect::bump_last
                      : cli.defect == "skip_chunk"   ? ref::device::Defect::skip_chunk
                                                     : ref::device::Defect::none;
  std::ostream& log = cli.report == "-" ? std::cerr : std::cout;
  log << "kgate refcheck: " << problems.size() << " problems, device reference on the " << kernels::backend_name()
      << " backend" << (defect != ref::device::Defect::none ? ", planted defect " + cli.defect : "") << std::endl;

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<Checked>> results(problems.size());
  std::atomic<std::size_t> next{0};
  std::mutex print;
  std::exception_ptr error;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < problems.size();) {
      try {
        for (const Fill& f : gate::default_fills(problems[i], cli.seed)) results[i].push_back(check_one(problems[i], f, defect));
      } catch (...) {
        std::lock_guard<std::mutex> lock(print);
        if (!error) error = std::current_exception();
        next = problems.size();
        return;
      }
      std::lock_guard<std::mutex> lock(print);
      for (const auto& c : results[i]) {
        log << (c.ok() ? "ok    " : "FAIL  ") << c.descriptor << "  [" << c.fill << "]";
        double worst = 0;
        for (const auto& cmp : c.compares)
          if (cmp.ulps_limited) worst = std::max(worst, cmp.worst_ulps);
        log << std::fixed << std::setprecision(2) << "  worst " << worst << " ulps  device " << c.device_s
            << " s, host " << c.host_s << " s\n";
        for (const auto& cmp : c.compares)
          if (!cmp.ok) log << "      " << cmp.what << ": " << cmp.bad << " elements; " << cmp.first << "\n";
      }
      log.flush();
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < cli.jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  std::size_t checks = 0, failed = 0;
  double worst = 0, device_s = 0, host_s = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& rs : results)
    for (const auto& c : rs) {
      ++checks;
      if (!c.ok()) ++failed;
      device_s += c.device_s;
      host_s += c.host_s;
      nlohmann::json cj = nlohmann::json::array();
      for (const auto& cmp : c.compares) {
        if (cmp.ulps_limited) worst = std::max(worst, cmp.worst_ulps);
        cj.push_back({{"what", cmp.what}, {"ok", cmp.ok}, {"bad", cmp.bad}, {"worst_ulps", cmp.worst_ulps},
                      {"first", cmp.first}});
      }
      list.push_back({{"descriptor", c.descriptor}, {"fill", c.fill}, {"ok", c.ok()}, {"device_seconds", c.device_s},
                      {"host_seconds", c.host_s}, {"comparisons", cj}});
    }
  const double wall = seconds_since(t0);
  log << "\n" << (failed ? "FAILED: " : "OK: ") << checks - failed << " of " << checks << " checks held ("
      << problems.size() << " problems); worst " << std::fixed << std::setprecision(2) << worst
      << " ulps (limit " << kRefcheckUlps << "); device reference " << device_s << " s, host references " << host_s
      << " s, wall " << wall << " s\n";
  if (!cli.report.empty()) {
    nlohmann::json doc{{"kgate_refcheck", 1}, {"backend", kernels::backend_name()}, {"defect", cli.defect},
                       {"checks", checks}, {"failed", failed}, {"worst_ulps", worst}, {"ulps_limit", kRefcheckUlps},
                       {"device_seconds", device_s}, {"host_seconds", host_s}, {"seconds", wall}, {"results", list}};
    files::write_output_file(cli.report, doc.dump(2) + "\n", "--report");
  }
  return failed ? 1 : 0;
}

}  // namespace kgate
