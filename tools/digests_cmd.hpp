// `kgate digests`: one run of each selected problem's production kernel on
// this binary's backend, its outputs' digests written to a file or compared
// with a file written elsewhere: the bit identity of two backends or
// emulated targets (e.g. the host emulator's sm90 model here, the CUDA
// backend on an NVIDIA machine), problem by problem.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/select.hpp"

namespace kgate {

struct DigestsCli {
  Selection selection;
  std::string bitwise;                   // bitwise corpus ("" leaves it out)
  std::vector<std::string> descriptors;  // explicit problems instead of the corpora
  std::uint64_t seed = 1;                // the signed fill's seed (the audit's inputs)
  bool seed_given = false;
  std::string out;     // write the digests here ("-": standard output)
  std::string expect;  // compare with the digests in this file
};

// A digests file: {"kgate_digests": 1, "backend", "settings", "seed",
// "problems": {descriptor: {output role: digest}}}.
struct DigestsFile {
  std::string backend;
  std::vector<std::pair<std::string, std::string>> settings;
  std::uint64_t seed = 1;
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> problems;  // by descriptor
};
nlohmann::json to_json(const DigestsFile& f);
// Throws InputError naming `flag` and the field on a malformed file.
DigestsFile parse_digests(const nlohmann::json& j, const std::string& flag);

CLI::App* add_digests_command(CLI::App& app, DigestsCli& cli);
// Exit code: 0 every problem ran (and, with --expect, every output equals
// the file's), 1 an output differs, 3 nothing differs but a problem has no
// kernel, is declined or is missing from the file.
int run_digests_command(DigestsCli cli);

}  // namespace kgate
