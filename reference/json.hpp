// JSON forms of the value types (nlohmann_json). from_json rejects unknown
// fields and names the bad field in its InputError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reference/problem.hpp"

namespace kgate {

// Parses a JSON document. Throws InputError naming `name` and the path of the
// value being read ("corpus/shapes.json: problems[3].problem.eps") on a
// syntax error, a number out of range (1e400), a key given twice in one
// object, or nesting deeper than kMaxJsonDepth.
nlohmann::json parse_json(std::string_view text, const std::string& name);
inline constexpr std::size_t kMaxJsonDepth = 64;

// An integer that fits in int64 (a JSON integer above 2^63 - 1 would wrap);
// InputError(field) otherwise.
std::int64_t as_int64(const nlohmann::json& v, const std::string& field);

nlohmann::json to_json(const ConvProblem& p);
nlohmann::json to_json(const GroupNormProblem& p);
nlohmann::json to_json(const Problem& p);
// Validates the problem too. `where` prefixes field names in errors
// (e.g. "corpus/shapes.json: problems[3]").
Problem problem_from_json(const nlohmann::json& j, const std::string& where = "problem");

}  // namespace kgate
