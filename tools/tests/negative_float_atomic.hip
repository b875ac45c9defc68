// A test-only kernel `kgate isa` must reject on every target: a floating-point atomic
// (the order-dependent reduction production kernels never use). Tests
// gfx942_rejects_float_atomic and isa_cuda_rejects_float_atomic expect the
// audit's float-atomic finding, so the check itself is tested.
#include "kernels/runtime/runtime.hpp"

namespace rt = kgate::rt;

KGATE_KERNEL(float_atomic_sum, const float* x, float* out) {
  rt::atomic_add_unordered(out, x[rt::block_idx().x * rt::block_dim().x + rt::thread_idx().x]);
}
