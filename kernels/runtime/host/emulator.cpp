// The host backend's emulator: scheduler, fibers, thread pool, memory, LDS
// and the wave collectives. Contract: docs/EMULATOR.md; interface:
// host_backend.hpp.
#include <algorithm>
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <csignal>
#include <sstream>
#include <string>
#include <thread>
#include <deque>
#include <vector>

#include <sys/mman.h>

#include "kernels/runtime/runtime.hpp"
#include "reference/host_memory.hpp"

// AddressSanitizer is told about every switch between a thread's own stack
// and a work-item's fiber stack (see `switch_start` below); a build without
// ASan compiles none of it.
#if defined(__SANITIZE_ADDRESS__)
#define KGATE_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KGATE_ASAN_FIBERS 1
#endif
#endif
#ifdef KGATE_ASAN_FIBERS
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace ctx = boost::context;

namespace kgate::rt {
namespace host {

// ===========================================================================
// Configuration

namespace {

[[noreturn]] void bad_value(const char* var, const std::string& value, const char* allowed) {
  throw ConfigError(std::string(var) + "='" + value + "' is not valid: allowed values are " + allowed);
}

// A decimal integer in [lo, hi] (digits only, no sign, no exponent).
long long parse_int(const char* var, const std::string& v, long long lo, long long hi, const char* allowed) {
  if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) bad_value(var, v, allowed);
  const long long x = std::stoll(v);
  if (x < lo || x > hi) bad_value(var, v, allowed);
  return x;
}

void check_config(const Config& c) {
  if (c.threads < 0 || c.threads > 4096) throw ConfigError("host config: threads must be in 0..4096 (KGATE_HOST_THREADS)");
  if (c.wave_size != 64 && c.wave_size != 32)
    throw ConfigError("host config: wave_size must be 64 or 32 (KGATE_HOST_WAVE)");
  if (c.target == Target::sm90 && c.wave_size != 32)
    throw ConfigError("host config: the sm90 target has 32-wide warps (KGATE_HOST_WAVE=32 or unset)");
  if (c.mfma == MfmaModel::cdna3 && c.target != Target::gfx942)
    throw ConfigError("host config: the cdna3 MMA model is the gfx942 target's (KGATE_MFMA_MODEL=exact|sm90 for sm90)");
  if (c.mfma == MfmaModel::sm90 && c.target != Target::sm90)
    throw ConfigError("host config: the sm90 MMA model is the sm90 target's (KGATE_MFMA_MODEL=exact|cdna3 for gfx942)");
  if (c.stack_bytes < 64 * 1024)
    throw ConfigError("host config: stack_bytes must be at least 64 KiB (KGATE_HOST_STACK_KIB)");
}

const char* getenv_value(const char* name) { return std::getenv(name); }

std::mutex g_config_mutex;
Config& config_ref() {
  static Config c = config_from(&getenv_value);
  return c;
}

}  // namespace

Config config_for(Target t, Config base) {
  base.target = t;
  base.wave_size = t == Target::sm90 ? 32 : 64;
  base.mfma = t == Target::sm90 ? MfmaModel::sm90 : MfmaModel::cdna3;
  return base;
}

Config config_from(const char* (*get)(const char*)) {
  Config c;
  if (const char* s = get("KGATE_HOST_THREADS"))
    c.threads = static_cast<int>(parse_int("KGATE_HOST_THREADS", s, 0, 4096, "an integer 0..4096 (0: one per core)"));
  if (const char* s = get("KGATE_HOST_ORDER")) {
    const std::string v = s;
    const char* allowed = "in_order, reversed, shuffled, shuffled:SEED (SEED an unsigned 64-bit decimal integer)";
    if (v == "in_order") {
      c.order = Order::in_order;
    } else if (v == "reversed") {
      c.order = Order::reversed;
    } else if (v == "shuffled") {
      c.order = Order::shuffled;
    } else if (v.rfind("shuffled:", 0) == 0) {
      const std::string seed = v.substr(9);
      if (seed.empty() || seed.size() > 20 || seed.find_first_not_of("0123456789") != std::string::npos)
        bad_value("KGATE_HOST_ORDER", v, allowed);
      errno = 0;
      const unsigned long long x = std::strtoull(seed.c_str(), nullptr, 10);
      if (errno == ERANGE) bad_value("KGATE_HOST_ORDER", v, allowed);
      c.order = Order::shuffled;
      c.seed = x;
    } else {
      bad_value("KGATE_HOST_ORDER", v, allowed);
    }
  }
  if (const char* s = get("KGATE_HOST_TARGET")) {
    const std::string v = s;
    if (v == "gfx942") c = config_for(Target::gfx942, c);
    else if (v == "sm90") c = config_for(Target::sm90, c);
    else bad_value("KGATE_HOST_TARGET", v, "gfx942, sm90");
  }
  if (const char* s = get("KGATE_HOST_WAVE")) {
    const std::string v = s;
    const char* allowed = c.target == Target::sm90 ? "32 (the sm90 target)" : "64, 32";
    if (v == "64" && c.target == Target::gfx942) c.wave_size = 64;
    else if (v == "32") c.wave_size = 32;
    else bad_value("KGATE_HOST_WAVE", v, allowed);
  }
  if (const char* s = get("KGATE_MFMA_MODEL")) {
    const std::string v = s;
    const char* allowed = c.target == Target::sm90 ? "exact, sm90 (the sm90 target)" : "exact, cdna3 (the gfx942 target)";
    if (v == "exact") c.mfma = MfmaModel::exact;
    else if (v == "cdna3" && c.target == Target::gfx942) c.mfma = MfmaModel::cdna3;
    else if (v == "sm90" && c.target == Target::sm90) c.mfma = MfmaModel::sm90;
    else bad_value("KGATE_MFMA_MODEL", v, allowed);
  }
  if (const char* s = get("KGATE_LDS_CHECK")) {
    const std::string v = s;
    if (v == "1") c.check_lds = true;
    else if (v == "0") c.check_lds = false;
    else bad_value("KGATE_LDS_CHECK", v, "1 (check LDS races), 0 (do not)");
  }
  if (const char* s = get("KGATE_HOST_STACK_KIB"))
    c.stack_bytes = static_cast<std::size_t>(
                        parse_int("KGATE_HOST_STACK_KIB", s, 64, 1048576, "an integer 64..1048576 (KiB per work-item)")) *
                    1024;
  check_config(c);
  return c;
}

std::string describe(const Config& c) {
  const char* order = c.order == Order::in_order ? "in_order" : c.order == Order::reversed ? "reversed" : "shuffled";
  std::string s = std::string("target=") + target_name(c.target) + " wave=" + std::to_string(c.wave_size) +
                  " mfma=" + mfma_model_name(c.mfma) + " threads=" + std::to_string(c.threads) + " order=" + order;
  if (c.order == Order::shuffled) s += ":" + std::to_string(c.seed);
  return s + " lds_check=" + (c.check_lds ? "1" : "0") + " stack_kib=" + std::to_string(c.stack_bytes / 1024);
}

namespace {
thread_local const Config* t_config = nullptr;  // the innermost ThreadConfig of this thread
}  // namespace

Config config() {
  if (t_config) return *t_config;
  return process_config();
}

Config process_config() {
  std::lock_guard lk(g_config_mutex);
  return config_ref();
}

ThreadConfig::ThreadConfig(const Config& c) : c_(c), saved_(t_config) {
  check_config(c_);
  t_config = &c_;
}
ThreadConfig::~ThreadConfig() { t_config = saved_; }

void set_config(const Config& c) {
  check_config(c);
  std::lock_guard lk(g_config_mutex);
  config_ref() = c;
}

namespace detail {

// ===========================================================================
// Formatting helpers

namespace {

std::string fmt_dim(const dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string fmt_site(const std::source_location& s) {
  const char* f = s.file_name();
  const char* slash = std::strrchr(f, '/');
  return std::string(slash ? slash + 1 : f) + ":" + std::to_string(s.line());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

dim3 unflatten(std::uint64_t i, const dim3& d) {
  return dim3(static_cast<unsigned>(i % d.x), static_cast<unsigned>((i / d.x) % d.y),
              static_cast<unsigned>(i / (static_cast<std::uint64_t>(d.x) * d.y)));
}

// Thrown at a scheduling point of a work-item whose workgroup is being
// abandoned; unwinds the kernel's frames back to the fiber's loop. Not a
// std::exception so that kernel code cannot catch it by accident.
struct Cancel {};

}  // namespace

// ===========================================================================
// Memory

namespace {

constexpr std::size_t kGuard = 4096;

// An allocation is mapped as [front guard][poison slack][user bytes][back
// guard]: the user bytes end where the back guard page begins, so the first
// byte past the end is in the guard. Guards and slack hold poison; the back
// guard is also inaccessible (PROT_NONE), so that a read past the end traps
// (reads before the start see poison and are not detected).
struct Allocation {
  unsigned char* base;  // start of the front guard
  std::size_t size;     // bytes the caller asked for
  std::size_t total;    // guard + data pages + guard
  std::size_t user_off; // offset of the user bytes from base
  std::size_t slot;     // the back guard's slot in g_guard_pages
};

std::mutex g_mem_mutex;
std::map<std::uintptr_t, Allocation> g_allocs;  // keyed by user address

// The back guard pages, for the SIGSEGV handler (which takes no lock): an
// open-addressing table written under g_mem_mutex and read lock-free. A
// slot holds the page address, with bit 0 set while the page is opened.
constexpr std::size_t kGuardSlots = std::size_t{1} << 16;
constexpr std::uintptr_t kTombstone = 1;  // a freed slot (no page is at address 0 or 1)
std::atomic<std::uintptr_t> g_guard_pages[kGuardSlots];
// The first address past the end of an allocation that a kernel touched
// since the last check (0: none).
std::atomic<std::uintptr_t> g_fault_addr{0};

std::size_t guard_slot(std::uintptr_t page) { return (page / kGuard * 0x9E3779B97F4A7C15ull) >> 48; }

std::size_t guard_insert_locked(std::uintptr_t page) {
  for (std::size_t i = guard_slot(page), n = 0; n < kGuardSlots; ++n, i = (i + 1) % kGuardSlots) {
    const std::uintptr_t v = g_guard_pages[i].load(std::memory_order_relaxed);
    if (v == 0 || v == kTombstone) {
      g_guard_pages[i].store(page, std::memory_order_release);
      return i;
    }
  }
  throw OutOfMemory("device_malloc: more than 65536 live device allocations");
}

// The slot of `page` (opened or not), or nullptr.
std::atomic<std::uintptr_t>* guard_find(std::uintptr_t page) {
  for (std::size_t i = guard_slot(page), n = 0; n < kGuardSlots; ++n, i = (i + 1) % kGuardSlots) {
    const std::uintptr_t v = g_guard_pages[i].load(std::memory_order_acquire);
    if (v == 0) return nullptr;
    if ((v & ~std::uintptr_t{1}) == page && v != kTombstone) return &g_guard_pages[i];
  }
  return nullptr;
}

// Accesses far outside every allocation (not in a back guard): while a
// work-group runs on a thread (t_in_kernel), a fault on an unmapped page maps
// a zero page there (recorded in g_wild_pages) and lets the access repeat;
// the launch then unmaps them and fails, naming the first address. Up to
// kWildPages pages per launch; beyond them, or outside a kernel, the fault
// kills the process as usual.
constexpr std::size_t kWildPages = 256;
std::atomic<std::uintptr_t> g_wild_pages[kWildPages];
std::atomic<std::size_t> g_wild_count{0};
std::atomic<std::uintptr_t> g_wild_addr{0};
thread_local bool t_in_kernel = false;
// t_in_kernel for one work-group's run, however it ends.
struct InKernel {
  InKernel() { t_in_kernel = true; }
  ~InKernel() { t_in_kernel = false; }
  InKernel(const InKernel&) = delete;
  InKernel& operator=(const InKernel&) = delete;
};

// Maps a zero page over the unmapped page of `addr` (async-signal-safe: one
// system call); true when the access may repeat.
bool open_wild_page(std::uintptr_t addr) {
  const std::uintptr_t page = addr & ~(kGuard - 1);
  const std::size_t k = g_wild_count.fetch_add(1);
  if (k >= kWildPages || page == 0) return false;
  const int saved = errno;
  void* m = mmap(reinterpret_cast<void*>(page), kGuard, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  bool ok = false;
  if (m == reinterpret_cast<void*>(page)) {
    g_wild_pages[k].store(page);
    ok = true;
  } else if (m == MAP_FAILED) {
    ok = errno == EEXIST;  // another thread mapped it first
  } else {
    munmap(m, kGuard);  // a kernel without MAP_FIXED_NOREPLACE placed it elsewhere
  }
  errno = saved;
  if (ok) {
    std::uintptr_t none = 0;
    g_wild_addr.compare_exchange_strong(none, addr);
  }
  return ok;
}

// Unmaps the pages open_wild_page mapped; returns the first wild address of
// the launch (0: none).
std::uintptr_t close_wild_pages() {
  const std::size_t n = std::min(g_wild_count.exchange(0), kWildPages);
  for (std::size_t i = 0; i < n; ++i)
    if (const std::uintptr_t page = g_wild_pages[i].exchange(0)) munmap(reinterpret_cast<void*>(page), kGuard);
  return g_wild_addr.exchange(0);
}

struct sigaction g_prev_segv;

// A fault in a back guard page: note the address, open the page (it holds
// poison) and let the access repeat; check_all_guards reports it after the
// kernel. Any other fault goes to the previous handler (or kills the process).
void on_segv(int sig, siginfo_t* info, void* uc) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  std::atomic<std::uintptr_t>* slot = guard_find(addr & ~(kGuard - 1));
  if (slot && mprotect(reinterpret_cast<void*>(addr & ~(kGuard - 1)), kGuard, PROT_READ | PROT_WRITE) == 0) {
    std::uintptr_t none = 0;
    g_fault_addr.compare_exchange_strong(none, addr);
    slot->fetch_or(1);
    return;
  }
  if (!slot && t_in_kernel && info->si_code == SEGV_MAPERR && open_wild_page(addr)) return;
  if (g_prev_segv.sa_flags & SA_SIGINFO) {
    if (g_prev_segv.sa_sigaction) return g_prev_segv.sa_sigaction(sig, info, uc);
  } else if (g_prev_segv.sa_handler != SIG_DFL && g_prev_segv.sa_handler != SIG_IGN && g_prev_segv.sa_handler) {
    return g_prev_segv.sa_handler(sig);
  }
  signal(SIGSEGV, SIG_DFL);  // the access repeats and kills the process as usual
}

void install_segv_handler() {
  static const bool once = [] {
    struct sigaction sa {};
    sa.sa_sigaction = &on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_prev_segv);
    return true;
  }();
  (void)once;
}

// A page of poison, for filling and comparing in bulk.
const unsigned char* poison_page() {
  static const auto* page = [] {
    auto* p = new unsigned char[kGuard];
    for (std::size_t i = 0; i < kGuard; ++i) p[i] = (i & 1) ? 0x7F : 0xA5;  // little-endian 0x7FA5
    return p;
  }();
  return page;
}

// Fills [p, p+n) with poison; p is 2-byte aligned relative to the pattern.
void fill_poison(unsigned char* p, std::size_t n) {
  const unsigned char* page = poison_page();
  for (std::size_t off = 0; off < n; off += kGuard) std::memcpy(p + off, page, std::min(kGuard, n - off));
}

// Index of the first byte in [p, p+n) that is not poison, or n. `phase` is
// the offset of p from a 2-aligned poison origin.
std::size_t first_clobbered(const unsigned char* p, std::size_t n, std::size_t phase) {
  const unsigned char* page = poison_page();
  const std::size_t head = phase & 1;
  if (head && n && p[0] != 0x7F) return 0;
  for (std::size_t off = head; off < n; off += kGuard - 2) {
    const std::size_t len = std::min(kGuard - 2, n - off);
    if (std::memcmp(p + off, page, len) != 0)
      for (std::size_t i = off; i < off + len; ++i)
        if (p[i] != page[i - off]) return i;
  }
  return n;
}

// Throws if a guard of `a` (user address `user`) was written, or if a
// kernel touched its back guard (then reopened: inaccessible again).
void check_guards_locked(std::uintptr_t user, const Allocation& a, const char* when) {
  const std::size_t front = first_clobbered(a.base, a.user_off, 0);
  const std::size_t back_off = a.user_off + a.size;
  auto* back_page = a.base + a.total - kGuard;
  std::atomic<std::uintptr_t>* slot = &g_guard_pages[a.slot];
  const bool opened = slot->load() & 1;
  // Without a fault the back guard is untouched (and unreadable).
  const std::size_t back_n = opened ? a.total - back_off : a.total - kGuard - back_off;
  const std::size_t back = first_clobbered(a.base + back_off, back_n, back_off);
  std::uintptr_t fault = 0;
  if (opened) {
    fill_poison(back_page, kGuard);  // the next kernel starts from poison (page-aligned: phase 0)
    if (mprotect(back_page, kGuard, PROT_NONE) != 0) throw Error("device memory: mprotect failed");
    slot->fetch_and(~std::uintptr_t{1});
    fault = g_fault_addr.exchange(0);
    if (fault < reinterpret_cast<std::uintptr_t>(back_page) || fault >= reinterpret_cast<std::uintptr_t>(back_page) + kGuard)
      fault = reinterpret_cast<std::uintptr_t>(back_page);  // another allocation's fault came first: this one's page was read too
  }
  if (front == a.user_off && back == back_n && !fault) return;
  std::ostringstream os;
  os << when << ": ";
  if (front != a.user_off || back != back_n) {
    os << "a write outside the device allocation at 0x" << std::hex << user << std::dec << " (" << a.size << " bytes): ";
    if (front != a.user_off)
      os << "byte at offset -" << (a.user_off - front) << " (before the start) was overwritten";
    else
      os << "byte at offset +" << (a.size + back) << " (past the end) was overwritten";
  } else {
    os << "a read outside the device allocation at 0x" << std::hex << user << std::dec << " (" << a.size
       << " bytes): byte at offset +" << (fault - user) << " (past the end) was read";
  }
  throw Error(os.str());
}

// The allocation containing [p, p+n), or throws naming `call`.
void check_range_locked(const void* p, std::size_t n, const char* call) {
  const auto u = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_allocs.upper_bound(u);
  if (it == g_allocs.begin()) return;  // not device memory: a host pointer
  --it;
  const std::uintptr_t start = it->first;
  const std::uintptr_t guard_end = reinterpret_cast<std::uintptr_t>(it->second.base) + it->second.total;
  if (u >= guard_end) return;  // host pointer
  if (u + n > start + it->second.size) {
    std::ostringstream os;
    os << call << "(" << n << " bytes at offset " << (u - start) << "): past the end of a device allocation of "
       << it->second.size << " bytes";
    throw Error(os.str());
  }
}

// Where `addr` lies relative to the device allocations, for a wild access.
std::string locate_wild(std::uintptr_t addr) {
  std::lock_guard lk(g_mem_mutex);
  std::ostringstream os;
  os << "an access at 0x" << std::hex << addr << std::dec << ", outside every device allocation";
  auto it = g_allocs.upper_bound(addr);
  if (it != g_allocs.begin()) {
    --it;
    os << ": " << (addr - it->first) << " bytes past the start of the allocation at 0x" << std::hex << it->first
       << std::dec << " (" << it->second.size << " bytes)";
  } else if (it != g_allocs.end()) {
    os << ": " << (it->first - addr) << " bytes before the allocation at 0x" << std::hex << it->first << std::dec
       << " (" << it->second.size << " bytes)";
  }
  return os.str();
}

void check_all_guards(const char* kernel) {
  std::lock_guard lk(g_mem_mutex);
  const std::string when = std::string("kernel '") + kernel + "'";
  for (const auto& [user, a] : g_allocs) check_guards_locked(user, a, when.c_str());
}

}  // namespace
}  // namespace detail
}  // namespace host

void* device_malloc(std::size_t bytes) {
  using namespace host::detail;
  if (bytes > std::numeric_limits<std::size_t>::max() - 3 * kGuard)  // the rounding and the guards would wrap
    allocation_failed("device_malloc", bytes, true, "larger than the address space");
  install_segv_handler();
  const std::size_t data = (bytes + kGuard - 1) / kGuard * kGuard;
  const std::size_t total = kGuard + data + kGuard;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) allocation_failed("device_malloc", bytes, true, "out of host memory");
  auto* base = static_cast<unsigned char*>(m);
  kgate::advise_huge_pages(m, total);  // before the poison fill touches every page
  host::detail::fill_poison(base, total);
  if (mprotect(base + kGuard + data, kGuard, PROT_NONE) != 0) {
    munmap(m, total);
    allocation_failed("device_malloc", bytes, true, "mprotect failed");
  }
  const std::size_t user_off = kGuard + data - bytes;
  std::lock_guard lk(g_mem_mutex);
  std::size_t slot = 0;
  try {
    slot = guard_insert_locked(reinterpret_cast<std::uintptr_t>(base + kGuard + data));
  } catch (...) {
    munmap(m, total);
    throw;
  }
  g_allocs[reinterpret_cast<std::uintptr_t>(base + user_off)] = Allocation{base, bytes, total, user_off, slot};
  return base + user_off;
}

