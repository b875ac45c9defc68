// Host backend: the CPU emulator of gfx942 (contract:
// docs/EMULATOR.md). Workgroups run on a pool of OS threads in a selectable order;
// each work-item is a Boost.Context fiber; barriers and wave operations are
// collective scheduling points of the workgroup's fibers. Defects a GPU would
// hide (barrier divergence, LDS races, out-of-range LDS indices, writes past
// an allocation, MFMA with inactive lanes) are thrown as kgate::rt::Error
// naming the kernel, workgroup, work-items and source sites.
//
// Sections in the order of runtime.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/runtime/common.hpp"

namespace kgate::rt {

// ===========================================================================
// 1. Identity
inline constexpr Backend backend = Backend::host;
inline constexpr bool has_mfma = true;  // emulated (host/mfma.cpp)
inline constexpr int max_wave_size = 64;

// ===========================================================================
// 2. Kernels
#define KGATE_KERNEL(name, ...) void name(__VA_ARGS__)
#define KGATE_KERNEL_BOUNDS(name, max_threads, ...) void name(__VA_ARGS__)
#define KGATE_KERNEL_OCCUPANCY(name, max_threads, min_blocks, ...) void name(__VA_ARGS__)
#define KGATE_DEVICE inline

// Emulator configuration (host only; kernels never see it).
namespace host {

enum class Order : std::uint8_t { in_order, reversed, shuffled };

struct Config {
  int threads = 0;                  // OS threads running workgroups; 0: one per core
  Order order = Order::in_order;    // workgroup order
  std::uint64_t seed = 0;           // for Order::shuffled
  Target target = Target::gfx942;   // emulated device: its MMA atoms and numerics
  int wave_size = 64;               // gfx942: 64 (or 32, a 32-wide model without MMA); sm90: 32
  MfmaModel mfma = MfmaModel::cdna3;  // exact, or the target's model (cdna3 / sm90)
  bool check_lds = true;            // LDS race checker (per barrier epoch)
  std::size_t stack_bytes = 256 * 1024;  // per work-item fiber, plus a guard page
};

// The configuration for a target with its defaults: gfx942 is wave64 with
// the cdna3 model, sm90 is warp32 with the sm90 model.
Config config_for(Target t, Config base = Config{});

// A bad emulator setting (an environment variable or a Config field): the
// message names the variable and its allowed values.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// The configuration subsequent launches from this thread use: this
// thread's ThreadConfig while one is active, else the process's. The
// process's is initialised from the environment on first use (ConfigError
// for a bad value):
//   KGATE_HOST_THREADS=N (0..4096; 0: one per core),
//   KGATE_HOST_ORDER=in_order|reversed|shuffled[:SEED] (SEED a 64-bit integer),
//   KGATE_HOST_TARGET=gfx942|sm90 (default gfx942),
//   KGATE_HOST_WAVE=64|32 (default: the target's; sm90 is 32 only),
//   KGATE_MFMA_MODEL=exact|cdna3|sm90 (default: the target's; cdna3 needs
//     gfx942, sm90 needs sm90),
//   KGATE_LDS_CHECK=0|1 (default 1),
//   KGATE_HOST_STACK_KIB=N (64..1048576, default 256).
Config config();
// The process's configuration, whatever this thread's ThreadConfig.
Config process_config();
// Sets the process's configuration; throws ConfigError for an inconsistent
// one.
void set_config(const Config& c);
// The configuration the environment `get` describes (get(name) returns the
// variable's value or nullptr); throws ConfigError. config() uses getenv.
Config config_from(const char* (*get)(const char*));
// One line naming every setting ("target=gfx942 wave=64 mfma=cdna3 ..."),
// for reports.
std::string describe(const Config& c);

// Sets the process's configuration for one scope and restores the previous
// one.
class ScopedConfig {
 public:
  explicit ScopedConfig(const Config& c) : saved_(process_config()) { set_config(c); }
  ~ScopedConfig() { set_config(saved_); }
  ScopedConfig(const ScopedConfig&) = delete;
  ScopedConfig& operator=(const ScopedConfig&) = delete;

