// Helpers of test_device_status: what a failed allocation throws.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kernels/runtime/common.hpp"

namespace kgate::rt::test {

// What `fail` threw: "oom: <message>" for OutOfMemory, "unavailable:
// <message>" for Unavailable, "error: <message>" for any other
// kgate::rt::Error, "none" if it returned.
inline std::string thrown_by(const std::function<void()>& fail) {
  try {
    fail();
  } catch (const OutOfMemory& e) {
    return std::string("oom: ") + e.what();
  } catch (const Unavailable& e) {
    return std::string("unavailable: ") + e.what();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
  return "none";
}

}  // namespace kgate::rt::test