void device_free(void* p) {
  using namespace host::detail;
  if (!p) return;
  std::lock_guard lk(g_mem_mutex);
  const auto it = g_allocs.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == g_allocs.end()) throw Error("device_free: pointer was not returned by device_malloc");
  const Allocation a = it->second;
  g_allocs.erase(it);
  g_guard_pages[a.slot].store(kTombstone, std::memory_order_release);
  munmap(a.base, a.total);
}

namespace {
void checked_copy(void* dst, const void* src, std::size_t bytes, const char* call) {
  using namespace host::detail;
  {
    std::lock_guard lk(g_mem_mutex);
    check_range_locked(dst, bytes, call);
    check_range_locked(src, bytes, call);
  }
  if (bytes) std::memmove(dst, src, bytes);
}
}  // namespace

void copy_h2d(void* dst, const void* src, std::size_t bytes, Stream*) { checked_copy(dst, src, bytes, "copy_h2d"); }
void copy_d2h(void* dst, const void* src, std::size_t bytes, Stream*) { checked_copy(dst, src, bytes, "copy_d2h"); }
void copy_d2d(void* dst, const void* src, std::size_t bytes, Stream*) { checked_copy(dst, src, bytes, "copy_d2d"); }

void device_memset(void* dst, int byte, std::size_t bytes, Stream*) {
  using namespace host::detail;
  {
    std::lock_guard lk(g_mem_mutex);
    check_range_locked(dst, bytes, "device_memset");
  }
  std::memset(dst, byte, bytes);
}

