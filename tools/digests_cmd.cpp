#include "tools/digests_cmd.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "determinism/audit.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/common.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/options.hpp"
#include "tools/summary.hpp"

namespace kgate {

namespace {

constexpr int kFormat = 1;

std::string read_all(const std::string& path, const std::string& flag) {
  files::input_file(path, flag);
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  if (!f && !f.eof()) throw InputError(flag, "cannot read " + path);
  return s.str();
}

std::string short_reason(const std::string& what) { return what.substr(0, what.find('\n')); }

}  // namespace

nlohmann::json to_json(const DigestsFile& f) {
  nlohmann::json j;
  j["kgate_digests"] = kFormat;
  j["backend"] = f.backend;
  j["settings"] = nlohmann::json::object();
  for (const auto& [k, v] : f.settings) j["settings"][k] = v;
  j["seed"] = f.seed;
  j["problems"] = nlohmann::json::object();
  for (const auto& [d, roles] : f.problems) j["problems"][d] = roles;
  return j;
}

DigestsFile parse_digests(const nlohmann::json& j, const std::string& flag) {
  auto field = [&](const std::string& f) { return flag + " (" + f + ")"; };
  if (!j.is_object()) throw InputError(flag, "expected a JSON object written by kgate digests --out");
  if (!j.contains("kgate_digests") || !j["kgate_digests"].is_number_integer() || j["kgate_digests"].get<int>() != kFormat)
    throw InputError(field("kgate_digests"), "expected " + std::to_string(kFormat) + " (a file written by kgate digests --out)");
  DigestsFile f;
  if (!j.contains("backend") || !j["backend"].is_string()) throw InputError(field("backend"), "expected a string");
  f.backend = j["backend"].get<std::string>();
  if (j.contains("settings")) {
    if (!j["settings"].is_object()) throw InputError(field("settings"), "expected an object");
    for (auto it = j["settings"].begin(); it != j["settings"].end(); ++it) {
      if (!it->is_string()) throw InputError(field("settings." + it.key()), "expected a string");
      f.settings.emplace_back(it.key(), it->get<std::string>());
    }
  }
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) throw InputError(field("seed"), "expected an unsigned integer");
  f.seed = j["seed"].get<std::uint64_t>();
  if (!j.contains("problems") || !j["problems"].is_object()) throw InputError(field("problems"), "expected an object");
  for (auto it = j["problems"].begin(); it != j["problems"].end(); ++it) {
    const std::string where = "problems." + it.key();
    // The key must be a problem this build can parse; its canonical form is
    // what the comparison looks up.
    Problem p;
    try {
      p = parse_descriptor(it.key());
    } catch (const InputError& e) {
      throw InputError(field(where), e.what());
    }
    if (!it->is_object()) throw InputError(field(where), "expected an object of output role -> digest");
    std::map<std::string, std::string> roles;
    for (auto r = it->begin(); r != it->end(); ++r) {
      if (!r->is_string() || r->get<std::string>().empty())
        throw InputError(field(where + "." + r.key()), "expected a digest string");
      roles[r.key()] = r->get<std::string>();
    }
    f.problems.emplace_back(to_descriptor(p), std::move(roles));
  }
  return f;
}

CLI::App* add_digests_command(CLI::App& app, DigestsCli& cli) {
  auto* c = app.add_subcommand("digests",
                               "One run of each problem's kernel: its outputs' digests, written (--out) or compared "
                               "with another backend's (--expect)");
  c->add_option("descriptor", cli.descriptors,
                "problems (default: the --expect file's, else the bitwise and reduced corpus problems)");
  add_corpora_options(*c, cli.selection, cli.bitwise);
  options::add_seed(*c, cli.seed, "seed of the signed fill (with --expect: the file's)")
      ->each([&cli](const std::string&) { cli.seed_given = true; });
  options::add_report(*c, "--out", cli.out, "write the digests to this file ('-': standard output)");
  c->add_option("--expect", cli.expect, "compare with the digests of this file (written by kgate digests --out)");
  c->footer(exit_codes_help);
  return c;
}

