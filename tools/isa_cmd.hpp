// `kgate isa`: compiles every production kernel the build lists (CMake
// writes the list and the toolchain to kgate-isa-manifest.json) for each
// device target with a compiler here, and audits the result (tools/isa.hpp).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kgate {

struct IsaCli {
  std::string target = "all";
  std::string manifest;               // default: the build's manifest
  std::vector<std::string> sources;   // instead of the manifest's kernels
  std::string name;
  bool all = false;                   // include the runtime's test kernels
  std::vector<std::string> expect;    // instructions the ISA must contain (gfx942)
  std::string json = "kgate-isa.json";
  std::string out;                    // folder for the ISA and PTX files; default: the manifest's out_dir
};

CLI::App* add_isa_command(CLI::App& app, IsaCli& cli);
// Exit code: 0 clean, 1 a finding or a failed compile, 2 bad input.
int run_isa_command(const IsaCli& cli);

}  // namespace kgate
