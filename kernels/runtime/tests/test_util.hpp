// Helpers shared by the runtime tests (host backend).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/runtime/runtime.hpp"

namespace kgate::rt::test {

// A configuration for deterministic tests: the gfx942 target (wave64,
// cdna3), one thread, in order, checks on.
inline host::Config test_config() {
  host::Config c = host::config_for(Target::gfx942, host::config());
  c.threads = 1;
  c.order = host::Order::in_order;
  c.check_lds = true;
  return c;
}

// Runs fn and returns the message of the kgate::rt::Error it throws ("" when none).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace kgate::rt::test
