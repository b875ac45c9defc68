// kgate: the command line. Exit codes (tools/summary.hpp): 0 passed, 1 a
// verification failed, 2 bad input or an error of the run (the message names
// the field), 3 incomplete (nothing failed, something was not verified).
#include <CLI/CLI.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <condition_variable>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <thread>

#include "corpus/corpus_file.hpp"
#include "corpus/unet.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/fill.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"
#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "reference/conv3d/ref.hpp"
#include "tools/audit_cmd.hpp"
#include "tools/bench_cmd.hpp"
#include "tools/bitwise_cmd.hpp"
#include "tools/data.hpp"
#include "tools/digests_cmd.hpp"
#include "tools/external.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/options.hpp"
#include "tools/summary.hpp"
#include "tools/isa_cmd.hpp"
#include "tools/gate_problems.hpp"
#include "tools/judge_cmd.hpp"
#include "tools/refcheck_cmd.hpp"
#include "tools/select.hpp"
#include "tools/verify.hpp"
#include "tools/version.hpp"

namespace fs = std::filesystem;
using namespace kgate;

namespace {

nlohmann::json spec_json(const TensorSpec& t, bool input) {
  nlohmann::json j{{"role", name(t.role)}, {"dtype", name(t.dtype)}, {"dims", t.dims}};
  if (input) j["derived"] = t.derived;
  return j;
}

int cmd_desc(const std::string& text, bool json, bool tensors) {
  const Problem p = parse_descriptor(text);
  if (tensors) {
    // The tensors an implementation of p reads and writes (NDHWC), for
    // drivers and the Python package.
    nlohmann::json j{{"descriptor", to_descriptor(p)}, {"problem", to_json(p)}, {"op", op_dir_name(p)}};
    j["inputs"] = nlohmann::json::array();
    j["outputs"] = nlohmann::json::array();
    for (const auto& t : inputs(p)) j["inputs"].push_back(spec_json(t, true));
    for (const auto& t : outputs(p)) j["outputs"].push_back(spec_json(t, false));
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (json) {
    std::cout << to_json(p).dump(2) << "\n";
    return 0;
  }
  std::cout << to_descriptor(p) << "\n";
  std::cout << "  flops      " << format_double(flops(p)) << "\n";
  std::cout << "  min bytes  " << min_bytes(p) << "\n";
  for (const auto& t : inputs(p))
    std::cout << "  in  " << name(t.role) << " " << name(t.dtype) << " " << dims_string(t.dims) << (t.derived ? " (derived)" : "") << "\n";
  for (const auto& t : outputs(p)) std::cout << "  out " << name(t.role) << " " << name(t.dtype) << " " << dims_string(t.dims) << "\n";
  return 0;
}

// Writes every input as <role>.npy (the derived ones too: GroupNorm
// backward's mean and rstd, as the references compute them from x) and a
// manifest.json with the problem, the generator and each tensor's digest,
// which `kgate judge` checks.
int cmd_gen(const std::string& text, const std::string& fill_text, std::uint64_t seed, const std::string& out) {
  const Problem p = parse_descriptor(text);
  validate(p);
  const Fill f = fill_text == "lattice" ? lattice_fill(p, seed) : parse_fill(fill_text, seed);
  files::output_folder(out, "--out");
  nlohmann::json manifest{{"descriptor", to_descriptor(p)}, {"problem", to_json(p)}, {"fill", to_json(f)}};
  const auto in = ref::make_inputs(p, f);
  for (const auto& s : inputs(p)) {
    const Tensor& t = in.at(s.role);
    const std::string file = std::string(name(s.role)) + ".npy";
    write_npy((fs::path(out) / file).string(), t.view());
    manifest["tensors"][std::string(name(s.role))] = {
        {"file", file}, {"dtype", name(s.dtype)}, {"dims", s.dims}, {"digest", digest(t)}, {"derived", s.derived}};
    std::cout << file << "  " << name(s.dtype) << " " << dims_string(s.dims) << "  " << digest(t)
              << (s.derived ? "  (derived)" : "") << "\n";
  }
  write_file_atomic((fs::path(out) / "manifest.json").string(), manifest.dump(2) + "\n");
  return 0;
}

// The problems of a selection (verify's --config, --filter, --full,
// --flop-budget), one descriptor per line, or as JSON with the corpus
// entry's configuration, sites and calls per step.
int cmd_problems(const Selection& sel, bool json) {
  const std::vector<Problem> work = select_corpus(sel, true);
  if (!json) {
    for (const Problem& p : work) std::cout << to_descriptor(p) << "\n";
    return 0;
  }
  // The corpus entries each selected problem stands for (with reduced
  // extents several full-size entries can share one descriptor).
  std::vector<corpus::Entry> entries = corpus::load_shapes(sel.corpus);
  for (auto& e : gate::plan_entries()) entries.push_back(std::move(e));
  std::map<std::string, nlohmann::json> sources;
  for (const auto& e : entries) {
    if (std::find(sel.configs.begin(), sel.configs.end(), e.config) == sel.configs.end()) continue;
    if (!filter_matches(e, e.problem, sel.filters)) continue;
    const bool keep = sel.full || e.config == gate::kPlanConfig;
    const std::string d = to_descriptor(keep ? e.problem : reduce_extents(e.problem, sel.flop_budget));
    sources[d].push_back({{"config", e.config},
                          {"corpus_descriptor", e.descriptor},
                          {"form", name(e.form)},
                          {"sites", e.sites},
                          {"calls_per_step", e.calls_per_step}});
  }
  nlohmann::json arr = nlohmann::json::array();
  for (const Problem& p : work) {
    const std::string d = to_descriptor(p);
    const nlohmann::json& src = sources.at(d);
    const nlohmann::json& first = src.front();
    arr.push_back({{"descriptor", d},
                   {"op", op_dir_name(p)},
                   {"config", first.at("config")},
                   {"form", first.at("form")},
                   {"sites", first.at("sites")},
                   {"calls_per_step", first.at("calls_per_step")},
                   {"sources", src}});
  }
  std::cout << arr.dump(2) << "\n";
  return 0;
}

// While one problem runs: a line every `interval` seconds with the elapsed
// time and the phase (inputs, kernel, rerun, reference, oracle), flushed, so
// that a long check shows it is alive in a log as on a terminal.
class Heartbeat {
 public:
  explicit Heartbeat(double interval) : interval_(interval) {
    if (interval_ > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void phase(const std::string& p) {
    std::lock_guard lock(mutex_);
    phase_ = p;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    const auto period = std::chrono::duration<double>(interval_);
    while (!cv_.wait_for(lock, period, [&] { return stop_; })) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      std::cout << "  ... " << std::fixed << std::setprecision(1) << s << " s, " << phase_ << std::endl;
    }
  }
  double interval_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string phase_ = "starting";
  std::thread thread_;
};

struct CheckOptions {
  std::string fill;           // empty: the default fills
  std::uint64_t seed = 1;
  std::string backend = "auto";
  std::vector<std::string> backend_options;
  std::string model = "fp32-any-order";
  double driver_timeout = 600;
  std::string reference = "auto";  // host | device | auto (auto: host for one problem)
  int repeats = 1;
  double progress = 5;        // heartbeat period in seconds; 0: none
  double memory_limit = 0;    // bytes; 0: available memory
  bool require_all = false;
};

// The developer's loop for one problem: verdict per tier, worst elements,
// the plan, and the command that reproduces it.
int cmd_check(const std::string& text, const CheckOptions& o) {
  const Problem p = parse_descriptor(text);
  const bool external = gate::is_external_backend(o.backend);
  if (!external && o.backend != "auto" && o.backend != kernels::backend_name())
    throw InputError("--backend", o.backend + " is not available in this build (it runs the " +
                                      kernels::backend_name() + " backend)");
  if (external) oracle::parse_model(o.model);
  const nlohmann::json settings = gate::backend_settings();
  std::vector<Fill> fills;
  if (o.fill.empty()) {
    std::optional<kernels::Plan> plan;
    if (!external && kernels::is_supported(p)) plan = kernels::plan(p);
    fills = gate::default_fills(p, o.seed, plan ? &*plan : nullptr);
  }
  else fills.push_back(o.fill == "lattice" ? lattice_fill(p, o.seed) : parse_fill(o.fill, o.seed));
  check_memory({p}, 1, o.memory_limit);
  std::unique_ptr<gate::Runner> runner;
  if (external) runner = gate::start_external({o.backend, o.backend_options, o.model, o.driver_timeout});
  std::cout << to_descriptor(p) << "  [" << (runner ? gate::external_description(*runner) : kernels::backend_name())
            << "]" << std::endl;
  gate::Result r;
  {
    Heartbeat beat(o.progress);
    r = gate::evaluate(p, fills, o.repeats, [&](const std::string& phase) { beat.phase(phase); }, runner.get(),
                       *gate::resolve_reference(o.reference, false));
  }
  if (!r.plan.empty()) std::cout << r.plan;
  if (!r.reason.empty()) std::cout << oracle::name(r.state) << ": " << r.reason << "\n";
  for (const auto& f : r.fills) {
    std::cout << "\nfill " << fill_string(f.fill) << " seed " << f.fill.seed << ": " << oracle::name(f.state)
              << (f.detail.empty() ? "" : " (" + f.detail + ")") << "\n";
    for (const auto& rr : f.roles) std::cout << oracle::to_table(rr.report);
  }
  std::cout << "\nsettings: " << settings.dump() << "\n";
  std::cout << "\n" << oracle::name(r.state) << " in " << std::fixed << std::setprecision(2) << r.seconds << " s\n";
  std::cout << "repro: " << r.repro() << "\n";
  Tally t;
  t.add(r.state);
  std::cout << t.summary_line(o.require_all) << std::endl;
  return t.exit_code(o.require_all);
}

// Runs a reference on .npy inputs (from `kgate gen`).
int cmd_ref(const std::string& text, const std::string& inputs_dir, const std::string& impl_text, const std::string& out) {
  const Problem p = parse_descriptor(text);
  const auto impl = ref::parse_impl(impl_text);
  if (!impl) throw InputError("--impl", "unknown implementation '" + impl_text + "' (direct, fast, mpfr, dot2)");
  files::input_folder(inputs_dir, "--inputs");
  files::output_folder(out, "--out");
  ref::run_reference_files(p, inputs_dir, *impl, out);
  std::cout << corpus::read_text((fs::path(out) / "digests.json").string());
  return 0;
}

// The census's interpreter start: a missing numpy or torch is exit 77 (the
// environment's), found before the package imports either; then
// kgate.census runs as `python3 -m kgate.census` would.
constexpr const char* kCensusBootstrap =
    "import importlib.util, runpy, sys\n"
    "missing = [m for m in ('numpy', 'torch') if importlib.util.find_spec(m) is None]\n"
    "if missing:\n"
    "    print('kgate.census: missing ' + ', '.join(missing) + ' for ' + sys.executable, file=sys.stderr)\n"
    "    sys.exit(77)\n"
    "sys.argv[0] = 'kgate.census'\n"
    "runpy.run_module('kgate.census', run_name='__main__', alter_sys=True)\n";

// `kgate census make`: the census of one training step of the Python
// package's U-Net (python3 -m kgate.census, stock PyTorch on the CPU, at
// 2^5 voxels per side: the same calls as configuration A, extents divided
// by 4), written to (or, with --check, compared byte for byte with) path.
// The census's exit codes: 0 written or current, 3 differs (--check), 77 a
// missing module; anything else (a Python error) is the run's error, never
// "differs".
int cmd_census_make(const std::string& path, bool check) {
  if (check) files::input_file(path, "--out");
  else files::output_file(path, "--out");
  const char* py = std::getenv("KGATE_PYTHON");
  std::vector<std::string> argv{py && *py ? py : "python3", "-c", kCensusBootstrap, "--config", "A", "--scale", "5",
                                "--corpus", data::path("corpus/shapes.json"), "--out", path};
  if (check) argv.push_back("--check");
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0 && std::strncmp(*e, "KGATE_BIN=", 10) != 0) env.emplace_back(*e);
  env.push_back("PYTHONPATH=" + data::path("tools/python"));
  env.push_back("PYTHONDONTWRITEBYTECODE=1");
  if (!ec) env.push_back("KGATE_BIN=" + self.string());
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), envp.data()) != 0)
    throw InputError("environment", "cannot run '" + argv[0] + "' (KGATE_PYTHON names the interpreter)");
  int st = 0;
  ::waitpid(pid, &st, 0);
  const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (rc == 77)
    throw InputError("environment", "the census needs PyTorch and numpy for " + argv[0] + " (python3-torch, python3-numpy)");
  if (rc == 0) return exit_passed;
  if (rc == 3) return exit_failed;
  throw InputError("environment", "the census run by " + argv[0] + " failed (" +
                                      (rc < 0 ? std::string("killed by a signal") : "exit " + std::to_string(rc)) +
                                      "; its error is above)");
}

