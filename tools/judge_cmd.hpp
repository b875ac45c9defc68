// `kgate judge`: the oracle on outputs kgate did not compute. The inputs are
// a folder `kgate gen` wrote (its manifest names the problem, the fill and
// each tensor's digest); the outputs are <role>.npy files from any kernel
// (PyTorch, cuDNN, MIOpen, Triton, a user's own). The references are
// regenerated from the manifest's fill, so the inputs the kernel saw must be
// the ones gen wrote: a changed input file is bad input, naming the file.
// The bounds come from an accumulation model (oracles/models.hpp), since an
// external kernel publishes no plan.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kgate {

struct JudgeCli {
  std::string descriptor, inputs, outputs;
  std::string model = "fp32-any-order";
  std::string reference = "auto";  // host | device | auto (auto: host)
  std::string report, junit;  // '' writes none, '-' standard output
};

CLI::App* add_judge_command(CLI::App& app, JudgeCli& cli);
// Exit code: 0 passed, 1 failed or untrusted; bad input throws InputError.
int run_judge_command(const JudgeCli& cli);

}  // namespace kgate
