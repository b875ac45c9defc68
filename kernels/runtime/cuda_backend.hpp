// CUDA backend (nvcc): the runtime's own mapping onto the CUDA runtime API
// and intrinsics. Wave = warp = 32 lanes; no MFMA (has_mfma is false and the
// MFMA operations fail at compile time if a kernel instantiates them); the
// tensor cores through mma.sync (the sm90 atoms of mma.hpp).
// Sections in the order of runtime.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/runtime/common.hpp"
#include "kernels/runtime/cuda_status.hpp"

namespace kgate::rt {

// ===========================================================================
// 1. Identity
inline constexpr Backend backend = Backend::cuda;
inline constexpr bool has_mfma = false;
inline constexpr int max_wave_size = 32;
// The settings a run on this backend uses (name, value) for reports: a
// device backend has none beyond the device itself.
inline std::vector<std::pair<std::string, std::string>> settings() { return {}; }

// ===========================================================================
// 2. Kernels
#define KGATE_KERNEL(name, ...) __global__ void name(__VA_ARGS__)
#define KGATE_KERNEL_BOUNDS(name, max_threads, ...) __global__ __launch_bounds__(max_threads) void name(__VA_ARGS__)
#define KGATE_KERNEL_OCCUPANCY(name, max_threads, min_blocks, ...) \
  __global__ __launch_bounds__(max_threads, min_blocks) void name(__VA_ARGS__)
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
__device__ constexpr int wave_size() { return 32; }
__device__ inline int lane_id() { return static_cast<int>(flat_thread_idx() % 32u); }
__device__ inline int wave_id() { return static_cast<int>(flat_thread_idx() / 32u); }
// A register array's index (rt::regs): unchecked on the device.
__device__ inline void check_register_index(int, int) {}

// ===========================================================================
// 4. Barrier
__device__ inline void barrier() { __syncthreads(); }

// ===========================================================================
// 5. LDS (shared memory)
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
  // Asynchronous copy (runtime.hpp, section 5): cp.async of sizeof(V) bytes,
  // zero-filled where !valid (src is then not read).
  template <class V>
  __device__ void copy_async(std::size_t i, const V* src, bool valid) const {
    static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "cp.async moves 4, 8 or 16 bytes");
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(p_ + i));
    const int n = valid ? static_cast<int>(sizeof(V)) : 0;
    if constexpr (sizeof(V) == 16)  // .cg: through L2 only (a staged tile is read once per workgroup)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(sizeof(V)), "r"(n)
                   : "memory");
  }

 private:
  T* p_;
};

__device__ inline void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ inline void async_wait() {
  static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes 0 .. 7");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

namespace detail {
template <class T>
__device__ inline T* dynamic_lds() {
  extern __shared__ __align__(16) unsigned char kgate_dynamic_lds[];
  return reinterpret_cast<T*>(kgate_dynamic_lds);
}
}  // namespace detail

#define KGATE_LDS(name, T, N)                  \
  __shared__ __align__(16) T kgate_lds_##name[(N)]; \
  const ::kgate::rt::lds_array<T> name(kgate_lds_##name)
#define KGATE_LDS_DYNAMIC(name, T) const ::kgate::rt::lds_array<T> name(::kgate::rt::detail::dynamic_lds<T>())

// ===========================================================================
// 6. Wave operations (over the active lanes of the warp). For power-of-two
// widths and in-segment sources they agree with the gfx942 rules
// (common.hpp); an inactive source lane gives an unspecified value on CUDA.
namespace detail {
template <class T, class F>
__device__ inline T wordwise(T v, F f) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "shuffle of a type wider than 16 bytes");
  constexpr int words = (sizeof(T) + 3) / 4;
  int w[words] = {};
  memcpy(w, &v, sizeof(T));
  for (int i = 0; i < words; ++i) w[i] = f(w[i]);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}
}  // namespace detail