 private:
  Config saved_;
};

// This thread's configuration for one scope: config() on this thread returns
// it, every launch from this thread runs all its work-groups with it (on
// whichever threads run them), other threads keep theirs. How one process
// runs problems for both targets at once, one target per thread. Nests;
// throws ConfigError for an inconsistent configuration.
class ThreadConfig {
 public:
  explicit ThreadConfig(const Config& c);
  ~ThreadConfig();
  ThreadConfig(const ThreadConfig&) = delete;
  ThreadConfig& operator=(const ThreadConfig&) = delete;

 private:
  Config c_;
  const Config* saved_;
};

// Poison written to fresh device memory, guard regions and LDS: the 16-bit
// pattern 0x7FA5 repeated. Read as fp32 (0x7FA57FA5) and bf16 (0x7FA5) it is
// a signalling NaN; as fp16 a NaN.
inline constexpr std::uint16_t poison16 = 0x7FA5;
inline constexpr std::uint32_t poison32 = 0x7FA57FA5u;

namespace detail {

// What the kernel-side inline functions read for the running work-item. The
// emulator (host/emulator.cpp) owns these and sets `current` before it
// resumes a work-item's fiber.
struct Lane {
  dim3 tid, bid, bdim, gdim;
  unsigned flat = 0;     // flat work-item index in the workgroup
  int lane = 0;          // flat % wave_size
  int wave = 0;          // flat / wave_size
  int wave_size = 64;
  bool check_lds = false;
  // Wave-collective mailbox: each lane deposits `in` and `arg`, the wave
  // synchronises, the collective writes every active lane's `out`.
  std::int64_t arg = 0;
  alignas(16) unsigned char in[96];
  alignas(16) unsigned char out[64];
};

inline thread_local Lane* current = nullptr;

// A wave collective sees the lanes of one wave (nullptr where no work-item
// exists) and the mask of lanes taking part (those at the same site).
struct WaveGroup {
  Lane* lanes[64];
  lane_mask active;
  int wave_size;
  Target target;   // the launch's emulated target
  MfmaModel mfma;  // the launch's MMA numeric model
};
using WaveExec = void (*)(const WaveGroup&);

// Scheduling points (emulator.cpp). Both return to the calling work-item
// after the workgroup (barrier) or the wave (collective) has synchronised.
void barrier_wait(const std::source_location& site);
void wave_collective(WaveExec op, const char* what, const std::source_location& site);

// Collectives (emulator.cpp).
void exec_gather(const WaveGroup&);     // out = in of lane `arg` if active, else 0
void exec_ballot(const WaveGroup&);     // out = {ballot mask, active mask}
void exec_firstlane(const WaveGroup&);  // out = in of the lowest active lane

// LDS (emulator.cpp).
void* lds_static_bytes(std::size_t bytes, std::size_t align, const std::source_location& site);
void* lds_dynamic_bytes(std::size_t* bytes);
[[noreturn]] void lds_index_error(std::size_t index, std::size_t size, const std::source_location& site);
[[noreturn]] void lds_misaligned(std::size_t align, const std::source_location& site);
void lds_note(const void* p, std::size_t bytes, bool write, const std::source_location& site);
// Asynchronous copies (emulator.cpp): the source bytes are read at the call
// (src nullptr: zeros) and written to LDS when async_wait completes their
// group.
void async_copy(void* lds_dst, const void* src, std::size_t bytes, const std::source_location& site);
void async_commit();
void async_wait(int n);

// Fatal in-kernel error (MFMA misuse and the like) with the current site.
[[noreturn]] void kernel_error(const char* what, const std::source_location& site);
// A register array index out of [0, n) (rt::regs).
[[noreturn]] void register_index_error(int index, int n);

}  // namespace detail
}  // namespace host

// The settings a run on this backend uses, as (name, value) pairs for
// reports: the emulator's configuration. Throws host::ConfigError for a bad
// environment value.
inline std::vector<std::pair<std::string, std::string>> settings() {
  const host::Config c = host::config();
  const char* order = c.order == host::Order::in_order ? "in_order" : c.order == host::Order::reversed ? "reversed" : "shuffled";
  return {{"threads", std::to_string(c.threads)},     {"order", order},
          {"order_seed", std::to_string(c.seed)},     {"target", target_name(c.target)},
          {"wave_size", std::to_string(c.wave_size)}, {"mma_model", mfma_model_name(c.mfma)},
          {"lds_check", c.check_lds ? "1" : "0"},     {"stack_bytes", std::to_string(c.stack_bytes)}};
}

// ===========================================================================
// 3. Indices
inline dim3 thread_idx() { return host::detail::current->tid; }
inline dim3 block_idx() { return host::detail::current->bid; }
inline dim3 block_dim() { return host::detail::current->bdim; }
inline dim3 grid_dim() { return host::detail::current->gdim; }
inline unsigned flat_thread_idx() { return host::detail::current->flat; }
inline int wave_size() { return host::detail::current->wave_size; }
inline int lane_id() { return host::detail::current->lane; }
inline int wave_id() { return host::detail::current->wave; }
// A register array's index (rt::regs, registers.hpp): outside [0, n) is a
// kernel error here, as a GPU would silently clobber another register.
inline void check_register_index(int i, int n) {
  if (static_cast<unsigned>(i) >= static_cast<unsigned>(n)) host::detail::register_index_error(i, n);
}

// ===========================================================================
// 4. Barrier
// Workgroup barrier (s_barrier + LDS fence). Every live work-item must reach
// the same barrier site; anything else is reported as divergence.
inline void barrier(std::source_location site = std::source_location::current()) {
  host::detail::barrier_wait(site);
}

// ===========================================================================
// 5. LDS
// An index into LDS that remembers the source site of the access (for the
// race checker's reports).
struct lds_index {
  std::size_t v;
  std::source_location site;
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  lds_index(I i, std::source_location s = std::source_location::current())  // NOLINT: implicit by design
      : v(static_cast<std::size_t>(i)), site(s) {
    if constexpr (std::is_signed_v<I>) {
      if (i < 0) v = static_cast<std::size_t>(-1);  // reported as out of range
    }
  }
};

// A reference to one LDS element. Reads and writes go through the race
// checker. Read it into a variable of the element type (`float v = t[i];`);
// `auto v = t[i]` would keep the reference, not the value.
template <class T>
class lds_ref {
 public:
  lds_ref(T* p, const std::source_location& s) : p_(p), site_(s) {}
  operator T() const {  // NOLINT: implicit by design
    if (host::detail::current->check_lds) host::detail::lds_note(p_, sizeof(T), false, site_);
    T v;
    std::memcpy(&v, p_, sizeof(T));
    return v;
  }
  const lds_ref& operator=(const T& v) const {
    if (host::detail::current->check_lds) host::detail::lds_note(p_, sizeof(T), true, site_);
    std::memcpy(p_, &v, sizeof(T));
    return *this;
  }
  const lds_ref& operator=(const lds_ref& o) const { return *this = static_cast<T>(o); }
  lds_ref(const lds_ref&) = default;
#define KGATE_LDS_COMPOUND(op)                        \
  template <class U>                                  \
  const lds_ref& operator op##=(const U& u) const {   \
    T v = static_cast<T>(*this);                      \
    v op## = u;                                       \
    return *this = v;                                 \
  }
  KGATE_LDS_COMPOUND(+)
  KGATE_LDS_COMPOUND(-)
  KGATE_LDS_COMPOUND(*)
  KGATE_LDS_COMPOUND(/)
  KGATE_LDS_COMPOUND(&)
  KGATE_LDS_COMPOUND(|)
  KGATE_LDS_COMPOUND(^)
#undef KGATE_LDS_COMPOUND

