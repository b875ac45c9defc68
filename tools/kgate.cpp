// kgate: the command line. Exit codes: 0 success, 1 a verification failed,
// 2 bad input (the message names the field).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>

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
#include "tools/gate.hpp"
#include "tools/isa_cmd.hpp"
#include "tools/verify.hpp"

namespace fs = std::filesystem;
using namespace kgate;

namespace {

int cmd_desc(const std::string& text, bool json) {
  const Problem p = parse_descriptor(text);
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

// Writes every generated input as <role>.npy and a manifest.json with the
// problem, the generator and each tensor's digest.
int cmd_gen(const std::string& text, const std::string& fill_text, std::uint64_t seed, const std::string& out) {
  const Problem p = parse_descriptor(text);
  const Fill f = fill_text == "lattice" ? lattice_fill(p, seed) : parse_fill(fill_text, seed);
  fs::create_directories(out);
  nlohmann::json manifest{{"descriptor", to_descriptor(p)}, {"problem", to_json(p)}, {"fill", to_json(f)}};
  for (const auto& s : inputs(p)) {
    if (s.derived) continue;
    Tensor t(s.dtype, s.dims);
    fill_tensor(f, p, s.role, t);
    const std::string file = std::string(name(s.role)) + ".npy";
    write_npy((fs::path(out) / file).string(), t.view());
    manifest["tensors"][std::string(name(s.role))] = {
        {"file", file}, {"dtype", name(s.dtype)}, {"dims", s.dims}, {"digest", digest(t)}};
    std::cout << file << "  " << name(s.dtype) << " " << dims_string(s.dims) << "  " << digest(t) << "\n";
  }
  write_file_atomic((fs::path(out) / "manifest.json").string(), manifest.dump(2) + "\n");
  return 0;
}

// The developer's loop for one problem: verdict per tier, worst elements,
// the plan, and the command that reproduces it.
int cmd_check(const std::string& text, const std::string& fill_text, std::uint64_t seed, const std::string& backend,
              int repeats) {
  const Problem p = parse_descriptor(text);
  if (backend != "auto" && backend != kernels::backend_name())
    throw InputError("--backend", backend + " is not available in this build (it runs the " + kernels::backend_name() +
                                      " backend)");
  std::vector<Fill> fills;
  if (fill_text.empty()) fills = gate::default_fills(p, seed);
  else fills.push_back(fill_text == "lattice" ? lattice_fill(p, seed) : parse_fill(fill_text, seed));
  const gate::Result r = gate::evaluate(p, fills, repeats);
  std::cout << r.descriptor << "  [" << kernels::backend_name() << "]\n";
  if (!r.plan.empty()) std::cout << r.plan;
  if (!r.reason.empty()) std::cout << oracle::name(r.state) << ": " << r.reason << "\n";
  for (const auto& f : r.fills) {
    std::cout << "\nfill " << fill_string(f.fill) << " seed " << f.fill.seed << ": " << oracle::name(f.state)
              << (f.detail.empty() ? "" : " (" + f.detail + ")") << "\n";
    for (const auto& rr : f.roles) std::cout << oracle::to_table(rr.report);
  }
  std::cout << "\n" << oracle::name(r.state) << " in " << std::fixed << std::setprecision(2) << r.seconds << " s\n";
  std::cout << "repro: " << r.repro() << "\n";
  return gate::is_failure(r.state) ? 1 : 0;
}

// Runs a reference on .npy inputs (from `kgate gen`).
int cmd_ref(const std::string& text, const std::string& inputs_dir, const std::string& impl_text, const std::string& out) {
  const Problem p = parse_descriptor(text);
  const auto impl = ref::parse_impl(impl_text);
  if (!impl) throw InputError("--impl", "unknown implementation '" + impl_text + "' (direct, fast, mpfr, dot2)");
  ref::run_reference_files(p, inputs_dir, *impl, out);
  std::cout << corpus::read_text((fs::path(out) / "digests.json").string());
  return 0;
}

int cmd_corpus_make(const std::string& path, bool check) {
  return corpus::write_or_check(path, corpus::dump(corpus::shapes_document(corpus::configurations())), check,
                                "run `kgate corpus make` to update it");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kgate: verification suite for NDHWC conv3d / GroupNorm kernels"};
  app.require_subcommand(1);

  std::string descriptor, fill = "signed", out, corpus_path = verify_default_corpus();
  std::uint64_t seed = 1;
  bool json = false, check = false;

  auto* desc = app.add_subcommand("desc", "Parse, validate and describe a problem");
  desc->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  desc->add_flag("--json", json, "print the problem as JSON");

  auto* gen = app.add_subcommand("gen", "Generate a problem's inputs as .npy files");
  gen->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  gen->add_option("--fill", fill, "generator: signed, positive, uniform:lo=..,hi=.., lattice, gn_exact, gn_sweep")->capture_default_str();
  gen->add_option("--seed", seed, "generator seed")->capture_default_str();
  gen->add_option("--out", out, "output folder")->required();

  auto* corpus_cmd = app.add_subcommand("corpus", "The shapes corpus");
  corpus_cmd->require_subcommand(1);
  auto* make = corpus_cmd->add_subcommand("make", "Regenerate corpus/shapes.json from the U-Net shape calculator");
  make->add_option("--out", corpus_path, "corpus file")->capture_default_str();
  make->add_flag("--check", check, "regenerate in memory and fail if the file differs by one byte");

  std::string backend = "auto", impl = "fast", inputs_dir;
  int repeats = 1;
  auto* check_cmd = app.add_subcommand("check", "Run one problem through kernel, reference and oracle");
  check_cmd->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  std::string check_fill;
  check_cmd->add_option("--fill", check_fill, "generator (default: the exact fill, then signed)");
  check_cmd->add_option("--seed", seed, "generator seed")->capture_default_str();
  check_cmd->add_option("--backend", backend, "auto | host | hip | cuda")->capture_default_str();
  check_cmd->add_option("--repeats", repeats, "extra kernel runs that must reproduce the digests")->capture_default_str();

  auto* ref_cmd = app.add_subcommand("ref", "Run a reference on .npy inputs");
  ref_cmd->add_option("descriptor", descriptor, "problem descriptor (quote it)")->required();
  ref_cmd->add_option("--inputs", inputs_dir, "folder with <role>.npy inputs")->required();
  ref_cmd->add_option("--impl", impl, "direct | fast | mpfr | dot2")->capture_default_str();
  ref_cmd->add_option("--out", out, "output folder")->required();

  std::string bitwise_path = bitwise_default_path();
  auto* bitwise_cmd = app.add_subcommand("bitwise", "The bitwise corpus");
  bitwise_cmd->require_subcommand(1);
  auto* bmake = bitwise_cmd->add_subcommand("make", "Regenerate corpus/bitwise.json from the references");
  bmake->add_option("--out", bitwise_path, "corpus file")->capture_default_str();
  bmake->add_flag("--check", check, "regenerate in memory and fail if the file differs by one byte");
  auto* brun = bitwise_cmd->add_subcommand("run", "Run the kernels on the bitwise corpus and compare digests");
  brun->add_option("--corpus", bitwise_path, "corpus file")->capture_default_str();

  VerifyOptions vopt;
  vopt.corpus = corpus_path;
  vopt.bitwise = bitwise_path;
  auto* verify = app.add_subcommand("verify", "Run the gate over the corpus");
  add_verify_options(*verify, vopt);

  AuditCli acli;
  acli.selection.corpus = corpus_path;
  acli.bitwise = bitwise_path;
  auto* audit = add_audit_command(app, acli);

  BenchCli bcli;
  bcli.selection.corpus = corpus_path;
  bcli.torch_driver = std::string(KGATE_SOURCE_DIR) + "/tools/bench_torch.py";
  auto* bench = add_bench_command(app, bcli);

  IsaCli icli;
  icli.manifest = std::string(KGATE_BINARY_DIR) + "/kgate-isa-manifest.json";
  auto* isa_cmd = add_isa_command(app, icli);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*desc) return cmd_desc(descriptor, json);
    if (*gen) return cmd_gen(descriptor, fill, seed, out);
    if (*make) return cmd_corpus_make(corpus_path, check);
    if (*bmake) return bitwise_make(bitwise_path, check);
    if (*brun) return bitwise_run(bitwise_path);
    if (*check_cmd) return cmd_check(descriptor, check_fill, seed, backend, repeats);
    if (*ref_cmd) return cmd_ref(descriptor, inputs_dir, impl, out);
    if (*verify) return run_verify(vopt);
    if (*audit) return run_audit_command(acli);
    if (*bench) return run_bench_command(bcli);
    if (*isa_cmd) return run_isa_command(icli);
  } catch (const InputError& e) {
    std::cerr << "kgate: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "kgate: error: out of memory\n";
    return 2;
  }
  return 2;
}
