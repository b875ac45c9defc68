// HIP backend for gfx942 (clang -x hip --offload-arch=gfx942, HIP headers).
// Wave64, MFMA through the amdgcn builtins, shuffles on ds_bpermute with the
// lane rules of common.hpp. Sections in the order of runtime.hpp.
#pragma once

#include <hip/hip_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/runtime/common.hpp"
#include "kernels/runtime/hip_status.hpp"

namespace kgate::rt {

// ===========================================================================
// 1. Identity
inline constexpr Backend backend = Backend::hip;
inline constexpr bool has_mfma = true;
inline constexpr int max_wave_size = 64;
// The settings a run on this backend uses (name, value) for reports: a
// device backend has none beyond the device itself.
inline std::vector<std::pair<std::string, std::string>> settings() { return {}; }

// ===========================================================================
// 2. Kernels
#define KGATE_KERNEL(name, ...) __global__ void name(__VA_ARGS__)
#define KGATE_KERNEL_BOUNDS(name, max_threads, ...) __global__ __launch_bounds__(max_threads) void name(__VA_ARGS__)
#define KGATE_KERNEL_OCCUPANCY(name, max_threads, min_blocks, ...) __global__ __launch_bounds__(max_threads) void name(__VA_ARGS__)
#define KGATE_DEVICE __device__ inline

// ===========================================================================
// 3. Indices
__device__ inline dim3 thread_idx() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
__device__ inline dim3 block_idx() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
__device__ inline dim3 block_dim() { return dim3(blockDim.x, blockDim.y, blockDim.z); }
__device__ inline dim3 grid_dim() { return dim3(gridDim.x, gridDim.y, gridDim.z); }
__device__ inline unsigned flat_thread_idx() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ constexpr int wave_size() { return 64; }
__device__ inline int lane_id() { return static_cast<int>(__lane_id()); }
__device__ inline int wave_id() { return static_cast<int>(flat_thread_idx() / 64u); }
// A register array's index (rt::regs): unchecked on the device.
__device__ inline void check_register_index(int, int) {}

// ===========================================================================
// 4. Barrier
__device__ inline void barrier() { __syncthreads(); }

// ===========================================================================
// 5. LDS
template <class T>
class lds_array {
 public:
  __device__ explicit lds_array(T* p) : p_(p) {}
  __device__ T& operator[](std::size_t i) const { return p_[i]; }
  __device__ T* data() const { return p_; }
  template <class V>
  __device__ V load(std::size_t i) const {
    return *reinterpret_cast<const V*>(p_ + i);
  }
  template <class V>
  __device__ void store(std::size_t i, const V& v) const {
    *reinterpret_cast<V*>(p_ + i) = v;
  }
  // Asynchronous copy (runtime.hpp, section 5): gfx942 has no 16-byte
  // global-to-LDS copy, so the copy is a load and a store at the call, which
  // is one valid schedule of the contract; commit and wait are empty.
  template <class V>
  __device__ void copy_async(std::size_t i, const V* src, bool valid) const {
    static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "asynchronous copies move 4, 8 or 16 bytes");
    // Moved as a vector of dwords (a struct copy can go through scratch).
    using W = std::conditional_t<sizeof(V) == 16, uint4, std::conditional_t<sizeof(V) == 8, uint2, unsigned>>;
    W w{};
    if (valid) w = *reinterpret_cast<const W*>(src);
    *reinterpret_cast<W*>(p_ + i) = w;
  }

 private:
  T* p_;
};

__device__ inline void async_commit() {}
template <int N>
__device__ inline void async_wait() {
  static_assert(N >= 0 && N <= 7, "wait takes 0 .. 7 (CUDA's cp.async.wait_group)");
}

namespace detail {
template <class T>
__device__ inline T* dynamic_lds() {
  extern __shared__ __attribute__((aligned(16))) unsigned char kgate_dynamic_lds[];
  return reinterpret_cast<T*>(kgate_dynamic_lds);
}
}  // namespace detail

#define KGATE_LDS(name, T, N)                                   \
  __shared__ __attribute__((aligned(16))) T kgate_lds_##name[(N)]; \
  const ::kgate::rt::lds_array<T> name(kgate_lds_##name)
#define KGATE_LDS_DYNAMIC(name, T) const ::kgate::rt::lds_array<T> name(::kgate::rt::detail::dynamic_lds<T>())

// ===========================================================================
// 6. Wave operations (ds_bpermute: an inactive source lane reads 0)
namespace detail {
template <class T>
__device__ inline T bpermute(T v, int index) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "shuffle of a type wider than 16 bytes");
  constexpr int words = (sizeof(T) + 3) / 4;
  int w[words] = {};
  __builtin_memcpy(w, &v, sizeof(T));
  const int addr = bpermute_lane(index, 64) << 2;
  for (int i = 0; i < words; ++i) w[i] = __builtin_amdgcn_ds_bpermute(addr, w[i]);
  T r;
  __builtin_memcpy(&r, w, sizeof(T));
  return r;
}
}  // namespace detail