// ===========================================================================
// Streams and events

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void Event::record(Stream*) { ns_ = now_ns(); }
void Event::synchronize() const {
  if (ns_ < 0) throw Error("Event::synchronize: event was never recorded");
}
float elapsed_ms(const Event& start, const Event& stop) {
  if (start.ns_ < 0 || stop.ns_ < 0) throw Error("elapsed_ms: event was never recorded");
  return static_cast<float>(static_cast<double>(stop.ns_ - start.ns_) * 1e-6);
}
void device_synchronize() {}

namespace host::detail {

// ===========================================================================
// The per-thread executor: fibers, LDS, race shadow, scheduler

namespace {

enum class State : std::uint8_t { idle, ready, at_barrier, at_wave, done, failed };

struct Executor;

// The extent of a stack, for the sanitizer's switch annotations.
struct StackSpan {
  const void* bottom = nullptr;
  std::size_t size = 0;
};

// A switch to the stack `to` is about to happen: ASan saves the current
// stack's fake frames in *fake (fake == nullptr: the current stack is never
// resumed again and its fake frames are released). Called right before the
// switch; `switch_finish` is the first thing the code on the other stack does.
inline void switch_start(void** fake, const StackSpan& to) {
#ifdef KGATE_ASAN_FIBERS
  __sanitizer_start_switch_fiber(fake, to.bottom, to.size);
#else
  (void)fake, (void)to;
#endif
}

// The switch is complete: ASan restores this stack's fake frames (`fake`,
// as saved by the switch_start that left it; nullptr on a stack's first
// entry) and reports the stack that was left in *from (unless nullptr).
inline void switch_finish(void* fake, StackSpan* from) {
#ifdef KGATE_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(fake, from ? &from->bottom : nullptr, from ? &from->size : nullptr);
#else
  (void)fake, (void)from;
#endif
}

// The fiber stacks: Boost's guarded stacks. Frames that never returned
// (Boost's entry frame) leave poison in ASan's shadow of a stack; it is
// cleared before the memory is unmapped, so that a later stack mapped at the
// same address starts clean.
struct FiberStack {
  ctx::protected_fixedsize_stack stacks;
  ctx::stack_context allocate() { return stacks.allocate(); }
  void deallocate(ctx::stack_context& s) noexcept {
#ifdef KGATE_ASAN_FIBERS
    __asan_unpoison_memory_region(static_cast<char*>(s.sp) - s.size, s.size);
#endif
    stacks.deallocate(s);
  }
};

// An asynchronous copy in flight: its source bytes as read at the call.
struct AsyncCopy {
  unsigned char* dst;
  std::size_t bytes;
  unsigned char data[16];
  std::source_location site;
};

struct Item : Lane {
  Executor* ex = nullptr;
  std::vector<AsyncCopy> async_open;                  // copies since the last commit
  std::deque<std::vector<AsyncCopy>> async_groups;  // committed groups in flight, oldest first
  ctx::fiber fiber;   // the work-item while it is suspended
  ctx::fiber caller;  // the scheduler while the work-item runs
  StackSpan stack;    // the fiber's stack
  State state = State::idle;
  bool started = false;  // has begun the current job
  bool cancel = false;
  bool retire = false;   // the fiber returns (and its stack is freed) when next resumed
  std::source_location site;  // barrier or wave-op site while waiting
  WaveExec op = nullptr;
  const char* what = nullptr;
  std::uint64_t wave_ops = 0;  // wave collectives completed in this workgroup
  std::exception_ptr error;
};

// Launch-wide state shared by the executors that run its workgroups.
struct LaunchState {
  const char* name;
  dim3 grid, block;
  std::size_t dyn_lds;
  Job job;
  Config cfg;
};

struct StaticLds {
  std::source_location site;
  std::size_t bytes, offset;
};

// The race shadow of one LDS byte: its last writer and up to two readers in
// the current barrier epoch. 16 bytes, so the shadow of a workgroup's LDS
// stays in the cache; the sites (read only for a report) are apart, in
// ShadowSites, written only when the record changes.
struct Shadow {
  std::uint32_t w_epoch = 0, r_epoch = 0;
  std::uint16_t writer = 0, reader = 0, reader2 = 0;
  bool two_readers = false;
};
static_assert(sizeof(Shadow) == 16);
struct ShadowSites {
  std::vector<std::source_location> w, r, r2;
};

struct Executor {
  // Work-items in blocks of 64 (contiguous, never moved: fibers point at them).
  std::vector<std::unique_ptr<Item[]>> blocks;
  std::vector<Item*> items;
  std::size_t stack_bytes = 0;
  const LaunchState* launch = nullptr;
  dim3 bid;
  // LDS: 64 KiB, poisoned before each workgroup; dynamic part first.
  alignas(64) unsigned char lds[max_lds_bytes];
  std::size_t lds_top = 0;
  std::vector<StaticLds> statics;
  std::vector<Shadow> shadow;
  ShadowSites sites;
  std::uint32_t epoch = 0;     // bumps at each barrier and workgroup
  std::uint32_t wg_epoch = 0;  // barrier epochs within this workgroup
  StackSpan thread_stack;      // this executor's thread's own stack (the scheduler's)

