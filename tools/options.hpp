// Strict validators for the command line's numeric flags. CLI11's own
// conversion accepts "-1" for an unsigned option (it wraps to 2^64-1) and
// "nan"/"inf" for a floating-point one; these read the text exactly (the
// whole string, decimal, in range) and CLI11 reports a refusal as
// "--flag: <message>" with exit code 2.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace kgate::options {

// A decimal integer in [lo, hi] (no sign for lo >= 0, no spaces, no suffix).
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);
// An unsigned 64-bit decimal integer (a seed): 0 .. 2^64-1.
CLI::Validator unsigned64();
// A finite decimal number in [lo, hi] (no nan, no inf).
CLI::Validator real_in(double lo, double hi);

// The flags several subcommands share, each registered by one function so
// that every subcommand reads it with the same validator and wording.
// --seed: an unsigned 64-bit integer.
CLI::Option* add_seed(CLI::App& c, std::uint64_t& seed, const std::string& help = "generator seed");
// --flop-budget: a finite number in [1, 1e30] (reduced extents' cost cap).
CLI::Option* add_flop_budget(CLI::App& c, double& budget, const std::string& help = "reduced extents: cost cap per problem");
// --memory-limit: bytes in [0, 1e30]; 0 (the default) means MemAvailable.
CLI::Option* add_memory_limit(CLI::App& c, double& bytes);
// --backend: kgate's backends (auto, host, hip, cuda) or an external
// implementation (torch, python:MODULE[:ATTR]: tools/external.hpp).
CLI::Option* add_backend(CLI::App& c, std::string& backend);
// The external backends' flags: --backend-option KEY=VALUE (repeatable),
// --model (the accumulation model), --driver-timeout (seconds per request).
void add_external_options(CLI::App& c, std::vector<std::string>& backend_options, std::string& model, double& timeout);

// --reference: where the fp64 references run: host | device | auto
// (gate::resolve_reference).
CLI::Option* add_reference(CLI::App& c, std::string& where);

// A report file flag (--report, --junit, --json, --svg, --out): its path,
// '' writes none where the default is a file, '-' standard output.
CLI::Option* add_report(CLI::App& c, const std::string& flag, std::string& path, const std::string& help);

}  // namespace kgate::options
