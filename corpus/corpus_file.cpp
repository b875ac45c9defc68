#include "corpus/corpus_file.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"

namespace kgate::corpus {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path, std::string("malformed JSON: ") + e.what());
  }
}

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

std::vector<Entry> load_shapes(const std::string& path) {
  const nlohmann::json doc = read_json(path);
  if (!doc.is_object()) throw InputError(path, "expected a JSON object");
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "provenance" && it.key() != "configurations" && it.key() != "problems")
      throw InputError(path + ": " + it.key(), "unknown field");
  if (!doc.contains("problems") || !doc["problems"].is_array()) throw InputError(path + ": problems", "missing or not an array");
  std::vector<Entry> out;
  const auto& arr = doc["problems"];
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string where = path + ": problems[" + std::to_string(i) + "]";
    const auto& e = arr[i];
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
    if (canonical != en.descriptor)
      throw InputError(where + ".descriptor", "'" + en.descriptor + "' disagrees with the problem ('" + canonical + "')");
    if (str("op") != op_dir_name(en.problem)) throw InputError(where + ".op", "disagrees with the problem");
    const std::string form = str("form");
    if (form == "logical") en.form = ShapeForm::logical;
    else if (form == "halo") en.form = ShapeForm::halo;
    else if (form == "adapter") en.form = ShapeForm::adapter;
    else throw InputError(where + ".form", "unknown form '" + form + "'");
    if (!e.contains("sites") || !e["sites"].is_array()) throw InputError(where + ".sites", "missing or not an array");
    for (const auto& s : e["sites"]) {
      if (!s.is_string()) throw InputError(where + ".sites", "expected strings");
      en.sites.push_back(s.get<std::string>());
    }
    if (!e.contains("calls_per_step") || !e["calls_per_step"].is_number_integer() || e["calls_per_step"].get<int>() < 1)
      throw InputError(where + ".calls_per_step", "missing or not a positive integer");
    en.calls_per_step = e["calls_per_step"].get<int>();
    out.push_back(std::move(en));
  }
  return out;
}

}  // namespace kgate::corpus
