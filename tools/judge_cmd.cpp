#include "tools/judge_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

#include "corpus/corpus_file.hpp"
#include "oracles/models.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/options.hpp"
#include "tools/summary.hpp"
#include "tools/verify.hpp"

namespace fs = std::filesystem;

namespace kgate {

namespace {

std::string quoted(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string role_list(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const auto& t : specs) s += (s.empty() ? "" : ", ") + std::string(name(t.role)) + ".npy";
  return s;
}

// dims as the descriptor gives them, and a hint when `got` is the same
// tensor in channels-first order (NCDHW), the layout a PyTorch tensor has
// unless it is channels_last_3d.
std::string dims_mismatch(const std::string& what, const Dims& got, const Dims& want) {
  std::string msg = "dims " + dims_string(got) + ", the descriptor's " + what + " is " + dims_string(want) + " (NDHWC)";
  if (got.size() == 5 && want.size() == 5 && got[0] == want[0] && got[1] == want[4] && got[2] == want[1] &&
      got[3] == want[2] && got[4] == want[3])
    msg += "; this looks like NCDHW: kgate's tensors are channels-last (in PyTorch: "
           ".permute(0, 2, 3, 4, 1).contiguous())";
  return msg;
}

// Every .npy in `dir` must be one of `specs`; anything else is named.
void no_extra_files(const std::string& dir, const std::vector<TensorSpec>& specs, const std::string& what,
                    const std::string& descriptor) {
  std::set<std::string> known;
  for (const auto& t : specs) known.insert(std::string(name(t.role)) + ".npy");
  std::vector<std::string> extra;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() == ".npy" && !known.count(f)) extra.push_back(f);
  }
  std::sort(extra.begin(), extra.end());
  if (!extra.empty())
    throw InputError((fs::path(dir) / extra.front()).string(),
                     "not " + what + " of '" + descriptor + "' (" + what + "s: " + role_list(specs) + ")");
}

// Reads dir/<role>.npy for spec in its dtype and dims; InputError naming the file.
Tensor read_tensor(const std::string& dir, const TensorSpec& s, const std::string& what) {
  const std::string file = (fs::path(dir) / (std::string(name(s.role)) + ".npy")).string();
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw InputError(file, "missing: " + what + " " + std::string(name(s.role)) + " (" + std::string(name(s.dtype)) + " " +
                               dims_string(s.dims) + ")");
  Tensor t = read_npy(file, s.dtype);
  if (t.dims() != s.dims) throw InputError(file, dims_mismatch(std::string(name(s.role)), t.dims(), s.dims));
  return t;
}

nlohmann::json read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError("--inputs", dir + " has no manifest.json (write the inputs with `kgate gen`)");
  files::input_file(path, "--inputs");
  try {
    nlohmann::json j = nlohmann::json::parse(corpus::read_text(path));
    if (!j.is_object() || !j.contains("descriptor") || !j.at("descriptor").is_string() || !j.contains("fill") ||
        !j.contains("tensors") || !j.at("tensors").is_object())
      throw InputError(path, "not a `kgate gen` manifest (descriptor, fill and tensors expected)");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, std::string("malformed JSON: ") + e.what());
  }
}

}  // namespace

CLI::App* add_judge_command(CLI::App& app, JudgeCli& o) {
  auto* c = app.add_subcommand("judge", "Judge outputs computed elsewhere (any kernel) against the references");
  c->add_option("descriptor", o.descriptor, "problem descriptor (quote it)")->required();
  c->add_option("--inputs", o.inputs, "folder `kgate gen` wrote for this descriptor (its manifest.json and <role>.npy)")
      ->required();
  c->add_option("--outputs", o.outputs, "folder with the kernel's <role>.npy outputs, in the descriptor's dtypes")
      ->required();
  c->add_option("--model", o.model, "accumulation model the bounds assume: " + oracle::model_help())
      ->capture_default_str();
  options::add_reference(*c, o.reference);
  options::add_report(*c, "--report", o.report, "JSON report ('-': standard output)");
  options::add_report(*c, "--junit", o.junit, "JUnit XML file ('-': standard output)");
  c->footer("Exit codes: 0 passed, 1 failed or untrusted, 2 bad input (the message names the file or flag).");
  return c;
}

