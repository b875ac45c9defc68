// The gate's results read back from their JSON form (Result::to_json,
// oracle::to_json): what `kgate_mpi verify` sends from rank to rank, so rank 0
// writes the same report a single process would. to_json(from_json(j)) == j;
// each fill's output reports come back in outputs(problem) order.
#pragma once

#include <nlohmann/json.hpp>

#include "oracles/oracle.hpp"
#include "tools/gate.hpp"

namespace kgate::gate {

oracle::State state_from_name(const std::string& s);
oracle::Report report_from_json(const nlohmann::json& j);
Result result_from_json(const nlohmann::json& j);

}  // namespace kgate::gate
