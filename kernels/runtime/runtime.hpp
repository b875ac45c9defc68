// kgate kernel runtime: one kernel source, three backends.
//
// This header is the only include a kernel or a host driver needs. It picks
// the backend from the compiler (HIP for gfx942, CUDA, otherwise the host CPU
// emulator) and every backend header defines the same sections in the same
// order, so they can be read side by side:
//
//   1. Identity        backend, has_mfma, max_wave_size
//   2. Kernels         KGATE_KERNEL, KGATE_KERNEL_BOUNDS, KGATE_DEVICE,
//                      KGATE_KERNEL_OCCUPANCY (also a minimum of resident
//                      workgroups per multiprocessor: CUDA's register
//                      budget; gfx942 and the host take the bound only)
//   3. Indices         thread_idx, block_idx, block_dim, grid_dim, lane_id,
//                      wave_id, wave_size, flat_thread_idx
//   4. Barrier         barrier
//      (register arrays: rt::regs, registers.hpp, on the backends'
//      check_register_index)
//   5. LDS             lds_array, KGATE_LDS (static), KGATE_LDS_DYNAMIC;
//                      asynchronous global-to-LDS copies:
//                      lds_array::copy_async(i, src, valid) copies one V
//                      (4, 8 or 16 bytes, V's alignment at both ends) from
//                      global src to element i, zeros where !valid (src
//                      unread); async_commit() closes the work-item's
//                      current group of copies; async_wait<N>() returns
//                      when at most N of its committed groups are still
//                      in flight. A copy's bytes are in LDS only after the
//                      wait that completes its group (the host emulator
//                      writes them there, not before), and other
//                      work-items see them after a barrier that follows.
//                      CUDA: cp.async; gfx942: a load and a store at the
//                      call.
//   6. Wave ops        shfl, shfl_xor, shfl_up, shfl_down, ballot, wave_any,
//                      wave_all, readfirstlane
//   7. Atomics         atomic_add/sub/min/max/and/or/xor/exch/cas (integers),
//                      atomic_add_unordered (float; negative controls only)
//   8. Matrix cores    f32x4/f32x16/f32x2/bf16x4/f16x4 and the gfx942 MFMA
//                      operations (mfma_f32_32x32x8bf16_1k, ...); CUDA: the
//                      sm_90 mma.sync operations. Kernels use the MMA atoms
//                      of mma.hpp (rt::mma), included last.
//   9. Memory          device_malloc/free, copy_h2d/d2h/d2d, device_memset;
//                      load_wide/store_wide (widest aligned accesses),
//                      load_once/store_once (cache hints, plain semantics)
//  10. Streams/events  Stream, Event, elapsed_ms, device_synchronize, Graph
//                      (has_graphs: a launch sequence captured and replayed)
//  11. Launch          LaunchConfig, launch, KGATE_LAUNCH
//
// A kernel is written once:
//
//   KGATE_KERNEL(scale, const float* x, float* y, int n) {
//     const int i = static_cast<int>(rt::block_idx().x * rt::block_dim().x + rt::thread_idx().x);
//     if (i < n) y[i] = 2.0f * x[i];
//   }
//   ...
//   KGATE_LAUNCH(scale, rt::LaunchConfig{grid, block}, dx, dy, n);
//
// and is a fiber-run C++ function on the host backend and a __global__
// function on HIP and CUDA. A missing backend operation fails at compile time.
#pragma once

#if defined(__HIP__)
// First, so that <cstring> (through reference/dtype.hpp) sees HIP's device
// memcpy and std::memcpy is usable in KGATE_HD code on gfx942.
#include <hip/hip_runtime.h>
#endif
#include "kernels/runtime/common.hpp"

#if defined(__HIP__)
#include "kernels/runtime/hip_backend.hpp"
#elif defined(__CUDACC__)
#include "kernels/runtime/cuda_backend.hpp"
#else
#include "kernels/runtime/host/host_backend.hpp"
#endif

#include "kernels/runtime/buffer.hpp"
#include "kernels/runtime/registers.hpp"
#include "kernels/runtime/mma.hpp"