 private:
  T* p_;
  std::source_location site_;
};

// A typed view of an LDS allocation. Indices are bounds-checked on the host.
template <class T>
class lds_array {
 public:
  lds_array(T* p, std::size_t n) : p_(p), n_(n) {}
  lds_ref<T> operator[](lds_index i) const {
    if (i.v >= n_) host::detail::lds_index_error(i.v, n_, i.site);
    return lds_ref<T>(p_ + i.v, i.site);
  }
  // Vector access: loads/stores a V (e.g. 16 bytes) starting at element i.
  template <class V>
  V load(lds_index i) const {
    check_vec<V>(i);
    if (host::detail::current->check_lds) host::detail::lds_note(p_ + i.v, sizeof(V), false, i.site);
    V v;
    std::memcpy(&v, p_ + i.v, sizeof(V));
    return v;
  }
  template <class V>
  void store(lds_index i, const V& v) const {
    check_vec<V>(i);
    if (host::detail::current->check_lds) host::detail::lds_note(p_ + i.v, sizeof(V), true, i.site);
    std::memcpy(p_ + i.v, &v, sizeof(V));
  }
  // Asynchronous copy (runtime.hpp, section 5). The destination is checked
  // (range, alignment) and noted for the race checker at the call and again
  // when the copy lands.
  template <class V>
  void copy_async(lds_index i, const V* src, bool valid) const {
    static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "asynchronous copies move 4, 8 or 16 bytes");
    check_vec<V>(i);
    if (valid && reinterpret_cast<std::uintptr_t>(src) % alignof(V) != 0)
      host::detail::kernel_error("asynchronous copy from a global address not aligned to its size", i.site);
    if (host::detail::current->check_lds) host::detail::lds_note(p_ + i.v, sizeof(V), true, i.site);
    host::detail::async_copy(p_ + i.v, valid ? src : nullptr, sizeof(V), i.site);
  }
  std::size_t size() const { return n_; }

 private:
  template <class V>
  void check_vec(const lds_index& i) const {
    static_assert(sizeof(V) % sizeof(T) == 0, "vector access must cover whole elements");
    if (i.v >= n_ || n_ - i.v < sizeof(V) / sizeof(T)) host::detail::lds_index_error(i.v, n_, i.site);
    // A GPU's vector LDS access needs its natural alignment (KGATE_LDS
    // arrays start 16-byte aligned on every backend).
    if (reinterpret_cast<std::uintptr_t>(p_ + i.v) % alignof(V) != 0) host::detail::lds_misaligned(alignof(V), i.site);
  }
  T* p_;
  std::size_t n_;
};