template <class T>
__device__ inline T shfl(T v, int src, int width = 64) {
  return detail::bpermute(v, lane_shfl(lane_id(), src, width));
}
template <class T>
__device__ inline T shfl_xor(T v, int mask, int width = 64) {
  return detail::bpermute(v, lane_shfl_xor(lane_id(), mask, width));
}
template <class T>
__device__ inline T shfl_up(T v, unsigned delta, int width = 64) {
  return detail::bpermute(v, lane_shfl_up(lane_id(), delta, width));
}
template <class T>
__device__ inline T shfl_down(T v, unsigned delta, int width = 64) {
  return detail::bpermute(v, lane_shfl_down(lane_id(), delta, width));
}
__device__ inline lane_mask ballot(bool pred) { return __ballot(pred); }
__device__ inline bool wave_any(bool pred) { return __ballot(pred) != 0; }
__device__ inline bool wave_all(bool pred) { return __ballot(pred) == __ballot(true); }
template <class T>
__device__ inline T readfirstlane(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "readfirstlane of a type wider than 16 bytes");
  constexpr int words = (sizeof(T) + 3) / 4;
  int w[words] = {};
  __builtin_memcpy(w, &v, sizeof(T));
  for (int i = 0; i < words; ++i) w[i] = __builtin_amdgcn_readfirstlane(w[i]);
  T r;
  __builtin_memcpy(&r, w, sizeof(T));
  return r;
}

}  // namespace kgate::rt

// ===========================================================================
// 7. Atomics (shared with CUDA)
#include "kernels/runtime/device_common.hpp"

