// hipMalloc's failures as the HIP backend reports them (hip_status.hpp),
// with the HIP runtime's real status codes.
#include "kernels/runtime/hip_status.hpp"
#include "kernels/runtime/tests/device_status_util.hpp"

namespace rt = kgate::rt;
using rt::test::thrown_by;

TEST(HipStatus, OutOfMemoryIsOutOfMemory) {
  EXPECT_EQ(thrown_by([] { rt::detail::hip_malloc_failed(hipErrorOutOfMemory, 1u << 30, "out of memory"); }),
            "oom: hipMalloc could not allocate 1073741824 bytes: out of memory");
  EXPECT_EQ(thrown_by([] { rt::detail::hip_malloc_failed(hipErrorMemoryAllocation, 8, "out of memory"); }),
            "oom: hipMalloc could not allocate 8 bytes: out of memory");
}

TEST(HipStatus, NoDeviceOrDriverIsUnavailable) {
  for (const hipError_t e : {hipErrorNoDevice, hipErrorInsufficientDriver, hipErrorNotInitialized,
                             hipErrorNoBinaryForGpu}) {
    EXPECT_EQ(thrown_by([&] { rt::detail::hip_malloc_failed(e, 4096, "api text"); }),
              "unavailable: hipMalloc could not allocate 4096 bytes: api text")
        << static_cast<int>(e);
    EXPECT_EQ(thrown_by([&] { rt::detail::hip_call_failed(e, "hipStreamCreate", "api text"); }),
              "unavailable: hipStreamCreate failed: api text")
        << static_cast<int>(e);
  }
}

TEST(HipStatus, OtherErrorsAreKernelOrCallErrors) {
  for (const hipError_t e : {hipErrorInvalidValue, hipErrorLaunchFailure, hipErrorIllegalAddress})
    EXPECT_EQ(thrown_by([&] { rt::detail::hip_malloc_failed(e, 4096, "api text"); }),
              "error: hipMalloc could not allocate 4096 bytes: api text")
        << static_cast<int>(e);
}