namespace host::detail {
template <class T>
lds_array<T> lds_static(std::size_t n, const std::source_location& site) {
  return lds_array<T>(static_cast<T*>(lds_static_bytes(n * sizeof(T), alignof(T), site)), n);
}
template <class T>
lds_array<T> lds_dynamic() {
  std::size_t bytes = 0;
  T* p = static_cast<T*>(lds_dynamic_bytes(&bytes));
  return lds_array<T>(p, bytes / sizeof(T));
}
}  // namespace host::detail

inline void async_commit() { host::detail::async_commit(); }
template <int N>
inline void async_wait() {
  static_assert(N >= 0 && N <= 7, "wait takes 0 .. 7 (CUDA's cp.async.wait_group)");
  host::detail::async_wait(N);
}

// KGATE_LDS(name, T, N): N elements of T in LDS, shared by the workgroup.
// KGATE_LDS_DYNAMIC(name, T): the launch's dynamic LDS viewed as T.
#define KGATE_LDS(name, T, N) \
  const ::kgate::rt::lds_array<T> name = ::kgate::rt::host::detail::lds_static<T>((N), std::source_location::current())
#define KGATE_LDS_DYNAMIC(name, T) \
  const ::kgate::rt::lds_array<T> name = ::kgate::rt::host::detail::lds_dynamic<T>()

