// The gfx942 probe source (every runtime operation) also builds and runs
// unchanged on the host backend, checks on.
#include "kernels/runtime/gfx942/runtime_probe.hip"
#include "kernels/runtime/tests/test_util.hpp"

namespace {

TEST(Probe, SameSourceRunsOnTheHostBackend) {
  kgate::rt::host::ScopedConfig sc(kgate::rt::test::test_config());
  EXPECT_GE(kgate::probe::launch_all(), 0.0f);
}

}  // namespace
