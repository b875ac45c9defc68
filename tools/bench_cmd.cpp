#include "tools/options.hpp"
#include "tools/bench_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "corpus/corpus_file.hpp"
#include "determinism/run_digest.hpp"
#include "kernels/api.hpp"
#include "reference/conv3d/gemm_rate.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/conv3d/ref_common.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"
#include "tools/bench_device.hpp"
#include "tools/external.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/stats.hpp"
#include "tools/verify.hpp"

namespace kgate {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string fmt(double v, int prec = 4) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

// One arm of a comparison. setup() prepares a problem (returns why not, or
// ""), check() judges its output once before timing, sample() returns the
// time of one sample in ms.
class Arm {
 public:
  virtual ~Arm() = default;
  virtual std::string name() const = 0;
  virtual std::string setup(const Problem& p) = 0;
  virtual std::string check() = 0;  // "passed", "failed: ...", "not checked: ..."
  virtual double sample() = 0;
  virtual std::string timer() const = 0;  // what the samples are timed with
  // How each timed sequence is issued, for the report ("" where it does not apply).
  virtual std::string launch() const { return ""; }
  // Whether the arm computes on the host's CPUs in fp64 (the reference): its
  // roof is the host's fp64 GEMM rate, not the device's copy bandwidth or
  // matrix-core peak.
  virtual bool on_host_cpu() const { return false; }
};

// kgate's production kernel on this build's backend, timed with the
// backend's events around the plan's launches (kernels/driver.hpp).
class KgateArm : public Arm {
 public:
  KgateArm(const BenchCli& cli, const bench::CacheFlush* flush) : cli_(cli), flush_(flush) {}
  std::string name() const override { return "kgate"; }
  std::string timer() const override {
    return kernels::backend_name() == "host" ? "wall clock around each launch sequence (host events)"
                                             : "device events around each launch sequence";
  }
  std::string launch() const override { return launch_; }
  std::string setup(const Problem& p) override {
    if (const auto s = kernels::is_supported(p); !s) return s.reason;
    p_ = p;
    plan_ = kernels::plan(p);
    in_ = determinism::make_inputs(p, parse_fill("signed", cli_.seed));
    ptr_.clear();
    for (const auto& [r, t] : in_) ptr_[r] = &t;
    // Warm-up with plain launches (outside the numbers), then the launch
    // mode, then the sequences per sample.
    iters_ = 1;
    graph_ = false;
    std::map<Role, Tensor> plain, replayed;
    const double t1 = run_timed(&plain);
    const bool want = cli_.launch == "graph" || (cli_.launch == "auto" && t1 < kGraphBelowMs);
    graph_ = want && bench::has_graphs();
    std::ostringstream why;
    why << std::setprecision(3) << (graph_ ? "graph replay" : "plain launches") << " (sequence " << t1 << " ms";
    if (cli_.launch != "auto") why << "; --launch " << cli_.launch;
    else why << (t1 < kGraphBelowMs ? " < " : " >= ") << kGraphBelowMs << " ms";
    if (want && !graph_) why << "; this backend has no graphs";
    why << ")";
    launch_ = why.str();
    // A replayed graph must leave the outputs the plain launches left.
    graph_mismatch_.clear();
    if (graph_) {
      run_timed(&replayed);
      for (const auto& [r, t] : plain)
        if (!replayed.count(r) || digest(replayed.at(r)) != digest(t))
          graph_mismatch_ += (graph_mismatch_.empty() ? "" : ", ") + std::string(kgate::name(r));
    }
    iters_ = static_cast<int>(std::clamp(std::ceil(cli_.min_sample_ms / std::max(t1, 1e-6)), 1.0, 1000.0));
    return "";
  }
  std::string check() override {
    if (!graph_mismatch_.empty())
      return "failed: the graph replay's " + graph_mismatch_ + " differ from the plain launches' (bitwise)";
    const gate::Result r = gate::evaluate(p_, {parse_fill("signed", cli_.seed)}, 0, {}, nullptr,
                                          *gate::resolve_reference(cli_.reference, cli_.selection.full));
    const std::string graph_note = graph_ ? "; graph replay bitwise equal to plain launches" : "";
    if (!gate::is_failure(r.state)) return std::string(oracle::name(r.state)) + graph_note;
    return "failed: " + std::string(oracle::name(r.state)) + " (repro: " + r.repro() + ")";
  }
  double sample() override { return run_timed(nullptr); }

