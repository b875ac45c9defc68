// A kernel the gfx942 gate must reject: a private array indexed at run time
// lives in scratch memory. Test gfx942_rejects_scratch expects the gate's
// "uses ... bytes of scratch" failure, so the check itself is tested.
#include "kernels/runtime/runtime.hpp"

namespace rt = kgate::rt;

KGATE_KERNEL(uses_scratch, const int* idx, float* out) {
  float local[256];
  for (int i = 0; i < 256; ++i) local[i] = out[i] * static_cast<float>(i);
  out[0] = local[idx[rt::thread_idx().x] & 255];
}