int run_digests_command(DigestsCli cli) {
  if (!cli.out.empty()) files::output_file(cli.out, "--out");  // before the run, not after it
  DigestsFile want;
  std::map<std::string, const std::map<std::string, std::string>*> wanted;
  if (!cli.expect.empty()) {
    nlohmann::json j;
    const std::string text = read_all(cli.expect, "--expect");
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw InputError("--expect", "not JSON: " + short_reason(e.what()));
    }
    want = parse_digests(j, "--expect");
    if (cli.seed_given && cli.seed != want.seed)
      throw InputError("--seed", std::to_string(cli.seed) + " differs from the --expect file's seed " +
                                     std::to_string(want.seed) + " (leave --seed out to use the file's)");
    cli.seed = want.seed;
    for (const auto& [d, roles] : want.problems) wanted[d] = &roles;
  }
  ProblemList list;
  for (const auto& d : cli.descriptors) list.add(parse_descriptor(d));
  if (cli.descriptors.empty()) {
    if (!cli.expect.empty()) {
      for (const auto& [d, roles] : want.problems) list.add(parse_descriptor(d));
    } else {
      list.add_corpora(cli.selection, cli.bitwise);
    }
  }
  const std::vector<Problem>& problems = list.problems();
  if (problems.empty()) throw InputError("descriptor", "no problem selected");

  DigestsFile got;
  got.backend = kernels::backend_name();
  got.settings = kernels::backend_settings();
  got.seed = cli.seed;
  std::ostream& log = cli.out == "-" ? std::cerr : std::cout;
  log << "kgate digests: " << problems.size() << " problem(s), backend " << got.backend;
  for (const auto& [k, v] : got.settings) log << ", " << k << "=" << v;
  if (!cli.expect.empty()) {
    log << "; expected: " << cli.expect << " (backend " << want.backend;
    for (const auto& [k, v] : want.settings) log << ", " << k << "=" << v;
    log << ")";
  }
  log << ", seed " << cli.seed << "\n";

  const auto ops = kernels::implemented_ops();
  int same = 0, differ = 0, incomplete = 0, outputs = 0;
  for (const Problem& p : problems) {
    const std::string d = to_descriptor(p);
    std::string verdict;
    std::map<std::string, std::string> digests;
    if (std::find(ops.begin(), ops.end(), op_dir_name(p)) == ops.end()) {
      verdict = "unimplemented (no production kernel for " + op_dir_name(p) + ")";
      ++incomplete;
    } else if (const auto s = kernels::is_supported(p); !s) {
      verdict = "skipped (" + s.reason + ")";
      ++incomplete;
    } else {
      try {
        digests = determinism::digests_once(p, cli.seed);
      } catch (const rt::Unavailable& e) {
        throw gate::environment_error(e.what());
      } catch (const std::exception& e) {
        verdict = "FAILED: the kernel did not run: " + short_reason(e.what());
        ++differ;
      }
    }
    if (verdict.empty()) {
      got.problems.emplace_back(d, digests);
      if (cli.expect.empty()) {
        verdict = "ran";
        for (const auto& [role, dg] : digests) verdict += " " + role + "=" + dg;
        ++same;
      } else if (const auto it = wanted.find(d); it == wanted.end()) {
        verdict = "not in the --expect file";
        ++incomplete;
      } else {
        std::string diff;
        std::set<std::string> roles;
        for (const auto& [role, dg] : digests) roles.insert(role);
        for (const auto& [role, dg] : *it->second) roles.insert(role);
        for (const auto& role : roles) {
          const auto g = digests.find(role);
          const auto w = it->second->find(role);
          const std::string gs = g == digests.end() ? "missing" : g->second;
          const std::string ws = w == it->second->end() ? "missing" : w->second;
          if (gs != ws) diff += " " + role + ": " + gs + " here, " + ws + " expected;";
        }
        if (diff.empty()) {
          verdict = "identical (" + std::to_string(digests.size()) + " output(s))";
          outputs += static_cast<int>(digests.size());
          ++same;
        } else {
          verdict = "DIFFERENT:" + diff.substr(0, diff.size() - 1);
          ++differ;
        }
      }
    }
    log << "  " << d << ": " << verdict << std::endl;
  }
  if (!cli.out.empty()) files::write_output_file(cli.out, to_json(got).dump(1) + "\n", "--out");
  if (!cli.expect.empty())
    log << "\n" << (differ ? "FAILED" : incomplete ? "INCOMPLETE" : "OK") << ": " << same << " of " << problems.size()
        << " problem(s) identical to the --expect file (" << outputs << " outputs), " << differ << " different, "
        << incomplete << " not compared\n";
  else
    log << "\n" << (differ ? "FAILED" : incomplete ? "INCOMPLETE" : "OK") << ": " << same << " of " << problems.size()
        << " problem(s) ran, " << differ << " failed, " << incomplete << " not run\n";
  return differ ? exit_failed : incomplete ? exit_incomplete : exit_passed;
}

}  // namespace kgate
