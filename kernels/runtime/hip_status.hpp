// The HIP runtime's failed allocations mapped onto the runtime's errors
// (common.hpp). Needs only the API's declarations, so the mapping compiles
// and is tested with the host compiler, without a HIP device
// (test_device_status).
#pragma once

#include <hip/hip_runtime_api.h>

#include <cstddef>
#include <string>

#include "kernels/runtime/common.hpp"

namespace kgate::rt::detail {

// What a HIP status means for the run: out_of_memory for hipErrorOutOfMemory
// (the same code as hipErrorMemoryAllocation); unavailable where the machine
// cannot run HIP kernels at all (no device, no or an old driver, no code
// object for the device); error otherwise.
inline Failure hip_failure(hipError_t e) {
  switch (e) {
    case hipErrorOutOfMemory: return Failure::out_of_memory;
    case hipErrorNoDevice:
    case hipErrorInsufficientDriver:
    case hipErrorNotInitialized:  // also hipErrorInitializationError
    case hipErrorNoBinaryForGpu: return Failure::unavailable;
    default: return Failure::error;
  }
}

// hipMalloc of `bytes` returned the failure `e`, which the API describes as
// `text` (hipGetErrorString).
[[noreturn]] inline void hip_malloc_failed(hipError_t e, std::size_t bytes, const char* text) {
  allocation_failed("hipMalloc", bytes, hip_failure(e), text);
}

// Any other call: "<call> failed: <text>".
[[noreturn]] inline void hip_call_failed(hipError_t e, const std::string& call, const char* text) {
  api_failed(hip_failure(e), call + " failed: " + text);
}

}  // namespace kgate::rt::detail