// ===========================================================================
// 6. Wave operations
// Collective over the lanes of the wave that reach the same site; lanes that
// do not (diverged, exited) are inactive. Lane rules: common.hpp.
namespace host::detail {
template <class T>
T shuffle_via(T v, int src, const char* what, const std::source_location& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "shuffle of a type wider than 16 bytes");
  Lane* l = current;
  l->arg = bpermute_lane(src, l->wave_size);
  std::memset(l->in, 0, 16);
  std::memcpy(l->in, &v, sizeof(T));
  wave_collective(&exec_gather, what, site);
  T r;
  std::memcpy(&r, l->out, sizeof(T));
  return r;
}
}  // namespace host::detail

template <class T>
T shfl(T v, int src, int width, std::source_location site = std::source_location::current()) {
  return host::detail::shuffle_via(v, lane_shfl(lane_id(), src, width), "shfl", site);
}
template <class T>
T shfl(T v, int src, std::source_location site = std::source_location::current()) {
  return shfl(v, src, wave_size(), site);
}
template <class T>
T shfl_xor(T v, int mask, int width, std::source_location site = std::source_location::current()) {
  return host::detail::shuffle_via(v, lane_shfl_xor(lane_id(), mask, width), "shfl_xor", site);
}
template <class T>
T shfl_xor(T v, int mask, std::source_location site = std::source_location::current()) {
  return shfl_xor(v, mask, wave_size(), site);
}
template <class T>
T shfl_up(T v, unsigned delta, int width, std::source_location site = std::source_location::current()) {
  return host::detail::shuffle_via(v, lane_shfl_up(lane_id(), delta, width), "shfl_up", site);
}
template <class T>
T shfl_up(T v, unsigned delta, std::source_location site = std::source_location::current()) {
  return shfl_up(v, delta, wave_size(), site);
}
template <class T>
T shfl_down(T v, unsigned delta, int width, std::source_location site = std::source_location::current()) {
  return host::detail::shuffle_via(v, lane_shfl_down(lane_id(), delta, width), "shfl_down", site);
}
template <class T>
T shfl_down(T v, unsigned delta, std::source_location site = std::source_location::current()) {
  return shfl_down(v, delta, wave_size(), site);
}

// Bit i set iff lane i is active and pred is true.
inline lane_mask ballot(bool pred, std::source_location site = std::source_location::current()) {
  host::detail::Lane* l = host::detail::current;
  l->arg = pred ? 1 : 0;
  host::detail::wave_collective(&host::detail::exec_ballot, "ballot", site);
  lane_mask m;
  std::memcpy(&m, l->out, sizeof m);
  return m;
}
// True iff pred holds for some / every active lane.
inline bool wave_any(bool pred, std::source_location site = std::source_location::current()) {
  return ballot(pred, site) != 0;
}
inline bool wave_all(bool pred, std::source_location site = std::source_location::current()) {
  host::detail::Lane* l = host::detail::current;
  const lane_mask b = ballot(pred, site);
  lane_mask active;
  std::memcpy(&active, l->out + 8, sizeof active);
  return b == active;
}
// The value of the lowest active lane.
template <class T>
T readfirstlane(T v, std::source_location site = std::source_location::current()) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "readfirstlane of a type wider than 16 bytes");
  host::detail::Lane* l = host::detail::current;
  std::memset(l->in, 0, 16);
  std::memcpy(l->in, &v, sizeof(T));
  host::detail::wave_collective(&host::detail::exec_firstlane, "readfirstlane", site);
  T r;
  std::memcpy(&r, l->out, sizeof(T));
  return r;
}

