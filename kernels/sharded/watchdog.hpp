// A watchdog for collective code: if the guarded scope has not finished
// after `seconds`, it prints which rank was stuck, in which phase of the
// sharded operators (sharded::current_phase) and what it was guarding, to
// stderr, and ends the process with exit code kWatchdogExit. Under mpirun
// that ends the job (a rank exiting without MPI_Finalize), so a hang becomes a
// failure with a report instead of a timeout without one.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace kgate::sharded {

inline constexpr int kWatchdogExit = 124;

class Watchdog {
 public:
  // `rank` is printed (MPI is not called from the watchdog's thread).
  Watchdog(double seconds, int rank, std::string what);
  ~Watchdog();  // disarms
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace kgate::sharded
