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

}  // namespace kgate::options
