// Reading the committed shapes corpus. Every error names the file, the
// problem index and the field (e.g. "corpus/shapes.json: problems[3].problem.cin").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/problem.hpp"

namespace kgate::corpus {

struct Entry {
  std::string config;
  std::string descriptor;
  Problem problem;
  ShapeForm form = ShapeForm::logical;
  std::vector<std::string> sites;
  int calls_per_step = 0;
};

// Throws InputError on unreadable or malformed files, unknown fields, invalid
// problems, and a descriptor that disagrees with its problem.
std::vector<Entry> load_shapes(const std::string& path);
// The same on a parsed document; `path` names it in errors.
std::vector<Entry> shapes_from_json(const nlohmann::json& doc, const std::string& path);

// The text of a regular file, or InputError(path) saying why it cannot be read.
std::string read_text(const std::string& path);

// A file's JSON, or InputError naming the file and the value being read
// (reference/json.hpp, parse_json).
nlohmann::json read_json(const std::string& path);

// The `make` / `make --check` of a generated corpus file. Without check:
// writes `text` to path atomically. With check: compares byte for byte with
// the committed file, never modifies it, and on a difference prints the
// sizes, the first differing line on both sides and `remedy`. Exit code.
int write_or_check(const std::string& path, const std::string& text, bool check, const std::string& remedy);

}  // namespace kgate::corpus