  ~Executor() { retire_all(); }

  void ensure_items(std::size_t n, std::size_t stack) {
    if (stack != stack_bytes) {
      retire_all();
      items.clear();
      blocks.clear();
      stack_bytes = stack;
    }
    while (items.size() < n) {
      if (items.size() % 64 == 0) blocks.push_back(std::make_unique<Item[]>(64));
      Item* raw = &blocks.back()[items.size() % 64];
      raw->ex = this;
      FiberStack stacks{ctx::protected_fixedsize_stack(stack)};
      ctx::stack_context sc = stacks.allocate();
      raw->stack = StackSpan{static_cast<const char*>(sc.sp) - sc.size, sc.size};
      // Boost enters the new stack once (its entry frame, which must not
      // land on this stack's fake frames) and comes straight back;
      // fiber_main starts at the first resume. ASan's books then place this
      // code on the new stack, so a bookkeeping switch puts them back.
      void* fake = nullptr;
      switch_start(&fake, raw->stack);
      raw->fiber = ctx::fiber(std::allocator_arg, ctx::preallocated(sc.sp, sc.size, sc), std::move(stacks),
                              [raw](ctx::fiber&& c) { return fiber_main(raw, std::move(c)); });
      StackSpan own;
      switch_finish(fake, &own);
      switch_start(&fake, own);
      switch_finish(fake, nullptr);
      items.push_back(raw);
    }
  }

