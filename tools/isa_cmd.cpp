#include "tools/options.hpp"
#include "tools/isa_cmd.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <regex>

#include "corpus/corpus_file.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"
#include "tools/files.hpp"
#include "tools/isa.hpp"

namespace fs = std::filesystem;

namespace kgate {

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns its exit status and output (stdout+stderr).
int run(const std::string& cmd, std::string& out) {
  out.clear();
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  return ::pclose(f);
}

struct Source {
  std::string name, path;
  bool production = true;
};

struct Outcome {
  std::string target, name, source;
  bool compiled = false;
  std::string error;
  std::vector<isa::KernelReport> kernels;
  std::vector<isa::Finding> findings;
  std::vector<std::string> missing;  // expected instructions absent
};

Outcome audit_gfx942(const nlohmann::json& tc, const std::string& root, const Source& s, const fs::path& out,
                     const std::vector<std::string>& expect) {
  Outcome o;
  o.target = "gfx942";
  o.name = s.name;
  o.source = s.path;
  const std::string common = "-x hip --offload-arch=gfx942 -std=c++20 -O3 -ffp-contract=off -fno-fast-math -Wall "
                             "-Wextra -Werror -I" + quote(root) +
                             " --rocm-device-lib-path=" + quote(tc.at("bitcode_dir").get<std::string>());
  const std::string clang = quote(tc.at("clang").get<std::string>());
  const fs::path asm_path = out / (s.name + ".gfx942.s");
  std::string remarks, text;
  if (run(clang + " " + common + " --cuda-device-only -S " + quote(s.path) + " -o " + quote(asm_path.string()) +
              " -Rpass-analysis=kernel-resource-usage",
          remarks) != 0) {
    o.error = "gfx942 device compile failed:\n" + remarks;
    return o;
  }
  if (const std::string mc = tc.value("llvm_mc", std::string()); !mc.empty())
    if (run(quote(mc) + " -triple=amdgcn-amd-amdhsa -mcpu=gfx942 -filetype=obj " + quote(asm_path.string()) + " -o " +
                quote((out / (s.name + ".gfx942.o")).string()),
            text) != 0) {
      o.error = "llvm-mc could not assemble the gfx942 ISA:\n" + text;
      return o;
    }
  if (run(clang + " " + common + " --cuda-host-only -c " + quote(s.path) + " -o " +
              quote((out / (s.name + ".host.o")).string()),
          text) != 0) {
    o.error = "HIP host-side compile failed:\n" + text;
    return o;
  }
  o.kernels = isa::parse_gfx942_remarks(remarks);
  if (o.kernels.empty()) {
    o.error = "no kernel resource remarks:\n" + remarks;
    return o;
  }
  const std::string listing = corpus::read_text(asm_path.string());
  isa::scan_gfx942_isa(listing, o.kernels);
  for (const auto& want : expect) {
    const std::regex re("[ \t]" + want + "[ \t]");
    const auto n = std::distance(std::sregex_iterator(listing.begin(), listing.end(), re), std::sregex_iterator());
    if (n == 0) o.missing.push_back("the ISA has no " + want);
    else std::cout << "gfx942: " << want << " x " << n << "\n";
  }
  o.compiled = true;
  return o;
}

Outcome audit_cuda(const nlohmann::json& tc, const std::string& root, const Source& s, const fs::path& out) {
  Outcome o;
  o.target = "cuda";
  o.name = s.name;
  o.source = s.path;
  const fs::path keep = out / (s.name + ".cuda");
  fs::remove_all(keep);
  fs::create_directories(keep);
  std::string log;
  // The device reference is built with --expt-relaxed-constexpr (its
  // geometry's std::array members in device code: reference/device/CMakeLists.txt).
  const std::string relaxed = isa::is_reference_source(s.path) ? " --expt-relaxed-constexpr" : "";
  if (run(quote(tc.at("nvcc").get<std::string>()) + " -arch=sm_90 -std=c++20 --fmad=false" + relaxed + " -x cu -I" + quote(root) +
              " -cubin -Xptxas -v --keep --keep-dir " + quote(keep.string()) + " -o " +
              quote((keep / (s.name + ".cubin")).string()) + " " + quote(s.path),
          log) != 0) {
    o.error = "nvcc compile failed:\n" + log;
    return o;
  }
  o.kernels = isa::parse_ptxas(log);
  for (const auto& e : fs::directory_iterator(keep))
    if (e.path().extension() == ".ptx") isa::scan_ptx(corpus::read_text(e.path().string()), o.kernels);
  if (o.kernels.empty()) {
    o.error = "no kernel in the ptxas report:\n" + log;
    return o;
  }
  o.compiled = true;
  return o;
}

}  // namespace

CLI::App* add_isa_command(CLI::App& app, IsaCli& cli) {
  auto* c = app.add_subcommand("isa", "Static audit of the kernels' device code (gfx942 ISA, CUDA PTX/ptxas)");
  c->add_option("--target", cli.target, "gfx942 | cuda | all (the targets this build has a compiler for)")
      ->check(CLI::IsMember({"gfx942", "cuda", "all"}))
      ->capture_default_str();
  c->add_option("--manifest", cli.manifest, "the build's kernel list and toolchain (written by CMake)")
      ->capture_default_str();
  c->add_option("--source", cli.sources, "audit these sources instead of the build's production kernels");
  c->add_option("--name", cli.name, "name of the --source (file stem by default)");
  c->add_flag("--all", cli.all, "also the runtime's test kernels (conformance, probes)");
  c->add_option("--expect-instruction", cli.expect, "gfx942 instructions the ISA must contain (e.g. an MMA atom's v_mfma_*)");
  options::add_report(*c, "--json", cli.json, "JSON report ('' writes none)");
  c->add_option("--out", cli.out, "folder for the ISA and PTX files (default: the build tree's isa/)");
  return c;
}

