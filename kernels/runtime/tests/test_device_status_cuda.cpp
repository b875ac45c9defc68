// cudaMalloc's failures as the CUDA backend reports them (cuda_status.hpp),
// with the CUDA runtime's real status codes.
#include "kernels/runtime/cuda_status.hpp"
#include "kernels/runtime/tests/device_status_util.hpp"

namespace rt = kgate::rt;
using rt::test::thrown_by;

TEST(CudaStatus, MemoryAllocationErrorIsOutOfMemory) {
  EXPECT_EQ(thrown_by([] { rt::detail::cuda_malloc_failed(cudaErrorMemoryAllocation, 1u << 30, "out of memory"); }),
            "oom: cudaMalloc could not allocate 1073741824 bytes: out of memory");
}

TEST(CudaStatus, NoDeviceOrDriverIsUnavailable) {
  for (const cudaError_t e : {cudaErrorNoDevice, cudaErrorInsufficientDriver, cudaErrorInitializationError,
                              cudaErrorStubLibrary, cudaErrorSystemDriverMismatch}) {
    EXPECT_EQ(thrown_by([&] { rt::detail::cuda_malloc_failed(e, 4096, "api text"); }),
              "unavailable: cudaMalloc could not allocate 4096 bytes: api text")
        << static_cast<int>(e);
    EXPECT_EQ(thrown_by([&] { rt::detail::cuda_call_failed(e, "cudaStreamCreate", "api text"); }),
              "unavailable: cudaStreamCreate failed: api text")
        << static_cast<int>(e);
  }
}

TEST(CudaStatus, OtherErrorsAreKernelOrCallErrors) {
  EXPECT_EQ(thrown_by([] { rt::detail::cuda_call_failed(cudaErrorIllegalAddress, "cudaMemcpy(d2h)", "illegal"); }),
            "error: cudaMemcpy(d2h) failed: illegal");
  for (const cudaError_t e : {cudaErrorInvalidValue, cudaErrorLaunchFailure, cudaErrorIllegalAddress})
    EXPECT_EQ(thrown_by([&] { rt::detail::cuda_malloc_failed(e, 4096, "api text"); }),
              "error: cudaMalloc could not allocate 4096 bytes: api text")
        << static_cast<int>(e);
}
