// External kernels under the gate: a Python implementation driven over
// kgate's driver protocol (docs/DRIVERS.md), one process for the whole run.
//
// `--backend python:MODULE[:ATTR]` runs `python3 -m kgate.driver` (the
// package of tools/python, put on PYTHONPATH; KGATE_PYTHON names another
// interpreter) on MODULE's ATTR (default: the module itself), which
// provides run(problem, inputs) and optionally supports(problem);
// `--backend torch` is the built-in kgate.backends.torch. The outputs are
// judged under an accumulation model (--model), since such a kernel
// publishes no plan. Every protocol violation (a malformed or unexpected
// message, stray output on the protocol channel, a driver that exits or
// does not answer within the timeout, outputs of the wrong dtype, shape or
// size) is a gate::RunError naming the driver and the problem: an error of
// the run, exit 2, never a verdict on the kernel. A run the driver reports
// as an error of the kernel is a failed verdict; a decline is "skipped".
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oracles/models.hpp"
#include "tools/gate.hpp"

namespace kgate::gate {

struct ExternalOptions {
  std::string backend;               // "python:MODULE[:ATTR]" or "torch"
  std::vector<std::string> options;  // KEY=VALUE handed to the driver (--backend-option)
  std::string model = "fp32-any-order";
  double timeout = 600;              // seconds per request (--driver-timeout)
};

// Whether --backend names an external implementation.
bool is_external_backend(const std::string& backend);

// Starts the driver and completes the handshake (RunError when it cannot);
// bad option values are InputError naming the flag.
std::unique_ptr<Runner> start_external(const ExternalOptions& o);

// What the driver said about itself in the handshake, as one line.
std::string external_description(const Runner& r);
// The handshake's "implementation" (what the target says it is), or the
// backend's name where it says nothing.
std::string external_implementation(const Runner& r);

// A timed run (the run request's "timing" field, docs/DRIVERS.md): the
// driver runs the problem `warmup` + `iters` times, each timed on its own
// inside the driver's process after a buffer of `flush_bytes` on the
// implementation's device is overwritten (0: none), and answers the last
// `iters` times (the warm-up runs' are dropped).
struct Timing {
  int warmup = 0;
  int iters = 1;
  std::size_t flush_bytes = 0;
};
struct TimedRun {
  std::map<Role, Tensor> outputs;  // the last timed run's, checked as run()'s are
  std::vector<double> ms;          // one time per iteration, milliseconds
  std::string timer;               // what timed them, as the driver says ("" where it does not)
};
// `r` is start_external's runner. Errors as Runner::run's: RunError for a
// protocol violation (a reply without times_ms, or with anything but
// `iters` finite non-negative numbers, or a timer that is not a string,
// included), any other exception for the kernel's own failure.
TimedRun run_timed(Runner& r, const Problem& p, const std::map<Role, Tensor>& in, const Timing& t);

}  // namespace kgate::gate