  // A work-item's whole life on its fiber: one job per resume from idle,
  // until it is retired. Every return to the scheduler is `to_scheduler`.
  static ctx::fiber fiber_main(Item* it, ctx::fiber&& c) {
    switch_finish(nullptr, &it->ex->thread_stack);
    it->caller = std::move(c);
    while (!it->retire) {
      try {
        it->ex->launch->job.invoke(it->ex->launch->job.ctx);
        it->state = State::done;
      } catch (const ctx::detail::forced_unwind&) {
        throw;  // the fiber is being destroyed without having been retired
      } catch (const Cancel&) {
        it->state = State::done;
      } catch (...) {
        it->error = std::current_exception();
        it->state = State::failed;
      }
      if (!it->retire) to_scheduler(it);
    }
    // Returning ends the fiber: Boost switches to the scheduler and frees
    // this stack, which is never resumed again.
    switch_start(nullptr, it->ex->thread_stack);
    return std::move(it->caller);
  }

  // Switches from the work-item's fiber back to the scheduler (in resume).
  static void to_scheduler(Item* it) {
    void* fake = nullptr;
    switch_start(&fake, it->ex->thread_stack);
    it->caller = std::move(it->caller).resume();
    switch_finish(fake, &it->ex->thread_stack);
  }

  // Runs the work-item until its next scheduling point (or the end of its job).
  void resume(Item* it) {
    current = it;
    it->started = true;
    void* fake = nullptr;
    switch_start(&fake, it->stack);
    it->fiber = std::move(it->fiber).resume();
    switch_finish(fake, nullptr);
    current = nullptr;
  }

