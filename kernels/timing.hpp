// The timing options of kernels::RunOptions (kernel_ms, timing_iters,
// step_ms, before_each) for any kernel's host driver: one definition, so
// that every kernel is timed alike. Include after the runtime.
#pragma once

#include <memory>
#include <vector>

#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels {

// Times opt.timing_iters more runs of a launch sequence (see RunOptions).
// launch_all(mark) launches the plan's steps and calls mark() after each.
template <class F>
void time_sequence(F&& launch_all, const RunOptions& opt) {
  if (!opt.kernel_ms || opt.timing_iters < 1) return;
  if (opt.before_each) {
    double total = 0;
    for (int i = 0; i < opt.timing_iters; ++i) {
      opt.before_each();
      rt::Event start, stop;
      start.record();
      launch_all([] {});
      stop.record();
      stop.synchronize();
      total += static_cast<double>(rt::elapsed_ms(start, stop));
    }
    *opt.kernel_ms = total / opt.timing_iters;
  } else {
    rt::Event start, stop;
    start.record();
    for (int i = 0; i < opt.timing_iters; ++i) launch_all([] {});
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