template <class T>
__device__ inline T shfl(T v, int src, int width = 32) {
  const unsigned m = __activemask();
  return detail::wordwise(v, [&](int w) { return __shfl_sync(m, w, src, width); });
}
template <class T>
__device__ inline T shfl_xor(T v, int mask, int width = 32) {
  const unsigned m = __activemask();
  return detail::wordwise(v, [&](int w) { return __shfl_xor_sync(m, w, mask, width); });
}
template <class T>
__device__ inline T shfl_up(T v, unsigned delta, int width = 32) {
  const unsigned m = __activemask();
  return detail::wordwise(v, [&](int w) { return __shfl_up_sync(m, w, delta, width); });
}
template <class T>
__device__ inline T shfl_down(T v, unsigned delta, int width = 32) {
  const unsigned m = __activemask();
  return detail::wordwise(v, [&](int w) { return __shfl_down_sync(m, w, delta, width); });
}
__device__ inline lane_mask ballot(bool pred) { return __ballot_sync(__activemask(), pred); }
__device__ inline bool wave_any(bool pred) { return __any_sync(__activemask(), pred) != 0; }
__device__ inline bool wave_all(bool pred) { return __all_sync(__activemask(), pred) != 0; }
template <class T>
__device__ inline T readfirstlane(T v) {
  const unsigned m = __activemask();
  const int first = __ffs(static_cast<int>(m)) - 1;
  return detail::wordwise(v, [&](int w) { return __shfl_sync(m, w, first); });
}

}  // namespace kgate::rt

// ===========================================================================
// 7. Atomics (shared with HIP)
#include "kernels/runtime/device_common.hpp"

namespace kgate::rt {

// ===========================================================================
// 8. Matrix cores: not available. The types exist so that a kernel's
// `if constexpr (rt::has_mfma)` branch still parses; instantiating an MFMA
// operation is a compile-time error.
template <class T, int N>
struct vec {
  T v[N];
  __host__ __device__ T& operator[](int i) { return v[i]; }
  __host__ __device__ const T& operator[](int i) const { return v[i]; }
};
using f32x2 = vec<float, 2>;
using f32x4 = vec<float, 4>;
using f32x16 = vec<float, 16>;
using bf16x4 = vec<short, 4>;
using f16x4 = vec<short, 4>;

namespace detail {
template <int>
inline constexpr bool no_mfma = false;
}

#define KGATE_CUDA_NO_MFMA(name, A, C)                                                       \
  template <int cbsz = 0, int abid = 0, int blgp = 0>                                         \
  __device__ inline C name(const A&, const A&, const C& c) {                                  \
    static_assert(detail::no_mfma<cbsz>, #name ": MFMA is not available on the CUDA backend; " \
                                         "guard it with if constexpr (kgate::rt::has_mfma)"); \
    return c;                                                                                 \
  }
KGATE_CUDA_NO_MFMA(mfma_32x32x8bf16_1k, bf16x4, f32x16)
KGATE_CUDA_NO_MFMA(mfma_16x16x16bf16_1k, bf16x4, f32x4)
KGATE_CUDA_NO_MFMA(mfma_32x32x8f16, f16x4, f32x16)
KGATE_CUDA_NO_MFMA(mfma_16x16x16f16, f16x4, f32x4)
KGATE_CUDA_NO_MFMA(mfma_32x32x2f32, float, f32x16)
KGATE_CUDA_NO_MFMA(mfma_16x16x4f32, float, f32x4)
KGATE_CUDA_NO_MFMA(mfma_32x32x4xf32, f32x2, f32x16)
KGATE_CUDA_NO_MFMA(mfma_16x16x8xf32, f32x2, f32x4)
#undef KGATE_CUDA_NO_MFMA

// Tensor cores: the sm_90 mma.sync instructions the MMA atoms of mma.hpp use
// (a kernel calls rt::mma::mma, not these). Operands are PTX's registers:
// two 16-bit elements per 32-bit register, the lower-numbered element in the
// low half; fragment layouts are the atoms' tables.
#define KGATE_CUDA_MMA_K16(name, ptx)                                                                  \
  __device__ inline void name(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],          \
                              const float (&c)[4]) {                                                   \
    asm volatile(ptx " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"                    \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                       \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),         \
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));                                                    \
  }