  // Ends every fiber: each one is resumed once more (one still inside a job
  // is cancelled at its scheduling point) and returns from fiber_main, so
  // that its stack is left by an annotated switch rather than by Boost's
  // forced unwinding.
  void retire_all() {
    for (Item* it : items) {
      if (!it->fiber) continue;
      it->retire = true;
      it->cancel = true;
      resume(it);
    }
  }

  std::string wi_name(const Item* it) const { return "work-item " + fmt_dim(it->tid); }

  // Cancels every work-item that is in the middle of the job.
  void abandon(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      Item* it = items[i];
      if (it->started && it->state != State::done && it->state != State::failed) {
        it->cancel = true;
        resume(it);
      }
    }
  }

  [[noreturn]] void fail(std::size_t n, const std::string& msg) {
    abandon(n);
    throw Error("kernel '" + std::string(launch->name) + "', workgroup " + fmt_dim(bid) + ": " + msg);
  }

  void run_workgroup(const LaunchState& L, std::uint64_t wg_linear);
  bool run_wave_collectives(std::size_t n);
};

thread_local std::unique_ptr<Executor> t_executor;

Executor& executor() {
  if (!t_executor) t_executor = std::make_unique<Executor>();
  return *t_executor;
}

std::string wi_name_of(const Item* it) { return "work-item " + fmt_dim(it->tid); }

void Executor::run_workgroup(const LaunchState& L, std::uint64_t wg_linear) {
  launch = &L;
  bid = unflatten(wg_linear, L.grid);
  const std::size_t n = L.block.count();
  ensure_items(n, L.cfg.stack_bytes);
  const int ws = L.cfg.wave_size;
  for (std::size_t i = 0; i < n; ++i) {
    Item* it = items[i];
    it->tid = unflatten(i, L.block);
    it->bid = bid;
    it->bdim = L.block;
    it->gdim = L.grid;
    it->flat = static_cast<unsigned>(i);
    it->lane = static_cast<int>(i % static_cast<unsigned>(ws));
    it->wave = static_cast<int>(i / static_cast<unsigned>(ws));
    it->wave_size = ws;
    it->check_lds = L.cfg.check_lds;
    it->state = State::ready;
    it->started = false;
    it->cancel = false;
    it->wave_ops = 0;
    it->error = nullptr;
    it->async_open.clear();  // copies a work-item never waited for do not land in the next workgroup's LDS
    it->async_groups.clear();
  }
  // LDS starts each workgroup as poison: the dynamic part here, each static
  // array when the workgroup declares it (lds_static_bytes). Bytes outside
  // both are never reachable (LDS arrays check their indices).
  fill_poison(lds, L.dyn_lds);
  lds_top = (L.dyn_lds + 15) / 16 * 16;
  statics.clear();
  ++epoch;
  wg_epoch = 0;

  for (;;) {
    // Run every ready work-item to its next scheduling point, classifying
    // all of them on the way.
    std::size_t at_wave = 0, waiting = 0;
    const Item* first_done = nullptr;
    const Item* first_wait = nullptr;
    const Item* other_site = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      Item* it = items[i];
      if (it->state == State::ready) {
        resume(it);
        if (it->state == State::failed) {
          std::string msg;
          try {
            std::rethrow_exception(it->error);
          } catch (const std::exception& e) {
            msg = e.what();
          } catch (...) {
            msg = "unknown exception";
          }
          it->error = nullptr;
          fail(n, wi_name(it) + ": " + msg);
        }
      }
      switch (it->state) {
        case State::at_wave: ++at_wave; break;
        case State::at_barrier:
          ++waiting;
          if (!first_wait)
            first_wait = it;
          else if (!other_site && !same_site(first_wait->site, it->site))
            other_site = it;
          break;
        case State::done:
          if (!first_done) first_done = it;
          break;
        default: break;
      }
    }
    if (at_wave) {
      run_wave_collectives(n);
      continue;
    }
    // Every live work-item waits at a barrier (or all are done).
    if (waiting == 0) break;
    if (first_done)
      fail(n, "barrier divergence: " + wi_name(first_done) + " exited while " + std::to_string(waiting) +
                  " work-item(s) wait at the barrier at " + fmt_site(first_wait->site) + " (first: " +
                  wi_name(first_wait) + ")");
    if (other_site)
      fail(n, "barrier divergence: " + wi_name(first_wait) + " waits at the barrier at " +
                  fmt_site(first_wait->site) + " while " + wi_name(other_site) + " waits at the barrier at " +
                  fmt_site(other_site->site));
    ++epoch;
    ++wg_epoch;
    for (std::size_t i = 0; i < n; ++i) items[i]->state = State::ready;
  }
  launch = nullptr;
}

// Runs at most one collective per wave: the waiting group that is furthest
// behind (fewest completed wave operations, then the earliest source line).
// Returns whether any ran.
bool Executor::run_wave_collectives(std::size_t n) {
  bool ran = false;
  const int ws = launch->cfg.wave_size;
  for (std::size_t w0 = 0; w0 < n; w0 += static_cast<std::size_t>(ws)) {
    const std::size_t w1 = std::min(n, w0 + static_cast<std::size_t>(ws));
    Item* lead = nullptr;
    for (std::size_t i = w0; i < w1; ++i) {
      Item* it = items[i];
      if (it->state != State::at_wave) continue;
      if (!lead || it->wave_ops < lead->wave_ops ||
          (it->wave_ops == lead->wave_ops && it->site.line() < lead->site.line()))
        lead = it;
    }
    if (!lead) continue;
    WaveGroup g{};
    g.wave_size = ws;
    g.target = launch->cfg.target;
    g.mfma = launch->cfg.mfma;
    g.active = 0;
    for (std::size_t i = w0; i < w1; ++i) {
      Item* it = items[i];
      g.lanes[i - w0] = it;
      if (it->state == State::at_wave && same_site(it->site, lead->site) && it->op == lead->op)
        g.active |= lane_mask{1} << (i - w0);
    }
    try {
      lead->op(g);
    } catch (const std::exception& e) {
      fail(n, std::string(lead->what) + " at " + fmt_site(lead->site) + " (wave " + std::to_string(lead->wave) +
                  "): " + e.what());
    }
    for (std::size_t i = w0; i < w1; ++i) {
      if (g.active >> (i - w0) & 1) {
        items[i]->state = State::ready;
        ++items[i]->wave_ops;
      }
    }
    ran = true;
  }
  return ran;
}

