// `kgate bench`: paired, interleaved timing of several arms per problem
// (kgate's kernel, the fp64 reference, PyTorch or any Python implementation
// through kgate's driver protocol, docs/DRIVERS.md) with Student t intervals, an online stop rule, ceilings and the oracle
// check before timing. See README.md ("Benchmarks").
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/select.hpp"

namespace kgate {

struct BenchCli {
  Selection selection;
  bool corpus = false;                  // time the selected corpus problems (with --config, --filter, --full)
  std::vector<std::string> descriptors;
  std::vector<std::string> arms{"kgate"};
  double target = 0.02;                 // relative half-width of every arm's 95% interval
  double budget_s = 10;                 // per problem
  int min_rounds = 5, max_rounds = 1000;
  double min_sample_ms = 1;             // one sample's timed sequences add up to at least this
  bool no_flush = false, no_check = false, ceilings = false;
  // kgate arm: "graph" replays the launch sequence as a captured graph,
  // "plain" launches it, "auto" replays sequences under kGraphBelowMs.
  std::string launch = "auto";
  std::uint64_t seed = 1;
  std::string reference = "auto";       // the oracle check's references (gate::resolve_reference, with --full)
  std::string json = "kgate-bench.json", svg;
  // The external arms (torch, torch-det, python:MODULE[:ATTR]): KEY=VALUE
  // pairs for every one's driver, after the torch arms' own; seconds a
  // driver may take per request.
  std::vector<std::string> backend_options;
  double driver_timeout = 600;
};

// auto launch mode: a sequence shorter than this is replayed as a graph (a
// few microseconds of launch gap per kernel are then no longer a visible
// share of it); a longer one is launched plainly.
inline constexpr double kGraphBelowMs = 1.0;

CLI::App* add_bench_command(CLI::App& app, BenchCli& cli);
// Exit code: 0, 1 when an arm failed its oracle check, 2 on bad input.
int run_bench_command(const BenchCli& cli);

}  // namespace kgate
