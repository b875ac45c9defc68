// Backend-independent pieces of the kernel runtime: value types shared by all
// three backends and the one definition of the wave-shuffle lane rules.
//
// Nothing here knows which backend it is compiled for; runtime.hpp picks the
// backend header, and every backend header defines the same sections in the
// same order (see runtime.hpp for the list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference/dtype.hpp"  // KGATE_HD, kgate::bf16, kgate::fp16

// KGATE_UNROLL before a loop with a constant trip count unrolls it fully on
// every backend (keeps indexed register arrays out of scratch on the GPUs).
#if defined(__HIP__) || defined(__CUDACC__)
#define KGATE_UNROLL _Pragma("unroll")
#else
#define KGATE_UNROLL _Pragma("GCC unroll 16")
#endif

namespace kgate::rt {

enum class Backend : std::uint8_t { host, hip, cuda };

constexpr const char* backend_name(Backend b) {
  switch (b) {
    case Backend::host: return "host";
    case Backend::hip: return "hip";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

// Grid and block extents, and work-item / workgroup indices.
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3() = default;
  KGATE_HD constexpr dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  KGATE_HD constexpr std::uint64_t count() const {
    return static_cast<std::uint64_t>(x) * y * z;
  }
};

// Every failure of the runtime (a failing API call, a launch the device would
// refuse, a defect the host emulator detects) is reported as this exception;
// its message names the call or the kernel, workgroup and source site.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device allocation that failed for want of memory: an error of the run,
// not a defect of the kernel (the gate reports it as such, never as failed).
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// The environment cannot run kernels at all: no device, no driver, a driver
// older than the runtime. An error of the environment, never a verdict on a
// kernel (the gate exits 2 saying so).
class Unavailable : public Error {
 public:
  using Error::Error;
};

// How the runtime classifies a failed API call (each backend's status header
// maps its codes onto it).
enum class Failure { error, out_of_memory, unavailable };

// The one way a failed API call is thrown on every backend: `what` names the
// call and the API's description.
[[noreturn]] inline void api_failed(Failure f, std::string what) {
  if (f == Failure::out_of_memory) throw OutOfMemory(std::move(what));
  if (f == Failure::unavailable) throw Unavailable(std::move(what));
  throw Error(std::move(what));
}

// The one wording of a failed device allocation on every backend: `call`
// (cudaMalloc, hipMalloc, the host's device_malloc) refused `bytes` for
// `reason`.
[[noreturn]] inline void allocation_failed(const char* call, std::size_t bytes, Failure f, const std::string& reason) {
  api_failed(f, std::string(call) + " could not allocate " + std::to_string(bytes) + " bytes: " + reason);
}
[[noreturn]] inline void allocation_failed(const char* call, std::size_t bytes, bool out_of_memory,
                                           const std::string& reason) {
  allocation_failed(call, bytes, out_of_memory ? Failure::out_of_memory : Failure::error, reason);
}

// Launch geometry. lds_bytes is the dynamic LDS size (static LDS is declared
// in the kernel with KGATE_LDS).
template <class StreamT>
struct BasicLaunchConfig {
  dim3 grid;
  dim3 block;
  std::size_t lds_bytes = 0;
  StreamT* stream = nullptr;  // nullptr: the default stream
};

// Launch trace. While a LaunchTrace lives on a host thread, every launch that
// thread issues (any backend; the geometry the kernel is launched with, after
// the launch checks) is appended to it. The kernel library uses it to prove
// that a plan's published steps are the launches it makes.
struct LaunchRecord {
  std::string kernel;  // the KGATE_LAUNCH expression
  dim3 grid, block;
  std::size_t lds_bytes = 0;
};

class LaunchTrace {
 public:
  LaunchTrace() : outer_(current()) { current() = this; }
  ~LaunchTrace() { current() = outer_; }
  LaunchTrace(const LaunchTrace&) = delete;
  LaunchTrace& operator=(const LaunchTrace&) = delete;
  const std::vector<LaunchRecord>& records() const { return records_; }
  // Called by every backend's launch; every live trace of the thread (nested
  // ones too) records it.
  static void note(const char* kernel, const dim3& grid, const dim3& block, std::size_t lds_bytes) {
    for (LaunchTrace* t = current(); t; t = t->outer_) t->records_.push_back({kernel, grid, block, lds_bytes});
  }

 private:
  static LaunchTrace*& current() {
    static thread_local LaunchTrace* t = nullptr;
    return t;
  }
  LaunchTrace* outer_;
  std::vector<LaunchRecord> records_;
};

// Facts about gfx942 the runtime enforces on every backend's launch checks.
inline constexpr unsigned max_workgroup_size = 1024;
inline constexpr std::size_t max_lds_bytes = 64 * 1024;

// ---------------------------------------------------------------------------
// Wave-shuffle lane rules (gfx942, as HIP implements them on ds_bpermute).
//
// A shuffle computes, for each lane `self`, an index; ds_bpermute then reads
// lane (index mod wave_size). A source lane that is inactive (diverged away,
// exited, or past the end of a partial wave) reads 0. With width w, lanes are
// split into segments of w consecutive lanes:
//   shfl(v, src, w):      index = (src & (w-1)) + (self & ~(w-1))
//   shfl_up(v, d, w):     index = self - d, or self if that leaves the segment
//                         downwards (index < self & ~(w-1))
//   shfl_down(v, d, w):   index = self + d, or self if (self & (w-1)) + d >= w
//   shfl_xor(v, m, w):    index = self ^ m, or self if index >= the end of the
//                         segment ((self + w) & ~(w-1)); an index in a LOWER
//                         segment is not clamped: xor with m >= w reaches it.
// Widths are meant to be powers of two in [1, wave_size] (CUDA requires it);
// the formulas above define the gfx942 result for any width.
// The host and HIP backends both call these functions; the CUDA backend uses
// the native shuffles, which agree for power-of-two widths and in-segment
// sources.
KGATE_HD constexpr int lane_shfl(int self, int src, int width) {
  return (src & (width - 1)) + (self & ~(width - 1));
}
KGATE_HD constexpr int lane_shfl_up(int self, unsigned delta, int width) {
  const int index = self - static_cast<int>(delta);
  return index < (self & ~(width - 1)) ? self : index;
}
KGATE_HD constexpr int lane_shfl_down(int self, unsigned delta, int width) {
  const int index = self + static_cast<int>(delta);
  return static_cast<int>((self & (width - 1)) + static_cast<int>(delta)) >= width ? self : index;
}
KGATE_HD constexpr int lane_shfl_xor(int self, int mask, int width) {
  const int index = self ^ mask;
  return index >= ((self + width) & ~(width - 1)) ? self : index;
}
// ds_bpermute addresses lanes modulo the wave size (address bits [7:2]).
KGATE_HD constexpr int bpermute_lane(int index, int wave_size) { return index & (wave_size - 1); }

// Bits of a 64-bit lane mask (ballot results are 64-bit on every backend; on
// a 32-wide backend the upper half is 0).
using lane_mask = std::uint64_t;

// splitmix64: the deterministic hash the conformance inputs are made of
// (identical on every backend and machine; no library random engine).
KGATE_HD constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Matrix-core targets: the instruction sets whose MMA atoms exist (mma.hpp).
// The HIP backend is gfx942, the CUDA backend sm90; the host backend emulates
// either (host::Config::target).
enum class Target : std::uint8_t { gfx942, sm90 };

constexpr const char* target_name(Target t) { return t == Target::gfx942 ? "gfx942" : "sm90"; }

// Input element type of an MMA atom: bf16 / f16 operands are 16-bit bit
// patterns, f32 and xf32 (f32 operands truncated to tf32) are floats.
enum class MmaType : std::uint8_t { bf16, f16, f32, xf32 };

// MMA numeric models of the host backend (host/mma_numerics.hpp):
//   exact  every product exact, one round-to-nearest-even to fp32 per
//          instruction and output element;
//   cdna3  the gfx942 matrix cores, bit for bit (the gfx942 target's model);
//   sm90   the Hopper mma.sync tensor cores, bit for bit (the sm90 target's).
enum class MfmaModel : std::uint8_t { exact, cdna3, sm90 };

constexpr const char* mfma_model_name(MfmaModel m) {
  return m == MfmaModel::exact ? "exact" : m == MfmaModel::cdna3 ? "cdna3" : "sm90";
}

}  // namespace kgate::rt