// ===========================================================================
// 7. Atomics (global memory). Integers only: 32- and 64-bit. Each returns the
// old value.
namespace host::detail {
template <class T>
constexpr void check_atomic_type() {
  static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "atomics are defined for 32- and 64-bit integers");
}
}  // namespace host::detail
template <class T>
T atomic_add(T* p, T v) {
  host::detail::check_atomic_type<T>();
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <class T>
T atomic_sub(T* p, T v) {
  host::detail::check_atomic_type<T>();
  return std::atomic_ref<T>(*p).fetch_sub(v);
}
template <class T>
T atomic_and(T* p, T v) {
  host::detail::check_atomic_type<T>();
  return std::atomic_ref<T>(*p).fetch_and(v);
}
template <class T>
T atomic_or(T* p, T v) {
  host::detail::check_atomic_type<T>();
  return std::atomic_ref<T>(*p).fetch_or(v);
}
template <class T>
T atomic_xor(T* p, T v) {
  host::detail::check_atomic_type<T>();
  return std::atomic_ref<T>(*p).fetch_xor(v);
}
template <class T>
T atomic_exch(T* p, T v) {
  host::detail::check_atomic_type<T>();
  return std::atomic_ref<T>(*p).exchange(v);
}
// Compare-and-swap: stores desired iff *p == expected; returns the old value.
template <class T>
T atomic_cas(T* p, T expected, T desired) {
  host::detail::check_atomic_type<T>();
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <class T>
T atomic_min(T* p, T v) {
  host::detail::check_atomic_type<T>();
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <class T>
T atomic_max(T* p, T v) {
  host::detail::check_atomic_type<T>();
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v > old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
// Floating-point atomic add: order-dependent rounding. Exists only so the
// determinism tests can build a negative control; production kernels must
// not use it (determinism/ audits for it).
inline float atomic_add_unordered(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }

// ===========================================================================
// 8. Matrix cores (MFMA)
// Operand and accumulator types. Element i is v[i] on every backend; the
// 16-bit operands hold bf16 / fp16 bit patterns.
template <class T, int N>
struct vec {
  T v[N];
  T& operator[](int i) { return v[i]; }
  const T& operator[](int i) const { return v[i]; }
};
using f32x2 = vec<float, 2>;
using f32x4 = vec<float, 4>;
using f32x16 = vec<float, 16>;
using bf16x4 = vec<std::int16_t, 4>;
using f16x4 = vec<std::int16_t, 4>;

namespace host::detail {
// One collective per instruction (host/mfma.cpp): reads a at in[0..16), b at
// in[16..32), c at in[32..96), writes d to out. exec_atom<Atom> for every
// atom of mma.hpp; the gfx942 builtins below are their atoms.
template <class Atom>
void exec_atom(const WaveGroup&);
void exec_mfma_32x32x8bf16_1k(const WaveGroup&);
void exec_mfma_16x16x16bf16_1k(const WaveGroup&);
void exec_mfma_32x32x8f16(const WaveGroup&);
void exec_mfma_16x16x16f16(const WaveGroup&);
void exec_mfma_32x32x2f32(const WaveGroup&);
void exec_mfma_16x16x4f32(const WaveGroup&);
void exec_mfma_32x32x4xf32(const WaveGroup&);
void exec_mfma_16x16x8xf32(const WaveGroup&);

template <int cbsz, int abid, int blgp, class A, class C>
C mfma_via(WaveExec op, const char* what, const A& a, const A& b, const C& c, const std::source_location& site) {
  static_assert(cbsz == 0 && abid == 0 && blgp == 0,
                "MFMA broadcast controls (cbsz, abid, blgp) must be 0: the emulator does not model them");
  static_assert(sizeof(A) <= 16 && sizeof(C) <= 64);
  Lane* l = current;
  std::memcpy(l->in, &a, sizeof(A));
  std::memcpy(l->in + 16, &b, sizeof(A));
  std::memcpy(l->in + 32, &c, sizeof(C));
  wave_collective(op, what, site);
  C d;
  std::memcpy(&d, l->out, sizeof(C));
  return d;
}
}  // namespace host::detail

#define KGATE_HOST_MFMA(name, A, C)                                                                  \
  template <int cbsz = 0, int abid = 0, int blgp = 0>                                                 \
  C name(const A& a, const A& b, const C& c, std::source_location site = std::source_location::current()) { \
    return host::detail::mfma_via<cbsz, abid, blgp>(&host::detail::exec_##name, #name, a, b, c, site);      \
  }
KGATE_HOST_MFMA(mfma_32x32x8bf16_1k, bf16x4, f32x16)
KGATE_HOST_MFMA(mfma_16x16x16bf16_1k, bf16x4, f32x4)
KGATE_HOST_MFMA(mfma_32x32x8f16, f16x4, f32x16)
KGATE_HOST_MFMA(mfma_16x16x16f16, f16x4, f32x4)
KGATE_HOST_MFMA(mfma_32x32x2f32, float, f32x16)
KGATE_HOST_MFMA(mfma_16x16x4f32, float, f32x4)
KGATE_HOST_MFMA(mfma_32x32x4xf32, f32x2, f32x16)
KGATE_HOST_MFMA(mfma_16x16x8xf32, f32x2, f32x4)
#undef KGATE_HOST_MFMA

// ===========================================================================
// 9. Memory
// Device allocations are host allocations between guard regions; fresh
// memory and the guards hold the poison pattern. Guards are checked after
// every launch and at free; a copy or fill that leaves its allocation fails.
class Stream;
void* device_malloc(std::size_t bytes);
void device_free(void* p);
void copy_h2d(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr);
void copy_d2h(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr);
void copy_d2d(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr);
void device_memset(void* dst, int byte, std::size_t bytes, Stream* s = nullptr);

// Wide accesses (GPU backends: T moved as its widest aligned pieces) and
// cache hints for data a kernel touches once (GPU backends: evict-first or
// nontemporal accesses); on the host, plain loads and stores.
template <class T>
inline T load_wide(const T* p) { return *p; }
template <class T>
inline void store_wide(T* p, const T& v) { *p = v; }
template <class T>
inline T load_once(const T* p) { return *p; }
template <class T>
inline void store_once(T* p, const T& v) { *p = v; }

// ===========================================================================
// 10. Streams and events
// The host backend runs each operation when it is issued, which is a valid
// schedule of an in-order stream; events record the time at that point.
class Stream {
 public:
  Stream() = default;
  explicit Stream(bool /*concurrent*/) {}  // every stream runs at issue here
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void synchronize() {}
};

class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream* s = nullptr);
  void synchronize() const;
  // Milliseconds from start to stop; both must have been recorded.
  friend float elapsed_ms(const Event& start, const Event& stop);

 private:
  std::int64_t ns_ = -1;
};
float elapsed_ms(const Event& start, const Event& stop);

void device_synchronize();

// A launch sequence recorded once and replayed as one unit (a CUDA or HIP
// graph on the device backends). Here every operation runs when issued, so
// the recording is the callable itself and replay() calls it; constructing
// runs nothing, as on the devices.
inline constexpr bool has_graphs = false;
// The host backend runs every stream at issue: a caller's stream (kgate's
// C ABI) changes nothing.
class StreamScope {
 public:
  explicit StreamScope(void* /*native*/) {}
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;
};

class Graph {
 public:
  template <class F>
  explicit Graph(F&& record) : record_(std::forward<F>(record)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void replay() { record_(); }

 private:
  std::function<void()> record_;
};

// ===========================================================================
// 11. Launch
using LaunchConfig = BasicLaunchConfig<Stream>;

namespace host::detail {
struct Job {
  void (*invoke)(const void* ctx);
  const void* ctx;
};
void launch_erased(const char* name, const LaunchConfig& cfg, const Job& job);

template <class... P>
struct Bound {
  void (*kernel)(P...);
  std::tuple<std::decay_t<P>...> args;
  static void invoke(const void* ctx) {
    const auto* b = static_cast<const Bound*>(ctx);
    std::apply(b->kernel, b->args);
  }
};
}  // namespace host::detail

// Runs `kernel` over cfg.grid x cfg.block work-items; returns when done
// (issuing into a stream is synchronous on this backend). Throws Error for a
// launch the device would refuse and for every defect the emulator finds.
template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), const LaunchConfig& cfg, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel argument count mismatch");
  const host::detail::Bound<P...> bound{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
  host::detail::launch_erased(name, cfg, host::detail::Job{&host::detail::Bound<P...>::invoke, &bound});
}

#define KGATE_LAUNCH(kernel, cfg, ...) ::kgate::rt::launch(#kernel, kernel, cfg __VA_OPT__(, ) __VA_ARGS__)

}  // namespace kgate::rt
