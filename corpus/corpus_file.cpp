#include "corpus/corpus_file.hpp"

#include <algorithm>
#include <climits>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"

namespace kgate::corpus {

std::string read_text(const std::string& path) {
  std::uintmax_t size = 0;
  std::ifstream in = open_regular_file(path, size);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) throw InputError(path, "read failed");
  return ss.str();
}

nlohmann::json read_json(const std::string& path) { return parse_json(read_text(path), path); }

int write_or_check(const std::string& path, const std::string& text, bool check, const std::string& remedy) {
  if (!check) {
    write_file_atomic(path, text);
    std::cout << "wrote " << path << " (" << text.size() << " bytes)\n";
    return 0;
  }
  const std::string committed = read_text(path);
  if (committed == text) {
    std::cout << path << ": up to date (" << text.size() << " bytes)\n";
    return 0;
  }
  std::size_t line = 1, i = 0;
  while (i < committed.size() && i < text.size() && committed[i] == text[i]) line += committed[i++] == '\n';
  auto line_at = [](const std::string& s, std::size_t pos) {
    const std::size_t b = s.rfind('\n', pos == 0 ? 0 : pos - 1);
    const std::size_t start = b == std::string::npos ? 0 : b + 1;
    return s.substr(start, s.find('\n', start) - start);
  };
  std::cerr << path << ": differs from the regenerated file (committed " << committed.size()
            << " bytes, regenerated " << text.size() << " bytes)\n"
            << "  first difference at line " << line << "\n"
            << "  committed:   " << line_at(committed, i) << "\n"
            << "  regenerated: " << line_at(text, i) << "\n"
            << "  " << remedy << "\n";
  return 1;
}

namespace {

Entry entry_from_json(const nlohmann::json& e, const std::string& where) {
  if (!e.is_object()) throw InputError(where, "expected a JSON object");
  static const char* known[] = {"config", "descriptor", "op", "form", "sites", "calls_per_step", "problem"};
  for (auto it = e.begin(); it != e.end(); ++it)
    if (std::find(std::begin(known), std::end(known), it.key()) == std::end(known))
      throw InputError(where + "." + it.key(), "unknown field");
  auto str = [&](const char* k) {
    if (!e.contains(k) || !e[k].is_string()) throw InputError(where + "." + k, "missing or not a string");
    return e[k].get<std::string>();
  };
  Entry en;
  en.config = str("config");
  en.descriptor = str("descriptor");
  if (!e.contains("problem")) throw InputError(where + ".problem", "missing");
  en.problem = problem_from_json(e["problem"], where + ".problem");
  const std::string canonical = to_descriptor(en.problem);
  if (canonical_descriptor(en.descriptor) != canonical)
    throw InputError(where + ".descriptor", "'" + en.descriptor + "' disagrees with the problem ('" + canonical + "')");
  en.descriptor = canonical;
  if (str("op") != op_dir_name(en.problem)) throw InputError(where + ".op", "disagrees with the problem");
  const std::string form = str("form");
  if (form == "logical") en.form = ShapeForm::logical;
  else if (form == "halo") en.form = ShapeForm::halo;
  else if (form == "adapter") en.form = ShapeForm::adapter;
  else throw InputError(where + ".form", "unknown form '" + form + "'");
  const auto* conv = std::get_if<ConvProblem>(&en.problem);
  const ShapeForm problem_form = conv ? conv->form : ShapeForm::logical;
  if (en.form != problem_form)
    throw InputError(where + ".form", "'" + form + "' disagrees with the problem's form '" +
                                          std::string(name(problem_form)) + "'");
  if (!e.contains("sites") || !e["sites"].is_array()) throw InputError(where + ".sites", "missing or not an array");
  for (const auto& s : e["sites"]) {
    if (!s.is_string()) throw InputError(where + ".sites", "expected strings");
    en.sites.push_back(s.get<std::string>());
  }
  if (!e.contains("calls_per_step")) throw InputError(where + ".calls_per_step", "missing");
  const std::int64_t calls = as_int64(e["calls_per_step"], where + ".calls_per_step");
  if (calls < 1 || calls > INT_MAX)
    throw InputError(where + ".calls_per_step", "must be in [1, " + std::to_string(INT_MAX) + "], got " + std::to_string(calls));
  en.calls_per_step = static_cast<int>(calls);
  return en;
}

}  // namespace

std::vector<Entry> load_shapes(const std::string& path) { return shapes_from_json(read_json(path), path); }

std::vector<Entry> shapes_from_json(const nlohmann::json& doc, const std::string& path) {
  if (!doc.is_object()) throw InputError(path, "expected a JSON object");
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "provenance" && it.key() != "configurations" && it.key() != "problems")
      throw InputError(path + ": " + it.key(), "unknown field");
  if (!doc.contains("problems") || !doc["problems"].is_array()) throw InputError(path + ": problems", "missing or not an array");
  // The configurations the entries may name: those the file declares (a file
  // without the list, e.g. a hand-made one-problem corpus, names any).
  std::vector<std::string> configs;
  const bool declared = doc.contains("configurations");
  if (declared) {
    if (!doc["configurations"].is_array()) throw InputError(path + ": configurations", "not an array");
    for (std::size_t i = 0; i < doc["configurations"].size(); ++i) {
      const auto& c = doc["configurations"][i];
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string())
        throw InputError(path + ": configurations[" + std::to_string(i) + "].name", "missing or not a string");
      configs.push_back(c["name"].get<std::string>());
    }
  }
  std::vector<Entry> out;
  std::map<std::pair<std::string, std::string>, std::size_t> seen;  // (config, descriptor) -> index
  const auto& arr = doc["problems"];
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string where = path + ": problems[" + std::to_string(i) + "]";
    try {
      out.push_back(entry_from_json(arr[i], where));
    } catch (const nlohmann::json::exception& e) {
      // Every access is type-checked; this names the entry should one not be.
      throw InputError(where, e.what());
    }
    const Entry& en = out.back();
    if (declared && std::find(configs.begin(), configs.end(), en.config) == configs.end())
      throw InputError(where + ".config", "'" + en.config + "' is not one of the file's configurations");
    const auto [it, fresh] = seen.emplace(std::make_pair(en.config, en.descriptor), i);
    if (!fresh)
      throw InputError(where, "duplicates problems[" + std::to_string(it->second) + "] ('" + en.descriptor +
                                  "' in configuration " + en.config + ")");
  }
  return out;
}

}  // namespace kgate::corpus
