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
