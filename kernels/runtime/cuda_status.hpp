// The CUDA runtime's failed allocations mapped onto the runtime's errors
// (common.hpp). Needs only the API's declarations, so the mapping compiles
// and is tested with the host compiler, without nvcc or a GPU
// (test_device_status).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "kernels/runtime/common.hpp"

namespace kgate::rt::detail {

// cudaMalloc of `bytes` returned the failure `e`, which the API describes as
// `text` (cudaGetErrorString): OutOfMemory for cudaErrorMemoryAllocation,
// Error otherwise.
[[noreturn]] inline void cuda_malloc_failed(cudaError_t e, std::size_t bytes, const char* text) {
  allocation_failed("cudaMalloc", bytes, e == cudaErrorMemoryAllocation, text);
}

}  // namespace kgate::rt::detail