int cmd_corpus_make(const std::string& path, bool check) {
  if (check) files::input_file(path, "--out");
  else files::output_file(path, "--out");
  return corpus::write_or_check(path, corpus::dump(corpus::shapes_document(corpus::configurations())), check,
                                "run `kgate corpus make` to update it");
}

// A word where a subcommand is expected that names none: CLI11 would call
// it an unexpected argument; say which subcommands there are.
void check_subcommand(const CLI::App& parent, const std::string& word, const std::string& where) {
  if (word == "--help" || word == "-h" || word == "--version") return;
  std::string names;
  for (const CLI::App* sub : parent.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return;
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (!word.empty() && word[0] == '-')
    throw InputError(where, "unknown option '" + word + "'; a subcommand comes first (one of: " + names + ")");
  throw InputError(where, "unknown subcommand '" + word + "' (one of: " + names + ")");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kgate: verification suite for NDHWC conv3d / GroupNorm kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_string(), "print the version, git revision and backends, then exit");
  app.footer(exit_codes_help);

  std::string descriptor, fill = "signed", out, corpus_path = verify_default_corpus();
  std::uint64_t seed = 1;
  bool json = false, check = false;

  auto* desc = app.add_subcommand("desc", "Parse, validate and describe a problem");
  desc->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  desc->add_flag("--json", json, "print the problem as JSON");
  bool tensors = false;
  desc->add_flag("--tensors", tensors, "print the problem and its input and output tensors (role, dtype, NDHWC dims) as JSON");

  Selection psel;
  psel.corpus = corpus_path;
  psel.configs = {"A", "B", "C", "D"};
  bool pjson = false;
  auto* problems_cmd = app.add_subcommand("problems", "List the problems of a selection (as verify selects them)");
  problems_cmd->add_option("--corpus", psel.corpus, "shapes corpus file")->capture_default_str();
  problems_cmd->add_option("--config", psel.configs, "configurations (A B C D, plan)")->capture_default_str();
  problems_cmd->add_option("--filter", psel.filters, "KEY=VALUE (op, dir, dtype, site, config, form); repeatable");
  problems_cmd->add_flag("--full", psel.full, "full extents");
  options::add_flop_budget(*problems_cmd, psel.flop_budget);
  problems_cmd->add_flag("--json", pjson, "JSON: descriptor, op, config, form, sites, calls_per_step");

  JudgeCli jcli;
  auto* judge_cmd = add_judge_command(app, jcli);

  auto* gen = app.add_subcommand("gen", "Generate a problem's inputs as .npy files");
  gen->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  gen->add_option("--fill", fill, "generator: signed, positive, uniform:lo=..,hi=.., lattice, gn_exact, gn_sweep")->capture_default_str();
  options::add_seed(*gen, seed);
  gen->add_option("--out", out, "output folder")->required();

  auto* corpus_cmd = app.add_subcommand("corpus", "The shapes corpus");
  corpus_cmd->require_subcommand(1);
  auto* make = corpus_cmd->add_subcommand("make", "Regenerate corpus/shapes.json from the U-Net shape calculator");
  make->add_option("--out", corpus_path, "corpus file")->capture_default_str();
  make->add_flag("--check", check, "regenerate in memory and fail if the file differs by one byte");

  std::string census_path = data::path("corpus/census.json");
  auto* census_cmd = app.add_subcommand("census", "The census of one U-Net training step (PyTorch)");
  census_cmd->require_subcommand(1);
  auto* cmake_cmd = census_cmd->add_subcommand("make", "Regenerate corpus/census.json from a recorded training step");
  cmake_cmd->add_option("--out", census_path, "census file")->capture_default_str();
  cmake_cmd->add_flag("--check", check, "regenerate in memory and fail if the file differs by one byte");

  std::string impl = "fast", inputs_dir;
  CheckOptions copt;
  auto* check_cmd = app.add_subcommand("check", "Run one problem through kernel, reference and oracle");
  check_cmd->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  check_cmd->add_option("--fill", copt.fill, "generator (default: the exact fill, then signed)");
  options::add_seed(*check_cmd, copt.seed);
  options::add_backend(*check_cmd, copt.backend);
  options::add_external_options(*check_cmd, copt.backend_options, copt.model, copt.driver_timeout);
  options::add_reference(*check_cmd, copt.reference);
  check_cmd->add_option("--repeats", copt.repeats, "extra kernel runs that must reproduce the digests")
      ->check(options::integer_in(0, 1000))
      ->capture_default_str();
  check_cmd->add_option("--progress", copt.progress, "seconds between progress lines while it runs (0: none)")
      ->check(options::real_in(0, 86400))
      ->capture_default_str();
  options::add_memory_limit(*check_cmd, copt.memory_limit);
  check_cmd->add_flag("--require-all", copt.require_all, "fail (exit 1) when the problem is unimplemented or skipped");
  check_cmd->footer(exit_codes_help);

  auto* ref_cmd = app.add_subcommand("ref", "Run a reference on .npy inputs");
  ref_cmd->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  ref_cmd->add_option("--inputs", inputs_dir, "folder with <role>.npy inputs")->required();
  ref_cmd->add_option("--impl", impl, "direct | fast | mpfr | dot2")->capture_default_str();
  ref_cmd->add_option("--out", out, "output folder")->required();

  std::string bitwise_path = bitwise_default_path();
  bool bitwise_require_all = false;
  auto* bitwise_cmd = app.add_subcommand("bitwise", "The bitwise corpus");
  bitwise_cmd->require_subcommand(1);
  auto* bmake = bitwise_cmd->add_subcommand("make", "Regenerate corpus/bitwise.json from the references");
  bmake->add_option("--out", bitwise_path, "corpus file")->capture_default_str();
  bmake->add_flag("--check", check, "regenerate in memory and fail if the file differs by one byte");
  auto* brun = bitwise_cmd->add_subcommand("run", "Run the kernels on the bitwise corpus and compare digests");
  brun->add_option("--corpus", bitwise_path, "corpus file")->capture_default_str();
  brun->add_flag("--require-all", bitwise_require_all, "fail (exit 1) when an entry has no kernel");
  brun->footer(exit_codes_help);

  VerifyOptions vopt;
  vopt.corpus = corpus_path;
  vopt.bitwise = bitwise_path;
  auto* verify = app.add_subcommand("verify", "Run the gate over the corpus");
  add_verify_options(*verify, vopt);

  AuditCli acli;
  acli.selection.corpus = corpus_path;
  acli.bitwise = bitwise_path;
  auto* audit = add_audit_command(app, acli);

  DigestsCli dcli;
  dcli.selection.corpus = corpus_path;
  dcli.bitwise = bitwise_path;
  auto* digests = add_digests_command(app, dcli);

  BenchCli bcli;
  bcli.selection.corpus = corpus_path;
  auto* bench = add_bench_command(app, bcli);

  RefcheckCli rcli;
  rcli.selection.corpus = corpus_path;
  rcli.bitwise = bitwise_path;
  auto* refcheck = add_refcheck_command(app, rcli);

  IsaCli icli;
  icli.manifest = std::string(KGATE_BINARY_DIR) + "/kgate-isa-manifest.json";
  auto* isa_cmd = add_isa_command(app, icli);

  try {
    if (argc > 1) check_subcommand(app, argv[1], "kgate");
    if (argc > 2 && (std::string(argv[1]) == "corpus" || std::string(argv[1]) == "bitwise" ||
                     std::string(argv[1]) == "census"))
      check_subcommand(*app.get_subcommand(argv[1]), argv[2], std::string("kgate ") + argv[1]);
  } catch (const InputError& e) {
    std::cerr << "kgate: error: " << e.what() << "\n";
    return exit_error;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : exit_error;
  }
  try {
    if (*desc) return cmd_desc(descriptor, json, tensors);
    if (*problems_cmd) {
      files::input_file(psel.corpus, "--corpus");
      return cmd_problems(psel, pjson);
    }
    if (*judge_cmd) return run_judge_command(jcli);
    if (*gen) return cmd_gen(descriptor, fill, seed, out);
    if (*make) return cmd_corpus_make(corpus_path, check);
    if (*cmake_cmd) return cmd_census_make(census_path, check);
    if (*bmake) {
      if (check) files::input_file(bitwise_path, "--out");
      else files::output_file(bitwise_path, "--out");
      return bitwise_make(bitwise_path, check);
    }
    if (*brun) {
      files::input_file(bitwise_path, "--corpus");
      gate::backend_settings();  // a bad emulator setting is bad input, not a failed entry
      return bitwise_run(bitwise_path, bitwise_require_all);
    }
    if (*check_cmd) return cmd_check(descriptor, copt);
    if (*ref_cmd) return cmd_ref(descriptor, inputs_dir, impl, out);
    if (*verify) return run_verify(vopt);
    if (*audit) return run_audit_command(acli);
    if (*digests) {
      gate::backend_settings();  // a bad emulator setting is bad input
      return run_digests_command(dcli);
    }
    if (*bench) return run_bench_command(bcli);
    if (*isa_cmd) return run_isa_command(icli);
    if (*refcheck) return run_refcheck_command(rcli);
  } catch (const InputError& e) {
    std::cerr << "kgate: error: " << e.what() << "\n";
    return exit_error;
  } catch (const gate::RunError& e) {
    std::cerr << "kgate: error: " << e.what() << "\n";
    return exit_error;
  } catch (const std::bad_alloc&) {
    std::cerr << "kgate: error: out of memory (an error of the run, not a verdict on a kernel)\n";
    return exit_error;
  } catch (const fs::filesystem_error& e) {
    std::cerr << "kgate: error: " << e.what() << "\n";
    return exit_error;
  } catch (const std::exception& e) {
    // Anything else that stops the run (e.g. no thread could be started) is
    // an error of the run: a message and exit 2, never an abort.
    std::cerr << "kgate: error: " << e.what() << "\n";
    return exit_error;
  }
  return exit_error;
}
