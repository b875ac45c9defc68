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

// What a CUDA status means for the run: out_of_memory for
// cudaErrorMemoryAllocation; unavailable where the machine cannot run CUDA
// kernels at all (no device, no or a mismatched driver, the stub library, a
// device the runtime does not support); error otherwise.
inline Failure cuda_failure(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return Failure::out_of_memory;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorSystemNotReady:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion: return Failure::unavailable;
    default: return Failure::error;
  }
}

// cudaMalloc of `bytes` returned the failure `e`, which the API describes as
// `text` (cudaGetErrorString).
[[noreturn]] inline void cuda_malloc_failed(cudaError_t e, std::size_t bytes, const char* text) {
  allocation_failed("cudaMalloc", bytes, cuda_failure(e), text);
}

// Any other call: "<call> failed: <text>".
[[noreturn]] inline void cuda_call_failed(cudaError_t e, const std::string& call, const char* text) {
  api_failed(cuda_failure(e), call + " failed: " + text);
}

}  // namespace kgate::rt::detail
