#include "tools/options.hpp"

#include "oracles/models.hpp"

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

CLI::Option* add_seed(CLI::App& c, std::uint64_t& seed, const std::string& help) {
  return c.add_option("--seed", seed, help)->check(unsigned64())->capture_default_str();
}

CLI::Option* add_flop_budget(CLI::App& c, double& budget, const std::string& help) {
  return c.add_option("--flop-budget", budget, help)->check(real_in(1, 1e30))->capture_default_str();
}

CLI::Option* add_memory_limit(CLI::App& c, double& bytes) {
  return c.add_option("--memory-limit", bytes, "bytes the run may use (0, the default: MemAvailable)")
      ->check(real_in(0, 1e30));
}

CLI::Option* add_report(CLI::App& c, const std::string& flag, std::string& path, const std::string& help) {
  CLI::Option* o = c.add_option(flag, path, help);
  if (!path.empty()) o->capture_default_str();
  return o;
}

CLI::Option* add_backend(CLI::App& c, std::string& backend) {
  return c
      .add_option("--backend", backend,
                  "auto | host | hip | cuda (kgate's kernels) | torch | python:MODULE[:ATTR] (an external implementation)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto" || v == "host" || v == "hip" || v == "cuda" || v == "torch") return "";
            if (v.rfind("python:", 0) == 0 && v.size() > 7) return "";
            return "expected auto, host, hip, cuda, torch or python:MODULE[:ATTR], got '" + v + "'";
          },
          "BACKEND"))
      ->capture_default_str();
}

CLI::Option* add_reference(CLI::App& c, std::string& where) {
  return c
      .add_option("--reference", where,
                  "where the fp64 references run: host (the CPUs), device (this binary's backend: the GPU, or the "
                  "host emulator), auto (device for verify --full on a GPU backend, else host)")
      ->check(CLI::IsMember({"host", "device", "auto"}))
      ->capture_default_str();
}

void add_external_options(CLI::App& c, std::vector<std::string>& backend_options, std::string& model, double& timeout) {
  c.add_option("--backend-option", backend_options,
               "KEY=VALUE for an external backend (torch: device, channels_last_3d, autocast, cudnn_benchmark, "
               "deterministic, allow_tf32); repeatable");
  c.add_option("--model", model, "accumulation model an external backend is judged under: " + oracle::model_help())
      ->capture_default_str();
  c.add_option("--driver-timeout", timeout, "seconds an external driver may take per request")
      ->check(real_in(0.1, 86400))
      ->capture_default_str();
}

}  // namespace kgate::options

