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

// hipMalloc of `bytes` returned the failure `e`, which the API describes as
// `text` (hipGetErrorString): OutOfMemory for hipErrorOutOfMemory (the same
// code as hipErrorMemoryAllocation), Error otherwise.
[[noreturn]] inline void hip_malloc_failed(hipError_t e, std::size_t bytes, const char* text) {
  allocation_failed("hipMalloc", bytes, e == hipErrorOutOfMemory, text);
}

}  // namespace kgate::rt::detail
