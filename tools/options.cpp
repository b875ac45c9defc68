#include "tools/options.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

namespace kgate::options {

namespace {

std::string range_text(double lo, double hi) {
  std::ostringstream s;
  s << "[" << lo << ", " << hi << "]";
  return s.str();
}

}  // namespace

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  const std::string allowed = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, allowed](std::string& s) -> std::string {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < lo || v > hi)
          return "'" + s + "' is not " + allowed;
        return {};
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", "integer_in");
}

CLI::Validator unsigned64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty())
          return "'" + s + "' is not an integer in [0, 18446744073709551615]";
        return {};
      },
      "UINT64", "unsigned64");
}

CLI::Validator real_in(double lo, double hi) {
  const std::string allowed = "a finite number in " + range_text(lo, hi);
  return CLI::Validator(
      [lo, hi, allowed](std::string& s) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty() || !std::isfinite(v) || v < lo || v > hi)
          return "'" + s + "' is not " + allowed;
        return {};
      },
      "NUMBER in " + range_text(lo, hi), "real_in");
}

}  // namespace kgate::options
