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

TEST(CudaStatus, OtherErrorsAreNotOutOfMemory) {
  for (const cudaError_t e : {cudaErrorInvalidValue, cudaErrorInitializationError, cudaErrorNoDevice,
                              cudaErrorLaunchFailure, cudaErrorIllegalAddress})
    EXPECT_EQ(thrown_by([&] { rt::detail::cuda_malloc_failed(e, 4096, "api text"); }),
              "error: cudaMalloc could not allocate 4096 bytes: api text")
        << static_cast<int>(e);
}
