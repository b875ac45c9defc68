// The host half every operator's driver shares (compiled once per backend,
// like the kernels): device copies of host tensors, input lookup, download,
// and the timing of a plan's launch sequence (RunOptions).
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels {

// The dtype pairs the kernels take: fp32, bf16 or fp16 in; fp32 or the
// input dtype out.
inline bool supported_pair(DType src, DType dst) {
  if (src == DType::fp64 || dst == DType::fp64) return false;
  return dst == DType::fp32 || dst == src;
}

// The dtype pairs supported_pair accepts, in a fixed order.
inline std::vector<std::pair<DType, DType>> supported_pairs() {
  std::vector<std::pair<DType, DType>> out;
  for (DType src : {DType::fp32, DType::bf16, DType::fp16})
    for (DType dst : {DType::fp32, DType::bf16, DType::fp16})
      if (supported_pair(src, dst)) out.emplace_back(src, dst);
  return out;
}

// A device copy of a host tensor (or of uninitialised output storage).
struct DeviceTensor {
  rt::DeviceBuffer<std::byte> buf;
  explicit DeviceTensor(std::size_t bytes) : buf(bytes == 0 ? 1 : bytes) {}
  DeviceTensor(const Tensor& t) : buf(t.nbytes() == 0 ? 1 : static_cast<std::size_t>(t.nbytes())) {
    rt::copy_h2d(buf.data(), t.data(), static_cast<std::size_t>(t.nbytes()));
  }
  void* data() const { return buf.data(); }
  template <class T> T* as() const { return reinterpret_cast<T*>(buf.data()); }
};

inline const Tensor& input(const char* op, const std::map<Role, const Tensor*>& in, Role r) {
  auto it = in.find(r);
  if (it == in.end() || !it->second) throw std::invalid_argument(std::string(op) + ": missing input " + std::string(name(r)));
  return *it->second;
}

inline Tensor download(const DeviceTensor& d, DType t, const Dims& dims) {
  Tensor out(t, dims);
  rt::copy_d2h(out.data(), d.data(), static_cast<std::size_t>(out.nbytes()));
  return out;
}

// Whether the launches a run made are its plan's steps, in order: the same
// count and, step by step, the same grid, block and dynamic LDS (the plan's
// kernel names are families, the launches' their template expressions, so
// names are not compared). A plan is what reports, the oracle and the
// bench read about a run; one that does not describe the run is a defect.
inline void check_launches(const Plan& plan, const std::vector<rt::LaunchRecord>& made) {
  const auto fmt = [](std::uint32_t x, std::uint32_t y, std::uint32_t z) {
    return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
  };
  if (made.size() != plan.steps.size())
    throw std::logic_error(plan.op + ": the plan has " + std::to_string(plan.steps.size()) + " steps, the run made " +
                           std::to_string(made.size()) + " launches");
  for (std::size_t i = 0; i < made.size(); ++i) {
    const LaunchStep& s = plan.steps[i];
    const rt::LaunchRecord& m = made[i];
    const std::string want = "grid " + fmt(s.grid[0], s.grid[1], s.grid[2]) + " block " +
                             fmt(s.block[0], s.block[1], s.block[2]) + " lds " + std::to_string(s.lds_bytes);
    const std::string got = "grid " + fmt(m.grid.x, m.grid.y, m.grid.z) + " block " +
                            fmt(m.block.x, m.block.y, m.block.z) + " lds " + std::to_string(m.lds_bytes);
    if (want != got)
      throw std::logic_error(plan.op + ": plan step " + std::to_string(i) + " (" + s.kernel + ") says " + want +
                             ", the launch of " + m.kernel + " had " + got);
  }
}

// Runs a launch sequence once (launch_all as in time_sequence) and waits for
// it; with `whole`, checks its launches against the plan (check_launches).
template <class F>
void launch_as_planned(const Plan& plan, F&& launch_all, bool whole = true) {
  rt::LaunchTrace trace;
  launch_all([] {});
  rt::device_synchronize();
  if (whole) check_launches(plan, trace.records());
}

// Times opt.timing_iters more runs of a launch sequence (see RunOptions).
// launch_all(mark) launches the plan's steps and calls mark() after each.
template <class F>
void time_sequence(F&& launch_all, const RunOptions& opt) {
  if (!opt.kernel_ms || opt.timing_iters < 1) return;
  std::unique_ptr<rt::Graph> graph;
  if (opt.graph && rt::has_graphs) {
    graph = std::make_unique<rt::Graph>([&] { launch_all([] {}); });
    graph->replay();  // the first replay uploads the graph: outside the numbers
  }
  const auto sequence = [&] {
    if (graph) graph->replay();
    else launch_all([] {});
  };
  if (opt.before_each) {
    double total = 0;
    for (int i = 0; i < opt.timing_iters; ++i) {
      opt.before_each();
      rt::Event start, stop;
      start.record();
      sequence();
      stop.record();
      stop.synchronize();
      total += static_cast<double>(rt::elapsed_ms(start, stop));
    }
    *opt.kernel_ms = total / opt.timing_iters;
  } else {
    rt::Event start, stop;
    start.record();
    for (int i = 0; i < opt.timing_iters; ++i) sequence();
    stop.record();
    stop.synchronize();
    *opt.kernel_ms = static_cast<double>(rt::elapsed_ms(start, stop)) / opt.timing_iters;
  }
  if (!opt.step_ms) return;
  opt.step_ms->clear();
  for (int i = 0; i < opt.timing_iters; ++i) {
    if (opt.before_each) opt.before_each();
    std::vector<std::unique_ptr<rt::Event>> ev;
    ev.push_back(std::make_unique<rt::Event>());
    ev.back()->record();
    launch_all([&] {
      ev.push_back(std::make_unique<rt::Event>());
      ev.back()->record();
    });
    ev.back()->synchronize();
    opt.step_ms->resize(ev.size() - 1, 0.0);
    for (std::size_t k = 0; k + 1 < ev.size(); ++k)
      (*opt.step_ms)[k] += static_cast<double>(rt::elapsed_ms(*ev[k], *ev[k + 1])) / opt.timing_iters;
  }
}

}  // namespace kgate::kernels
