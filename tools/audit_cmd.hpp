// `kgate audit`: the determinism audit (determinism/audit.hpp) over the
// selected problems, with a JSON report and a summary table.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "determinism/audit.hpp"
#include "tools/select.hpp"

namespace kgate {

struct AuditCli {
  Selection selection;
  std::string bitwise;                    // bitwise corpus ("" leaves it out)
  std::vector<std::string> descriptors;   // explicit problems instead of the corpora
  determinism::AuditOptions audit;
  bool no_noise = false;
  bool no_bitwise = false;                // leave the bitwise corpus out
  std::string report = "kgate-audit.json";
  bool print_digests = false;             // fresh-process mode (internal)
  bool print_plans = false;               // fresh-process mode (internal)
};

// Adds the subcommand and its options; returns it.
CLI::App* add_audit_command(CLI::App& app, AuditCli& cli);
// Exit code: 0 deterministic and control caught, 1 otherwise.
int run_audit_command(AuditCli cli);

}  // namespace kgate