#define KGATE_CUDA_MMA_K8(name, ptx)                                                                   \
  __device__ inline void name(float (&d)[4], const unsigned (&a)[2], const unsigned (&b)[1],          \
                              const float (&c)[4]) {                                                   \
    asm volatile(ptx " {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"                                 \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                       \
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));        \
  }
KGATE_CUDA_MMA_K16(mma_m16n8k16_bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
KGATE_CUDA_MMA_K16(mma_m16n8k16_f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
KGATE_CUDA_MMA_K8(mma_m16n8k8_bf16, "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32")
KGATE_CUDA_MMA_K8(mma_m16n8k8_f16, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")
#undef KGATE_CUDA_MMA_K16
#undef KGATE_CUDA_MMA_K8

// ldmatrix: N 8x8 matrices of 16-bit elements from LDS into N registers per
// lane (Trans: each matrix transposed); lane l gives the address of row l % 8
// of matrix l / 8. rt::mma's LDS fragment loads use it where an atom's
// fragment layout is ldmatrix's (a kernel calls rt::mma, not this).
template <int N, bool Trans>
__device__ inline void ldmatrix(unsigned (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Trans) {
    if constexpr (N == 4)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(addr));
    else if constexpr (N == 2)
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(addr));
  } else {
    if constexpr (N == 4)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(addr));
    else if constexpr (N == 2)
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(addr));
  }
}

// ===========================================================================
// 9. Memory
namespace detail {
inline void check(cudaError_t e, const std::string& call) {
  if (e != cudaSuccess) cuda_call_failed(e, call, cudaGetErrorString(e));
}
}  // namespace detail

class Stream;
void copy_h2d(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr);

inline void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    (void)cudaGetLastError();  // consumed here, so that the next launch check does not report it
    detail::cuda_malloc_failed(e, bytes, cudaGetErrorString(e));
  }
  const unsigned long long n = bytes / 2;
  if (n) {
    detail::poison_fill<0><<<static_cast<unsigned>((n + 255) / 256), 256>>>(static_cast<unsigned short*>(p), n);
    detail::check(cudaGetLastError(), "device_malloc: poison fill");
  }
  return p;
}
inline void device_free(void* p) { detail::check(cudaFree(p), "cudaFree"); }

// Cache hints (device code) for data a kernel touches once: the semantics of
// a plain load / store of T; ld.global.cs / st.global.cs mark the lines
// evict-first in the L2, so that data a later pass reuses stays cached.
namespace detail {
struct OnceHint {
  using P16 = uint4;
  using P8 = uint2;
  using P4 = unsigned int;
  __device__ static uint4 load(const uint4* p) { return __ldcs(p); }
  __device__ static uint2 load(const uint2* p) { return __ldcs(p); }
  __device__ static unsigned int load(const unsigned int* p) { return __ldcs(p); }
  __device__ static void store(uint4* p, uint4 v) { __stcs(p, v); }
  __device__ static void store(uint2* p, uint2 v) { __stcs(p, v); }
  __device__ static void store(unsigned int* p, unsigned int v) { __stcs(p, v); }
};
}  // namespace detail
// load_wide / store_wide / load_once / store_once: device_common.hpp.