namespace kgate::rt {

// ===========================================================================
// 8. Matrix cores (MFMA): the gfx942 builtins. Element i of every vector is
// v[i]; the 16-bit operands hold bf16 / fp16 bit patterns.
using f32x2 = float __attribute__((ext_vector_type(2)));
using f32x4 = float __attribute__((ext_vector_type(4)));
using f32x16 = float __attribute__((ext_vector_type(16)));
using bf16x4 = short __attribute__((ext_vector_type(4)));
using f16x4 = short __attribute__((ext_vector_type(4)));

namespace detail {
using half4 = _Float16 __attribute__((ext_vector_type(4)));
}

template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x16 mfma_32x32x8bf16_1k(const bf16x4& a, const bf16x4& b, const f32x16& c) {
  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x4 mfma_16x16x16bf16_1k(const bf16x4& a, const bf16x4& b, const f32x4& c) {
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x16 mfma_32x32x8f16(const f16x4& a, const f16x4& b, const f32x16& c) {
  return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(detail::half4, a),
                                              __builtin_bit_cast(detail::half4, b), c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x4 mfma_16x16x16f16(const f16x4& a, const f16x4& b, const f32x4& c) {
  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(detail::half4, a),
                                               __builtin_bit_cast(detail::half4, b), c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x16 mfma_32x32x2f32(float a, float b, const f32x16& c) {
  return __builtin_amdgcn_mfma_f32_32x32x2f32(a, b, c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x4 mfma_16x16x4f32(float a, float b, const f32x4& c) {
  return __builtin_amdgcn_mfma_f32_16x16x4f32(a, b, c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x16 mfma_32x32x4xf32(const f32x2& a, const f32x2& b, const f32x16& c) {
  return __builtin_amdgcn_mfma_f32_32x32x4_xf32(a, b, c, cbsz, abid, blgp);
}
template <int cbsz = 0, int abid = 0, int blgp = 0>
__device__ inline f32x4 mfma_16x16x8xf32(const f32x2& a, const f32x2& b, const f32x4& c) {
  return __builtin_amdgcn_mfma_f32_16x16x8_xf32(a, b, c, cbsz, abid, blgp);
}

// ===========================================================================
// 9. Memory
namespace detail {
inline void check(hipError_t e, const std::string& call) {
  if (e != hipSuccess) hip_call_failed(e, call, hipGetErrorString(e));
}
}  // namespace detail

class Stream;
void copy_h2d(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr);

inline void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  if (const hipError_t e = hipMalloc(&p, bytes); e != hipSuccess) {
    (void)hipGetLastError();  // consumed here, so that the next launch check does not report it
    detail::hip_malloc_failed(e, bytes, hipGetErrorString(e));
  }
  const unsigned long long n = bytes / 2;
  if (n) {
    hipLaunchKernelGGL(detail::poison_fill<0>, ::dim3(static_cast<unsigned>((n + 255) / 256)), ::dim3(256), 0, 0,
                       static_cast<unsigned short*>(p), n);
    detail::check(hipGetLastError(), "device_malloc: poison fill");
  }
  return p;
}
inline void device_free(void* p) { detail::check(hipFree(p), "hipFree"); }

// Cache hints (device code) for data a kernel touches once: the semantics of
// a plain load / store of T; nontemporal accesses (the nt bit on gfx942), so
// that data a later pass reuses stays cached.
namespace detail {
struct OnceHint {
  using P16 = unsigned int __attribute__((ext_vector_type(4)));
  using P8 = unsigned int __attribute__((ext_vector_type(2)));
  using P4 = unsigned int;
  template <class P>
  __device__ static P load(const P* p) { return __builtin_nontemporal_load(p); }
  template <class P>
  __device__ static void store(P* p, P v) { __builtin_nontemporal_store(v, p); }
};
}  // namespace detail
// load_wide / store_wide / load_once / store_once: device_common.hpp.

// ===========================================================================
// 10. Streams and events: gpu_streams.hpp over this vendor shim.
namespace vendor {
using error_t = hipError_t;
using stream_t = hipStream_t;
using event_t = hipEvent_t;
using graph_t = hipGraph_t;
using graph_exec_t = hipGraphExec_t;
inline std::string call(const char* what) { return std::string("hip") + what; }
inline error_t stream_create(stream_t* s) { return hipStreamCreate(s); }
inline error_t stream_create_with_flags(stream_t* s, bool concurrent) {
  return hipStreamCreateWithFlags(s, concurrent ? hipStreamNonBlocking : hipStreamDefault);
}
inline error_t stream_destroy(stream_t s) { return hipStreamDestroy(s); }
inline error_t stream_synchronize(stream_t s) { return hipStreamSynchronize(s); }
inline error_t event_create(event_t* e) { return hipEventCreate(e); }
inline error_t event_destroy(event_t e) { return hipEventDestroy(e); }
inline error_t event_record(event_t e, stream_t s) { return hipEventRecord(e, s); }
inline error_t event_synchronize(event_t e) { return hipEventSynchronize(e); }
inline error_t event_elapsed_ms(float* ms, event_t a, event_t b) { return hipEventElapsedTime(ms, a, b); }
inline error_t device_synchronize() { return hipDeviceSynchronize(); }
inline error_t begin_capture(stream_t s) { return hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal); }
inline error_t end_capture(stream_t s, graph_t* g) { return hipStreamEndCapture(s, g); }
inline error_t graph_instantiate(graph_exec_t* e, graph_t g) { return hipGraphInstantiate(e, g, nullptr, nullptr, 0); }
inline error_t graph_destroy(graph_t g) { return hipGraphDestroy(g); }
inline error_t graph_exec_destroy(graph_exec_t e) { return hipGraphExecDestroy(e); }
inline error_t graph_launch(graph_exec_t e) { return hipGraphLaunch(e, nullptr); }
enum class copy_kind { h2d, d2h, d2d };
inline hipMemcpyKind native_kind(copy_kind k) {
  return k == copy_kind::h2d ? hipMemcpyHostToDevice : k == copy_kind::d2h ? hipMemcpyDeviceToHost : hipMemcpyDeviceToDevice;
}
inline error_t memcpy_async(void* d, const void* s, std::size_t n, copy_kind k, stream_t st) {
  return hipMemcpyAsync(d, s, n, native_kind(k), st);
}
inline error_t memcpy_sync(void* d, const void* s, std::size_t n, copy_kind k) { return hipMemcpy(d, s, n, native_kind(k)); }
inline error_t memset_async(void* d, int byte, std::size_t n, stream_t st) { return hipMemsetAsync(d, byte, n, st); }
inline error_t memset_sync(void* d, int byte, std::size_t n) { return hipMemset(d, byte, n); }
}  // namespace vendor
}  // namespace kgate::rt

#include "kernels/runtime/gpu_streams.hpp"

namespace kgate::rt {

// ===========================================================================
// 11. Launch
using LaunchConfig = BasicLaunchConfig<Stream>;

template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), const LaunchConfig& cfg, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel argument count mismatch");
  detail::check_launch(name, cfg.grid, cfg.block, cfg.lds_bytes);
  const ::dim3 g(cfg.grid.x, cfg.grid.y, cfg.grid.z), b(cfg.block.x, cfg.block.y, cfg.block.z);
  hipLaunchKernelGGL(kernel, g, b, static_cast<unsigned>(cfg.lds_bytes), detail::native(cfg.stream),
                     static_cast<P>(std::forward<A>(args))...);
  detail::check(hipGetLastError(), std::string("launch of kernel '") + name + "'");
}

#define KGATE_LAUNCH(kernel, cfg, ...) ::kgate::rt::launch(#kernel, kernel, cfg __VA_OPT__(, ) __VA_ARGS__)

}  // namespace kgate::rt