int run_judge_command(const JudgeCli& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const Problem p = parse_descriptor(o.descriptor);
  validate(p);
  const std::string desc = to_descriptor(p);
  const oracle::Model model = oracle::parse_model(o.model);
  const kernels::Plan plan = gate::model_plan(p, model);
  files::input_folder(o.inputs, "--inputs");
  files::input_folder(o.outputs, "--outputs");
  files::distinct_outputs({{"--report", o.report}, {"--junit", o.junit}});
  if (!o.report.empty()) files::output_file(o.report, "--report");
  if (!o.junit.empty()) files::output_file(o.junit, "--junit");

  // The inputs: gen's manifest for this problem, each file as gen wrote it.
  const nlohmann::json manifest = read_manifest(o.inputs);
  const std::string mpath = (fs::path(o.inputs) / "manifest.json").string();
  std::string mdesc;
  try {
    mdesc = to_descriptor(parse_descriptor(manifest.at("descriptor").get<std::string>()));
  } catch (const InputError& e) {
    throw InputError(mpath, std::string("descriptor: ") + e.what());
  }
  if (mdesc != desc) throw InputError("--inputs", o.inputs + " holds the inputs of '" + mdesc + "', not of '" + desc + "'");
  const Fill fill = fill_from_json(manifest.at("fill"), mpath + ": fill");
  const auto in = ref::make_inputs(p, fill);
  const std::vector<TensorSpec> in_specs = inputs(p), out_specs = outputs(p);
  no_extra_files(o.inputs, in_specs, "an input", desc);
  for (const auto& s : in_specs) {
    const std::string role(name(s.role));
    const std::string file = (fs::path(o.inputs) / (role + ".npy")).string();
    std::error_code ec;
    if (s.derived && !fs::exists(file, ec)) continue;  // derived from the others: regenerated either way
    const Tensor t = read_tensor(o.inputs, s, "input");
    const std::string got = digest(t), want = digest(in.at(s.role));
    const auto& mt = manifest.at("tensors");
    if (mt.contains(role) && mt.at(role).contains("digest") && mt.at(role).at("digest") != want)
      throw InputError(mpath, "the digest of " + role + " differs from what fill " + fill_string(fill) + " seed " +
                                  std::to_string(fill.seed) + " generates: the manifest was edited");
    if (got != want)
      throw InputError(file, "differs from the input `kgate gen` wrote (digest " + got + ", fill " + fill_string(fill) +
                                 " seed " + std::to_string(fill.seed) + " gives " + want +
                                 "): the kernel must be judged on the inputs the references are computed from");
  }

  // The candidate's outputs: every output role, in its dtype and dims.
  no_extra_files(o.outputs, out_specs, "an output", desc);
  std::map<Role, Tensor> got;
  for (const auto& s : out_specs) got.emplace(s.role, read_tensor(o.outputs, s, "output"));

  const gate::RefSite where = *gate::resolve_reference(o.reference, false);
  const gate::References refs = gate::references(p, in, where);
  gate::check_range(p, plan, fill, in, refs);
  gate::Result r;
  r.descriptor = desc;
  r.op = op_dir_name(p);
  r.dtype = gate::dtype_label(p);
  r.plan = "accumulation model " + model.name() + "\n";
  for (const auto& [role, red] : plan.reduction) r.plan += "  reduction " + role + ": " + to_string(red) + "\n";
  r.repro_line = gate::command_prefix() + " judge " + quoted(desc) + " --inputs " + quoted(o.inputs) + " --outputs " +
                 quoted(o.outputs) + " --model " + model.name() +
                 (where == gate::RefSite::device ? " --reference device" : "");
  r.reference = gate::describe(where);
  gate::FillResult fr;
  fr.fill = fill;
  fr.roles = gate::judge(p, plan, fill, in, refs, got);
  std::set<std::string> proven;
  gate::add_verdicts(fr, proven);
  r.state = fr.state;
  r.worst_margin = fr.worst_margin;
  r.fills.push_back(std::move(fr));
  gate::conclude(p, r, proven);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::ostream& log = o.report == "-" || o.junit == "-" ? std::cerr : std::cout;
  log << desc << "  [judge, model " << model.name() << ", references " << r.reference << "]\n" << r.plan;
  if (!r.reason.empty()) log << oracle::name(r.state) << ": " << r.reason << "\n";
  for (const auto& f : r.fills) {
    log << "\nfill " << fill_string(f.fill) << " seed " << f.fill.seed << ": " << oracle::name(f.state)
        << (f.detail.empty() ? "" : " (" + f.detail + ")") << "\n";
    for (const auto& rr : f.roles) log << oracle::to_table(rr.report);
  }
  log << "\n" << oracle::name(r.state) << "\nrepro: " << r.repro() << "\n";
  if (!o.report.empty()) {
    nlohmann::json j = r.to_json();
    nlohmann::json outs = nlohmann::json::object();
    for (const auto& rr : r.fills.front().roles) outs[rr.role] = oracle::to_json(rr.report);
    nlohmann::json doc{{"kgate_judge", 1},         {"descriptor", desc},         {"model", model.name()},
                       {"state", oracle::name(r.state)}, {"reason", r.reason},   {"fill", to_json(fill)},
                       {"plan", r.plan},           {"outputs", outs},            {"repro", r.repro()},
                       {"seconds", r.seconds},     {"reference", r.reference}};
    files::write_output_file(o.report, doc.dump(2) + "\n", "--report");
  }
  if (!o.junit.empty()) files::write_output_file(o.junit, junit_xml({r}, {}, r.seconds, false, "kgate judge"), "--junit");
  Tally t;
  t.add(r.state);
  log << t.summary_line(false) << std::endl;
  return t.exit_code(false);
}

}  // namespace kgate