// ===========================================================================
// 10. Streams and events: gpu_streams.hpp over this vendor shim.
namespace vendor {
using error_t = cudaError_t;
using stream_t = cudaStream_t;
using event_t = cudaEvent_t;
using graph_t = cudaGraph_t;
using graph_exec_t = cudaGraphExec_t;
inline std::string call(const char* what) { return std::string("cuda") + what; }
inline error_t stream_create(stream_t* s) { return cudaStreamCreate(s); }
inline error_t stream_create_with_flags(stream_t* s, bool concurrent) {
  return cudaStreamCreateWithFlags(s, concurrent ? cudaStreamNonBlocking : cudaStreamDefault);
}
inline error_t stream_destroy(stream_t s) { return cudaStreamDestroy(s); }
inline error_t stream_synchronize(stream_t s) { return cudaStreamSynchronize(s); }
inline error_t event_create(event_t* e) { return cudaEventCreate(e); }
inline error_t event_destroy(event_t e) { return cudaEventDestroy(e); }
inline error_t event_record(event_t e, stream_t s) { return cudaEventRecord(e, s); }
inline error_t event_synchronize(event_t e) { return cudaEventSynchronize(e); }
inline error_t event_elapsed_ms(float* ms, event_t a, event_t b) { return cudaEventElapsedTime(ms, a, b); }
inline error_t device_synchronize() { return cudaDeviceSynchronize(); }
inline error_t begin_capture(stream_t s) { return cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal); }
inline error_t end_capture(stream_t s, graph_t* g) { return cudaStreamEndCapture(s, g); }
inline error_t graph_instantiate(graph_exec_t* e, graph_t g) { return cudaGraphInstantiate(e, g, 0); }
inline error_t graph_destroy(graph_t g) { return cudaGraphDestroy(g); }
inline error_t graph_exec_destroy(graph_exec_t e) { return cudaGraphExecDestroy(e); }
inline error_t graph_launch(graph_exec_t e) { return cudaGraphLaunch(e, nullptr); }
enum class copy_kind { h2d, d2h, d2d };
inline cudaMemcpyKind native_kind(copy_kind k) {
  return k == copy_kind::h2d ? cudaMemcpyHostToDevice : k == copy_kind::d2h ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}
inline error_t memcpy_async(void* d, const void* s, std::size_t n, copy_kind k, stream_t st) {
  return cudaMemcpyAsync(d, s, n, native_kind(k), st);
}
inline error_t memcpy_sync(void* d, const void* s, std::size_t n, copy_kind k) { return cudaMemcpy(d, s, n, native_kind(k)); }
inline error_t memset_async(void* d, int byte, std::size_t n, stream_t st) { return cudaMemsetAsync(d, byte, n, st); }
inline error_t memset_sync(void* d, int byte, std::size_t n) { return cudaMemset(d, byte, n); }
}  // namespace vendor
}  // namespace kgate::rt

#include "kernels/runtime/gpu_streams.hpp"

namespace kgate::rt {

// ===========================================================================
// 11. Launch
using LaunchConfig = BasicLaunchConfig<Stream>;

namespace detail {
// A kernel whose static and dynamic shared memory together pass 48 KiB needs
// an opt-in for its dynamic size (cudaFuncSetAttribute), or the launch fails
// with an invalid argument. Set once per kernel for the largest size asked.
inline void allow_dynamic_lds(const void* kernel, std::size_t bytes, const char* name) {
  static std::mutex m;
  static std::unordered_map<const void*, std::size_t> allowed;
  std::lock_guard<std::mutex> lk(m);
  std::size_t& a = allowed[kernel];
  if (bytes <= a) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        std::string("cudaFuncSetAttribute for kernel '") + name + "'");
  a = bytes;
}
}  // namespace detail

template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), const LaunchConfig& cfg, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel argument count mismatch");
  detail::check_launch(name, cfg.grid, cfg.block, cfg.lds_bytes);
  if (cfg.lds_bytes > 0) detail::allow_dynamic_lds(reinterpret_cast<const void*>(kernel), cfg.lds_bytes, name);
  const ::dim3 g(cfg.grid.x, cfg.grid.y, cfg.grid.z), b(cfg.block.x, cfg.block.y, cfg.block.z);
  kernel<<<g, b, cfg.lds_bytes, detail::native(cfg.stream)>>>(static_cast<P>(std::forward<A>(args))...);
  detail::check(cudaGetLastError(), std::string("launch of kernel '") + name + "'");
}

#define KGATE_LAUNCH(kernel, cfg, ...) ::kgate::rt::launch(#kernel, kernel, cfg __VA_OPT__(, ) __VA_ARGS__)

}  // namespace kgate::rt
