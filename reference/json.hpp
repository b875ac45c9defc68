// JSON forms of the value types (nlohmann_json). from_json rejects unknown
// fields and names the bad field in its InputError.
#pragma once

#include <nlohmann/json.hpp>

#include "reference/problem.hpp"

namespace kgate {

nlohmann::json to_json(const ConvProblem& p);
nlohmann::json to_json(const GroupNormProblem& p);
nlohmann::json to_json(const Problem& p);
// Validates the problem too. `where` prefixes field names in errors
// (e.g. "corpus/shapes.json: problems[3]").
Problem problem_from_json(const nlohmann::json& j, const std::string& where = "problem");

}  // namespace kgate