Item* current_item(const char* what) {
  if (!current) throw Error(std::string(what) + " called outside a kernel");
  return static_cast<Item*>(current);
}

void suspend(Item* it) {
  Executor::to_scheduler(it);
  if (it->cancel) throw Cancel{};
}

}  // namespace

// ===========================================================================
// Scheduling points

void barrier_wait(const std::source_location& site) {
  Item* it = current_item("barrier");
  it->state = State::at_barrier;
  it->site = site;
  suspend(it);
}

void wave_collective(WaveExec op, const char* what, const std::source_location& site) {
  Item* it = current_item(what);
  it->state = State::at_wave;
  it->site = site;
  it->op = op;
  it->what = what;
  suspend(it);
}

// ===========================================================================
// Collectives

void exec_gather(const WaveGroup& g) {
  for (int l = 0; l < g.wave_size; ++l) {
    if (!(g.active >> l & 1)) continue;
    Lane* me = g.lanes[l];
    const auto src = static_cast<int>(me->arg);
    if (g.active >> src & 1)
      std::memcpy(me->out, g.lanes[src]->in, 16);
    else
      std::memset(me->out, 0, 16);  // ds_bpermute: an inactive source lane reads 0
  }
}

void exec_ballot(const WaveGroup& g) {
  lane_mask b = 0;
  for (int l = 0; l < g.wave_size; ++l)
    if ((g.active >> l & 1) && g.lanes[l]->arg) b |= lane_mask{1} << l;
  for (int l = 0; l < g.wave_size; ++l) {
    if (!(g.active >> l & 1)) continue;
    std::memcpy(g.lanes[l]->out, &b, 8);
    std::memcpy(g.lanes[l]->out + 8, &g.active, 8);
  }
}

void exec_firstlane(const WaveGroup& g) {
  int first = 0;
  while (!(g.active >> first & 1)) ++first;
  for (int l = 0; l < g.wave_size; ++l)
    if (g.active >> l & 1) std::memcpy(g.lanes[l]->out, g.lanes[first]->in, 16);
}

// ===========================================================================
// LDS

void* lds_static_bytes(std::size_t bytes, std::size_t align, const std::source_location& site) {
  Item* it = current_item("KGATE_LDS");
  Executor& ex = *it->ex;
  for (const StaticLds& s : ex.statics) {
    if (same_site(s.site, site)) {
      if (s.bytes != bytes)
        throw Error("KGATE_LDS at " + fmt_site(site) + " declared with " + std::to_string(bytes) +
                    " bytes here and " + std::to_string(s.bytes) + " bytes by another work-item");
      return ex.lds + s.offset;
    }
  }
  const std::size_t a = std::max<std::size_t>(align, 16);
  const std::size_t off = (ex.lds_top + a - 1) / a * a;
  if (off + bytes > max_lds_bytes)
    throw Error("LDS request at " + fmt_site(site) + " exceeds the gfx942 limit: " + std::to_string(off + bytes) +
                " bytes (dynamic " + std::to_string(ex.launch->dyn_lds) + " + static) > " +
                std::to_string(max_lds_bytes));
  ex.statics.push_back(StaticLds{site, bytes, off});
  ex.lds_top = off + bytes;
  fill_poison(ex.lds + off, bytes);
  return ex.lds + off;
}

void* lds_dynamic_bytes(std::size_t* bytes) {
  Item* it = current_item("KGATE_LDS_DYNAMIC");
  *bytes = it->ex->launch->dyn_lds;
  return it->ex->lds;
}

void lds_index_error(std::size_t index, std::size_t size, const std::source_location& site) {
  throw Error("LDS index " + (index == static_cast<std::size_t>(-1) ? std::string("(negative)") : std::to_string(index)) +
              " out of range [0, " + std::to_string(size) + ") at " + fmt_site(site));
}

void lds_misaligned(std::size_t align, const std::source_location& site) {
  throw Error("LDS vector access not aligned to " + std::to_string(align) + " bytes at " + fmt_site(site));
}

void lds_note(const void* p, std::size_t bytes, bool write, const std::source_location& site) {
  Item* it = static_cast<Item*>(current);
  Executor& ex = *it->ex;
  if (ex.shadow.empty()) {
    ex.shadow.resize(max_lds_bytes);
    ex.sites.w.resize(max_lds_bytes);
    ex.sites.r.resize(max_lds_bytes);
    ex.sites.r2.resize(max_lds_bytes);
  }
  const std::size_t off = static_cast<std::size_t>(static_cast<const unsigned char*>(p) - ex.lds);
  const auto me = static_cast<std::uint16_t>(it->flat);
  const std::uint32_t e = ex.epoch;
  auto race = [&](std::uint16_t other, const std::source_location& other_site, bool other_write) {
    const dim3 o = unflatten(other, ex.launch->block);
    throw Error("LDS race in barrier epoch " + std::to_string(ex.wg_epoch) + ": " + wi_name_of(it) + " " +
                (write ? "writes" : "reads") + " LDS bytes [" + std::to_string(off) + ", " +
                std::to_string(off + bytes) + ") at " + fmt_site(site) + " and work-item " + fmt_dim(o) + " " +
                (other_write ? "wrote" : "read") + " them at " + fmt_site(other_site) +
                " with no barrier between");
  };
  for (std::size_t b = off; b < off + bytes; ++b) {
    Shadow& s = ex.shadow[b];
    if (s.w_epoch == e && s.writer != me) race(s.writer, ex.sites.w[b], true);
    if (write) {
      if (s.r_epoch == e) {
        if (s.reader != me) race(s.reader, ex.sites.r[b], false);
        if (s.two_readers && s.reader2 != me) race(s.reader2, ex.sites.r2[b], false);
      }
      // A byte this work-item already wrote in this epoch keeps its first
      // write's site.
      if (s.w_epoch != e) {
        s.w_epoch = e;
        s.writer = me;
        ex.sites.w[b] = site;
      }
    } else if (s.r_epoch != e) {
      s.r_epoch = e;
      s.reader = me;
      ex.sites.r[b] = site;
      s.two_readers = false;
    } else if (s.reader != me && !s.two_readers) {
      s.two_readers = true;
      s.reader2 = me;
      ex.sites.r2[b] = site;
    }
  }
}

