// The backend-dependent half of `kgate audit`: the environments a kernel is
// run and planned under, concurrent noise, and the float-atomic negative
// control. Compiled once per backend (it includes the runtime); the rest of
// the audit (audit.hpp) knows no backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kgate::determinism {

// Run environments: host, every emulator workgroup order at two thread
// counts; GPU backends, the device as it is (one environment).
std::vector<std::string> run_environments();
// Plan environments: what a plan must not depend on besides the problem.
// Host: thread counts, workgroup order, the emulated 32-wide target; GPU
// backends: the device as it is (its properties cannot be varied).
std::vector<std::string> plan_environments();

// Plan environments only a fresh process can apply: what the runtime reads
// once, at start-up. GPU backends: no visible device (a plan that read any
// device property would fail or change), one hardware queue with eager
// module loading, and on a host with several GPUs the last one; host: other
// thread counts and workgroup orders from the environment variables.
struct ProcessEnv {
  std::string label;
  std::vector<std::string> assignments;  // NAME=VALUE
};
std::vector<ProcessEnv> plan_process_environments();

// Applies one environment (index into the list above) until destroyed;
// `seed` picks the shuffled order's permutation.
class EnvScope {
 public:
  EnvScope(bool plan_env, std::size_t index, std::uint64_t seed = 0);
  ~EnvScope();
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Concurrent work while it lives: on a GPU backend a memory-bound kernel
// launched over and over on a stream that does not synchronise with the
// default one; on the host backend (which runs kernels on the issuing
// thread) a CPU thread streaming through memory, competing for the cores.
// Created paused; set_active switches it on and off without tearing it down
// (switching on waits until the noise is running).
class Noise {
 public:
  Noise();
  ~Noise();
  Noise(const Noise&) = delete;
  Noise& operator=(const Noise&) = delete;
  void set_active(bool on);
  std::uint64_t launches() const;  // noise rounds completed so far
  static std::string description();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The negative control: block partial sums of fixed inputs added into one
// float with a floating-point atomic, so the result depends on the order in
// which workgroups finish. Built only for the audit (never a production
// kernel). Runs once in run environment `env` (with `seed`) and returns the
// output's raw values. With `deterministic` the same partials are written to
// one slot per block instead (no atomic): a control the audit must fail to
// catch, which tests the audit itself.
std::vector<float> control_run(std::size_t env, std::uint64_t seed, bool deterministic);

}  // namespace kgate::determinism