 private:
  double run_timed(std::map<Role, Tensor>* out) {
    double ms = 0;
    kernels::RunOptions opt;
    opt.kernel_ms = &ms;
    opt.timing_iters = iters_;
    opt.graph = graph_;
    if (flush_) opt.before_each = [f = flush_] { (*f)(); };
    auto o = kernels::run(p_, plan_, ptr_, opt);  // the outputs of the last timed sequence
    if (out) *out = std::move(o);
    return ms;
  }
  const BenchCli& cli_;
  const bench::CacheFlush* flush_;
  Problem p_;
  kernels::Plan plan_;
  std::map<Role, Tensor> in_;
  std::map<Role, const Tensor*> ptr_;
  int iters_ = 1;
  bool graph_ = false;
  std::string launch_, graph_mismatch_;
};

// The fp64 reference (fast implementation) on the host, wall clock, warm:
// one call before the numbers, so that the timed calls find their large
// blocks resident (reference/host_memory.hpp), as the calls of a verification
// run after its first problem of a size do.
class RefArm : public Arm {
 public:
  explicit RefArm(const BenchCli& cli) : cli_(cli) {}
  std::string name() const override { return "ref"; }
  std::string timer() const override {
    return "wall clock (fp64 fast reference, host, " + std::to_string(ref::ref_threads()) +
           " threads; one warm-up call outside the numbers)";
  }
  bool on_host_cpu() const override { return true; }
  std::string setup(const Problem& p) override {
    p_ = p;
    in_ = ref::make_inputs(p, parse_fill("signed", cli_.seed));
    sample();
    return "";
  }
  std::string check() override { return "not checked: the reference is the oracle's own"; }
  double sample() override {
    ref::Inputs in;
    for (const auto& [r, t] : in_) in.emplace(r, std::cref(t));
    const auto t0 = Clock::now();
    const auto out = ref::run_reference(p_, in, ref::Impl::fast);
    const double ms = seconds_since(t0) * 1e3;
    if (out.empty()) throw std::runtime_error("reference produced no output");
    return ms;
  }