void async_copy(void* lds_dst, const void* src, std::size_t bytes, const std::source_location& site) {
  Item* it = static_cast<Item*>(current);
  AsyncCopy c{static_cast<unsigned char*>(lds_dst), bytes, {}, site};
  if (src) std::memcpy(c.data, src, bytes);
  it->async_open.push_back(c);
}

void async_commit() {
  Item* it = static_cast<Item*>(current);
  it->async_groups.push_back(std::move(it->async_open));
  it->async_open.clear();
}

void async_wait(int n) {
  Item* it = static_cast<Item*>(current);
  while (it->async_groups.size() > static_cast<std::size_t>(n)) {
    for (const AsyncCopy& c : it->async_groups.front()) {
      if (it->check_lds) lds_note(c.dst, c.bytes, true, c.site);
      std::memcpy(c.dst, c.data, c.bytes);
    }
    it->async_groups.pop_front();
  }
}

void kernel_error(const char* what, const std::source_location& site) {
  throw Error(std::string(what) + " at " + fmt_site(site));
}

void register_index_error(int index, int n) {
  const Lane* l = current;
  throw Error("register array index " + std::to_string(index) + " outside [0, " + std::to_string(n) + ")" +
              (l ? " in work-item " + std::to_string(l->flat) + " of workgroup (" + std::to_string(l->bid.x) + "," +
                       std::to_string(l->bid.y) + "," + std::to_string(l->bid.z) + ")"
                 : ""));
}

// ===========================================================================
// Thread pool and launch

namespace {

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs fn on `n` threads (the caller is one of them) and waits for all.
  void run(int n, const std::function<void()>& fn) {
    if (n <= 1) {
      fn();
      return;
    }
    {
      std::lock_guard lk(m_);
      while (static_cast<int>(threads_.size()) < n - 1)
        threads_.emplace_back([this, id = threads_.size()] { worker(id); });
      task_ = &fn;
      wanted_ = n - 1;
      pending_ = n - 1;
      ++generation_;
    }
    cv_.notify_all();
    fn();
    std::unique_lock lk(m_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    task_ = nullptr;
  }

 private:
  void worker(std::size_t id) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* task;
      {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (id >= static_cast<std::size_t>(wanted_)) continue;
        task = task_;
      }
      (*task)();
      {
        std::lock_guard lk(m_);
        --pending_;
      }
      done_cv_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> threads_;
  const std::function<void()>* task_ = nullptr;
  std::uint64_t generation_ = 0;
  int wanted_ = 0, pending_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

std::mutex g_launch_mutex;

}  // namespace

void launch_erased(const char* name, const LaunchConfig& lc, const Job& job) {
  LaunchState L{name, lc.grid, lc.block, lc.lds_bytes, job, config()};
  const auto prefix = std::string("launch of kernel '") + name + "'";
  const std::uint64_t bsize = L.block.count();
  if (bsize == 0 || L.grid.count() == 0)
    throw Error(prefix + ": empty grid " + fmt_dim(L.grid) + " or block " + fmt_dim(L.block));
  if (bsize > max_workgroup_size || L.block.z > 64)
    throw Error(prefix + ": block " + fmt_dim(L.block) + " has " + std::to_string(bsize) +
                " work-items; gfx942 allows at most 1024 (z at most 64)");
  if (L.grid.y > 65535 || L.grid.z > 65535 || L.grid.x > 0x7fffffffu)
    throw Error(prefix + ": grid " + fmt_dim(L.grid) + " exceeds the portable limits (2^31-1, 65535, 65535)");
  if (L.dyn_lds > max_lds_bytes)
    throw Error(prefix + ": dynamic LDS of " + std::to_string(L.dyn_lds) + " bytes exceeds the gfx942 limit of " +
                std::to_string(max_lds_bytes));
  LaunchTrace::note(name, L.grid, L.block, L.dyn_lds);

  const std::uint64_t nwg = L.grid.count();
  std::vector<std::uint32_t> order;
  if (L.cfg.order == Order::shuffled) {
    if (nwg > 0xffffffffull) throw Error(prefix + ": shuffled order supports at most 2^32 workgroups");
    order.resize(nwg);
    for (std::uint64_t i = 0; i < nwg; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::mt19937_64 rng(L.cfg.seed);
    for (std::uint64_t i = nwg; i > 1; --i) {
      const std::uint64_t j = std::uniform_int_distribution<std::uint64_t>(0, i - 1)(rng);
      std::swap(order[i - 1], order[j]);
    }
  }
  auto wg_at = [&](std::uint64_t i) -> std::uint64_t {
    switch (L.cfg.order) {
      case Order::in_order: return i;
      case Order::reversed: return nwg - 1 - i;
      case Order::shuffled: return order[i];
    }
    return i;
  };

  int threads = L.cfg.threads > 0 ? L.cfg.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(threads), nwg));

  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex err_mutex;
  std::uint64_t err_index = ~std::uint64_t{0};
  std::string err_msg;
  bool err_memory = false;  // the first error was an allocation failure: OutOfMemory, not a kernel defect
  const std::function<void()> work = [&] {
    Executor& ex = executor();
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= nwg) return;
      try {
        const InKernel in_kernel;
        ex.run_workgroup(L, wg_at(i));
      } catch (const std::exception& e) {
        ex.launch = nullptr;
        std::lock_guard lk(err_mutex);
        if (i < err_index) {
          err_index = i;
          err_msg = e.what();
          err_memory = dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const OutOfMemory*>(&e);
        }
        stop = true;
      }
    }
  };
  {
    std::lock_guard lk(g_launch_mutex);
    pool().run(threads, work);
  }
  if (const std::uintptr_t wild = close_wild_pages()) {
    try {
      check_all_guards(name);  // closes any guard the kernel opened
    } catch (const Error&) {
    }
    throw Error(prefix + ": " + locate_wild(wild));
  }
  if (!err_msg.empty() && err_memory) throw OutOfMemory(prefix + ": " + err_msg);
  if (!err_msg.empty()) throw Error(err_msg);
  check_all_guards(name);
}

}  // namespace host::detail
}  // namespace kgate::rt
