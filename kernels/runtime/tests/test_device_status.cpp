// The one wording of a failed device allocation (common.hpp) and the host
// backend's use of it; the CUDA and HIP mappings are in
// test_device_status_cuda.cpp and test_device_status_hip.cpp (compiled
// against the APIs' declarations where they are installed).
#include <limits>

#include "kernels/runtime/runtime.hpp"
#include "kernels/runtime/tests/device_status_util.hpp"

namespace rt = kgate::rt;
using rt::test::thrown_by;

TEST(DeviceStatus, LackOfMemoryIsOutOfMemoryNamingTheCallAndSize) {
  EXPECT_EQ(thrown_by([] { rt::allocation_failed("cudaMalloc", 1099511627776, true, "out of memory"); }),
            "oom: cudaMalloc could not allocate 1099511627776 bytes: out of memory");
}

TEST(DeviceStatus, AnyOtherFailureIsAnErrorButNotOutOfMemory) {
  EXPECT_EQ(thrown_by([] { rt::allocation_failed("hipMalloc", 64, false, "invalid argument"); }),
            "error: hipMalloc could not allocate 64 bytes: invalid argument");
}

TEST(DeviceStatus, HostAllocationPastTheAddressSpaceIsOutOfMemory) {
  // Without the check the size would wrap to a few guard pages and succeed.
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 100;
  EXPECT_EQ(thrown_by([&] { rt::device_free(rt::device_malloc(huge)); }),
            "oom: device_malloc could not allocate " + std::to_string(huge) + " bytes: larger than the address space");
}