 private:
  const BenchCli& cli_;
  Problem p_;
  ref::Outputs in_;
};

// The plan the oracle judges a vendor library's output with: the roles and
// term counts of kgate's plan for the problem, each reduction as one
// sequential loop over all its terms (the widest bound of any summation
// order: every term passes through at most that many roundings), in the
// mma_sm90 model (16 products per instruction, truncated) for a bf16/fp16
// convolution, whose library runs it on tensor cores, and IEEE
// round-to-nearest otherwise. A convolution's bias is added to the library's
// rounded output (PyTorch adds it after cuDNN's convolution, in the output
// dtype: a bf16 output with bias is bf16(bf16(convolution) + bias)), one
// rounding more.
kernels::Plan vendor_plan(const Problem& p) {
  kernels::Plan pl = kernels::plan(p);
  const auto* c = std::get_if<ConvProblem>(&p);
  const bool tensor_cores = c && (c->src == DType::bf16 || c->src == DType::fp16);
  for (auto& [role, r] : pl.reduction) {
    ReductionPlan v = ReductionPlan::sequential(r.length * r.splits, r.acc);
    v.epilogue_ops = r.epilogue_ops;
    v.rounded_before_epilogue = c && c->bias && r.epilogue_ops > 0;
    if (tensor_cores) {
      v.model = AccumModel::mma_sm90;
      v.chunk = 16;
    }
    r = v;
  }
  return pl;
}

// An implementation behind kgate's driver protocol (tools/external.hpp,
// docs/DRIVERS.md), one driver process per arm for the whole run: the torch
// arms are the built-in torch backend (kgate.backends.torch) with the
// U-Net's training settings (channels_last_3d, autocast in the problem's
// input dtype; torch-det with deterministic algorithms too),
// python:MODULE[:ATTR] is any target; --backend-option pairs follow the
// arm's own. The driver times the runs in its own process (the run
// request's timing field): setup's request is kSetupWarmup warm-up runs and
// one timed run on kgate's inputs, whose time sets the runs per sample as
// the kgate arm's first sequence does (enough to last --min-sample-ms) and
// whose outputs the check judges; each sample is one request, the mean of
// that many runs, each timed on its own after the cache flush, after
// kSampleWarmup warm-up runs outside the numbers.
class ExternalArm : public Arm {
 public:
  ExternalArm(const BenchCli& cli, std::string arm, std::size_t flush_bytes)
      : cli_(cli), name_(std::move(arm)), flush_bytes_(flush_bytes) {
    gate::ExternalOptions o;
    o.backend = name_.rfind("python:", 0) == 0 ? name_ : "torch";
    if (name_ == "torch" || name_ == "torch-det") o.options = {"channels_last_3d=1", "autocast=1"};
    if (name_ == "torch-det") o.options.push_back("deterministic=1");
    o.options.insert(o.options.end(), cli.backend_options.begin(), cli.backend_options.end());
    o.timeout = cli.driver_timeout;
    try {
      runner_ = gate::start_external(o);
    } catch (const gate::RunError& e) {
      const char* py = std::getenv("KGATE_PYTHON");
      throw gate::RunError("arm " + name_ + ": " + e.what() + " (the interpreter is " +
                           (py && *py ? std::string(py) : std::string("python3")) +
                           "; KGATE_PYTHON names another)");
    }
    implementation_ = gate::external_implementation(*runner_);
  }
  std::string name() const override { return name_; }
  std::string timer() const override {
    return (timer_.empty() ? std::string("timed by the driver") : timer_) + " [" + implementation_ + "]";
  }
  std::string setup(const Problem& p) override {
    p_ = p;
    out_.clear();
    timer_.clear();
    if (const auto s = runner_->is_supported(p); !s) return s.reason;
    in_ = ref::make_inputs(p, parse_fill("signed", cli_.seed));
    gate::TimedRun r = gate::run_timed(*runner_, p, in_, {kSetupWarmup, 1, flush_bytes_});
    iters_ = static_cast<int>(std::clamp(std::ceil(cli_.min_sample_ms / std::max(r.ms.at(0), 1e-6)), 1.0, 1000.0));
    out_ = std::move(r.outputs);
    timer_ = r.timer;
    return "";
  }
  // Setup's outputs (the timed call on kgate's inputs), every one judged by
  // the oracle against the fp64 reference with vendor_plan's bounds.
  std::string check() override {
    if (const auto s = kernels::is_supported(p_); !s)
      return "not checked: no kgate plan gives the output roles' term counts (" + s.reason + ")";
    const auto roles = gate::judge(p_, vendor_plan(p_), parse_fill("signed", cli_.seed), in_, out_);
    std::string failed;
    for (const auto& rr : roles)
      if (gate::is_failure(gate::verdict(rr.report))) {
        const oracle::TierResult& t2 = rr.report.tier2;
        failed += (failed.empty() ? "" : ", ") + rr.role + " " + std::string(oracle::name(rr.report.state)) +
                  " (tier 2: " + std::to_string(t2.violations) + " of " + std::to_string(t2.checked) +
                  " elements over the bound, largest error/bound " + fmt(t2.max_margin, 3) + ")";
      }
    if (!failed.empty()) return "failed: " + failed + " (oracle with vendor_plan bounds)";
    return "passed (oracle, reductions bounded as any-order sequential sums)";
  }
  double sample() override {
    const gate::TimedRun r = gate::run_timed(*runner_, p_, in_, {kSampleWarmup, iters_, flush_bytes_});
    double sum = 0;
    for (double ms : r.ms) sum += ms;
    return sum / static_cast<double>(r.ms.size());
  }

