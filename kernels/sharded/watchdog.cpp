#include "kernels/sharded/watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "kernels/sharded/sharded.hpp"

namespace kgate::sharded {

Watchdog::Watchdog(double seconds, int rank, std::string what) {
  thread_ = std::thread([this, seconds, rank, what = std::move(what)] {
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
    std::fprintf(stderr, "kgate watchdog: rank %d: '%s' did not finish within %g s; stuck in: %s\n", rank,
                 what.c_str(), seconds, current_phase().c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(kWatchdogExit);
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace kgate::sharded
