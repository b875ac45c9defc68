// SIGINT during a long run: while an InterruptGuard lives, the first SIGINT
// only sets a flag that the run polls between problems (it then finishes
// the problems in flight, writes a report marked incomplete and exits
// exit_interrupted); a second SIGINT ends the process at once, as the
// default action does.
#pragma once

#include <signal.h>

#include <atomic>

namespace kgate {

inline constexpr int exit_interrupted = 130;  // 128 + SIGINT, what a shell reports

namespace detail {
inline volatile sig_atomic_t interrupt_flag = 0;
extern "C" inline void on_interrupt(int) { interrupt_flag = 1; }
}  // namespace detail

// Whether a SIGINT arrived while a guard was installed.
inline bool interrupted() { return detail::interrupt_flag != 0; }

class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction sa {};
    sa.sa_handler = detail::on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // the second SIGINT takes the default action
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &old_, nullptr); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_ {};
};

}  // namespace kgate