 private:
  // Warm-up runs per request. A request prepares its operands afresh (the
  // driver loads them from the request's files), and the first runs after
  // that allocate (the outputs, the backward's buffers); the first request
  // of a problem also meets the library's first call on its shape. On an
  // H100 (kgate.backends.torch, a 64-channel 16^3 bf16 convolution, 0.017 ms
  // steady) a request's first timed run took 0.27 ms without warm-up runs,
  // and was within the noise of the steady time after two.
  static constexpr int kSetupWarmup = 3, kSampleWarmup = 2;
  const BenchCli& cli_;
  std::string name_, implementation_, timer_;
  std::size_t flush_bytes_;
  std::unique_ptr<gate::Runner> runner_;
  Problem p_;
  std::map<Role, Tensor> in_, out_;
  int iters_ = 1;
};

struct ArmResult {
  std::string arm, check, skipped, timer, launch;
  double roof_ms = 0;  // this arm's roof time (0: none applies)
  bool device = true;  // runs on the backend's device (the matrix-core peak applies)
  std::vector<double> samples;
  stats::Interval time, ratio;  // ratio: to the first timed arm, paired per round
  bool has_ratio = false;
};

struct ProblemResult {
  std::string descriptor, op;
  double flops = 0, bytes = 0, roof_ms = 0;
  std::string atom;        // the MMA atom kgate's plan uses ("" for none)
  double peak_tflops = 0;  // that atom's measured peak
  int calls_per_step = 0;
  int rounds = 0;
  std::string stop;
  std::vector<ArmResult> arms;
};


// A plot of each ratio with its interval against 1 (log scale).
std::string ratio_svg(const std::vector<ProblemResult>& results) {
  struct Row {
    std::string label;
    stats::Interval r;
  };
  std::vector<Row> rows;
  for (const auto& p : results)
    for (const auto& a : p.arms)
      if (a.has_ratio) rows.push_back({p.descriptor + " : " + a.arm, a.ratio});
  const int w = 1100, left = 520, right = 40, rowh = 22, top = 40;
  const int h = top + rowh * static_cast<int>(rows.size()) + 40;
  double lo = 0.5, hi = 2;
  for (const auto& r : rows) {
    if (std::isfinite(r.r.lo) && r.r.lo > 0) lo = std::min(lo, r.r.lo);
    if (std::isfinite(r.r.hi)) hi = std::max(hi, r.r.hi);
  }
  const auto x = [&](double v) {
    v = std::clamp(v, lo, hi);
    return left + (w - left - right) * (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo));
  };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"monospace\" font-size=\"12\">\n"
    << "<text x=\"10\" y=\"20\">time ratio to the first arm, 95% interval (log scale; left of 1 is faster)</text>\n"
    << "<line x1=\"" << x(1) << "\" y1=\"" << top - 10 << "\" x2=\"" << x(1) << "\" y2=\"" << h - 30
    << "\" stroke=\"gray\" stroke-dasharray=\"4\"/>\n";
  for (double t : {lo, 1.0, hi})
    s << "<text x=\"" << x(t) - 10 << "\" y=\"" << h - 12 << "\">" << fmt(t, 2) << "</text>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double y = top + rowh * static_cast<double>(i) + rowh / 2.0;
    std::string label = rows[i].label;
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{"&", "&amp;"}, {"<", "&lt;"}})
      for (std::size_t k = 0; (k = label.find(from, k)) != std::string::npos; k += to.size()) label.replace(k, 1, to);
    s << "<text x=\"10\" y=\"" << y + 4 << "\">" << label << "</text>\n"
      << "<line x1=\"" << x(rows[i].r.lo) << "\" y1=\"" << y << "\" x2=\"" << x(rows[i].r.hi) << "\" y2=\"" << y
      << "\" stroke=\"black\" stroke-width=\"2\"/>\n"
      << "<circle cx=\"" << x(rows[i].r.center) << "\" cy=\"" << y << "\" r=\"4\" fill=\"steelblue\"/>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchCli& cli) {
  auto* c = app.add_subcommand("bench", "Time arms side by side (kgate, ref, torch, torch-det) with 95% intervals");
  c->add_option("descriptor", cli.descriptors, "problems to time");
  c->add_flag("--corpus", cli.corpus, "time the corpus problems of --config (weighted by calls per step)");
  c->add_option("--corpus-file", cli.selection.corpus, "shapes corpus file")->capture_default_str();
  c->add_option("--config", cli.selection.configs, "configurations (with --corpus)")->capture_default_str();
  c->add_option("--filter", cli.selection.filters, "KEY=VALUE (with --corpus); repeatable");
  c->add_flag("--full", cli.selection.full, "full extents (with --corpus)");
  options::add_flop_budget(*c, cli.selection.flop_budget, "reduced extents (with --corpus)");
  c->add_option("--arm", cli.arms,
                "arms in order, the first is the ratios' base: kgate ref torch torch-det python:MODULE[:ATTR]")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "kgate" || v == "ref" || v == "torch" || v == "torch-det") return "";
            if (v.rfind("python:", 0) == 0 && v.size() > 7 && v.find_first_of(" \t\n'\"") == std::string::npos)
              return "";
            return "expected kgate, ref, torch, torch-det or python:MODULE[:ATTR], got '" + v + "'";
          },
          "ARM"))
      ->capture_default_str();
  c->add_option("--target", cli.target, "stop when every arm's 95% half-width is under this share of its time")
      ->check(CLI::Range(1e-4, 1.0))->capture_default_str();
  c->add_option("--budget", cli.budget_s, "seconds per problem")->check(CLI::Range(0.0, 1e6))->capture_default_str();
  c->add_option("--min-rounds", cli.min_rounds, "rounds before the stop rule applies")
      ->check(CLI::Range(2, 1000000))->capture_default_str();
  c->add_option("--max-rounds", cli.max_rounds, "rounds at most")->check(CLI::Range(2, 1000000))->capture_default_str();
  c->add_option("--min-sample-ms", cli.min_sample_ms, "launch sequences per sample add up to at least this")
      ->check(CLI::Range(0.0, 1e5))->capture_default_str();
  c->add_flag("--no-flush", cli.no_flush, "no cache flush between timed sequences (the report says so)");
  c->add_flag("--no-check", cli.no_check, "skip the oracle check before timing (the report says so)");
  c->add_option("--launch", cli.launch,
                "kgate arm: graph (replay a captured graph), plain, or auto (graph below 1 ms per sequence)")
      ->check(CLI::IsMember({"auto", "graph", "plain"}))->capture_default_str();
  c->add_flag("--ceilings", cli.ceilings, "also print the streaming ceilings (read, write, widening, single-read bound)");
  options::add_seed(*c, cli.seed, "seed of the signed fill");
  options::add_reference(*c, cli.reference);
  options::add_report(*c, "--json", cli.json, "JSON report ('' writes none)");
  options::add_report(*c, "--svg", cli.svg, "SVG plot of the ratios with their intervals");
  c->add_option("--backend-option", cli.backend_options,
                "KEY=VALUE for the external arms' drivers, after the torch arms' own (torch: device, "
                "channels_last_3d, autocast, cudnn_benchmark, deterministic, allow_tf32); repeatable");
  c->add_option("--driver-timeout", cli.driver_timeout, "seconds an external arm's driver may take per request")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  return c;
}