int run_isa_command(const IsaCli& cli) {
  files::input_file(cli.manifest, "--manifest");
  const nlohmann::json m = corpus::read_json(cli.manifest);
  const std::string root = m.at("root").get<std::string>();
  const fs::path out = cli.out.empty() ? fs::path(m.at("out_dir").get<std::string>()) : fs::path(cli.out);
  files::output_folder(out.string(), cli.out.empty() ? "--manifest (out_dir)" : "--out");
  if (!cli.json.empty()) {  // its folder is created; both are checked before the compiles, not after them
    if (fs::path(cli.json).has_parent_path()) files::output_folder(fs::path(cli.json).parent_path().string(), "--json");
    files::output_file(cli.json, "--json");
  }
  std::vector<Source> sources;
  if (!cli.sources.empty()) {
    for (const auto& s : cli.sources) {
      if (!fs::exists(s)) throw InputError("--source", "no such file: " + s);
      sources.push_back({cli.name.empty() || cli.sources.size() > 1 ? fs::path(s).stem().string() : cli.name,
                         fs::absolute(s).string(), isa::is_production_source(fs::absolute(s).string())});
    }
  } else {
    for (const auto& k : m.at("kernels")) {
      Source s{k.at("name").get<std::string>(), k.at("source").get<std::string>(), true};
      s.production = isa::is_production_source(s.path);
      if (s.production || cli.all) sources.push_back(s);
    }
  }
  std::vector<std::string> targets;
  for (const std::string t : {"gfx942", "cuda"}) {
    if (cli.target != "all" && cli.target != t) continue;
    if (m.contains(t) && !m.at(t).is_null()) targets.push_back(t);
    else if (cli.target == t) throw InputError("--target", t + ": this build found no compiler for it");
  }
  if (targets.empty()) throw InputError("--target", "this build has no device compiler (clang-19 for gfx942, nvcc)");
  // The toolchain's pieces are the environment, not the kernels: a missing
  // one is named before any compile (exit 2), never counted as a finding.
  for (const auto& t : targets) {
    const nlohmann::json& tc = m.at(t);
    std::vector<fs::path> need;
    if (t == "gfx942") {
      need = {tc.at("clang").get<std::string>(), fs::path(tc.at("bitcode_dir").get<std::string>()) / "ocml.bc",
              fs::path(tc.at("bitcode_dir").get<std::string>()) / "oclc_isa_version_942.bc"};
    } else {
      need = {tc.at("nvcc").get<std::string>()};
    }
    for (const auto& p : need)
      if (!fs::exists(p))
        throw InputError("toolchain", t + ": " + p.string() + " is missing" +
                                          (p.filename() == "oclc_isa_version_942.bc"
                                               ? " (the build generates it: ninja kgate_gfx942_bitcode)"
                                               : ""));
  }

  std::vector<Outcome> outcomes;
  int failures = 0;
  for (const auto& t : targets)
    for (const auto& s : sources) {
      Outcome o = t == "gfx942" ? audit_gfx942(m.at(t), root, s, out, cli.expect) : audit_cuda(m.at(t), root, s, out);
      if (o.compiled) o.findings = isa::check(o.kernels, s.production, isa::is_reference_source(s.path));
      for (const auto& miss : o.missing) o.findings.push_back({o.name, "expected-instruction", miss});
      std::cout << isa::table(t + " resources for " + o.name + " (" + o.source + "):", o.kernels);
      if (!o.error.empty()) std::cout << "  ERROR: " << o.error << "\n";
      for (const auto& f : o.findings) {
        const bool fatal = isa::is_fatal(f, t);
        std::cout << (fatal ? "  FAIL " : "  WARN ") << f.check << ": " << f.message << "\n";
        failures += fatal;
      }
      failures += !o.error.empty();
      outcomes.push_back(std::move(o));
    }
  std::cout << "\n" << (failures ? "FAILED" : "OK") << ": " << outcomes.size() << " source(s) x target(s), "
            << failures << " finding(s)" << (failures ? "" : "; ISA in " + out.string()) << "\n";
  if (!cli.json.empty()) {
    nlohmann::json j{{"failures", failures}, {"sources", nlohmann::json::array()}};
    for (const auto& o : outcomes) {
      nlohmann::json js{{"target", o.target}, {"name", o.name}, {"source", o.source}, {"error", o.error},
                        {"kernels", nlohmann::json::array()}, {"findings", nlohmann::json::array()}};
      for (const auto& k : o.kernels) js["kernels"].push_back(isa::to_json(k));
      for (const auto& f : o.findings)
        js["findings"].push_back({{"kernel", f.kernel}, {"check", f.check}, {"message", f.message},
                                  {"fatal", isa::is_fatal(f, o.target)}});
      j["sources"].push_back(js);
    }
    files::write_output_file(cli.json, j.dump(1) + "\n", "--json");
  }
  return failures ? 1 : 0;
}

}  // namespace kgate
