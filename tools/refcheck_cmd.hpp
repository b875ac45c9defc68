// `kgate refcheck`: the device reference (reference/device/devref.hpp)
// against the host references, on the corpora's problems and the gate's
// default fills. Per output:
//   - convolutions: the device result equals the host Dot2 reference
//     (Impl::dot2) and its companion bit for bit; against the host fast
//     reference (what `--reference host` judges with) it is equal on the
//     exact (lattice) fill and within kUlps fp64 ulps of the companion
//     elsewhere;
//   - GroupNorm: every output and every companion statistic within kUlps
//     ulps of its scale (the output's companion; |value| for the
//     statistics) of the host fast reference.
// On the host build the device reference runs on the emulator (CI's gate);
// on kgate_cuda on the GPU. --defect plants one of devref's test-only
// defects: the run must then fail (the gate's negative control).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/select.hpp"

namespace kgate {

// fp64 ulps of the scale a device result may differ from the host fast one.
inline constexpr double kRefcheckUlps = 4;

struct RefcheckCli {
  Selection selection;
  std::string bitwise;                   // bitwise corpus ("" leaves it out)
  std::vector<std::string> descriptors;  // explicit problems instead of the corpora
  std::uint64_t seed = 1;
  std::string defect = "none";           // none | bump_last | skip_chunk (negative controls)
  int jobs = 1;
  std::string report;                    // JSON report ('' none, '-' standard output)
};

CLI::App* add_refcheck_command(CLI::App& app, RefcheckCli& cli);
// Exit code: 0 every comparison held, 1 one did not; bad input throws InputError.
int run_refcheck_command(const RefcheckCli& cli);

}  // namespace kgate