int run_bench_command(const BenchCli& cli) {
  const auto t_start = Clock::now();
  // Problems, and their calls per step when timed from the corpus.
  std::vector<Problem> problems;
  std::map<std::string, int> calls;
  for (const auto& d : cli.descriptors) problems.push_back(parse_descriptor(d));
  if (cli.corpus) {
    for (const Problem& p : select_corpus(cli.selection)) problems.push_back(p);
    for (const auto& e : corpus::load_shapes(cli.selection.corpus)) {
      if (std::find(cli.selection.configs.begin(), cli.selection.configs.end(), e.config) ==
          cli.selection.configs.end())
        continue;
      const Problem p = cli.selection.full ? e.problem : reduce_extents(e.problem, cli.selection.flop_budget);
      calls[to_descriptor(p)] += e.calls_per_step;
    }
  }
  if (problems.empty()) throw InputError("descriptor", "no problem to time (give descriptors or --corpus)");
  if (cli.min_rounds > cli.max_rounds)
    throw InputError("--max-rounds", std::to_string(cli.max_rounds) + " is below --min-rounds " +
                                         std::to_string(cli.min_rounds));
  // The reports' paths are checked before the run, not after it.
  if (!cli.json.empty()) files::output_file(cli.json, "--json");
  if (!cli.svg.empty()) files::output_file(cli.svg, "--svg");

  std::unique_ptr<bench::CacheFlush> flush;
  if (!cli.no_flush) flush = std::make_unique<bench::CacheFlush>(bench::default_flush_bytes());
  std::vector<std::unique_ptr<Arm>> arms;
  for (const auto& a : cli.arms) {
    if (a == "kgate") arms.push_back(std::make_unique<KgateArm>(cli, flush.get()));
    else if (a == "ref") arms.push_back(std::make_unique<RefArm>(cli));
    else arms.push_back(std::make_unique<ExternalArm>(cli, a, flush ? flush->bytes() : 0));
  }

  const double copy = bench::copy_gbps(bench::default_copy_bytes(), 10);
  ref::GemmRate host_gemm;
  for (const auto& a : arms)
    if (a->on_host_cpu() && host_gemm.threads == 0) host_gemm = ref::measure_gemm_rate(ref::ref_threads());
  std::cout << "kgate bench: " << problems.size() << " problem(s), arms";
  for (const auto& a : arms) std::cout << " " << a->name();
  std::cout << "; backend " << kernels::backend_name() << "; cache "
            << (flush ? "flushed before each timed sequence (" + std::to_string(flush->bytes() >> 20) + " MiB)"
                      : std::string("NOT flushed (--no-flush)"))
            << "; oracle check " << (cli.no_check ? "SKIPPED (--no-check)" : "before timing") << "; kgate launches "
            << (cli.launch == "auto" ? "auto (graph replay below " + fmt(kGraphBelowMs, 1) + " ms per sequence)" : cli.launch)
            << (bench::has_graphs() ? "" : " (no graphs on this backend: plain)") << "\n";
  std::cout << "copy bandwidth " << fmt(copy, 1) << " GB/s (" << (bench::default_copy_bytes() >> 20)
            << " MiB device-to-device, read + write)\n";
  if (host_gemm.threads > 0)
    std::cout << "host fp64 GEMM rate " << fmt(host_gemm.gflops, 1) << " GFLOP/s (Eigen, " << host_gemm.threads
              << " threads, one " << host_gemm.n << "^3 product each, best of " << host_gemm.trials << ")\n";
  std::vector<bench::Ceiling> ceilings;
  if (cli.ceilings) {
    ceilings = bench::streaming_ceilings(bench::default_copy_bytes() / 4, 10, copy);
    for (const auto& c : ceilings)
      std::cout << "  ceiling " << std::left << std::setw(48) << c.name << std::right << fmt(c.ms) << " ms "
                << std::setw(9) << fmt(c.gbps, 1) << " GB/s " << std::setw(6) << fmt(100 * c.share_of_copy, 1)
                << "% of copy\n";
  }

  int failures = 0;
  std::vector<ProblemResult> results;
  std::map<std::string, bench::MmaPeak> peaks;
  for (const Problem& p : problems) {
    ProblemResult pr;
    pr.descriptor = to_descriptor(p);
    pr.op = op_dir_name(p);
    pr.flops = flops(p);
    pr.bytes = static_cast<double>(min_bytes(p));
    pr.roof_ms = pr.bytes / (copy * 1e6);  // bandwidth roof
    pr.calls_per_step = calls.count(pr.descriptor) ? calls.at(pr.descriptor) : 0;
    // Matrix-core problems: the atom's measured peak is a second roof.
    if (kernels::is_supported(p)) pr.atom = bench::atom_of_variant(kernels::plan(p).variant);
    if (!pr.atom.empty()) {
      const bool first = !peaks.count(pr.atom);
      const bench::MmaPeak pk = bench::mma_peak(pr.atom);
      peaks[pr.atom] = pk;
      if (first)
        std::cout << "matrix-core peak " << pk.atom << ": " << fmt(pk.tflops, pk.tflops < 1 ? 5 : 1) << " TFLOP/s (" << pk.instructions
                  << " instructions from registers in " << fmt(pk.ms, 3) << " ms)\n";
      pr.peak_tflops = pk.tflops;
      pr.roof_ms = std::max(pr.roof_ms, pr.flops / (pk.tflops * 1e9));
    }
    std::vector<Arm*> live;
    for (const auto& a : arms) {
      ArmResult ar;
      ar.arm = a->name();
      ar.device = !a->on_host_cpu();
      // A device arm's roof is the problem's; the host's fp64 arm has one on
      // convolutions only (their FLOP at the host's GEMM rate).
      ar.roof_ms = ar.device ? pr.roof_ms
                   : std::holds_alternative<ConvProblem>(p) && host_gemm.gflops > 0 ? pr.flops / (host_gemm.gflops * 1e6)
                                                                                      : 0.0;
      try {
        ar.skipped = a->setup(p);
        ar.launch = a->launch();
        if (ar.skipped.empty()) {
          ar.check = cli.no_check ? "skipped (--no-check)" : a->check();
          if (ar.check.rfind("failed", 0) == 0) {
            ++failures;
            ar.skipped = "oracle check " + ar.check;
          }
        }
      } catch (const InputError&) {
        throw;
      } catch (const gate::RunError&) {
        throw;  // an error of the run (an external arm's driver broke the protocol): exit 2
      } catch (const std::exception& e) {
        ar.skipped = std::string("error: ") + e.what();
      }
      ar.timer = a->timer();  // after setup: an external arm's driver says what timed its runs
      if (ar.skipped.empty()) live.push_back(a.get());
      pr.arms.push_back(ar);
    }
    // Rounds: every live arm once, in the balanced order.
    std::vector<std::vector<double>> samples(live.size());
    const auto t0 = Clock::now();
    stats::StopRule rule{cli.target, cli.budget_s, cli.min_rounds, cli.max_rounds};
    stats::Stop stop = live.empty() ? stats::Stop::budget : stats::Stop::running;
    std::string error;
    try {
      while (stop == stats::Stop::running) {
        for (int k : stats::balanced_order(static_cast<int>(live.size()), pr.rounds))
          samples[static_cast<std::size_t>(k)].push_back(live[static_cast<std::size_t>(k)]->sample());
        ++pr.rounds;
        stop = stats::should_stop(samples, seconds_since(t0), rule);
        if (stop == stats::Stop::budget && pr.rounds < 2) stop = stats::Stop::running;  // an interval needs 2
      }
    } catch (const gate::RunError&) {
      throw;
    } catch (const std::exception& e) {
      error = e.what();
      ++failures;
    }
    pr.stop = !error.empty() ? "error: " + error : live.empty() ? "nothing to time" : stats::name(stop);
    for (auto& s : samples) s.resize(static_cast<std::size_t>(pr.rounds));  // whole rounds only
    std::size_t k = 0;
    for (auto& ar : pr.arms) {
      if (!ar.skipped.empty()) continue;
      ar.samples = samples[k++];
      if (ar.samples.empty()) {
        ar.skipped = "no sample (" + pr.stop + ")";
        continue;
      }
      ar.time = stats::time_interval(ar.samples);
      if (k > 1) {
        ar.ratio = stats::ratio_interval(ar.samples, samples[0]);
        ar.has_ratio = true;
      }
    }
    for (const auto& a : pr.arms)  // progress, so that a run cut short still says something
      std::cout << "  " << pr.descriptor << " | " << a.arm << " | "
                << (a.skipped.empty() ? fmt(a.time.center) + " ms [" + fmt(a.time.lo) + ", " + fmt(a.time.hi) + "]" +
                                            (a.has_ratio ? " ratio " + fmt(a.ratio.center, 3) : "")
                                      : "not timed: " + a.skipped)
                << " | " << pr.stop << std::endl;
    results.push_back(pr);
  }

  // The table; the problem column is as wide as the longest descriptor, the
  // arm column as the longest arm name (python:MODULE:ATTR).
  std::size_t width = 8, arm_width = 10;
  for (const auto& pr : results) width = std::max(width, pr.descriptor.size() + 2);
  for (const auto& a : cli.arms) arm_width = std::max(arm_width, a.size() + 2);
  const int pw = static_cast<int>(width), aw = static_cast<int>(arm_width);
  std::cout << "\n"
            << std::left << std::setw(pw) << "problem" << std::setw(aw) << "arm" << std::right << std::setw(11)
            << "time ms" << std::setw(24) << "95% interval" << std::setw(9) << "TFLOP/s" << std::setw(9) << "GB/s"
            << std::setw(8) << "%roof" << std::setw(8) << "%mma" << std::setw(30) << "ratio to first [95%]"
            << std::setw(7) << "n"
            << "  stop\n";
  for (const auto& pr : results) {
    for (const auto& a : pr.arms) {
      std::cout << std::left << std::setw(pw) << pr.descriptor << std::setw(aw) << a.arm << std::right;
      if (!a.skipped.empty()) {
        std::cout << "  not timed: " << a.skipped << "\n";
        continue;
      }
      const double ms = a.time.center;
      std::cout << std::setw(11) << fmt(ms) << std::setw(24) << ("[" + fmt(a.time.lo) + ", " + fmt(a.time.hi) + "]")
                << std::setw(9) << fmt(pr.flops / (ms * 1e9), 3) << std::setw(9) << fmt(pr.bytes / (ms * 1e6), 1)
                << std::setw(8) << (a.roof_ms > 0 ? fmt(100 * a.roof_ms / ms, 1) : std::string("-")) << std::setw(8)
                << (a.device && pr.peak_tflops > 0 ? fmt(100 * pr.flops / (ms * 1e9) / pr.peak_tflops, 1)
                                                   : std::string("-"))
                << std::setw(30)
                << (a.has_ratio ? fmt(a.ratio.center, 3) + " [" + fmt(a.ratio.lo, 3) + ", " + fmt(a.ratio.hi, 3) + "]"
                                : std::string("-"))
                << std::setw(7) << a.samples.size() << "  " << pr.stop << "\n";
    }
  }
  // Step totals per operator-direction (corpus mode): sum of calls x time.
  if (cli.corpus) {
    std::map<std::pair<std::string, std::string>, double> step;
    for (const auto& pr : results)
      for (const auto& a : pr.arms)
        if (a.skipped.empty()) step[{pr.op, a.arm}] += pr.calls_per_step * a.time.center;
    std::cout << "\nper training step (calls per step x time), configurations";
    for (const auto& c : cli.selection.configs) std::cout << " " << c;
    std::cout << ":\n";
    for (const auto& [key, ms] : step)
      std::cout << "  " << std::left << std::setw(28) << key.first << std::setw(aw) << key.second << std::right
                << std::setw(12) << fmt(ms, 3) << " ms\n";
  }
  std::cout << "\ntime: geometric mean of the samples (the median under log-symmetric noise); intervals: Student t "
               "on log times; ratios: paired per round\n"
            << "%roof: the problem's roof time (its minimum bytes at the copy bandwidth or, on matrix cores, its FLOP at "
               "the atom's measured peak, whichever is longer) as a share of the time; for the ref arm (fp64 on the "
               "host's CPUs), a convolution's FLOP at the host's fp64 GEMM rate\n"
            << "%mma: TFLOP/s as a share of the measured peak of the MMA atom kgate's plan uses (a library on other "
               "instructions may exceed it; device arms only)\n";
  for (const auto& pr : results)
    for (const auto& a : pr.arms)
      if (!a.launch.empty() && a.skipped.empty()) std::cout << "launch: " << pr.descriptor << " | " << a.arm << " | " << a.launch << "\n";
  for (const auto& pr : results)
    for (const auto& a : pr.arms)
      if (!a.check.empty()) std::cout << "check: " << pr.descriptor << " | " << a.arm << " | " << a.check << "\n";

  nlohmann::json j{{"backend", kernels::backend_name()},
                   {"copy_gbps", copy},
                   {"cache", flush ? "flushed" : "warm"},
                   {"flush_bytes", flush ? flush->bytes() : 0},
                   {"oracle_check", cli.no_check ? "skipped" : "before timing"},
                   {"target", cli.target},
                   {"budget_s", cli.budget_s},
                   {"min_sample_ms", cli.min_sample_ms},
                   {"arms", cli.arms},
                   {"host_gemm_gflops", host_gemm.gflops},
                   {"host_gemm_threads", host_gemm.threads},
                   {"seconds", seconds_since(t_start)},
                   {"failures", failures}};
  j["ceilings"] = nlohmann::json::array();
  for (const auto& c : ceilings)
    j["ceilings"].push_back({{"name", c.name}, {"ms", c.ms}, {"gbps", c.gbps}, {"share_of_copy", c.share_of_copy}});
  j["mma_peaks"] = nlohmann::json::array();
  for (const auto& [atom, pk] : peaks)
    j["mma_peaks"].push_back({{"atom", atom}, {"tflops", pk.tflops}, {"ms", pk.ms}, {"instructions", pk.instructions}});
  j["problems"] = nlohmann::json::array();
  for (const auto& pr : results) {
    nlohmann::json jp{{"problem", pr.descriptor}, {"op", pr.op},         {"flops", pr.flops},
                      {"min_bytes", pr.bytes},    {"roof_ms", pr.roof_ms}, {"rounds", pr.rounds},
                      {"stop", pr.stop},          {"calls_per_step", pr.calls_per_step}};
    if (!pr.atom.empty()) jp["mma"] = {{"atom", pr.atom}, {"peak_tflops", pr.peak_tflops}};
    jp["arms"] = nlohmann::json::array();
    for (const auto& a : pr.arms) {
      nlohmann::json ja{{"arm", a.arm}, {"timer", a.timer}, {"check", a.check}};
      if (!a.launch.empty()) ja["launch"] = a.launch;
      if (!a.skipped.empty()) {
        ja["not_timed"] = a.skipped;
      } else {
        ja["samples_ms"] = a.samples;
        ja["time_ms"] = {{"center", a.time.center}, {"lo", a.time.lo}, {"hi", a.time.hi}, {"n", a.time.n}};
        ja["median_ms"] = stats::median(a.samples);
        ja["tflops"] = pr.flops / (a.time.center * 1e9);
        ja["gbps"] = pr.bytes / (a.time.center * 1e6);
        if (a.roof_ms > 0) {
          ja["roof_ms"] = a.roof_ms;
          ja["roof"] = a.device ? "device" : "host fp64 GEMM rate";
          ja["share_of_roof"] = a.roof_ms / a.time.center;
        }
        if (a.device && pr.peak_tflops > 0)
          ja["share_of_mma_peak"] = pr.flops / (a.time.center * 1e9) / pr.peak_tflops;
        if (a.has_ratio) ja["ratio"] = {{"center", a.ratio.center}, {"lo", a.ratio.lo}, {"hi", a.ratio.hi}};
      }
      jp["arms"].push_back(ja);
    }
    j["problems"].push_back(jp);
  }
  if (!cli.json.empty()) files::write_output_file(cli.json, j.dump(1) + "\n", "--json");
  if (!cli.svg.empty()) files::write_output_file(cli.svg, ratio_svg(results), "--svg");
  return failures ? 1 : 0;
}

}  // namespace kgate
